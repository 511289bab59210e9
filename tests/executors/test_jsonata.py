"""The JSONata executor: native shapes equal jsonata-python, parity with the reference, bounds, errors."""

from __future__ import annotations

import datetime
import io
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import validate
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from actions.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.avro import avro_to_spark_value, parse_schema, spark_to_avro_value, struct_type
from contracts.errors import ContractError
from contracts.model import Rule, RuleKind, RuleMode
from executors import BatchStep, NativeStep, RuleContext
from executors._jsonata_runtime import Bounds, JsonataBatch, outcome, parse
from executors.jsonata import JsonataExecutor

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
    max_examples=examples(4),
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
    return RuleContext(rule, "users-value", 1, mode, PARSED, RECORD_TYPE)


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


def test_a_record_with_non_json_values_fails_every_jsonata_rule(spark: Any) -> None:
    """jsonata-python refuses bytes, dates, timestamps, … anywhere in its input (so does the reference)."""
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
    step = JsonataExecutor().compile(RuleContext(rule, "e-value", 1, RuleMode.WRITE, parsed, record_type))
    assert isinstance(step, NativeStep)
    rows = [
        {"id": 1, "at": None, "blobs": [None]},
        {"id": 1, "at": None, "blobs": [b"x"]},
        {"id": 1, "at": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc), "blobs": []},
    ]
    df = spark.createDataFrame([avro_to_spark_value(r, parsed) for r in rows], record_type)
    native = [r[0] for r in df.select(step.build(F.struct("id", "at", "blobs")).passed).collect()]
    python = [outcome(RuleKind.CONDITION, parse("id > 0"), r, Bounds()).passed for r in rows]
    assert native == python == [True, False, False]


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
    evaluate = JsonataBatch(RUNAWAY, RuleKind.CONDITION, Bounds(timeout_ms=50))()
    started = time.monotonic()
    outcomes = evaluate([BASE, BASE])
    assert time.monotonic() - started < 5
    assert [o.passed for o in outcomes] == [False, False]
    assert all("timeout" in (o.reason or "") for o in outcomes)


def test_the_timeout_counts_from_each_evaluation_not_from_parsing() -> None:
    evaluate = JsonataBatch("age > 18", RuleKind.CONDITION, Bounds(timeout_ms=20))()
    time.sleep(0.05)
    assert [o.passed for o in evaluate([BASE, BASE])] == [True, True]


def test_max_depth_fails_deep_recursion_and_bounds_are_per_rule() -> None:
    bounded = JsonataBatch(DEEP, RuleKind.TRANSFORM, Bounds(max_depth=50))()
    (failed,) = bounded([BASE])
    assert not failed.passed and "Stack overflow" in (failed.reason or "")
    # The same expression in a rule without bounds shares the parsed expression, not the bounds.
    (unbounded,) = JsonataBatch(DEEP, RuleKind.TRANSFORM, Bounds())()([BASE])
    assert unbounded.passed and unbounded.record == 200


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
    (failed,) = JsonataBatch("$nope(age)", RuleKind.CONDITION, Bounds())()([BASE])
    assert not failed.passed and "non-function" in (failed.reason or "")
    (failed,) = JsonataBatch("name + 1", RuleKind.TRANSFORM, Bounds())()([BASE])
    assert not failed.passed and "must evaluate to a number" in (failed.reason or "")


def test_a_migration_transform_returns_another_versions_shape_as_plain_data() -> None:
    expr = MIGRATIONS[0][0]
    (migrated,) = JsonataBatch(expr, RuleKind.TRANSFORM, Bounds())()([BASE])
    assert migrated.passed and "ssn" not in migrated.record
    assert migrated.record["socialSecurityNumber"] == "123"
