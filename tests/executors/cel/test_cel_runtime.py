"""The CEL runtime gives confluent-kafka 2.16.1's answers, record by record, on both cel-python runners."""

from __future__ import annotations

import datetime
import time
import uuid
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import celpy
import pytest
from celpy import celtypes
from confluent_kafka.schema_registry import Schema as RefSchema
from confluent_kafka.schema_registry.common.schema_registry_client import Rule as RefRule
from confluent_kafka.schema_registry.common.schema_registry_client import RuleKind as RefKind
from confluent_kafka.schema_registry.common.serde import FieldContext, FieldType
from confluent_kafka.schema_registry.rules.cel import extra_func
from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor as RefCelExecutor
from confluent_kafka.schema_registry.rules.cel.cel_executor import msg_to_cel
from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts.errors import ContractError
from executors.cel import confluent_functions, runtime

UTC = datetime.timezone.utc

RECORD: dict[str, Any] = {
    "id": 42,
    "name": "Zoë 😀",
    "email": "zoe@example.com",
    "active": True,
    "flag": False,
    "score": 3.5,
    "zero": 0,
    "big": 9223372036854775807,
    "small": -9223372036854775808,
    "neg": -7,
    "nothing": None,
    "empty": "",
    "letters": ["a", "b", "c"],
    "nums": [1, 2, 3],
    "none_list": [],
    "attrs": {"k": "v", "n": "1"},
    "nested": {"inner": {"x": 1, "y": None}},
    "data": b"\x00\x01\xff",
    "ip_bytes": b"\x7f\x00\x00\x01",
    "ts": datetime.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC),
    "day": datetime.date(2024, 5, 1),
    "uid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "host": "example.com",
    "ip4": "192.168.0.1",
    "ip6": "fe80::1%eth0",
    "uri": "https://example.com/a?b=1#c",
    "amount": Decimal("-0.00"),
}

