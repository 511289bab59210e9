"""CEL_FIELD: native Spark evaluation equals the Python walk, which equals confluent-kafka 2.16.1.

Differential tests run a corpus of rules over generated schemas and records three ways: the
native step in Spark (all rules in one select, one job per schema), the Python twin in process,
and — for the Python twin — the reference's CelFieldExecutor through its AvroSerializer.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts import formats
from contracts.formats import avro
from contracts.formats.fields import tag_matches
from contracts.model import Rule, RuleKind, RuleMode
from contracts.planning.loader import superseded_rules
from executors.cel_field.executor import CelFieldExecutor
from executors.protocol import BatchStep, NativeStep, RuleContext, Step

AVRO = formats.get("AVRO")

TAGS = ("PII", "PRIVATE", "AUDIT")
# (kind, expression, rule tags): guards on name/typeName/tags/fullName, value transforms,
# masking, conditions, null handling, wildcard-tagged fields, and a few that must fall back.
CORPUS: list[tuple[str, str, tuple[str, ...]]] = [
    ("TRANSFORM", "typeName == 'STRING' ; value + '-x'", ()),
    ("TRANSFORM", "'****'", ()),
    ("TRANSFORM", "typeName == 'STRING' ; '****'", ()),
    ("TRANSFORM", "name == 'f0' ; value", ()),
    ("TRANSFORM", "typeName == 'INT' ; value + 1", ()),
    ("TRANSFORM", "typeName == 'LONG' ; value * 2", ()),
    ("TRANSFORM", "typeName == 'DOUBLE' ; value * 2.0", ()),
    ("TRANSFORM", "typeName == 'FLOAT' ; value + 1.5", ()),
    ("TRANSFORM", "typeName == 'BOOLEAN' ; !value", ()),
    ("TRANSFORM", "typeName == 'BYTES' ; value + b'!'", ()),
    ("TRANSFORM", "typeName == 'NULL' ; null", ()),
    ("TRANSFORM", "typeName == 'NULL' ; 'was-null'", ()),
    ("TRANSFORM", "'PII' in tags ; '****'", ()),
    ("TRANSFORM", "tags.exists(t, t == 'PRIVATE') && typeName == 'STRING' ; value + '#'", ()),
    ("TRANSFORM", "fullName.endsWith('.f1') ; value", ()),
    ("TRANSFORM", "name.startsWith('f') && typeName == 'STRING' ; name + ':' + value", ()),
    ("TRANSFORM", "typeName == 'STRING' && size(value) > 3 ; 'long'", ()),
    ("TRANSFORM", "typeName == 'INT' && value < 0 ; 0", ()),
    ("TRANSFORM", "typeName == 'STRING' ; value == '' ? 'empty' : value", ()),
    ("TRANSFORM", "typeName == 'STRING' ; fullName", ()),
    ("TRANSFORM", "typeName == 'STRING' ; 'masked'", ("PII",)),
    ("TRANSFORM", "typeName == 'STRING' || typeName == 'NULL' ; 'audited'", ("AUDIT",)),
    ("TRANSFORM", "typeName == 'STRING' ; value.size() > 2 ? value : 'short'", ()),
    ("TRANSFORM", "fullName == 'ns.R.f1' ; 'exact'", ()),
    ("TRANSFORM", "typeName == 'LONG' ; -value", ()),
    ("TRANSFORM", "typeName == 'STRING' ; value.matches('^[a-c]+$') ? 'abc' : value", ()),
    ("CONDITION", "size(value) < 10", ()),
    ("CONDITION", "typeName == 'STRING' ; size(value) < 10", ()),
    ("CONDITION", "typeName == 'INT' ; value >= 0", ()),
    ("CONDITION", "value != null", ()),
    ("CONDITION", "typeName == 'NULL' ; false", ()),
    ("CONDITION", "typeName == 'STRING' ; value.startsWith('a') || value == ''", ()),
    ("CONDITION", "name == 'f0' ; value == value", ()),
    ("CONDITION", "typeName == 'DOUBLE' ; value > 0.0", ()),
    ("CONDITION", "'PII' in tags ; size(value) > 0", ()),
    ("CONDITION", "typeName == 'LONG' ; value + 1 > value", ()),
    ("CONDITION", "typeName == 'STRING' ; value.contains('a') ? true : false", ()),
    ("CONDITION", "typeName == 'STRING' ; value != 'secret'", ("PRIVATE",)),
    ("CONDITION", "typeName == 'BOOLEAN' ; value", ()),
    ("CONDITION", "typeName == 'STRING' ; value.matches('^[a-z]*$')", ()),
]
# Rules using what CEL_FIELD gains from the shared CEL compiler and runtime: the Confluent
# builtins, macros, `in`, conversions, division, `has`, and guards mixing builtins with the
# plan-time variables (`name`, `fullName`, `typeName`, `tags` are plain strings in the reference,
# so `name.isHostname()` is an evaluation error there).
BUILTIN_CORPUS: list[tuple[str, str, tuple[str, ...]]] = [
    ("CONDITION", "typeName == 'STRING' ; isEmail(value)", ()),
    ("CONDITION", "typeName == 'STRING' ; value.isHostname() || value.isIpv4()", ()),
    ("TRANSFORM", "typeName == 'STRING' ; value.isEmail() ? 'email' : value", ()),
    ("TRANSFORM", "typeName == 'STRING' ; value.matches('^[a-z]+@') ? 'REDACTED' : value", ()),
    ("TRANSFORM", "typeName == 'STRING' ; value.isIpv4() ? value + '/32' : value", ()),
    ("TRANSFORM", "typeName == 'STRING' ; value.isIpv6() ? 'v6' : value", ()),
    ("CONDITION", "tags.exists(t, t == 'PII') && typeName == 'STRING' ; !value.isEmail()", ()),
    ("TRANSFORM", "typeName == 'STRING' ; value in ['a', 'b', ''] ? name : value", ()),
    ("TRANSFORM", "typeName == 'INT' || typeName == 'LONG' ; value / 3 + value % 3", ()),
    ("TRANSFORM", "typeName == 'STRING' ; string(size(value))", ()),
    ("TRANSFORM", "typeName == 'LONG' ; int(double(value) / 2.0)", ()),
    ("TRANSFORM", "typeName == 'DOUBLE' ; value / 0.0", ()),
    ("CONDITION", "typeName == 'STRING' ; value.startsWith(name) || value.contains('@')", ()),
    ("CONDITION", "typeName == 'STRING' ; [value, name].exists(s, s.size() > 3)", ()),
    ("CONDITION", "typeName == 'STRING' ; [1, 2, 3].all(i, i < size(value) + 3)", ()),
    ("CONDITION", "name.isHostname()", ()),
    ("TRANSFORM", "typeName == 'BYTES' ; size(value) > 2 ? b'big' : value", ()),
    ("CONDITION", "typeName == 'STRING' ; has(message.f0) && value != fullName", ()),
    ("TRANSFORM", "typeName == 'BOOLEAN' ; value && name != 'f0'", ()),
    (
        "TRANSFORM",
        "typeName == 'STRING' && 'PII' in tags ; value.matches('^[0-9]{3}') ? 'XXX' : value",
        ("PII",),
    ),
]
# Tag paths matched against fullName: `*` within one name, `**` across names, `?` one character.
METADATA_PATTERNS = ["**.f1", "ns.R.*", "ns.*.f?", "**.Inner*.s?", "ns.R.f2*", "*.R.f3"]
_STRING = st.text(alphabet="abcsert XZé中", max_size=12)
# Strings on both sides of the builtins' edges (emails, hostnames, IPv4/IPv6 addresses).
_ADDRESS = st.one_of(
    st.sampled_from(
        [
            "ann@example.com",
            "@example.com",
            "a b@c.de",
            '"q r"@x.io',
            "x@1.2.3.4",
            "example.com",
            "-bad.example",
            "host.",
            "1.2.3.4",
            "256.1.1.1",
            "::1",
            "fe80::1%eth0",
            "abc",
            "f0",
            "ns.R.f1",
            "",
        ]
    ),
    st.text(alphabet="ab1@.-: ", max_size=12),
)
_LEAVES: dict[str, st.SearchStrategy[Any]] = {
    "string": _STRING,
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "float": st.floats(-1e6, 1e6, width=32),
    "boolean": st.booleans(),
    "bytes": st.binary(max_size=5),
}
_counter = itertools.count()


def _leaf_type(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(sorted(_LEAVES)))


@st.composite
def _field_type(draw: st.DrawFn, depth: int) -> Any:
    shapes = ["leaf", "leaf", "nullable", "array", "map", "members"] + (["record"] if depth < 2 else [])
    shape = draw(st.sampled_from(shapes))
    if shape == "leaf":
        return _leaf_type(draw)
    if shape == "nullable":
        inner = draw(st.one_of(st.just(_leaf_type(draw)), _field_type(depth + 1)))
        return ["null", inner] if not isinstance(inner, list) else ["null", _leaf_type(draw)]
    if shape == "array":
        items = draw(st.sampled_from([_leaf_type(draw), ["null", "string"]]))
        return {"type": "array", "items": items}
    if shape == "map":
        return {"type": "map", "values": draw(st.sampled_from([_leaf_type(draw), ["null", "long"]]))}
    if shape == "members":
        return draw(st.sampled_from([["null", "string", "long"], ["string", "boolean"]]))
    return _record(draw, f"Inner{next(_counter)}", depth + 1)


def _record(draw: st.DrawFn, name: str, depth: int) -> dict[str, Any]:
    fields = []
    for index in range(draw(st.integers(1, 5 if depth else 7))):
        field: dict[str, Any] = {"name": f"f{index}" if depth == 0 else f"s{index}"}
        field["type"] = draw(_field_type(depth))
        tags = draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True))
        if tags:
            field["confluent:tags"] = tags
        fields.append(field)
    return {"type": "record", "name": name, "fields": fields}


@st.composite
def schemas(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A record schema in namespace `ns` with nested records, collections, unions and tags."""
    schema = {**_record(draw, "R", 0), "namespace": "ns"}
    patterns = draw(st.lists(st.sampled_from(METADATA_PATTERNS), max_size=3, unique=True))
    return schema, {pattern: [draw(st.sampled_from(TAGS))] for pattern in patterns}


