"""Native migrations give what the Python path gives: same records, same rejections, same errors.

`read(df, writer_version=N)` runs a migration as Columns when it can (contracts.engine.native_migration);
each case here runs it that way and again with the native form switched off, on hypothesis
records, and the two must agree row for row.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.avro import avro_to_spark_value, parse_schema, spark_to_avro_value, struct_type
from executors.jsonata.executor import JsonataExecutor
from executors.protocol import BatchStep, NativeOutcome, NativeStep, RuleContext

# An executor defined here runs on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "people-value"
MAJOR = "application.major.version"
ADDR = {
    "type": "record",
    "name": "Addr",
    "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}],
}
AMOUNT = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}
MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
MICROS = {"type": "long", "logicalType": "timestamp-micros"}
FEE = {"type": "fixed", "name": "Fee", "size": 4, "logicalType": "decimal", "precision": 8, "scale": 3}
# Types JSON cannot carry: JSONata reads them through their JSON view, natively they are carried.
VIEWED = [
    {"name": "amount", "type": AMOUNT},
    {"name": "fee", "type": ["null", FEE], "default": None},
    {"name": "at", "type": MILLIS},
    {"name": "seen", "type": ["null", MICROS], "default": None},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "cutoff", "type": {"type": "int", "logicalType": "time-millis"}},
]
WRITER = {
    "type": "record",
    "name": "Person",
    "namespace": "t",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": ["null", "string"]},
        {"name": "age", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "addr", "type": ["null", ADDR]},
        {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        *VIEWED,
        {"name": "blob", "type": ["null", "bytes"], "default": None},
    ],
}
RENAME = (
    "$merge([$sift($, function($v, $k) {$k != 'ssn' and $k != 'blob'}), {'socialSecurityNumber': $.'ssn'}])"
)
RENAMED_FIELDS = [
    {"name": "name", "type": "string"},
    {"name": "socialSecurityNumber", "type": ["null", "string"], "default": None},
    {"name": "age", "type": "long"},
    {"name": "score", "type": "double"},
    WRITER["fields"][4],
    WRITER["fields"][5],
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    *VIEWED,
    {"name": "country", "type": "string", "default": "NZ"},
]
# Renames of fields JSON cannot carry, into fields of the same types.
PAYMENT = (
    "$merge([$sift($, function($v, $k) {$k != 'at' and $k != 'amount' and $k != 'blob'}),"
    " {'paidAt': at, 'total': $.amount, 'memo': blob}])"
)
PAYMENT_FIELDS = [
    *(f for f in WRITER["fields"] if f["name"] not in ("at", "amount", "blob")),
    {"name": "paidAt", "type": MILLIS},
    {"name": "total", "type": AMOUNT},
    {"name": "memo", "type": ["null", "bytes"], "default": None},
]
FLATTENED = "{'fullName': name & ' ' & ssn, 'years': age, 'city': addr.city, 'zip': addr.zip}"


def _flat(city: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": "fullName", "type": "string"},
        {"name": "years", "type": "long"},
        {"name": "city", **city},
        {"name": "zip", "type": ["null", "int"], "default": None},
    ]


# (case, the UPGRADE rule's expression or None, the target's fields)
CASES = [
    (
        "schema resolution only",
        None,
        [*WRITER["fields"][:4], *VIEWED, {"name": "extra", "type": "int", "default": 7}],
    ),
    ("rename, widen, default", RENAME, RENAMED_FIELDS),
    ("renamed decimals, timestamps and bytes", PAYMENT, PAYMENT_FIELDS),
    ("nested path with default", FLATTENED, _flat({"type": "string", "default": "nowhere"})),
    ("nested path without default", FLATTENED, _flat({"type": "string"})),
]
NAMES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=4) | st.sampled_from(["", "ann", "é"])
UTC = datetime.timezone.utc
# Microseconds in millisecond fields too: a DataFrame may hold them, the JSON view drops them.
INSTANTS = st.datetimes(datetime.datetime(1800, 1, 1), datetime.datetime(2300, 1, 1))


def _decimals(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal]:
    return st.integers(-(10**precision) + 1, 10**precision - 1).map(
        lambda n: decimal.Decimal(n).scaleb(-scale)
    )


PEOPLE = st.fixed_dictionaries(
    {
        "name": NAMES,
        "ssn": st.none() | NAMES,
        "age": st.integers(-(2**31), 2**31 - 1),
        "score": st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0, 1.5]),
        "addr": st.none() | st.fixed_dictionaries({"city": NAMES, "zip": st.none() | st.integers(0, 99999)}),
        "level": st.sampled_from(["LOW", "HIGH"]),
        "tags": st.lists(NAMES, max_size=2),
        "amount": _decimals(9, 2),
        "fee": st.none() | _decimals(8, 3),
        "at": INSTANTS.map(lambda d: d.replace(tzinfo=UTC)),
        "seen": st.none() | INSTANTS.map(lambda d: d.replace(tzinfo=UTC)),
        "local": INSTANTS,
        "day": st.dates(datetime.date(1800, 1, 1), datetime.date(2300, 1, 1)),
        "cutoff": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
        "blob": st.none() | st.binary(max_size=3),
    }
)
SETTINGS = settings(
    max_examples=examples(3),
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def contract(
    tmp_path: Path,
    expr: str | None,
    fields: list[dict[str, Any]],
    on_failure: str = "NONE",
    metadata_tags: dict[str, list[str]] | None = None,
    **rule: Any,
) -> DataContract:
    """Version 1 (WRITER) and version 2 (`fields`, `metadata_tags`), whose one UPGRADE rule is a
    JSONata TRANSFORM `expr` unless `rule` overrides its kind, type or tags."""
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibilityGroup=MAJOR)
    target = {**WRITER, "fields": fields}
    rules = []
    if expr is not None:
        up = {"name": "up", "kind": "TRANSFORM", "type": "JSONATA", "mode": "UPGRADE", "expr": expr, **rule}
        rules.append({**up, "onFailure": on_failure, "params": {"dlq.topic": "people-dlq"}})
    for major, schema, migrations, tags in (("1", WRITER, [], {}), ("2", target, rules, metadata_tags or {})):
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {MAJOR: major}, "tags": tags},
            "ruleSet": {"migrationRules": migrations},
        }
        registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return DataContract(registry, SUBJECT, version=2, dlq_sink=LocalTopicSink(tmp_path / "dlq"))


def writer_rows(spark: Any, people: list[dict[str, Any]]) -> Any:
    from pyspark.sql.types import IntegerType

    parsed = parse_schema(WRITER)
    names = [f["name"] for f in WRITER["fields"]]
    converted = [avro_to_spark_value(person, parsed) for person in people]
    rows = [(*(values[name] for name in names), i) for i, values in enumerate(converted)]
    schema = struct_type(parsed).add("row", IntegerType())
    return spark.createDataFrame(rows, schema)


def person(**fields: Any) -> dict[str, Any]:
    """A writer record; `fields` override its values."""
    return {
        "name": "a",
        "ssn": "1",
        "age": 1,
        "score": 0.5,
        "addr": None,
        "level": "LOW",
        "tags": [],
        "amount": decimal.Decimal("-12.50"),
        "fee": decimal.Decimal("0.125"),
        "at": datetime.datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=UTC),
        "seen": None,
        "local": datetime.datetime(1969, 12, 31, 23, 59, 59, 1000),
        "day": datetime.date(2024, 2, 29),
        "cutoff": datetime.time(23, 59, 59, 999000),
        "blob": b"\x00\xff",
        **fields,
    }


def runs_natively(reader: DataContract, df: Any) -> bool:
    """Whether `read(df, writer_version=1)` migrates as Columns (its native form resolved by Spark)."""
    writer = reader._compiler.writer(reader.registry.get_version(SUBJECT, 1))
    return 1 in reader._pipelines().natives([writer], df)


def read_both(monkeypatch: pytest.MonkeyPatch, reader: DataContract, df: Any) -> tuple[Any, Any]:
    """(native rows or error text, Python rows or error text), ordered by the `row` column."""
    assert runs_natively(reader, df)
    native = _outcome(lambda: reader.read(df, writer_version=1))
    with monkeypatch.context() as patched:
        patched.setattr(reader, "_compiler", dataclasses.replace(reader._compiler, natives=None))
        patched.setattr(reader, "_resolved", {})  # else the native migration cached by the first read
        assert not runs_natively(reader, df)
        assert reader._compiler.writer(reader.registry.get_version(SUBJECT, 1)).native is None
        python = _outcome(lambda: reader.read(df, writer_version=1))
    return native, python


def _outcome(read: Any) -> Any:
    try:
        return sorted((row.asDict(recursive=True) for row in read().collect()), key=lambda r: r["row"])
    except Exception as e:  # both paths must fail alike; the message is compared by the caller
        return ("failed", "no field" in str(e) and "no default" in str(e))


@SETTINGS
@given(people=st.lists(PEOPLE, min_size=25, max_size=25))
@pytest.mark.parametrize(("case", "expr", "fields"), CASES, ids=[c[0] for c in CASES])
def test_native_migrations_equal_the_python_path(
    spark: Any, tmp_path: Path, monkeypatch: Any, case: str, expr: Any, fields: Any, people: Any
) -> None:
    people[0] = {**people[0], "addr": None, "blob": None}
    native, python = read_both(monkeypatch, contract(tmp_path, expr, fields), writer_rows(spark, people))
    assert native == python


def test_renamed_decimals_timestamps_and_bytes_keep_their_values_without_a_python_pass(
    spark: Any, tmp_path: Path
) -> None:
    """Java's client migrates such records (through their JSON form); so do both paths here, and
    the native one is all Spark: no Python in the plan."""
    import contextlib
    import io

    people = [person(), person(name="b", fee=None, blob=None, at=datetime.datetime(1000, 1, 1, tzinfo=UTC))]
    reader = contract(tmp_path, PAYMENT, PAYMENT_FIELDS)
    df = writer_rows(spark, people)
    assert runs_natively(reader, df)
    migrated = reader.read(df, writer_version=1)
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        migrated.explain()
    assert "MapInArrow" not in plan.getvalue() and "EvalPython" not in plan.getvalue()
    target = parse_schema({**WRITER, "fields": PAYMENT_FIELDS})
    names = [f["name"] for f in PAYMENT_FIELDS]
    collected = sorted(migrated.collect(), key=lambda row: row["row"])
    rows = [spark_to_avro_value({name: row[name] for name in names}, target) for row in collected]
    for row, written in zip(rows, people, strict=True):
        assert (row["paidAt"], row["total"], row["memo"]) == (
            written["at"],
            written["amount"],
            written["blob"],
        )
        kept = ("fee", "local", "day", "cutoff")
        assert {k: row[k] for k in kept} == {k: written[k] for k in kept}
    assert str(rows[0]["total"]) == "-12.50" and str(rows[0]["fee"]) == "0.125"


# A rename that fails where the record's ssn is null (JSONata cannot order null).
FAILING = (
    "$merge([$sift($, function($v, $k) {$k != 'ssn' and $k != 'blob'}),"
    " {'socialSecurityNumber': $.'ssn', 'early': ssn < 'm'}])"
)


@pytest.mark.parametrize("on_failure", ["NONE", "DLQ", "ERROR"])
def test_a_failing_native_migration_follows_its_action_as_python_does(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_failure: str
) -> None:
    """Record b's rename fails; it holds decimals, timestamps and bytes like record a."""
    people = [person(), person(name="b", ssn=None)]
    fields = [f for f in RENAMED_FIELDS if f["name"] != "socialSecurityNumber"]
    reader = contract(tmp_path, FAILING, fields, on_failure)
    native, python = read_both(monkeypatch, reader, writer_rows(spark, people))
    assert native == python
    if on_failure == "ERROR":
        assert native[0] == "failed"
    else:
        assert [row["name"] for row in native] == (["a", "b"] if on_failure == "NONE" else ["a"])
    if on_failure == "DLQ":  # one record from each path, with the same headers and JSON value
        from_native, from_python = reader.dlq_sink.read("people-dlq")
        assert dict(from_native.headers) == dict(from_python.headers)
        assert from_native.value == from_python.value
        assert b"must evaluate to numeric or string values" in dict(from_native.headers)["__rule.exception"]


