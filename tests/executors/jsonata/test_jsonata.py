"""The JSONata executor: native shapes equal jsonata-python, parity with the reference, bounds, errors."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import math
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import validate
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, formats
from contracts.engine import python_migration
from contracts.errors import ContractError
from contracts.formats.avro import avro_to_spark_value, parse_schema, spark_to_avro_value, struct_type
from contracts.formats.avro.json_view import from_json_view, to_json_view
from contracts.model import Rule, RuleKind, RuleMode
from executors import BatchStep, NativeStep, RuleContext
from executors.jsonata.executor import MAX_DEPTH_PARAM, JsonataExecutor
from executors.jsonata.runtime import DEFAULT_TIMEOUT_MS, Bounds, JsonataBatch, evaluate, outcome, parse

AVRO = formats.get("AVRO")

USER = {
    "type": "record",
    "name": "User",
    "namespace": "t",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "big", "type": "long"},
        {"name": "score", "type": "double"},
        {"name": "ratio", "type": ["null", "double"]},
        {"name": "active", "type": "boolean"},
        {"name": "nick", "type": ["null", "string"]},
        {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]}},
        {
            "name": "addr",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Addr",
                    "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}],
                },
            ],
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "count", "type": ["null", "long"]},
    ],
}
PARSED = parse_schema(USER)
RECORD_TYPE = struct_type(PARSED)
BASE = {
    "name": "ann",
    "ssn": "123",
    "age": 30,
    "big": 2**53 + 1,
    "score": 1.5,
    "ratio": None,
    "active": True,
    "nick": None,
    "level": "LOW",
    "addr": {"city": "Zürich", "zip": None},
    "tags": ["a"],
    "count": 7,
}

# (expression, compiles natively?)
CONDITIONS = [
    ("age > 18", True),
    ("age >= 18 and active", True),
    ("name = 'ann' or nick = 'x'", True),
    ("nick != null", True),
    ("nick = null", True),
    ("score < 1.5", True),
    ("big > 9007199254740992", True),
    ("big = 9007199254740992", True),
    ("ratio > 0 or $exists(addr.city)", True),
    ("addr.zip > 100", True),
    ("addr.city = 'Zürich'", True),
    ("name", True),
    ("age", True),
    ("ratio", True),
    ("score + age > 10", True),
    ("score / age > 1", True),
    ("name & nick = 'annnull'", True),
    ("name & (active ? null) = name", True),  # no branch chosen: undefined, rendered ''
    ("(name & (active ? null)) = 'annnull'", True),
    ("age > 0 and 'x' != '\\ud83d\\ude00'", False),  # a lone surrogate the JVM cannot hold
    ("-age < 0", True),
    ("active ? age > 1 : ratio = 0", True),
    ("$exists(nick) and $exists(addr.zip)", True),
    ("name < nick", True),
    ("level = 'LOW'", True),
    ("(score * 1e300) * 1e300 > 0", True),
    ("big + 1 > big", False),
    ("$count(tags) > 1", False),
    ("$uppercase(name) = 'ANN'", False),
    ("age % 2 = 0", False),
    ("tags = 'a'", False),
]
DOMAIN_TRANSFORMS = [
    ("$", True),
    ("$merge([$, {'nick': name & '!'}])", True),
    ("$merge([$, {'age': age + 1}])", True),
    ("$merge([$, {'score': score * 2}])", True),
    ("$merge([$, {'big': big - 1}])", True),
    ("$merge([$, {'ratio': score / age}])", True),
    ("$merge([$, {'nick': null}])", True),
    ("$merge([$, {'active': score > 1}])", True),
    ("$merge([$sift($, function($v, $k) {$k != 'nick'}), {'nick': $.'name'}])", True),
    ("$sift($, function($v, $k) {$k != 'count' and $k != 'ratio'})", True),
    ("$merge([$, {'count': age, 'ratio': big}])", True),
    ("$merge([$, {'age': count}])", True),
    ("$merge([$, {'addr': addr}])", True),
    ("$merge([$, {'name': nick}])", True),
    ("$merge([$, {'score': age}])", True),
    ("$merge([$, {'age': score + 0}])", True),
    ("$merge([$sift($, function($v, $k) {$k != 'nick'}), {'nick': addr.city, 'extra': 1}])", True),
    ("$merge([$, {'nick': addr.city}])", False),
    ("$merge([$, {'nick': name & (active ? null)}])", True),
    ("$sift($, function($v, $k)<ns:b> {$k != 'nick'})", False),  # jsonata-python checks the signature
    ("$merge([$, {'age': score}])", False),
    ("$merge([$, {'name': $uppercase(name)}])", False),
    ("$merge([$, {'level': 'HIGH'}])", False),
]
MIGRATIONS = [
    ("$merge([$sift($, function($v, $k) {$k != 'ssn'}), {'socialSecurityNumber': $.'ssn'}])", True),
    ("{'fullName': name & ' ' & nick, 'years': age, 'city': addr.city, 'zip': addr.zip}", True),
    ("$sift($, function($v, $k) {$k != 'tags' and $k != 'addr'})", True),
    ("{'doubled': age * 2}", False),
]

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=5) | st.sampled_from(
    ["", "ann", "x", "é", "😀", "Zürich"]
)
INTS = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, 1, 18, 2**31 - 1, -(2**31)])
LONGS = st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, 2**53, 2**53 + 1, 2**63 - 1])
DOUBLES = st.floats() | st.sampled_from([0.0, -0.0, 1.5, 1e308, -1e308, 3.0])
RECORDS = st.fixed_dictionaries(
    {
        "name": TEXT,
        "ssn": TEXT,
        "age": INTS,
        "big": LONGS,
        "score": DOUBLES,
        "ratio": st.none() | DOUBLES,
        "active": st.booleans(),
        "nick": st.none() | TEXT,
        "level": st.sampled_from(["LOW", "HIGH"]),
        "addr": st.none() | st.fixed_dictionaries({"city": TEXT, "zip": st.none() | INTS}),
        "tags": st.lists(TEXT, max_size=2),
        "count": st.none() | LONGS,
    }
)
SETTINGS = settings(
    max_examples=examples(3),
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
        HealthCheck.data_too_large,
        HealthCheck.too_slow,
    ],
)


def context(expr: str, kind: RuleKind, mode: RuleMode = RuleMode.WRITE, **params: str) -> RuleContext:
    rule = Rule(name="r", kind=kind, mode=mode, type="JSONATA", expr=expr, params=params)
    return RuleContext(rule, "users-value", 1, mode, PARSED, RECORD_TYPE, AVRO)


def compiled(expr: str, kind: RuleKind, mode: RuleMode = RuleMode.WRITE) -> NativeStep | BatchStep:
    return JsonataExecutor().compile(context(expr, kind, mode))


def expected(expr: str, kind: RuleKind, record: dict[str, Any], migration: bool) -> tuple[bool, Any]:
    """jsonata-python's outcome as the engine's batch path decides it (a domain result must fit)."""
    result = outcome(kind, parse(expr), record, Bounds())
    if result.passed and kind is RuleKind.TRANSFORM and not migration:
        if not validate(result.record, PARSED, raise_errors=False):
            return False, None
        return True, written(result.record)
    return result.passed, result.record


def written(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the reference's serializer writes it (an int in a double field becomes a double)."""
    buffer = io.BytesIO()
    schemaless_writer(buffer, PARSED, record)
    buffer.seek(0)
    return schemaless_reader(buffer, PARSED, None)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values: NaN equals NaN, ints and floats compare by value, dict keys must match."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def disagreements(
    spark: Any, cases: list[tuple[str, RuleKind, RuleMode]], rows: list[dict[str, Any]]
) -> list[str]:
    """Every native case on every row in one Spark job, against jsonata-python."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([avro_to_spark_value(r, PARSED) for r in rows], RECORD_TYPE)
    record = F.struct(*[F.col(f"`{n}`") for n in RECORD_TYPE.fieldNames()])
    columns = []
    for i, (expr, kind, mode) in enumerate(cases):
        step = compiled(expr, kind, mode)
        assert isinstance(step, NativeStep), expr
        result = step.build(record)
        new = result.record if result.record is not None else F.lit(None)
        flags = [F.when(flag, F.lit(key)) for key, flag in result.undefined.items()]
        cell = F.struct(result.passed.alias("p"), new.alias("v"), F.array(*flags, F.lit(None)).alias("u"))
        columns.append(cell.alias(f"c{i}"))
    problems = []
    for row, source in zip(df.select(*columns).collect(), rows, strict=True):
        for i, (expr, kind, mode) in enumerate(cases):
            migration = mode is RuleMode.UPGRADE
            passed, new = expected(expr, kind, source, migration)
            cell = row[f"c{i}"]
            if cell["p"] != passed:
                problems.append(f"{expr!r}: native {cell['p']} jsonata {passed} on {source!r}")
            elif passed and kind is RuleKind.TRANSFORM:
                native = native_record(cell["v"], migration)
                if migration:  # keys JSONata leaves out are flagged undefined (null in the struct)
                    native = {k: v for k, v in native.items() if k not in cell["u"]}
                if not same(native, new):
                    problems.append(f"{expr!r}: native {native} jsonata {new} on {source!r}")
    return problems


def native_record(value: Any, migration: bool) -> dict[str, Any]:
    return value.asDict(recursive=True) if migration else spark_to_avro_value(value, PARSED)


def all_cases() -> list[tuple[str, RuleKind, RuleMode]]:
    cases = [(e, RuleKind.CONDITION, RuleMode.WRITE) for e, native in CONDITIONS if native]
    cases += [(e, RuleKind.TRANSFORM, RuleMode.WRITE) for e, native in DOMAIN_TRANSFORMS if native]
    return cases + [(e, RuleKind.TRANSFORM, RuleMode.UPGRADE) for e, native in MIGRATIONS if native]


@pytest.mark.parametrize(
    ("expr", "kind", "mode", "native"),
    [(e, RuleKind.CONDITION, RuleMode.WRITE, n) for e, n in CONDITIONS]
    + [(e, RuleKind.TRANSFORM, RuleMode.WRITE, n) for e, n in DOMAIN_TRANSFORMS]
    + [(e, RuleKind.TRANSFORM, RuleMode.UPGRADE, n) for e, n in MIGRATIONS],
)
def test_which_corpus_expressions_compile_natively(
    spark: Any, expr: str, kind: RuleKind, mode: RuleMode, native: bool
) -> None:
    step = compiled(expr, kind, mode)
    assert isinstance(step, NativeStep if native else BatchStep)
    if native:
        assert isinstance(step.batch, BatchStep)


EDGES = [
    {**BASE, "name": "", "nick": "", "age": 0, "score": -0.0, "addr": None, "count": None},
    {**BASE, "score": float("nan"), "ratio": float("inf"), "age": 2**31 - 1, "big": 2**63 - 1},
    {**BASE, "score": float("-inf"), "ratio": 0.0, "age": -(2**31), "big": -(2**63), "count": 2**40},
    {**BASE, "nick": "😀é", "addr": {"city": "", "zip": 0}, "active": False, "score": 1e308},
]


# Few examples of many records: each Spark job costs seconds, each extra record nothing.
@SETTINGS
@given(rows=st.lists(RECORDS, min_size=80, max_size=80))
def test_native_shapes_equal_jsonata_python_on_generated_records(
    spark: Any, rows: list[dict[str, Any]]
) -> None:
    problems = disagreements(spark, all_cases(), [BASE, *EDGES, *rows])
    assert not problems, "\n".join(p[:400] for p in problems[:15])


def test_a_record_with_bytes_and_timestamps_passes_natively_as_in_python(spark: Any) -> None:
    """Both paths read such a record through its JSON view (jsonata-python refuses it as it is)."""
    from pyspark.sql import functions as F

    schema = {
        "type": "record",
        "name": "Event",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
            {"name": "blobs", "type": {"type": "array", "items": ["null", "bytes"]}},
        ],
    }
    parsed = parse_schema(schema)
    record_type = struct_type(parsed)
    rule = Rule(name="r", kind=RuleKind.CONDITION, mode=RuleMode.WRITE, type="JSONATA", expr="id > 0")
    step = JsonataExecutor().compile(
        RuleContext(rule, "e-value", 1, RuleMode.WRITE, parsed, record_type, AVRO)
    )
    assert isinstance(step, NativeStep) and step.batch is not None
    rows = [
        {"id": 1, "at": None, "blobs": [None]},
        {"id": 1, "at": None, "blobs": [b"x"]},
        {"id": 0, "at": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc), "blobs": []},
    ]
    df = spark.createDataFrame([avro_to_spark_value(r, parsed) for r in rows], record_type)
    native = [r[0] for r in df.select(step.build(F.struct("id", "at", "blobs")).passed).collect()]
    python = [o.passed for o in step.batch.factory()(rows)]
    assert native == python == [True, True, False]


def reference_transform(expr: str, record: Any) -> tuple[str, Any]:
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import (
        JsonataExecutor as ReferenceExecutor,
    )

    ctx = SimpleNamespace(rule=SimpleNamespace(expr=expr))
    try:
        return "value", ReferenceExecutor().transform(ctx, record)
    except Exception as e:
        return "error", str(e)


@pytest.mark.parametrize(
    ("expr", "record"),
    [
        ("$merge([$sift($, function($v, $k) {$k != 'ssn'}), {'socialSecurityNumber': $.'ssn'}])", BASE),
        ("$merge([$, {'sku': $uppercase(name)}])", BASE),
        ("age > 18 and $exists(nick)", BASE),
        ("nick", BASE),
        ("name & nick", BASE),
        ("age / 0", BASE),
        ("$nope(1)", BASE),
        ("score + 1", {**BASE, "score": float("nan")}),
        ("id", {"id": b"\x00"}),
    ],
)
def test_batch_results_equal_the_reference_executor(expr: str, record: dict[str, Any]) -> None:
    ours = outcome(RuleKind.TRANSFORM, parse(expr), record, Bounds())
    theirs = reference_transform(expr, record)
    if theirs[0] == "error":
        assert not ours.passed and ours.reason == theirs[1]  # the reference's text: str(error)
    elif theirs[1] is None:
        assert not ours.passed and ours.reason is None
    else:
        assert ours.passed and ours.record == theirs[1]


@pytest.mark.parametrize(
    ("result", "passes"), [("0", False), ("''", False), ("{}", False), ("'false'", True), ("[0]", True)]
)
def test_conditions_use_the_references_python_truthiness(result: str, passes: bool) -> None:
    assert outcome(RuleKind.CONDITION, parse(result), BASE, Bounds()).passed is passes
    assert bool(reference_transform(result, BASE)[1]) is passes


RUNAWAY = "($loop := function($n) {$n = 0 ? 0 : $loop($n - 1)}; $loop(100000000))"
DEEP = "($f := function($n) {$n = 0 ? 0 : 1 + $f($n - 1)}; $f(200))"


def test_a_runaway_expression_fails_by_timeout_per_record() -> None:
    evaluate = JsonataBatch(RUNAWAY, RuleKind.CONDITION, Bounds(timeout_ms=50), PARSED, AVRO)()
    started = time.monotonic()
    outcomes = evaluate([BASE, BASE])
    assert time.monotonic() - started < 5
    assert [o.passed for o in outcomes] == [False, False]
    assert all("timeout" in (o.reason or "") for o in outcomes)


def test_the_timeout_counts_from_each_evaluation_not_from_parsing() -> None:
    evaluate = JsonataBatch("age > 18", RuleKind.CONDITION, Bounds(timeout_ms=20), PARSED, AVRO)()
    time.sleep(0.05)
    assert [o.passed for o in evaluate([BASE, BASE])] == [True, True]


def test_max_depth_fails_deep_recursion_and_bounds_are_per_rule() -> None:
    bounded = JsonataBatch(DEEP, RuleKind.TRANSFORM, Bounds(max_depth=50), PARSED, AVRO)()
    (failed,) = bounded([BASE])
    assert not failed.passed and "Stack overflow" in (failed.reason or "")
    # The same expression in a rule with the default bounds shares the parsed expression, not the bounds.
    (unbounded,) = JsonataBatch(DEEP, RuleKind.TRANSFORM, Bounds(), PARSED, AVRO)()([BASE])
    assert unbounded.passed and unbounded.record == 200


def test_a_max_depth_below_the_default_keeps_even_a_native_shape_in_python() -> None:
    """How deep jsonata-python's evaluation goes decides which records fail a small bound: `age > 18`
    fails every record at depth 2 there, so it must not pass them natively."""
    shallow = JsonataExecutor().compile(context("age > 18", RuleKind.CONDITION, **{MAX_DEPTH_PARAM: "2"}))
    assert isinstance(shallow, BatchStep) and MAX_DEPTH_PARAM in (shallow.why_not_native or "")
    (failed,) = JsonataBatch("age > 18", RuleKind.CONDITION, Bounds(max_depth=2), PARSED, AVRO)()([BASE])
    assert not failed.passed and "Stack overflow" in (failed.reason or "")
    default = JsonataExecutor().compile(context("age > 18", RuleKind.CONDITION, **{MAX_DEPTH_PARAM: "1000"}))
    assert isinstance(default, NativeStep)


def test_a_runaway_rule_never_hangs_the_job(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    rules = [
        {"name": "adult", "kind": "CONDITION", "type": "JSONATA", "mode": "WRITE", "expr": "age > 18"},
        {
            "name": "loop",
            "kind": "CONDITION",
            "type": "JSONATA",
            "mode": "WRITE",
            "expr": f"age < 40 or {RUNAWAY}",
            "params": {"jsonata.timeout.ms": "100", "dlq.topic": "bad"},
            "onFailure": "DLQ",
        },
    ]
    schema = {"type": "record", "name": "P", "fields": [{"name": "age", "type": "int"}]}
    registry.register_schema(
        "p-value", Schema.from_dict({"schema": json.dumps(schema), "ruleSet": {"domainRules": rules}})
    )
    contract = DataContract(
        registry, "p-value", executors=[JsonataExecutor()], dlq_sink=LocalTopicSink(tmp_path / "dlq")
    )
    result = contract.apply(spark.createDataFrame([(30,), (50,)], "age int"), mode="WRITE")
    assert [r["age"] for r in result.valid.collect()] == [30]
    (rejected,) = result.rejected.collect()
    assert rejected["_contract"]["rule"] == "loop" and "timeout" in rejected["_contract"]["reason"]


@pytest.mark.parametrize(("expr", "position"), [("age +", 5), ("{'a': 1", 7), ("name = 'x", 9)])
def test_a_syntax_error_is_a_contract_error_with_its_position(expr: str, position: int) -> None:
    with pytest.raises(ContractError) as caught:
        compiled(expr, RuleKind.CONDITION)
    assert caught.value.position == position


def test_bad_bounds_are_contract_errors() -> None:
    with pytest.raises(ContractError) as caught:
        JsonataExecutor().compile(context("age > 1", RuleKind.CONDITION, **{"jsonata.timeout.ms": "soon"}))
    assert caught.value.position == "jsonata.timeout.ms"


def test_a_runtime_error_is_a_failure_carrying_its_message() -> None:
    (failed,) = JsonataBatch("$nope(age)", RuleKind.CONDITION, Bounds(), PARSED, AVRO)()([BASE])
    assert not failed.passed and "non-function" in (failed.reason or "")
    (failed,) = JsonataBatch("name + 1", RuleKind.TRANSFORM, Bounds(), PARSED, AVRO)()([BASE])
    assert not failed.passed and "must evaluate to a number" in (failed.reason or "")


def test_a_migration_transform_returns_another_versions_shape_as_plain_data() -> None:
    expr = MIGRATIONS[0][0]
    (migrated,) = JsonataBatch(expr, RuleKind.TRANSFORM, Bounds(), PARSED, AVRO, migration=True)()([BASE])
    assert migrated.passed and "ssn" not in migrated.record
    assert migrated.record["socialSecurityNumber"] == "123"


# Records with every type JSON cannot carry: JSONata reads them through Avro's JSON encoding.
AMOUNT = {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}
MILLIS_TYPE = {"type": "long", "logicalType": "timestamp-millis"}
PAYMENT = {
    "type": "record",
    "name": "Payment",
    "namespace": "p",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": AMOUNT},
        {
            "name": "fee",
            "type": [
                "null",
                {
                    "type": "fixed",
                    "name": "Fee",
                    "size": 3,
                    "logicalType": "decimal",
                    "precision": 6,
                    "scale": 3,
                },
            ],
        },
        {"name": "at", "type": MILLIS_TYPE},
        {"name": "seen", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "cutoff", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "precise", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "memo", "type": ["null", "bytes"]},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
        {
            "name": "legs",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Leg",
                    "fields": [{"name": "at", "type": MILLIS_TYPE}, {"name": "amount", "type": AMOUNT}],
                },
            },
        },
        {"name": "when", "type": ["null", "string", MILLIS_TYPE]},
    ],
}
PAYMENT_PARSED = parse_schema(PAYMENT)
UTC = datetime.timezone.utc
AT = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
PAID = {
    "id": 7,
    "amount": decimal.Decimal("12.34"),
    "fee": decimal.Decimal("-0.500"),
    "at": AT,
    "seen": AT.replace(microsecond=678901),
    "local": datetime.datetime(2024, 1, 2, 3, 4, 5, 678000),
    "day": datetime.date(2024, 1, 2),
    "cutoff": datetime.time(3, 4, 5, 678000),
    "precise": datetime.time(3, 4, 5, 678901),
    "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "memo": b"\x00\xff",
    "code": b"AB",
    "legs": [{"at": AT, "amount": decimal.Decimal("-1.28")}],
    "when": AT,
}
# Avro's JSON encoding of PAID, as Java's client hands it to JSONata (unions unwrapped).
PAID_VIEW = {
    "id": 7,
    "amount": "\x04\xd2",
    "fee": "\xff\xfe\x0c",
    "at": 1704164645678,
    "seen": 1704164645678901,
    "local": 1704164645678,
    "day": 19724,
    "cutoff": 11045678,
    "precise": 11045678901,
    "ref": "12345678-1234-5678-1234-567812345678",
    "memo": "\x00\xff",
    "code": "AB",
    "legs": [{"at": 1704164645678, "amount": "\x80"}],
    "when": 1704164645678,
}


def payment_rule(expr: str, kind: RuleKind, mode: RuleMode = RuleMode.WRITE) -> JsonataBatch:
    step = JsonataExecutor().compile(
        RuleContext(
            Rule(name="r", kind=kind, mode=mode, type="JSONATA", expr=expr),
            "payments-value",
            1,
            mode,
            PAYMENT_PARSED,
            struct_type(PAYMENT_PARSED),
            AVRO,
        )
    )
    batch = step.batch if isinstance(step, NativeStep) else step
    assert isinstance(batch, BatchStep) and isinstance(batch.factory, JsonataBatch)
    return batch.factory


def test_the_json_view_of_each_avro_type_is_avros_json_encoding_and_comes_back_exactly() -> None:
    view = to_json_view(PAID, PAYMENT_PARSED)
    assert view == PAID_VIEW
    assert evaluate(parse("$"), view, Bounds()) == PAID_VIEW  # jsonata-python takes every value of it
    back = from_json_view(view, PAYMENT_PARSED)
    assert back == {**PAID, "ref": str(PAID["ref"])}
    assert [str(back["amount"]), str(back["fee"]), str(back["legs"][0]["amount"])] == [
        "12.34",
        "-0.500",
        "-1.28",
    ]


def test_jsonata_rules_run_on_records_with_decimals_timestamps_dates_and_bytes() -> None:
    """jsonata-python refuses Decimal, datetime and bytes: every such record used to fail every rule."""
    (passed,) = payment_rule("id > 0 and day * 86400000 < at", RuleKind.CONDITION)()([PAID])
    assert passed.passed and passed.record is PAID
    (copied,) = payment_rule("$merge([$, {'id': id + 1}])", RuleKind.TRANSFORM)()([PAID])
    assert copied.passed and copied.record == {**PAID, "id": 8, "ref": str(PAID["ref"])}
    rename = "$merge([$sift($, function($v, $k) {$k != 'at'}), {'paidAt': $.at}])"
    (migrated,) = payment_rule(rename, RuleKind.TRANSFORM, RuleMode.UPGRADE)()([PAID])
    kept = [f for f in PAYMENT["fields"] if f["name"] != "at"]
    target = parse_schema({**PAYMENT, "fields": [*kept, {"name": "paidAt", "type": MILLIS_TYPE}]})
    projected = python_migration.project(migrated.record, target, formats.get("AVRO"))
    assert projected == {
        **{k: v for k, v in PAID.items() if k != "at"},
        "ref": str(PAID["ref"]),
        "paidAt": AT,
    }


@pytest.mark.parametrize(
    ("produced", "expected"),
    [
        ("{'at': 0}", {"at": datetime.datetime(1970, 1, 1, tzinfo=UTC)}),
        ("{'seen': null, 'day': day + 1}", {"seen": None, "day": datetime.date(2024, 1, 3)}),
        ("{'memo': 'ÿA', 'code': 'xy'}", {"memo": b"\xffA", "code": b"xy"}),
        ("{'amount': '\\u0001', 'fee': null}", {"amount": decimal.Decimal("0.01"), "fee": None}),
        ("{'cutoff': 1, 'precise': 86399999999}", {"cutoff": datetime.time(0, 0, 0, 1000)}),
        ("{'when': 'later'}", {"when": "later"}),
        ("{'when': 0}", {"when": datetime.datetime(1970, 1, 1, tzinfo=UTC)}),
    ],
)
def test_values_a_rule_produces_are_read_back_as_java_reads_them(
    produced: str, expected: dict[str, Any]
) -> None:
    (result,) = payment_rule(f"$merge([$, {produced}])", RuleKind.TRANSFORM)()([PAID])
    assert result.passed, result.reason
    changed = {k: v for k, v in result.record.items() if v != PAID.get(k) and k != "ref"}
    assert {k: changed[k] for k in expected} == expected
    if "precise" in produced:
        assert result.record["precise"] == datetime.time(23, 59, 59, 999999)


@pytest.mark.parametrize(
    ("produced", "reason"),
    [
        ("{'memo': '€'}", "field 'memo': '€' is not bytes"),
        ("{'code': 'xyz'}", "field 'code': 'xyz' has 3 bytes, not the 2 of its fixed type"),
        ("{'cutoff': -1}", "field 'cutoff': -1 millis is not a time of day"),
        ("{'day': 1.5}", "field 'day': 1.5 is not a whole number of days"),
        ("{'amount': ''}", "field 'amount': '' has 0 bytes of a decimal's unscaled value"),
        ("{'legs': [{'at': 1e300, 'amount': 'x'}]}", "field 'legs[0].at': "),
    ],
)
def test_a_produced_value_its_type_cannot_hold_fails_the_rule_with_the_reason(
    produced: str, reason: str
) -> None:
    (result,) = payment_rule(f"$merge([$, {produced}])", RuleKind.TRANSFORM)()([PAID])
    assert not result.passed and result.record is PAID
    assert result.reason is not None and reason in result.reason and "\n" not in result.reason


def bounded_contract(tmp_path: Path, expr: str, **params: str) -> DataContract:
    """A contract whose one WRITE rule is `expr`, failing to a DLQ topic, on records of an `age`."""
    registry = LocalRegistry()
    rule = {
        "name": "bounded",
        "kind": "CONDITION",
        "type": "JSONATA",
        "mode": "WRITE",
        "expr": expr,
        "params": {"dlq.topic": "bad", **params},
        "onFailure": "DLQ",
    }
    schema = {"type": "record", "name": "P", "fields": [{"name": "age", "type": "int"}]}
    registry.register_schema(
        "p-value", Schema.from_dict({"schema": json.dumps(schema), "ruleSet": {"domainRules": [rule]}})
    )
    return DataContract(registry, "p-value", dlq_sink=LocalTopicSink(tmp_path / "dlq"))


def test_a_runaway_expression_without_params_fails_its_rule_by_the_default_timeout(
    spark: Any, tmp_path: Path
) -> None:
    """`$f` calls itself forever (a tail call, so no depth grows): the default bound stops it."""
    contract = bounded_contract(tmp_path, "age < 40 or ($f := function($x) {$f($x)}; $f(1))")
    result = contract.apply(spark.createDataFrame([(30,), (50,)], "age int"), mode="WRITE")
    assert [r["age"] for r in result.valid.collect()] == [30]
    started = time.monotonic()  # the Python workers are warm now
    (rejected,) = result.rejected.collect()
    assert time.monotonic() - started < 30
    reason = rejected["_contract"]["reason"]
    assert rejected["age"] == 50 and rejected["_contract"]["rule"] == "bounded"
    assert reason == f"Evaluation timeout after {DEFAULT_TIMEOUT_MS} milliseconds. Check for infinite loop"


def test_recursion_deeper_than_python_allows_fails_its_rule_not_the_worker(
    spark: Any, tmp_path: Path
) -> None:
    """With the depth bound raised past what Python's stack allows, RecursionError is a rule failure."""
    deep = "($f := function($n) {$n = 0 ? 0 : 1 + $f($n - 1)}; $f(age))"
    contract = bounded_contract(tmp_path, f"{deep} >= 0", **{"jsonata.max.depth": "1000000"})
    result = contract.apply(spark.createDataFrame([(30,), (5000,)], "age int"), mode="WRITE")
    assert [r["age"] for r in result.valid.collect()] == [30]
    (rejected,) = result.rejected.collect()
    assert "maximum recursion depth exceeded" in rejected["_contract"]["reason"]
    # The default depth bound stops the same recursion with JSONata's own error first.
    default = bounded_contract(tmp_path / "default", f"{deep} >= 0").apply(
        spark.createDataFrame([(5000,)], "age int"), mode="WRITE"
    )
    (stopped,) = default.rejected.collect()
    assert stopped["_contract"]["reason"].startswith("Stack overflow")


