"""The native CEL compiler gives cel-python's answers: every corpus expression, on generated records."""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Any

import cel_corpus
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts import formats
from contracts.errors import ContractError
from contracts.formats.avro import avro_to_spark_value, parse_schema, struct_type
from contracts.model import Rule, RuleKind, RuleMode
from executors.cel import CelExecutor, runtime
from executors.cel.compiler.expressions import NotNativeCel, compile_expression, compile_rule
from executors.protocol import BatchStep, NativeStep, RuleContext

AVRO = formats.get("AVRO")

PARSED = parse_schema(cel_corpus.SCHEMA)
RECORD_TYPE = struct_type(PARSED)
INT64 = st.integers(-(2**63), 2**63 - 1)
EDGE_INTS = st.sampled_from([0, 1, -1, 2, 3, 7, -7, 2**63 - 1, -(2**63), 2**31 - 1, -(2**31)])
LONGS = st.one_of(EDGE_INTS, INT64, st.integers(-100, 100))
INTS = st.one_of(
    st.sampled_from([0, 1, -1, 18, 30, 65, 2**31 - 1, -(2**31)]), st.integers(-(2**31), 2**31 - 1)
)
DOUBLES = st.one_of(
    st.sampled_from([0.0, -0.0, 0.5, 1.0, -1.0, 1e300, float("nan"), float("inf"), float("-inf"), 9.3e18]),
    st.floats(allow_nan=True, allow_infinity=True),
)
TEXT = st.one_of(
    st.sampled_from(["", "a", "x", "alice", "Alice", "bob", "abc", "Paris", "é😀", "123-45-6789", "7"]),
    st.sampled_from(["a@b.com", "x.y@example.org", '"q"@ex.com', "a b@c.d", "1.2.3.4", "256.1.1.1"]),
    st.text(max_size=12),
    st.text(alphabet='ab.@-1 "\\x\t\n', max_size=14),
)
# The last microsecond of days far from 1970, which a double count of microseconds cannot hold.
DAY_ENDS = [datetime.datetime(*day, 23, 59, 59, 999_999) for day in ((1, 1, 2), (1600, 3, 1), (9999, 12, 30))]
TIMESTAMPS = st.one_of(
    st.sampled_from([*DAY_ENDS, datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999)]),
    st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30)),
).map(lambda d: d.replace(tzinfo=datetime.timezone.utc))
DATES = st.dates(min_value=datetime.date(1, 1, 1), max_value=datetime.date(9999, 12, 31))


def _address(draw: Any) -> dict[str, Any]:
    return {
        "city": draw(TEXT),
        "zip": draw(st.one_of(st.none(), TEXT)),
        "geo": {"lat": draw(DOUBLES), "lon": draw(DOUBLES)},
    }


@st.composite
def records(draw: Any) -> dict[str, Any]:
    """One Person as fastavro reads it (the reference's input), every field type at its extremes."""
    return {
        "id": draw(LONGS),
        "age": draw(INTS),
        "score": draw(DOUBLES),
        "ratio": draw(st.one_of(st.none(), DOUBLES)),
        "name": draw(TEXT),
        "nick": draw(st.one_of(st.none(), TEXT)),
        "email": draw(TEXT),
        "ssn": draw(TEXT),
        "active": draw(st.booleans()),
        "flag": draw(st.one_of(st.none(), st.booleans())),
        "data": draw(st.one_of(st.sampled_from([b"", b"ab", b"\x80", b"!"]), st.binary(max_size=6))),
        "count": draw(st.one_of(st.none(), LONGS)),
        "tags": draw(st.lists(TEXT, max_size=4)),
        "nums": draw(st.lists(LONGS, max_size=4)),
        "maybe": draw(st.lists(st.one_of(st.none(), LONGS), max_size=3)),
        "attrs": draw(st.dictionaries(st.sampled_from(["k", "", "a", "é"]), TEXT, max_size=3)),
        "address": _address(draw),
        "home": _address(draw) if draw(st.booleans()) else None,
        "items": draw(
            st.lists(
                st.fixed_dictionaries({"sku": TEXT, "qty": INTS, "price": DOUBLES}),
                max_size=3,
            )
        ),
        "created": draw(TIMESTAMPS),
        "born": draw(DATES),
        "amount": decimal.Decimal("1.25"),
    }