def test_shapes_without_an_exact_native_form_stay_in_python(spark: Any, tmp_path: Path) -> None:
    df = writer_rows(spark, [person()])
    chained = contract(tmp_path, "$sift($, function($v, $k) {$k != 'blob'})", WRITER["fields"][:-1])
    assert runs_natively(chained, df)
    doubled = contract(tmp_path, "{'name': name, 'twice': age * 2}", [WRITER["fields"][0]])
    assert not runs_natively(doubled, df)
    assert runs_natively(contract(tmp_path, None, WRITER["fields"]), df)
    # Python reads the JSON view back as the target's type: milliseconds taken for microseconds,
    # a time of day for a plain int, a date's days into a timestamp: no native form gives that.
    for copied, into in [
        ("at", MICROS),
        ("cutoff", {"type": "long", "logicalType": "time-micros"}),
        ("day", MILLIS),
    ]:
        reshaped = contract(
            tmp_path, f"{{'name': name, 'x': {copied}}}", [WRITER["fields"][0], {"name": "x", "type": into}]
        )
        assert not runs_natively(reshaped, df), (copied, into)
    # Schema resolution alone passes Avro values on unchanged, so a type changed under a name is Python's.
    retyped = [{**f, "type": MICROS} if f["name"] == "at" else f for f in WRITER["fields"]]
    assert not runs_natively(contract(tmp_path, None, retyped), df)