def _values(schema: Any, strings: st.SearchStrategy[str] = _STRING) -> st.SearchStrategy[Any]:
    if isinstance(schema, str):
        if schema == "string":
            return strings
        return _LEAVES[schema] if schema != "null" else st.none()
    if isinstance(schema, list):
        return st.one_of(*[_values(branch, strings) for branch in schema])
    if schema["type"] == "array":
        return st.lists(_values(schema["items"], strings), max_size=3)
    if schema["type"] == "map":
        return st.dictionaries(st.text("kq", max_size=2), _values(schema["values"], strings), max_size=3)
    return st.fixed_dictionaries({f["name"]: _values(f["type"], strings) for f in schema["fields"]})


def _context(
    parsed: Any, metadata_tags: dict[str, list[str]], kind: str, expr: str, tags: tuple[str, ...]
) -> RuleContext:
    rule = Rule("r", RuleKind(kind), RuleMode.WRITE, "CEL_FIELD", expr, tags)
    metadata = {path: tuple(values) for path, values in metadata_tags.items()}
    return RuleContext(rule, "s-value", 1, RuleMode.WRITE, parsed, avro.struct_type(parsed), AVRO, metadata)


def _normalized(record: Any, parsed: Any) -> Any:
    """The record as the wire would carry it (floats rounded to 32 bits), or None if it cannot be written."""
    if not fastavro.validate(record, parsed, raise_errors=False):
        return None
    out = io.BytesIO()
    try:
        fastavro.schemaless_writer(out, parsed, record)
    except (ValueError, TypeError, OverflowError):
        return None
    out.seek(0)
    return fastavro.schemaless_reader(out, parsed)