# (expression, kind) pairs; every one runs through our runtime and the reference's CelExecutor.
CORPUS: list[str] = [
    # comparisons, booleans, truthiness
    "message.id == 42",
    "message.id != 42",
    "message.active",
    "message.flag",
    "!message.flag",
    "message.active == true",
    "message.zero",
    "message.empty",
    "message.name",
    "message.nums",
    "message.none_list",
    "message.attrs",
    "message.score",
    "message.nothing",
    "message.nothing == null",
    "message.id > 40 && message.score < 4.0",
    "message.flag || message.id == 42",
    # ints vs doubles, int64 extremes and overflow, division by zero
    "message.id == 42.0",
    "message.score > 3",
    "double(message.id) == 42.0",
    "int(message.score) == 3",
    "message.big + 1 > 0",
    "message.small - 1 < 0",
    "message.big",
    "-message.small",
    "message.big * 2",
    "message.id / 0",
    "message.id % 0",
    "message.score / 0.0",
    "message.id / 5",
    "message.neg / 2",
    "message.neg % 5",
    "uint(message.neg)",
    "int('9223372036854775808')",
    # strings, unicode, bytes
    "message.name.size() == 6",
    'message.name.startsWith("Zo")',
    'message.name.contains("😀")',
    'message.name + "!"',
    'message.email.matches("^[a-z]+@[a-z.]+$")',
    "message.empty.size() == 0",
    "size(message.data) == 3",
    "message.data",
    'message.data == b"\\x00\\x01\\xff"',
    "string(message.data)",
    "bytes(message.name)",
    "string(message.active)",
    "string(message.id)",
    "string(message.score)",
    "string(message.nothing)",
    "string(message.nums)",
    "double(message.active)",
    "string(message.amount)",
    "double(message.amount)",
    # lists, maps, macros
    "message.nums.all(n, n > 0)",
    "message.nums.exists(n, n == 2)",
    "message.nums.exists_one(n, n > 1)",
    "message.nums.map(n, n * 2)",
    "message.nums.filter(n, n % 2 == 1)",
    "message.none_list.all(n, n > 100)",
    "message.letters.map(l, l + l)",
    "2 in message.nums",
    '"k" in message.attrs',
    "message.attrs.all(k, message.attrs[k].size() == 1)",
    "message.nums[5]",
    "message.nums[1]",
    'message.attrs["missing"]',
    "message.nested.inner.x == 1",
    "message.nested.inner.y == null",
    "message.nested.inner",
    "size(message.attrs) == 2",
    # has(), missing fields
    "has(message.nothing)",
    "has(message.missing)",
    "has(message.nested.inner.x)",
    "has(message.nested.inner.z)",
    "message.missing",
    "message.missing == null",
    "message.nested.missing.x",
    "message.name.missing",
    "undeclared_variable",
    # cel-python's own macros, which its transpiler cannot write (min) or can (reduce)
    "[3, 1, 2].min() == 1",
    "[1, 2].reduce(acc, x, 0, acc + x) == 3",
    # more nested parentheses in Python than its parser takes: the interpreter alone
    "!" * 210 + "(message.id == 42)",
    # timestamps, dates, uuids
    'message.ts > timestamp("2024-01-01T00:00:00Z")',
    "message.ts.getFullYear() == 2024",
    "message.ts < now",
    "string(message.ts)",
    "message.ts",
    "timestamp(0)",
    "timestamp(1700000000123, 3)",
    "timestamp(1, 4)",
    "timestamp(message.active)",
    "message.day == 19844",
    "message.day",
    'message.uid == "12345678-1234-5678-1234-567812345678"',
    "message.uid.isUuid()",
    # the Confluent builtins
    "message.email.isEmail()",
    'isEmail("not an email")',
    "isEmail(message.id)",
    "message.host.isHostname()",
    '"1.2.3.4".isHostname()',
    '"-bad.example".isHostname()',
    "message.ip4.isIpv4()",
    '"256.1.1.1".isIpv4()',
    "message.ip_bytes.isIpv4()",
    "message.ip6.isIpv6()",
    "message.ip4.isIpv6()",
    "isIpv4(message.id)",
    "message.uri.isUri()",
    '"/relative/path".isUri()',
    '"#frag".isUriRef()',
    '"http://[::1".isUri()',
    '"A1B2C3D4-1234-5678-9ABC-DEF012345678".isUuid()',
    '"".isUuid()',
    "message.nothing.isEmail()",
    '"%s has %d items, %.2f avg, hex %x, %X".format([message.name, 3, message.score, 255, "hi"])',
    '"%s".format([message.nums])',
    '"%d".format(["x"])',
    '"%d %d".format([1])',
    # whole-message transforms
    '{"id": message.id + 1, "name": message.name}',
    "message.nums.map(n, {'n': n})",
    # guards
    "message.active ; message.id == 42",
    "message.flag ; message.id == 0",
    "message.zero ; false",
    "message.missing ; true",
    "   ; message.id == 42",
    "message.active ; null",
    "message.active ; message.missing",
    "message.active ; message.nothing",
]


def _reference_executor() -> RefCelExecutor:
    return RefCelExecutor()


REFERENCE = _reference_executor()
REF_TARGET = RefSchema("{}", "AVRO")


def reference_outcome(expr: str, kind: str, record: Any) -> tuple[Any, ...]:
    """The outcome the reference's rule loop (`_execute_rules_with_phase`) gives one CEL rule; an
    error's text in the runtime's one-line form of the same exception."""
    rule = RefRule("r", None, RefKind(kind), None, "CEL", None, None, expr, None, None, None)
    ctx = SimpleNamespace(rule=rule, target=REF_TARGET)
    try:
        result = REFERENCE.transform(ctx, record)
    except Exception as e:
        return ("failed", runtime.evaluation_reason(e))
    if kind == "CONDITION":
        return ("passed",) if result else ("failed", f"Rule expr failed: {expr}")
    return ("failed", f"Rule expr failed: {expr}") if result is None else ("passed", result)


def our_outcome(expr: str, kind: str, record: Any) -> tuple[Any, ...]:
    program = runtime.compile_program(expr)
    activation = {"message": runtime.to_cel(record)}
    if kind == "CONDITION":
        outcome = program.condition(activation)
        return ("passed",) if outcome.passed else ("failed", outcome.reason)
    outcome = program.transform(activation, record)
    return ("passed", outcome.value) if outcome.passed else ("failed", outcome.reason)