def frames(reader: DataContract, people: list[dict[str, Any]], second: dict[str, Any]) -> list[bytes]:
    """People framed by version 1 (the writer), then `second` by version 2, then a broken frame."""
    import io

    from fastavro import schemaless_writer

    from contracts.formats.wire import encode_frame

    out = []
    for version, values in [(1, p) for p in people] + [(2, None)]:
        registered = reader.registry.get_version(SUBJECT, version)
        record = values or second
        body = io.BytesIO()
        schemaless_writer(body, parse_schema(json.loads(registered.schema.schema_str)), record)
        out.append(encode_frame(registered.schema_id, body.getvalue()))
    return [*out, b"\x01broken"]


DESERIALIZE_CASES = [
    ("rename, failing rule continues", FAILING, RENAMED_FIELDS, "NONE", "DLQ"),
    ("rename, failing rule to DLQ", FAILING, RENAMED_FIELDS, "DLQ", "DLQ"),
    ("renamed decimals, timestamps and bytes", PAYMENT, PAYMENT_FIELDS, "DLQ", "DLQ"),
    ("missing field to the decode DLQ", FLATTENED, _flat({"type": "string"}), "NONE", "DLQ"),
    ("missing field fails the job", FLATTENED, _flat({"type": "string"}), "NONE", "ERROR"),
]