BASE_RECORD: dict[str, Any] = {
    "id": 1,
    "age": 30,
    "score": 0.5,
    "ratio": None,
    "name": "alice",
    "nick": None,
    "email": "a@b.com",
    "ssn": "123456789",
    "active": True,
    "flag": None,
    "data": b"ab",
    "count": None,
    "tags": ["x"],
    "nums": [1, 2],
    "maybe": [None, 3],
    "attrs": {"k": "v"},
    "address": {"city": "Paris", "zip": None, "geo": {"lat": 1.0, "lon": -1.0}},
    "home": None,
    "items": [{"sku": "alice", "qty": 1, "price": 2.5}],
    "created": datetime.datetime(2024, 2, 29, 23, 59, 59, 999_000, tzinfo=datetime.timezone.utc),
    "born": datetime.date(1990, 5, 17),
    "amount": decimal.Decimal("1.25"),
}


def _reference(expr: str, record: dict[str, Any]) -> tuple[str, Any]:
    """The runtime's value of an expression (no guard): ("error", None) or ("value", v)."""
    try:
        result = runtime.compile_program(expr).body.evaluate({"message": runtime.to_cel(record)})
    except Exception:
        return ("error", None)
    return ("value", _plain(result))


def _plain(value: Any) -> Any:
    from celpy import celtypes

    if isinstance(value, celtypes.BoolType | bool):
        return bool(value)
    if isinstance(value, celtypes.DurationType | datetime.timedelta):
        return ("duration", value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds)
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _native_plain(value: Any, kind: str) -> Any:
    if kind == "duration" and value is not None:
        return ("duration", value)
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [_native_plain(v, "") for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b if not isinstance(a, int | float) else a == b and type(a) is type(b)


def _dataframe(spark: Any, rows: list[dict[str, Any]]) -> Any:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([avro_to_spark_value(r, PARSED) for r in rows], RECORD_TYPE)
    return df.select(F.struct(*[F.col(f"`{n}`") for n in RECORD_TYPE.fieldNames()]).alias("r"))


# Expressions per Spark job: wide enough that a whole corpus takes a few jobs.
CHUNK = 120


def _disagreements(spark: Any, expressions: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """Evaluate every expression on every row natively (one Spark job per batch of expressions)
    and with cel-python; describe each row where the outcomes differ."""
    from pyspark.sql import functions as F

    df = _dataframe(spark, rows)
    compiled = [(expr, *compile_expression(expr, RECORD_TYPE)) for expr in expressions]
    problems: list[str] = []
    for start in range(0, len(compiled), CHUNK):
        chunk = compiled[start : start + CHUNK]
        columns = []
        for i, (_, _, build) in enumerate(chunk):
            val = build(F.col("r"))
            error = F.lit(False) if val.error is None else val.error
            columns.append(F.struct(val.value.alias("v"), error.alias("e")).alias(f"c{i}"))
        for row, record in zip(df.select(*columns).collect(), rows, strict=True):
            for i, (expr, cel_type, _) in enumerate(chunk):
                cell = row[f"c{i}"]
                native = ("error", None) if cell["e"] else ("value", _native_plain(cell["v"], cel_type.kind))
                expected = _reference(expr, record)
                if native[0] != expected[0] or (native[0] == "value" and not _same(native[1], expected[1])):
                    problems.append(f"{expr!r}: native {native} reference {expected} on {record!r}")
    return problems


# Hypothesis' buffer holds about 20 of these records per example; more would overrun and retry.
RECORD_LISTS = st.lists(records(), min_size=20, max_size=20)
SETTINGS = settings(
    max_examples=examples(2),
    deadline=None,
    # A disagreement is reported with every differing row; shrinking 60-row DataFrames costs minutes.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


def test_corpus_is_large_and_every_native_expression_compiles() -> None:
    assert len(cel_corpus.NATIVE) + len(cel_corpus.FALLBACK) >= 150
    refused = []
    for expr in cel_corpus.NATIVE:
        try:
            compile_expression(expr, RECORD_TYPE)
        except NotNativeCel as e:
            refused.append(f"{expr}: {e}")
    assert not refused, "\n".join(refused)


@pytest.mark.parametrize("expr", cel_corpus.FALLBACK)
def test_fallback_expressions_are_refused_by_the_compiler(expr: str) -> None:
    with pytest.raises(NotNativeCel):
        compile_rule(expr, RuleKind.CONDITION, RECORD_TYPE)


@SETTINGS
@given(rows=RECORD_LISTS)
def test_native_expressions_equal_cel_python(spark: Any, rows: list[dict[str, Any]]) -> None:
    problems = _disagreements(spark, cel_corpus.NATIVE, rows)
    assert not problems, "\n".join(problem[:400] for problem in problems[:20])


def test_a_field_the_schema_lacks_is_absent_and_always_reading_it_a_contract_error() -> None:
    # `false && error` is false: a record whose age is not positive passes it (docs/semantics.md §3.5).
    assert compile_rule("message.age > 0 &&\n  message.nope == 1", RuleKind.CONDITION, RECORD_TYPE)
    with pytest.raises(ContractError) as caught:
        compile_rule("(\n  message.nope == 1)", RuleKind.CONDITION, RECORD_TYPE)
    assert caught.value.position == "2:11"


def _context(expr: str, kind: RuleKind) -> RuleContext:
    rule = Rule(name="r", kind=kind, mode=RuleMode.WRITE, type="CEL", expr=expr)
    return RuleContext(rule, "s-value", 1, RuleMode.WRITE, cel_corpus.SCHEMA, RECORD_TYPE, AVRO)


def test_executor_compiles_natively_or_falls_back_per_rule() -> None:
    executor = CelExecutor()
    assert isinstance(executor.compile(_context("message.age > 0", RuleKind.CONDITION)), NativeStep)
    assert isinstance(executor.compile(_context("message.email.isUri()", RuleKind.CONDITION)), BatchStep)


EMAILISH = st.text(alphabet='ab1.-@"\\() \t\r\n<>,:;[]é\x0b\xa0_', max_size=16)
VALIDATOR_CALLS = ["s.isEmail()", "s.isHostname()", "s.isIpv4()"]


@SETTINGS
@given(texts=st.lists(st.one_of(EMAILISH, TEXT, EMAILISH.map(lambda t: t + "@ex-1.com")), min_size=300))
def test_validators_equal_the_reference_on_tricky_strings(spark: Any, texts: list[str]) -> None:
    rows = [{**BASE_RECORD, "email": text} for text in texts]
    expressions = [call.replace("s.", "message.email.") for call in VALIDATOR_CALLS]
    problems = _disagreements(spark, expressions, rows)
    assert not problems, "\n".join(problem[:300] for problem in problems[:20])


def _reference_rule(expr: str, kind: RuleKind, record: dict[str, Any]) -> tuple[bool, Any, bool]:
    """The runtime's rule outcome (docs/semantics.md §3): passed, the record after it, and whether
    evaluating it raised an error (the failures whose reason only the twin knows, §2.2)."""
    program = runtime.compile_program(expr)
    activation = {"message": runtime.to_cel(record)}
    if kind is RuleKind.CONDITION:
        outcome = program.condition(activation)
        return outcome.passed, record, outcome.error
    outcome = program.transform(activation, record)
    return outcome.passed, outcome.value, outcome.error


def _rule_disagreements(
    spark: Any, kind: RuleKind, rules: list[str], rows: list[dict[str, Any]]
) -> list[str]:
    """Each rule on each row natively and as the reference runs it, with whether it failed by an
    error; a transform's record compared as CEL values (the runtime hands a date on as its CEL int)."""
    from pyspark.sql import functions as F

    from contracts.formats.avro import spark_to_avro_value

    df = _dataframe(spark, rows)
    columns = []
    for i, expr in enumerate(rules):
        outcome = compile_rule(expr, kind, RECORD_TYPE)(F.col("r"))
        record = outcome.record if outcome.record is not None else F.col("r")
        assert outcome.error is not None  # CEL tells an error from a clean failure
        passed = F.coalesce(outcome.passed, F.lit(False))
        erred = ~passed & F.coalesce(outcome.error, F.lit(False))
        columns.append(F.struct(passed.alias("p"), record.alias("v"), erred.alias("e")).alias(f"c{i}"))
    problems = []
    for row, record in zip(df.select(*columns).collect(), rows, strict=True):
        for i, expr in enumerate(rules):
            passed, new, erred = _reference_rule(expr, kind, record)
            changes = passed and kind is RuleKind.TRANSFORM
            native_new = _plain(runtime.to_cel(spark_to_avro_value(row[f"c{i}"]["v"], PARSED)))
            cell = row[f"c{i}"]
            if (
                cell["p"] != passed
                or cell["e"] != erred
                or (changes and not _same(native_new, _plain(runtime.to_cel(new))))
            ):
                problems.append(
                    f"{expr!r}: native {cell['p']} (error {cell['e']}) reference {passed} (error {erred})"
                    f" on {record!r}"
                )
    return problems


@SETTINGS
@given(rows=RECORD_LISTS)
def test_guarded_conditions_and_transforms_equal_the_reference(
    spark: Any, rows: list[dict[str, Any]]
) -> None:
    problems = _rule_disagreements(spark, RuleKind.CONDITION, cel_corpus.GUARDED, [BASE_RECORD, *rows])
    problems += _rule_disagreements(spark, RuleKind.TRANSFORM, cel_corpus.TRANSFORMS, [BASE_RECORD, *rows])
    assert not problems, "\n".join(problem[:300] for problem in problems[:20])


def test_times_of_day_fall_back_since_cel_python_sees_no_int() -> None:
    """A time-millis/micros column is an int in Spark but a datetime.time in cel-python."""
    times = {
        "type": "record",
        "name": "Shift",
        "fields": [
            {"name": "hours", "type": "int"},
            {"name": "start", "type": {"type": "int", "logicalType": "time-millis"}},
            {
                "name": "breaks",
                "type": {"type": "array", "items": {"type": "long", "logicalType": "time-micros"}},
            },
        ],
    }
    record_type = struct_type(parse_schema(times))
    assert compile_rule("message.hours > 0", RuleKind.CONDITION, record_type)
    for expr in ("message.start > 0", "size(message.breaks) > 0", "message.breaks[0] > 0"):
        with pytest.raises(NotNativeCel):
            compile_rule(expr, RuleKind.CONDITION, record_type)
    rule = Rule(name="r", kind=RuleKind.CONDITION, mode=RuleMode.WRITE, type="CEL", expr="message.start > 0")
    step = CelExecutor().compile(RuleContext(rule, "s-value", 1, RuleMode.WRITE, times, record_type, AVRO))
    assert isinstance(step, BatchStep)
    (outcome,) = step.factory()([{"hours": 1, "start": datetime.time(9), "breaks": []}])
    assert not outcome.passed  # cel-python has no `>` between a time of day and an int


def test_a_transform_with_narrowing_fields_falls_back() -> None:
    with pytest.raises(NotNativeCel):
        compile_rule(cel_corpus.FALLBACK_TRANSFORM, RuleKind.TRANSFORM, RECORD_TYPE)


@settings(max_examples=examples(3), deadline=None, phases=[Phase.explicit, Phase.generate])
@given(rows=RECORD_LISTS)
def test_fallback_rules_give_the_reference_answers_through_the_batch_step(rows: list[dict[str, Any]]) -> None:
    executor = CelExecutor()
    for expr in cel_corpus.FALLBACK:
        step = executor.compile(_context(expr, RuleKind.CONDITION))
        assert isinstance(step, BatchStep)
        outcomes = step.factory()([BASE_RECORD, *rows])
        for outcome, record in zip(outcomes, [BASE_RECORD, *rows], strict=True):
            assert outcome.passed == _reference_rule(expr, RuleKind.CONDITION, record)[0], (expr, record)


LABEL_EDGES = [
    "a" * 63 + ".com",
    "a" * 64 + ".com",
    "x." + "b" * 63,
    "x." + "b" * 64,
    "-a.com",
    "a-.com",
    "a.-b.com",
    "a.b-.com",
    "a--b.c-d",
    "a.b.",
    "a..b",
    "1.22",
    "1.2a",
    "1.a2",
    "a.123-",
    "a.-",
    "a.1-1",
    ".a.com",
    "a.com-",
    "a.co-m.",
]


def test_validators_equal_the_reference_on_label_edges(spark: Any) -> None:
    """Label lengths 63/64, hyphens at label edges, all-digit last labels, empty labels and trailing
    dots, as hostnames and as email domains."""
    texts = [*LABEL_EDGES, *(f"user.name@{host}" for host in LABEL_EDGES), *(f"a b@{h}" for h in LABEL_EDGES)]
    rows = [{**BASE_RECORD, "email": text} for text in texts]
    expressions = [call.replace("s.", "message.email.") for call in VALIDATOR_CALLS]
    problems = _disagreements(spark, expressions, rows)
    assert not problems, "\n".join(problem[:300] for problem in problems[:20])


# Conditions that may fail (a division by a field, a nullable comparison, int overflow) joined by
# && and ||, and nested: each operator reads its operands' Columns in several places, and a Spark
# expression is a tree, so folding such a chain two at a time nested a copy per step (six of
# these conditions took the driver out of memory).
FAILING_CHAINS = [
    " && ".join(["100 / message.age > 0"] * 16),
    " || ".join(["message.count > 0", "message.id + 1 > 0", "message.flag"] * 10),
    " && ".join(f"(message.count > {i} || 100 / message.age > {i})" for i in range(2)),
    "!(" + " && ".join(["message.flag", "message.count > 0"] * 8) + ")",
]


def test_chains_of_failing_conditions_compile_to_small_expressions_with_cel_pythons_answers(
    spark: Any,
) -> None:
    from executors.cel.compiler.expressions import MAX_COST, _TermCompiler

    for expr in FAILING_CHAINS:
        assert _TermCompiler(RECORD_TYPE, expr).root(expr, 0).cost < MAX_COST, expr
    rows = [
        BASE_RECORD,
        {**BASE_RECORD, "age": 0, "count": None, "flag": None},
        {**BASE_RECORD, "age": 0, "count": 5, "flag": True},
        {**BASE_RECORD, "id": 2**63 - 1, "count": -1, "flag": False},
    ]
    problems = _disagreements(spark, FAILING_CHAINS, rows)
    assert not problems, "\n".join(problem[:300] for problem in problems)


def test_int_division_and_remainder_at_the_edges_equal_cel_python(spark: Any) -> None:
    """MIN / -1 overflows and fails, MIN % -1 is 0 (cel-python's remainder never overflows), a zero
    divisor fails both, and both truncate toward zero whatever the signs."""
    expressions = ["message.id / message.age", "message.id % message.age", "message.age % message.id"]
    low, high = -(2**63), 2**63 - 1
    pairs = [(low, -1), (low, 1), (high, -1), (low, 0), (-7, 2), (7, -2), (-7, -2), (low, 3)]
    rows = [{**BASE_RECORD, "id": id_, "age": age} for id_, age in pairs]
    problems = _disagreements(spark, expressions, rows)
    assert not problems, "\n".join(problem[:300] for problem in problems)


ACCESSORS = ["getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear"]
ACCESSORS += ["getHours", "getMinutes", "getSeconds", "getMilliseconds"]
# The last microsecond of a day far from 1970 (9999-12-31 is a common "never" sentinel), whose
# epoch microseconds a double cannot hold exactly, and the first microsecond of the next day.
LAST_MICROSECONDS = ["9999-12-31", "0001-01-01", "1600-03-01", "2329-01-01", "2400-03-01", "1969-12-31"]


def test_timestamp_accessors_at_the_ends_of_days_far_from_1970_equal_cel_python(spark: Any) -> None:
    instants = [_last_microsecond(day) for day in LAST_MICROSECONDS]
    instants += [at + datetime.timedelta(microseconds=1) for at in instants if at.year < 9999]
    rows = [{**BASE_RECORD, "created": at} for at in instants]
    problems = _disagreements(spark, [f"message.created.{name}()" for name in ACCESSORS], rows)
    assert not problems, "\n".join(problem[:300] for problem in problems)


def _last_microsecond(day: str) -> datetime.datetime:
    start = datetime.datetime.fromisoformat(day).replace(tzinfo=datetime.timezone.utc)
    return start.replace(hour=23, minute=59, second=59, microsecond=999999)


def test_has_of_a_field_of_what_fails_to_evaluate_is_false_as_in_cel_python(spark: Any) -> None:
    """cel-python's `has(e.f)` is whether reading `e.f` succeeds: a null record or an index out of
    range has nothing, rather than failing the rule."""
    expressions = [
        "has(message.home.geo.lat)",
        "has(message.home.city)",
        "has(message.items[0].sku)",
        "has(message.items[-5].qty)",
        "!has(message.home.geo.lat) || message.home.geo.lat > 0.0",
    ]
    home = {"city": "Lyon", "zip": None, "geo": {"lat": 2.0, "lon": 0.0}}
    rows = [{**BASE_RECORD, "items": []}, {**BASE_RECORD, "home": home}, BASE_RECORD]
    problems = _disagreements(spark, expressions, rows)
    assert not problems, "\n".join(problem[:300] for problem in problems)


def test_all_and_exists_with_one_null_predicate_are_false_as_in_cel_python(spark: Any) -> None:
    """cel-python's all/exists reduce with &&/||: a single null among the undecided elements ends
    the reduction as false, two or more fail it."""
    expressions = [
        "message.nums.all(n, message.flag)",
        "message.nums.exists(n, message.flag)",
        "message.nums.all(n, message.flag) == false",
        "message.nums.all(n, n == 1 ? message.flag : true)",
        "message.maybe.exists(n, n == null ? message.flag : false)",
    ]
    shapes = [([1], [None]), ([1, 20], [None, None]), ([], []), ([0], [3])]
    rows = [
        {**BASE_RECORD, "nums": nums, "maybe": maybe, "flag": flag}
        for nums, maybe in shapes
        for flag in (None, True)
    ]
    problems = _disagreements(spark, expressions, rows)
    assert not problems, "\n".join(problem[:300] for problem in problems)


@pytest.mark.parametrize(
    "expr",
    [
        "message.nums.exists_one(n, n == 0 ? 1 / n == 1 : false)",
        "message.nums.exists_one(n, !(100 / n == 1 || false))",
        "message.nums.filter(n, message.nick == 'x' || 100 / n == 1)",
        "message.nums.map(n, n == 0 ? 100 / n == 1 : false)",
    ],
)
def test_a_macro_keeping_a_predicates_error_value_runs_in_cel_python(expr: str) -> None:
    """cel-python's `?:`, `||` and `&&` give an error as a value, which exists_one and filter take
    as true and map keeps: not what a native error flag says."""
    with pytest.raises(NotNativeCel, match="error may be a value"):
        compile_expression(expr, RECORD_TYPE)
    assert compile_expression("message.nums.exists_one(n, n > 0 || n < -5)", RECORD_TYPE)
    assert compile_expression("message.nums.exists(n, n == 0 ? 1 / n == 1 : false)", RECORD_TYPE)


# (expression, why it is not native): cel-python's answer depends on what Spark cannot see.
VALUES = "depends on the values"
CEL_PYTHONS_TO_ANSWER = [
    ("message.name / message.score", VALUES),  # any value divided by a double zero is infinity
    ("message.name / message.score > 1.0", VALUES),
    ("message.ratio / 0.0", VALUES),  # a null one too
    ("message.nick / 0.0", VALUES),
    ("message.id / 0.0", VALUES),  # an int by a double: a value unless the double is zero
    ("message.name % message.id", VALUES),  # a string or bytes `%` formats as Python's does
    ("'%s' % message.name", VALUES),
    ("message.name % message.nick", VALUES),
    ("message.data % message.id", VALUES),
    ("message.name == '\\ud83d'", "lone surrogate"),  # which no JVM string can hold
    ("message.name != '\\ud83d\\ude00'", "lone surrogate"),
    ("message.attrs['\\udfff'] == 'v'", "lone surrogate"),
    ("size(message) > 0", "record"),  # a CEL map but a Spark struct: its size, keys and `in`
    ("size(message.address) == 3", "record"),
    ("'city' in message.address", "record"),
    ("message.address.exists(k, k == 'city')", "record"),
]


@pytest.mark.parametrize(("expr", "why"), CEL_PYTHONS_TO_ANSWER)
def test_what_spark_cannot_answer_as_cel_python_does_runs_in_cel_python(expr: str, why: str) -> None:
    with pytest.raises(NotNativeCel, match=why):
        compile_rule(expr, RuleKind.CONDITION, RECORD_TYPE)
    assert isinstance(CelExecutor().compile(_context(expr, RuleKind.CONDITION)), BatchStep)


@pytest.mark.parametrize(
    "expr",
    [
        "!" * 12 + "(100 / message.age > 0)",
        "[1].all(x, " * 6 + "100 / message.age > x" + ")" * 6,
        " && ".join(["100 / message.age > 0"] * 60),
    ],
)
def test_an_expression_too_large_for_spark_runs_in_cel_python(expr: str) -> None:
    with pytest.raises(NotNativeCel, match="Spark nodes"):
        compile_rule(expr, RuleKind.CONDITION, RECORD_TYPE)
    assert isinstance(CelExecutor().compile(_context(expr, RuleKind.CONDITION)), BatchStep)


@pytest.mark.parametrize(
    "expr",
    ["!" * 120 + "message.active", "message.id == 1 ? true : " * 40 + "message.age > 0"],
)
def test_an_expression_nested_too_deeply_for_spark_runs_in_cel_python(expr: str) -> None:
    """Spark turns a Column into its expression by recursion on a py4j thread: 300 nested `when`s
    overflowed its stack."""
    with pytest.raises(NotNativeCel, match="nested about"):
        compile_rule(expr, RuleKind.CONDITION, RECORD_TYPE)
    assert isinstance(CelExecutor().compile(_context(expr, RuleKind.CONDITION)), BatchStep)