def _python_outcomes(step: Step, records: list[Any], parsed: Any) -> list[tuple[bool, Any]]:
    """The engine's Python pass: passed (a transform result must fit the schema) and the record."""
    batch = step.batch if isinstance(step, NativeStep) else step
    assert isinstance(batch, BatchStep)
    results = []
    for outcome in batch.factory()(copy.deepcopy(records)):
        written = _normalized(outcome.record, parsed) if outcome.passed else None
        results.append((written is not None, written))
    return results


def _reference_outcome(
    schema: Any, metadata_tags: dict[str, list[str]], kind: str, expr: str, tags: tuple[str, ...], record: Any
) -> tuple[bool, Any]:
    """confluent-kafka 2.16.1's AvroSerializer on a mock registry, with the rule as a WRITE domain rule."""
    from confluent_kafka.schema_registry import (
        Metadata,
        MetadataProperties,
        MetadataTags,
        RuleSet,
        SchemaRegistryClient,
    )
    from confluent_kafka.schema_registry import Rule as RefRule
    from confluent_kafka.schema_registry import Schema as RefSchema
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor as RefExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext

    RefExecutor.register()
    client = SchemaRegistryClient.new_client({"url": "mock://cel-field"})
    topic = f"t{next(_counter)}"
    rule = RefRule("r", "", kind, "WRITE", "CEL_FIELD", list(tags) or None, None, expr, None, "ERROR", False)
    metadata = Metadata(MetadataTags(metadata_tags), MetadataProperties({}), None) if metadata_tags else None
    text = json.dumps(schema)
    client.register_schema(f"{topic}-value", RefSchema(text, "AVRO", [], metadata, RuleSet(None, [rule])))
    serializer = AvroSerializer(
        client, text, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    try:
        data = serializer(copy.deepcopy(record), SerializationContext(topic, MessageField.VALUE))
    except Exception:
        return False, None
    parsed = fastavro.parse_schema(json.loads(text))
    return True, fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed)