def _plain(value: Any) -> bool:
    """Whether a transform's value holds only plain Python types (no celpy subclasses)."""
    if isinstance(value, dict):
        return type(value) is dict and all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return type(value) in (list, tuple) and all(_plain(v) for v in value)
    return not type(value).__module__.startswith("celpy")


@pytest.mark.parametrize("kind", ["CONDITION", "TRANSFORM"])
@pytest.mark.parametrize("expr", CORPUS)
def test_outcome_matches_the_reference(expr: str, kind: str) -> None:
    ours = our_outcome(expr, kind, RECORD)
    reference = reference_outcome(expr, kind, RECORD)
    assert ours == reference
    if ours[0] == "passed" and kind == "TRANSFORM":
        assert _plain(ours[1])


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 80


class _InterpreterOnly:
    """Evaluates a part with cel-python's interpreter alone, the reference's runner."""

    @staticmethod
    def run(part: Any, activation: dict[str, Any]) -> tuple[str, Any]:
        try:
            return ("value", part._interpret(activation))
        except Exception:
            return ("error", None)


def _transpiled_only(part: Any, activation: dict[str, Any]) -> tuple[str, Any]:
    try:
        value = part._transpiled(activation)
    except Exception:
        return ("error", None)
    return ("error", None) if isinstance(value, celpy.CELEvalError) else ("value", value)


@pytest.mark.parametrize("expr", CORPUS)
def test_compiled_and_interpreted_runners_agree(expr: str) -> None:
    program = runtime.compile_program(expr)
    activation = {
        "message": runtime.to_cel(RECORD),
        "now": celtypes.TimestampType(datetime.datetime.now(UTC)),
    }
    for part in filter(None, (program.guard, program.body)):
        if part._code is None:  # cel-python's own macros, 200 nested parentheses: interpreted
            continue
        compiled = _transpiled_only(part, activation)
        interpreted = _InterpreterOnly.run(part, activation)
        assert compiled[0] == interpreted[0]
        assert runtime.from_cel(compiled[1]) == runtime.from_cel(interpreted[1])


def test_interpreter_decides_error_text_after_the_compiled_runner_reports_one() -> None:
    outcome = runtime.compile_program("message.id / 0").condition({"message": runtime.to_cel(RECORD)})
    assert outcome.reason == "modulus or divide by zero: integer division or modulo by zero"


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("undeclared_variable", "undeclared reference to 'undeclared_variable'"),
        ('message.attrs["missing"]', "no such key: 'missing'"),
        ("message.nums[5]", "invalid_argument: list index out of range"),
        (
            "string(message.data)",
            "return error for overflow: 'utf-8' codec can't decode byte 0xff in position 2:",
        ),
        ("message.missing", "no such member in mapping: 'missing'"),
        ("message.nothing.isEmail()", "invalid argument, expected string"),
    ],
)
def test_an_evaluation_errors_reason_is_one_short_line_with_the_references_meaning(
    expr: str, reason: str
) -> None:
    """The reference's text is celpy's exception arguments (with, for an undeclared name, the whole
    activation: every variable and function); ours keeps the message and the error under it."""
    ours = our_outcome(expr, "CONDITION", RECORD)
    assert ours[0] == "failed" and ours[1].startswith(reason)
    assert "\n" not in ours[1] and len(ours[1]) <= runtime.MAX_REASON
    rule = RefRule("r", None, RefKind("CONDITION"), None, "CEL", None, None, expr, None, None, None)
    with pytest.raises(Exception) as caught:
        REFERENCE.transform(SimpleNamespace(rule=rule, target=REF_TARGET), RECORD)
    assert runtime.evaluation_reason(caught.value) == ours[1]
    if expr == "undeclared_variable":
        assert len(str(caught.value)) > 2000  # the reference's text: every variable and function