@pytest.mark.parametrize(
    ("case", "expr", "fields", "on_failure", "policy"),
    DESERIALIZE_CASES,
    ids=[c[0] for c in DESERIALIZE_CASES],
)
def test_deserialize_migrates_natively_as_python_does(
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    expr: str,
    fields: Any,
    on_failure: str,
    policy: str,
) -> None:
    """Rows of writer version 1 (one whose ssn is null, one without an address; all with decimals,
    timestamps and bytes), one of version 2 and an undecodable frame: the same rows, DLQ records and
    errors both ways. Under ERROR only the record without an address fails, so which failure the
    job reports does not depend on timing."""
    city = {"city": "x", "zip": None}
    people = [
        person(addr=city, blob=None),
        person(name="b", ssn=None, addr=city),
        person(name="c", addr=None),
    ]
    if policy == "ERROR":
        people = [people[0], people[2]]
    reader = contract(tmp_path, expr, fields, on_failure)
    later = {
        "fullName": "v2",
        "years": 2,
        "zip": None,
        "paidAt": people[0]["at"],
        "total": people[0]["amount"],
        "memo": None,
    }
    second = {f["name"]: later.get(f["name"], people[0].get(f["name"], "2")) for f in fields}
    framed = frames(reader, people, second)[: None if policy == "DLQ" else -1]
    native, python = deserialize_both(spark, monkeypatch, tmp_path, reader, framed, policy)
    assert native == python
    if policy == "ERROR":
        assert "offset 1 of subject 'people-value': migrated record has no field 'city'" in native[1]
    else:
        got, dlq = native
        assert len(got) + len(dlq) == len(framed)


def deserialize_both(
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    reader: DataContract,
    framed: list[bytes],
    policy: str,
) -> tuple[Any, Any]:
    """`deserialize` of the frames with the migration native, then in Python: for each, the rows by
    offset and the DLQ records, or the error's text."""
    rows = [(None, value, "people", 0, offset) for offset, value in enumerate(framed)]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")
    assert runs_natively(reader, df)

    def run(way: str) -> Any:
        sink = reader._dlq_sink = LocalTopicSink(tmp_path / way)
        out = reader.deserialize(df, on_decode_error=policy, decode_dlq_topic="people-undecodable")
        try:
            got = sorted((row.asDict(recursive=True) for row in out.collect()), key=lambda r: r["offset"])
        except Exception as e:
            text = str(e)
            return "failed", text[text.index("cannot deserialize") :].split("\n")[0][:160]
        dlq = sorted((t, r.value, tuple(sorted(r.headers))) for t in sink.topics() for r in sink.read(t))
        return got, dlq

    native = run("native")
    with monkeypatch.context() as patched:
        patched.setattr(reader, "_compiler", dataclasses.replace(reader._compiler, natives=None))
        patched.setattr(reader, "_resolved", {})  # else the native migration cached by the first read
        assert not runs_natively(reader, df)
        python = run("python")
    return native, python