WIDENED = {
    "type": "record",
    "name": "Widened",
    "fields": [
        {"name": "n", "type": ["null", "int", "long"]},
        {"name": "ns", "type": {"type": "array", "items": ["null", "int", "long"]}},
        {"name": "f", "type": "float"},
        {"name": "nf", "type": ["null", "float"]},
    ],
}
WIDENED_RULES = [
    ("TRANSFORM", "typeName == 'INT' ; value + 1", ()),
    ("TRANSFORM", "typeName == 'LONG' ; 100 / value", ()),
    ("CONDITION", "typeName == 'INT' ; value > 0", ()),
    ("TRANSFORM", "typeName == 'FLOAT' ; value * 1e30", ()),
    ("TRANSFORM", "typeName == 'FLOAT' ; 3.4028235677973366e38", ()),
]


def test_nulls_of_int_first_unions_and_floats_beyond_range_match_the_python_walk(spark: Any) -> None:
    """A null of `[null, int, long]` is the NULL branch's (the guard is false, the rule passes), and
    a double beyond float's range is written as infinity, as fastavro's writer stores it."""
    records = [
        {"n": None, "ns": [None, 1], "f": 3.4028234663852886e38, "nf": None},
        {"n": 3_000_000_000, "ns": [3_000_000_000, None], "f": 1.5, "nf": 3e38},
        {"n": 5, "ns": [], "f": -0.0, "nf": 1.0},
    ]
    _assert_native_matches_python_on(spark, WIDENED, {}, records, WIDENED_RULES)


@settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_native_steps_match_the_python_walk(spark: Any, data: st.DataObject) -> None:
    _assert_native_matches_python(spark, data, CORPUS, _STRING)


@settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_native_builtins_and_macros_match_the_python_walk(spark: Any, data: st.DataObject) -> None:
    _assert_native_matches_python(spark, data, BUILTIN_CORPUS, _ADDRESS)


def _assert_native_matches_python(
    spark: Any,
    data: st.DataObject,
    corpus: list[tuple[str, str, tuple[str, ...]]],
    strings: st.SearchStrategy[str],
) -> None:
    """Every rule of `corpus` that compiles natively gives, in one Spark job over generated
    records, the outcome and record of its Python twin."""
    schema, metadata_tags = data.draw(schemas())
    records = data.draw(st.lists(_values(schema, strings), min_size=20, max_size=40))
    _assert_native_matches_python_on(spark, schema, metadata_tags, records, corpus)