@pytest.mark.parametrize("operator", ["&&", "||"])
def test_a_chain_of_failing_conditions_evaluates_in_linear_time(operator: str) -> None:
    """cel-python's && and || put both operands' reprs in their error when neither is a boolean,
    an error's repr holds the one under it, and along a chain the time doubled with each term."""
    short = f" {operator} ".join(["message.id / 0 > 1"] * 3)
    assert our_outcome(short, "CONDITION", RECORD)[0] == reference_outcome(short, "CONDITION", RECORD)[0]
    start = time.perf_counter()
    outcome = our_outcome(f" {operator} ".join(["message.id / 0 > 1"] * 30), "CONDITION", RECORD)
    assert outcome[0] == "failed" and outcome[1].startswith(f"found no matching overload for _{operator}_")
    assert time.perf_counter() - start < 5


def test_a_reason_is_cut_to_one_line_of_at_most_max_reason_characters() -> None:
    key = "k\n" * 2000
    outcome = runtime.compile_program("message.attrs[message.key] == 1").condition(
        {"message": runtime.to_cel({"attrs": {}, "key": key})}
    )
    assert outcome.reason is not None
    assert outcome.reason.startswith("no such key: 'k\\nk\\n")
    assert len(outcome.reason) == runtime.MAX_REASON and "\n" not in outcome.reason


def test_the_compiled_runner_survives_another_parser_owning_celpys_shared_parser() -> None:
    shared = celpy.CELParser.CEL_PARSER
    try:
        celpy.CELParser.CEL_PARSER = None
        celpy.Environment()  # the default runner builds the shared parser with plain lark Trees
        program = runtime._compile(
            "message.id == 42 && message.active", subject=None, version=None, rule=None
        )
        assert program.condition({"message": runtime.to_cel(RECORD)}).passed
        assert celpy.CELParser.CEL_PARSER.options.tree_class is not celpy.evaluation.TranspilerTree
    finally:
        celpy.CELParser.CEL_PARSER = shared


def test_semicolon_inside_a_string_literal_splits_the_expression_as_the_reference_does() -> None:
    expr = 'message.name == "a;b"'
    with pytest.raises(ContractError) as caught:
        runtime.compile_program(expr)
    assert caught.value.position == "1:17"
    assert reference_outcome(expr, "CONDITION", RECORD)[0] == "failed"


@pytest.mark.parametrize(
    ("expr", "position"),
    [
        ("message.id ==", "1:12"),
        ("message.id @ 1", "1:12"),
        ("", "1:1"),
        ("message.id > 1 ;", "1:17"),
        ("message.active ;\n  message.id +", "2:14"),
        ("message.active\n  && ; true", "2:3"),
        ("message.a\n ;  1 +\n  2 )", "3:5"),
    ],
)
def test_syntax_error_names_line_and_column_in_the_rule_text(expr: str, position: str) -> None:
    with pytest.raises(ContractError) as caught:
        runtime.compile_program(expr, subject="orders-value", version=3, rule="checkId")
    error = caught.value
    assert (error.position, error.subject, error.version, error.rule) == (
        position,
        "orders-value",
        3,
        "checkId",
    )
    assert isinstance(error.__cause__, Exception)


def test_programs_are_compiled_once_per_process() -> None:
    first = runtime.compile_program("message.id == 7 ; message.id > 0")
    assert runtime.compile_program("message.id == 7 ; message.id > 0") is first
    assert first.guard is not None and first.guard.text == "message.id == 7 "


def test_guard_false_transform_returns_the_very_same_message() -> None:
    record = {"id": 1, "active": False}
    outcome = runtime.compile_program("message.active ; {'id': 2}").transform(
        {"message": runtime.to_cel(record)}, record
    )
    assert outcome.passed and outcome.value is record


def test_guard_error_is_a_failure_even_for_a_condition() -> None:
    outcome = runtime.compile_program("message.missing == 1 ; true").condition(
        {"message": runtime.to_cel(RECORD)}
    )
    assert not outcome.passed and outcome.error and "no such member" in str(outcome.reason)


def test_a_falsy_result_is_a_failure_without_an_error() -> None:
    outcome = runtime.compile_program("message.zero").condition({"message": runtime.to_cel(RECORD)})
    assert (outcome.passed, outcome.error, outcome.reason) == (False, False, "Rule expr failed: message.zero")