# PAYMENT without the types only Python reads exactly (a fixed, a union of a string and a timestamp).
VIEWED = parse_schema(
    {**PAYMENT, "fields": [f for f in PAYMENT["fields"] if f["name"] not in ("code", "when")]}
)
VIEWED_TYPE = struct_type(VIEWED)
VIEWED_CASES = [
    ("id > 0 and $exists(seen)", RuleKind.CONDITION, True),
    ("$exists(memo) and memo = null", RuleKind.CONDITION, True),
    ("$", RuleKind.TRANSFORM, True),
    ("$merge([$, {'id': id + 1}])", RuleKind.TRANSFORM, True),
    ("$merge([$sift($, function($v, $k) {$k != 'memo'}), {'memo': $.memo}])", RuleKind.TRANSFORM, True),
    ("$merge([$, {'seen': seen, 'day': day, 'fee': null}])", RuleKind.TRANSFORM, True),
    ("$sift($, function($v, $k) {$k != 'fee' and $k != 'seen'})", RuleKind.TRANSFORM, True),
    ("$merge([$, {'seen': at}])", RuleKind.TRANSFORM, False),
    ("$merge([$, {'cutoff': cutoff + 1}])", RuleKind.TRANSFORM, False),
    ("$merge([$, {'memo': amount}])", RuleKind.TRANSFORM, False),
]
INSTANTS = st.datetimes(datetime.datetime(1800, 1, 1), datetime.datetime(2300, 1, 1))
AWARE = INSTANTS.map(lambda d: d.replace(tzinfo=UTC))