def _assert_native_matches_python_on(
    spark: Any,
    schema: dict[str, Any],
    metadata_tags: dict[str, list[str]],
    records: list[dict[str, Any]],
    corpus: list[tuple[str, str, tuple[str, ...]]],
) -> None:
    from pyspark.sql import functions as F

    parsed = avro.parse_schema(json.dumps(schema))
    steps = [CelFieldExecutor().compile(_context(parsed, metadata_tags, *rule)) for rule in corpus]
    df = spark.createDataFrame(
        [avro.avro_to_spark_value(r, parsed) for r in records], avro.struct_type(parsed)
    )
    record = F.struct(*[F.col(name) for name in df.columns])
    columns = []
    for index, step in enumerate(steps):
        if isinstance(step, NativeStep):
            outcome = step.build(record)
            columns.append(F.coalesce(outcome.passed, F.lit(False)).alias(f"passed{index}"))
            if outcome.record is not None:
                columns.append(outcome.record.alias(f"record{index}"))
    assert any(isinstance(step, NativeStep) for step in steps)
    rows = df.select(*columns).collect()
    for index, ((kind, expr, tags), step) in enumerate(zip(corpus, steps, strict=True)):
        if not isinstance(step, NativeStep):
            continue
        for row, original, (expected_passed, expected) in zip(
            rows, records, _python_outcomes(step, records, parsed), strict=True
        ):
            passed = row[f"passed{index}"]
            assert passed == expected_passed, (expr, tags, schema, metadata_tags, original)
            if passed and kind == "TRANSFORM":
                assert (
                    _normalized(avro.spark_to_avro_value(row[f"record{index}"], parsed), parsed) == expected
                ), (expr, original)


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_python_walk_matches_the_reference_serializer(data: st.DataObject) -> None:
    _assert_python_matches_reference(data, CORPUS, _STRING)


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_python_walk_with_builtins_matches_the_reference_serializer(data: st.DataObject) -> None:
    _assert_python_matches_reference(data, BUILTIN_CORPUS, _ADDRESS)


def _assert_python_matches_reference(
    data: st.DataObject, corpus: list[tuple[str, str, tuple[str, ...]]], strings: st.SearchStrategy[str]
) -> None:
    """Rules drawn from `corpus`, run by the Python twin, end each generated record as
    confluent-kafka's AvroSerializer with its own CelFieldExecutor does."""
    schema, metadata_tags = data.draw(schemas())
    records = data.draw(st.lists(_values(schema, strings), min_size=1, max_size=3))
    parsed = avro.parse_schema(json.dumps(schema))
    for kind, expr, tags in data.draw(st.lists(st.sampled_from(corpus), min_size=4, max_size=8, unique=True)):
        step = CelFieldExecutor().compile(_context(parsed, metadata_tags, kind, expr, tags))
        batch = step.batch if isinstance(step, NativeStep) else step
        assert isinstance(batch, BatchStep)
        walked = batch.factory()(copy.deepcopy(records))
        for record, ours, raw in zip(records, _python_outcomes(step, records, parsed), walked, strict=True):
            theirs = _reference_outcome(schema, metadata_tags, kind, expr, tags, record)
            if raw.passed and not ours[0] and theirs[0]:
                # A result that does not fit its field fails here; the reference's fastavro writer
                # does not validate and writes any truthy value into a boolean as true.
                assert _coerced_booleans(raw.record, parsed) == theirs[1], (expr, record)
                continue
            assert ours[0] == theirs[0], (expr, tags, record)
            if ours[0]:
                assert ours[1] == theirs[1], (expr, record)