def test_to_cel_matches_the_references_msg_to_cel() -> None:
    ours, reference = runtime.to_cel(RECORD), msg_to_cel(RECORD)
    assert ours == reference
    for key, value in reference.items():
        assert type(ours[key]) is type(value), key
    assert type(runtime.to_cel(True)) is celtypes.BoolType
    assert runtime.to_cel(datetime.date(1969, 12, 31)) == -1
    assert runtime.to_cel(("B", {"x": 5})) == ("B", {"x": 5})


def test_from_cel_gives_plain_values() -> None:
    value = runtime.from_cel(msg_to_cel(RECORD))
    assert value == {**RECORD, "day": 19844, "uid": str(RECORD["uid"])}
    assert _plain(value)
    assert type(runtime.from_cel(celtypes.BoolType(False))) is bool
    assert type(runtime.from_cel(celtypes.TimestampType(RECORD["ts"]))) is datetime.datetime


# --- CEL_FIELD -------------------------------------------------------------------------------

FIELDS = [
    ("email", "User.email", FieldType.STRING, {"PII"}, "zoe@example.com"),
    ("id", "User.id", FieldType.LONG, set(), 42),
    ("active", "User.active", FieldType.BOOLEAN, {"A", "B"}, True),
    ("score", "ns.User.score", FieldType.DOUBLE, set(), 3.5),
    ("nothing", "User.nothing", FieldType.NULL, {"OPT"}, None),
    ("data", "User.data", FieldType.BYTES, set(), b"\x00"),
]

FIELD_EXPRESSIONS = [
    "value",
    'typeName == "STRING" ; value.isEmail()',
    '"PII" in tags ; value + "!"',
    "tags.exists(t, t == 'OPT')",
    "value == null",
    "name.isHostname()",
    'name + ":" + fullName + ":" + typeName',
    "message.id == 42",
    "typeName == 'NULL' ; false",
    "value.size()",
    "!value",
]


def _reference_field_args(field: tuple[Any, ...]) -> tuple[dict[str, Any], RefCelExecutor]:
    name, full_name, field_type, tags, value = field
    executor = CelFieldExecutor()
    captured: dict[str, Any] = {}
    executor._executor.execute = lambda ctx, msg, args: captured.update(args)
    executor._field_transform(None, FieldContext(RECORD, full_name, name, field_type, tags), value)
    return captured, executor


def _our_field_activation(field: tuple[Any, ...]) -> dict[str, Any]:
    name, full_name, field_type, tags, value = field
    return runtime.field_activation(value, name, full_name, field_type.name, sorted(tags), RECORD)


@pytest.mark.parametrize("field", FIELDS, ids=[f[0] for f in FIELDS])
def test_field_activation_matches_the_reference(field: tuple[Any, ...]) -> None:
    reference, _ = _reference_field_args(field)
    ours = _our_field_activation(field)
    assert ours.keys() == reference.keys()
    for key in ours:
        if key == "tags":
            assert sorted(ours[key]) == sorted(reference[key])
            assert all(type(tag) is celtypes.StringType for tag in ours[key])
        else:
            assert ours[key] == reference[key]
            assert type(ours[key]) is type(reference[key]), key


@pytest.mark.parametrize("kind", ["CONDITION", "TRANSFORM"])
@pytest.mark.parametrize("expr", FIELD_EXPRESSIONS)
@pytest.mark.parametrize("field", FIELDS, ids=[f[0] for f in FIELDS])
def test_field_results_match_the_reference(field: tuple[Any, ...], expr: str, kind: str) -> None:
    name, full_name, field_type, tags, value = field
    rule = RefRule("r", None, RefKind(kind), None, "CEL_FIELD", None, None, expr, None, None, None)
    ctx = SimpleNamespace(rule=rule, target=REF_TARGET)
    field_ctx = FieldContext(RECORD, full_name, name, field_type, tags)
    try:
        reference = ("passed", CelFieldExecutor()._field_transform(ctx, field_ctx, value))
    except Exception as e:
        reference = ("failed", runtime.evaluation_reason(e))
    activation = _our_field_activation(field)
    outcome = runtime.compile_program(expr).field(activation, value, condition=kind == "CONDITION")
    assert (("passed", outcome.value) if outcome.passed else ("failed", outcome.reason)) == reference


# --- builtins --------------------------------------------------------------------------------