def decimals(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal]:
    return st.integers(-(10**precision) + 1, 10**precision - 1).map(
        lambda n: decimal.Decimal(n).scaleb(-scale)
    )


# Microseconds in millisecond fields too: a DataFrame may hold them, the JSON view drops them.
PAYMENTS = st.fixed_dictionaries(
    {
        "id": st.integers(-(2**63), 2**63 - 1),
        "amount": decimals(12, 2),
        "fee": st.none() | decimals(6, 3),
        "at": AWARE,
        "seen": st.none() | AWARE,
        "local": INSTANTS,
        "day": st.dates(datetime.date(1800, 1, 1), datetime.date(2300, 1, 1)),
        "cutoff": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
        "precise": st.times(),
        "ref": st.uuids(),
        "memo": st.none() | st.binary(max_size=4),
        "legs": st.lists(st.fixed_dictionaries({"at": AWARE, "amount": decimals(12, 2)}), max_size=2),
    }
)


def test_which_expressions_on_viewed_types_compile_natively() -> None:
    for expr, kind, native in VIEWED_CASES:
        rule = Rule(name="r", kind=kind, mode=RuleMode.WRITE, type="JSONATA", expr=expr)
        step = JsonataExecutor().compile(
            RuleContext(rule, "p-value", 1, RuleMode.WRITE, VIEWED, VIEWED_TYPE, AVRO)
        )
        assert isinstance(step, NativeStep) is native, expr