def _coerced_booleans(record: Any, parsed: Any) -> Any:
    """The record as fastavro's unvalidated writer would write it, booleans taken by truthiness."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    out.seek(0)
    return fastavro.schemaless_reader(out, parsed)


@settings(max_examples=examples(200), deadline=None)
@given(
    name=st.lists(st.text("ab.", min_size=1, max_size=3), min_size=1, max_size=3).map(".".join),
    pattern=st.text("ab.*?", min_size=1, max_size=7),
)
def test_tag_patterns_match_as_confluent_wildcards(name: str, pattern: str) -> None:
    from confluent_kafka.schema_registry.wildcard_matcher import wildcard_match

    assert tag_matches(name, pattern) == wildcard_match(name, pattern)


USER = {
    "type": "record",
    "name": "User",
    "namespace": "com.acme",
    "fields": [
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "zipcode", "type": "string"},
        {"name": "aliases", "type": {"type": "array", "items": "string"}},
        {"name": "age", "type": "int"},
    ],
}
USERS = [
    ("123-45-6789", "ann@example.com", "12345", ["a", "annie"], 30),
    ("987-65-4321", None, "54321", [], -1),
]


class _Contract:
    """The USER schema's WRITE plan for some CEL_FIELD rules; failures reject the row (as DLQ does)."""

    def __init__(
        self, rules: list[dict[str, Any]], metadata_tags: dict[str, list[str]] | None = None
    ) -> None:
        from actions.protocol import ActionPlan, Effect
        from contracts.planning.plan import build_plan

        parsed = avro.parse_schema(json.dumps(USER))
        spark_type = avro.struct_type(parsed)
        tags = {path: tuple(values) for path, values in (metadata_tags or {}).items()}
        compiled = []
        for data in rules:
            rule = Rule.from_dict(data)
            ctx = RuleContext(rule, "users-value", 1, RuleMode.WRITE, parsed, spark_type, AVRO, tags)
            compiled.append((ctx, CelFieldExecutor().compile(ctx)))

        def resolve(name: str | None, ctx: Any) -> ActionPlan:
            failed = name == "DLQ"
            return ActionPlan(
                name or "NONE", Effect.REJECT if failed else Effect.CONTINUE, "bad" if failed else None
            )

        self.plan = build_plan("users-value", 1, RuleMode.WRITE, spark_type, compiled, resolve)

    def explain(self) -> str:
        return self.plan.explain()

    def valid(self, df: Any) -> list[Any]:
        from contracts.engine import runner
        from contracts.engine.columns import RECORD, STATUS

        staged = runner.stage(self.plan, df)
        return staged.where(staged[STATUS].isNull()).select(f"{RECORD}.*").collect()


def _rule(expr: str, kind: str = "TRANSFORM", **fields: Any) -> dict[str, Any]:
    return {"name": "r", "kind": kind, "type": "CEL_FIELD", "mode": "WRITE", "expr": expr, **fields}


def _users(spark: Any) -> Any:
    return spark.createDataFrame(
        USERS, "ssn string, email string, zipcode string, aliases array<string>, age int"
    )


def _step(expr: str, kind: str = "TRANSFORM") -> Step:
    parsed = avro.parse_schema(json.dumps(USER))
    rule = Rule("r", RuleKind(kind), RuleMode.WRITE, "CEL_FIELD", expr)
    return CelFieldExecutor().compile(
        RuleContext(rule, "users-value", 1, RuleMode.WRITE, parsed, avro.struct_type(parsed), AVRO)
    )


@pytest.mark.parametrize(
    ("expr", "constant_outcome"),
    [
        ("name == 'ssn' ; '***'", True),
        ("tags.exists(t, t == 'PII') && fullName.endsWith('.ssn') ; value.isEmail() ? value : '***'", False),
    ],
)
def test_a_plan_time_guard_touches_only_its_column(spark: Any, expr: str, constant_outcome: bool) -> None:
    from pyspark.sql import functions as F

    step = _step(expr)
    assert isinstance(step, NativeStep)
    outcome = step.build(F.col("user"))
    text = str(outcome.record)
    assert "ssn" in text
    assert not any(other in text for other in ("email", "zipcode", "aliases", "age"))
    if constant_outcome:
        assert str(outcome.passed) == str(F.lit(True))


def test_a_guard_false_everywhere_leaves_the_record_untouched(spark: Any) -> None:
    from pyspark.sql import functions as F

    step = _step("typeName == 'DOUBLE' ; value * 2.0")
    assert isinstance(step, NativeStep)
    record = F.col("user")
    outcome = step.build(record)
    assert str(outcome.record) == str(record)