# A target the writer's records reach by schema resolution alone (one field dropped, one defaulted).
RESOLVED_FIELDS = [*WRITER["fields"][:-1], {"name": "country", "type": "string", "default": "NZ"}]
# (case, the UPGRADE rule, whether it may change a record)
RULE_CASES = [
    ("JSONata condition", {"kind": "CONDITION", "expr": "age > 0"}, False),
    ("CEL_FIELD transform", {"type": "CEL_FIELD", "expr": "typeName == 'STRING' ; 'XXX'"}, True),
    (
        "CEL_FIELD condition on tagged fields",
        {"type": "CEL_FIELD", "kind": "CONDITION", "expr": "size(value) < 3", "tags": ["PII"]},
        False,
    ),
]


@SETTINGS
@given(people=st.lists(PEOPLE, min_size=25, max_size=25))
@pytest.mark.parametrize("on_failure", ["NONE", "DLQ"])
@pytest.mark.parametrize(("case", "rule", "transforms"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_conditions_and_field_rules_migrate_natively_as_python_does(
    spark: Any,
    tmp_path: Path,
    monkeypatch: Any,
    case: str,
    rule: dict[str, Any],
    transforms: bool,
    on_failure: str,
    people: Any,
) -> None:
    """A CONDITION hands the writer's record on (natively it failed an assertion before); a
    CEL_FIELD rule walks the writer's record with the tags its own version's metadata gives
    (docs/semantics.md §4.7, §6.6)."""
    reader = tagged_contract(tmp_path, rule, on_failure)
    native, python = read_both(monkeypatch, reader, writer_rows(spark, people))
    assert native == python
    if transforms:
        assert {row["name"] for row in native} == {"XXX"}


def tagged_contract(tmp_path: Path, rule: dict[str, Any], on_failure: str) -> DataContract:
    """`contract` onto RESOLVED_FIELDS, version 2 tagging `name` and `ssn` PII in its metadata."""
    expr, fields = rule["expr"], {k: v for k, v in rule.items() if k != "expr"}
    tags = {"**.name": ["PII"], "t.Person.ssn": ["PII"]}
    return contract(tmp_path, expr, RESOLVED_FIELDS, on_failure, metadata_tags=tags, **fields)


@pytest.mark.parametrize("policy", ["DLQ", "ERROR"])
@pytest.mark.parametrize(("case", "rule", "transforms"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_deserialize_runs_conditions_and_field_rules_natively_as_python_does(
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    rule: dict[str, Any],
    transforms: bool,
    policy: str,
) -> None:
    people = [person(), person(name="bob", age=-1), person(name="c", ssn=None)]
    reader = tagged_contract(tmp_path, rule, "DLQ")
    second = {f["name"]: people[0].get(f["name"], "NZ") for f in RESOLVED_FIELDS}
    framed = frames(reader, people, second)[: None if policy == "DLQ" else -1]
    native, python = deserialize_both(spark, monkeypatch, tmp_path, reader, framed, policy)
    assert native == python
    got, dlq = native
    assert len(got) + len(dlq) == len(framed)
    # The conditions fail bob (age -1; a three-letter name) and the field condition c (a null ssn).
    assert any(topic == "people-dlq" for topic, _, _ in dlq) is not transforms
    if transforms:  # every record of version 1 masked; version 2's is read as it was written
        assert [row["name"] for row in got] == ["XXX"] * len(people) + ["a"]


class ScalarResult(JsonataExecutor):
    """A JSONata executor whose migration step is native and returns the record's `age`, a number,
    as its Python twin does: no built-in native compiler builds such a migration result."""

    def compile(self, ctx: RuleContext) -> NativeStep:
        from pyspark.sql import functions as F

        batch = super().compile(ctx)
        assert isinstance(batch, BatchStep), "`age` has no native form of its own"
        return NativeStep(lambda record: NativeOutcome(F.lit(True), record.getField("age")), batch=batch)


def test_a_native_migration_result_that_is_no_record_leaves_the_migration_to_python(
    spark: Any, tmp_path: Path
) -> None:
    """Spark types the native result as a number, not a struct: the migration runs in Python, where
    the record is undecodable naming the rule (it failed on an IntegerType without fields before)."""
    registry = contract(tmp_path, "age", RESOLVED_FIELDS).registry
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = DataContract(registry, SUBJECT, version=2, dlq_sink=sink, executors={"up": ScalarResult()})
    df = writer_rows(spark, [person(age=7)])
    assert reader._compiler.writer(registry.get_version(SUBJECT, 1)).native is not None
    assert not runs_natively(reader, df)
    with pytest.raises(Exception, match="migration rule 'up' in UPGRADE on subject 'people-value' version 2"
                       " returned 7, not a record"):  # fmt: skip
        reader.read(df, writer_version=1).collect()