def python_domain_outcome(expr: str, kind: RuleKind, record: dict[str, Any]) -> tuple[bool, Any]:
    """The batch path's outcome: jsonata-python on the JSON view, a transform's result read back,
    checked against the schema and stored as the writer stores it."""
    (result,) = JsonataBatch(expr, kind, Bounds(), VIEWED, AVRO)()([record])
    if not result.passed or kind is RuleKind.CONDITION:
        return result.passed, None
    if not validate(result.record, VIEWED, raise_errors=False):
        return False, None  # as `expected` decides it: a result that does not fit (a long overflowing)
    buffer = io.BytesIO()
    schemaless_writer(buffer, VIEWED, result.record)
    buffer.seek(0)
    return True, schemaless_reader(buffer, VIEWED, None)


@SETTINGS
@given(rows=st.lists(PAYMENTS, min_size=30, max_size=30))
def test_native_rules_on_decimals_timestamps_dates_and_bytes_equal_python(
    spark: Any, rows: list[dict[str, Any]]
) -> None:
    from pyspark.sql import functions as F

    rows = [PAID_VIEWED, *rows]
    df = spark.createDataFrame([avro_to_spark_value(r, VIEWED) for r in rows], VIEWED_TYPE)
    record = F.struct(*[F.col(f"`{n}`") for n in VIEWED_TYPE.fieldNames()])
    cases = [(expr, kind) for expr, kind, native in VIEWED_CASES if native]
    columns = []
    for i, (expr, kind) in enumerate(cases):
        rule = Rule(name="r", kind=kind, mode=RuleMode.WRITE, type="JSONATA", expr=expr)
        step = JsonataExecutor().compile(
            RuleContext(rule, "p-value", 1, RuleMode.WRITE, VIEWED, VIEWED_TYPE, AVRO)
        )
        assert isinstance(step, NativeStep)
        result = step.build(record)
        new = result.record if result.record is not None else F.lit(None)
        columns.append(F.struct(result.passed.alias("p"), new.alias("v")).alias(f"c{i}"))
    problems = []
    for row, source in zip(df.select(*columns).collect(), rows, strict=True):
        for i, (expr, kind) in enumerate(cases):
            passed, expected_record = python_domain_outcome(expr, kind, source)
            cell = row[f"c{i}"]
            native = spark_to_avro_value(cell["v"], VIEWED) if passed and kind is RuleKind.TRANSFORM else None
            if cell["p"] != passed or native != expected_record:
                problems.append(
                    f"{expr!r} on {source!r}: native {cell['p']} {native} python {passed} {expected_record}"
                )
    assert not problems, "\n".join(p[:600] for p in problems[:5])