REFERENCE_FUNCTIONS = {
    name: extra_func.EXTRA_FUNCS[name]
    for name in ("isEmail", "isHostname", "isIpv4", "isIpv6", "isUri", "isUriRef", "isUuid")
}


def _call(function: Any, argument: Any) -> tuple[str, Any]:
    try:
        return ("value", bool(function(argument)))
    except Exception as e:
        return ("error", f"{type(e).__name__}: {e}")


TRICKY = [
    "",
    ".",
    "a",
    "a.",
    "a..b",
    "@example.com",
    "a@b",
    "a@b.c.",
    "Zoë@example.com",
    "x@exämple.com",
    '"quoted"@example.com',
    "Name <a@b.com>",
    "a@b.com (comment)",
    "a" * 64 + "@example.com",
    "a" * 65 + "@example.com",
    "a" * 63 + ".com",
    "a" * 64 + ".com",
    "123.example",
    "example.123",
    "-a.com",
    "a-.com",
    "xn--bcher-kva.example",
    "1.2.3.4",
    "01.2.3.4",
    "::1",
    "fe80::1%eth0",
    "fe80::1%",
    "::ffff:1.2.3.4",
    "2001:db8::/32",
    "http://example.com",
    "http://example.com/",
    "http://[::1]/x",
    "http://[::1",
    "mailto:a@b.com",
    "urn:isbn:0451450523",
    "//host/path",
    "/path#frag",
    "#frag",
    "http:#frag",
    "12345678-1234-5678-1234-567812345678",
    "{12345678-1234-5678-1234-567812345678}",
    "urn:uuid:12345678-1234-5678-1234-567812345678",
    "1234567812345678123456781234567G",
    " 12345678123456781234567812345678",
    "12345678123456781234567812345678",
    "1234_678123456781234567812345678",
]


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("name", sorted(REFERENCE_FUNCTIONS))
def test_builtin_matches_the_reference_on_tricky_strings(name: str, text: str) -> None:
    ours = _call(confluent_functions.FUNCTIONS[name], celtypes.StringType(text))
    assert ours == _call(REFERENCE_FUNCTIONS[name], celtypes.StringType(text))


NON_STRINGS = [
    celtypes.IntType(1),
    celtypes.BoolType(True),
    celtypes.BytesType(b"\x7f\x00\x00\x01"),
    celtypes.BytesType(b"\x00" * 16),
    celtypes.BytesType(b"abc"),
    None,
    "plain str",
    celtypes.ListType([celtypes.StringType("a@b.com")]),
]


@pytest.mark.parametrize("argument", NON_STRINGS, ids=repr)
@pytest.mark.parametrize("name", sorted(REFERENCE_FUNCTIONS))
def test_builtin_matches_the_reference_on_other_types(name: str, argument: Any) -> None:
    assert _call(confluent_functions.FUNCTIONS[name], argument) == _call(REFERENCE_FUNCTIONS[name], argument)


_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="abcdefXYZ0123456789-.:@/#?[]%{}_ ", max_size=40),
    st.from_regex(r"[a-z0-9-]{1,10}(\.[a-z0-9-]{1,10}){0,3}", fullmatch=True),
    st.from_regex(r"[a-z.+]{0,8}@[a-z0-9-]{1,8}\.[a-z]{2,3}", fullmatch=True),
    st.uuids().map(str).map(lambda s: s.upper()),
    st.ip_addresses().map(str),
)


@settings(max_examples=examples(300), deadline=None)
@given(text=_text)
def test_builtins_agree_with_the_reference_on_generated_strings(text: str) -> None:
    for name, reference in REFERENCE_FUNCTIONS.items():
        assert _call(confluent_functions.FUNCTIONS[name], celtypes.StringType(text)) == _call(
            reference, celtypes.StringType(text)
        )


@settings(max_examples=examples(60), deadline=None)
@given(text=_text)
def test_builtins_give_the_same_answer_on_both_runners(text: str) -> None:
    activation = {"value": celtypes.StringType(text)}
    for name in REFERENCE_FUNCTIONS:
        part = runtime.compile_program(f"value.{name}()").body
        compiled = _transpiled_only(part, activation)
        assert compiled == _InterpreterOnly.run(part, activation)