def test_explain_says_native_and_masking_runs(spark: Any) -> None:
    contract = _Contract([_rule("'PII' in tags ; '***'")])
    assert "(native)" in contract.explain()
    rows = sorted(contract.valid(_users(spark)), key=lambda row: row["zipcode"])
    assert [row["ssn"] for row in rows] == ["***", "***"]
    assert [row["zipcode"] for row in rows] == ["12345", "54321"]


def test_metadata_tag_patterns_select_fields(spark: Any) -> None:
    contract = _Contract([_rule("'SECRET' in tags ; 'x'")], {"com.acme.User.z*": ["SECRET"]})
    rows = contract.valid(_users(spark))
    assert {row["zipcode"] for row in rows} == {"x"}
    assert {row["ssn"] for row in rows} == {"123-45-6789", "987-65-4321"}


def test_rule_tags_restrict_the_visited_fields(spark: Any) -> None:
    contract = _Contract([_rule("typeName == 'STRING' ; 'x'", tags=["PII"])])
    rows = contract.valid(_users(spark))
    assert {row["ssn"] for row in rows} == {"x"}
    assert {row["zipcode"] for row in rows} == {"12345", "54321"}


def test_a_null_in_a_nullable_union_is_visited_as_null(spark: Any) -> None:
    contract = _Contract([_rule("typeName == 'NULL' ; 'none@example.com'")])
    rows = {row["zipcode"]: row for row in contract.valid(_users(spark))}
    assert rows["54321"]["email"] == "none@example.com"
    assert rows["12345"]["email"] == "ann@example.com"


def test_a_false_on_an_array_element_does_not_fail_the_record(spark: Any) -> None:
    contract = _Contract(
        [_rule("name == 'aliases' ; value == 'a'", "CONDITION", onFailure="DLQ", params={"dlq.topic": "bad"})]
    )
    assert len(contract.valid(_users(spark))) == 2


def test_a_false_field_fails_a_condition(spark: Any) -> None:
    rules = [
        _rule("typeName == 'INT' ; value >= 0", "CONDITION", onFailure="DLQ", params={"dlq.topic": "bad"})
    ]
    assert [row["zipcode"] for row in _Contract(rules).valid(_users(spark))] == ["12345"]


def test_an_expression_without_native_form_runs_in_python(spark: Any) -> None:
    # isUuid's `uuid.UUID` leniency has no exact native form (executors/cel/_native_builtins.py).
    contract = _Contract([_rule("name == 'zipcode' ; value.isUuid() ? 'uuid' : value + '!'")])
    assert "(python)" in contract.explain()
    rows = contract.valid(_users(spark))
    assert sorted(row["zipcode"] for row in rows) == ["12345!", "54321!"]


def test_a_bad_expression_fails_at_load() -> None:
    from contracts.errors import ContractError

    with pytest.raises(ContractError):
        _Contract([_rule("name == ")])


def _transform(name: str, mode: str, tags: tuple[str, ...] = ("PII",), **fields: Any) -> Rule:
    return Rule(name, RuleKind.TRANSFORM, RuleMode(mode), "CEL_FIELD", "'x'", tags, **fields)


def _superseded(rules: list[Rule], mode: RuleMode) -> frozenset[int]:
    """What the loader drops with the built-in executors, found as the engine finds them."""
    from operator import attrgetter

    from contracts.plugins import PluginRegistry
    from executors.cel import CelExecutor

    executors: PluginRegistry[Any] = PluginRegistry(attrgetter("type"))
    executors.register(CelFieldExecutor())
    executors.register(CelExecutor())
    return superseded_rules(rules, mode, executors)


def test_same_tag_transforms_run_only_the_first_on_write() -> None:
    rules = [
        _transform("a", "WRITE", disabled=True),
        _transform("b", "WRITE"),
        _transform("c", "WRITE", ("PII", "X")),
    ]
    assert _superseded(rules, RuleMode.WRITE) == {1}
    assert _superseded(rules, RuleMode.UPGRADE) == {1}


def test_same_tag_transforms_run_only_the_last_of_the_reversed_list_on_read() -> None:
    rules = [_transform("a", "READ"), _transform("b", "READ"), _transform("c", "WRITEREAD")]
    assert _superseded(rules, RuleMode.READ) == {0}
    assert _superseded(rules, RuleMode.DOWNGRADE) == {0}