PAID_VIEWED = {k: v for k, v in PAID.items() if k not in ("code", "when")} | {
    "at": AT.replace(microsecond=678901),
    "local": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999),
    "legs": [
        {
            "at": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            "amount": decimal.Decimal("0.00"),
        }
    ],
}


REGEX_CASES = [
    ("$contains(name, /^(a+)+$/)", "a" * 41 + "!", False),  # Python's `re` ran past 300 s on it
    ("$contains(name, /^(a+)+$/)", "a" * 41, True),
    ("$count($match(name, /(a|aa)+b/)) = 0", "a" * 5000, True),
    ("$replace(name, /(x+x+)+y/, '-') = name", "x" * 5000, True),
    ("$count($split(name, /(a*)*b/)) = 1", "a" * 5000, True),
]


def test_regexes_are_matched_in_linear_time() -> None:
    """JSONata regexes are RE2's (docs/semantics.md §5.3): a search cannot be stopped by the rule's
    time bound, so none may run long. Run in a process of its own, which a regression would hold."""
    from deadline import python_within

    code = f"""
import json
from executors.jsonata.runtime import Bounds, parse, outcome
from contracts.model import RuleKind
cases = {REGEX_CASES!r}
passed = [outcome(RuleKind.CONDITION, parse(e), {{"name": n}}, Bounds()).passed for e, n, _ in cases]
print(json.dumps(passed))
"""
    assert json.loads(python_within(60, code)) == [passed for _, _, passed in REGEX_CASES]


def test_regexes_keep_their_flags_groups_and_replacements() -> None:
    cases = {
        "$contains('ABC', /b/i)": True,
        "$match('a\nb', /^b$/m).index": 2,
        "$match('éé😀1', /1/).index": 3,
        "$replace('abcabc', /b(c)/, '[$1]')": "a[c]a[c]",
        "$split('a1b22c', /[0-9]+/)": ["a", "b", "c"],
        "$match('abcabc', /(b)(c)/).groups": ["b", "c", "b", "c"],
    }
    for expr, value in cases.items():
        assert parse(expr).evaluate(None) == value, expr


def test_a_regex_re2_refuses_fails_the_contract_at_load() -> None:
    with pytest.raises(ContractError, match=r"/\(\?=a\)b/ is not an RE2 pattern \(invalid perl operator"):
        JsonataExecutor().compile(context("$contains(name, /(?=a)b/)", RuleKind.CONDITION))