def test_untagged_conditions_and_other_types_are_never_superseded() -> None:
    condition = Rule("c", RuleKind.CONDITION, RuleMode.WRITE, "CEL_FIELD", "true", ("PII",))
    untagged = [_transform("a", "WRITE", ()), _transform("b", "WRITE", ())]
    other_type = Rule("o", RuleKind.TRANSFORM, RuleMode.WRITE, "CEL", "message", ("PII",))
    assert _superseded([condition, condition], RuleMode.WRITE) == frozenset()
    assert _superseded(untagged, RuleMode.WRITE) == frozenset()
    assert _superseded([other_type, _transform("b", "WRITE")], RuleMode.WRITE) == frozenset()


def test_builtins_compile_natively(spark: Any) -> None:
    contract = _Contract([_rule("typeName == 'STRING' ; value.isEmail() ? 'email' : value")])
    assert "(native)" in contract.explain()
    rows = {row["zipcode"]: row for row in contract.valid(_users(spark))}
    assert rows["12345"]["email"] == "email"
    assert rows["12345"]["ssn"] == "123-45-6789"
    assert rows["54321"]["email"] is None


def test_a_builtin_on_a_null_field_fails_the_condition_natively(spark: Any) -> None:
    rules = [
        _rule("name == 'email' ; isEmail(value)", "CONDITION", onFailure="DLQ", params={"dlq.topic": "bad"})
    ]
    contract = _Contract(rules)
    assert "(native)" in contract.explain()
    assert [row["zipcode"] for row in contract.valid(_users(spark))] == ["12345"]


def test_plan_time_variables_are_plain_strings_as_in_the_reference(spark: Any) -> None:
    from pyspark.sql import functions as F

    # The reference binds `name` as a plain str, which the builtins refuse: an evaluation error.
    step = _step("name.isHostname()", "CONDITION")
    assert isinstance(step, NativeStep)
    assert step.batch is not None
    record = {"ssn": "1", "email": None, "zipcode": "2", "aliases": [], "age": 3}
    (outcome,) = step.batch.factory()([record])
    assert not outcome.passed
    users = _users(spark)
    passed = step.build(F.struct(*[F.col(name) for name in users.columns])).passed
    assert [row[0] for row in users.select(passed).collect()] == [False, False]


@pytest.mark.one_pass
def test_a_failed_rules_reason_names_the_field_natively_and_in_python(spark: Any) -> None:
    from contracts import DataContract, LocalRegistry, Schema

    registry = LocalRegistry()
    dlq = {"onFailure": "DLQ", "params": {"dlq.topic": "bad"}}
    rules = [
        {**_rule("typeName == 'INT' ; value >= 0", "CONDITION", **dlq), "name": "native"},
        # isUuid keeps this one in Python (test_an_expression_without_native_form_runs_in_python).
        {**_rule("name == 'zipcode' ; value.isUuid() || value == '12345'", "CONDITION", **dlq), "name": "py"},
        {**_rule("name == 'age' ; 100 / (value - 30) != 0", "CONDITION", **dlq), "name": "error"},
    ]
    for rule in rules:
        schema = {"schema": json.dumps(USER), "ruleSet": {"domainRules": [rule]}}
        registry.register_schema(f"{rule['name']}-value", Schema.from_dict(schema))
    users = _users(spark)
    reasons = {}
    for rule in rules:
        contract = DataContract(registry, f"{rule['name']}-value")
        [row] = contract.apply(users).rejected.collect()
        reasons[rule["name"]] = (contract.explain("WRITE").count("(native)"), row["_contract"]["reason"])
    assert reasons["native"] == (
        1,
        "Rule expr failed: typeName == 'INT' ; value >= 0 (field com.acme.User.age)",
    )
    assert reasons["py"] == (
        0,
        "Rule expr failed: name == 'zipcode' ; value.isUuid() || value == '12345'"
        " (field com.acme.User.zipcode)",
    )
    assert "divide by zero" in reasons["error"][1] and reasons["error"][1].endswith(
        "(field com.acme.User.age)"
    )
