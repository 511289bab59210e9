"""CEL expressions are checked when a contract loads: nesting depth, and every call against the
reference's CEL environment; what loads evaluates without exhausting Python's recursion."""

from __future__ import annotations

import functools
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from celpy.evaluation import base_functions
from confluent_kafka.schema_registry.rules.cel.extra_func import EXTRA_FUNCS

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError
from executors.cel import runtime
from executors.cel.checks import FUNCTIONS, MAX_DEPTH, UNSUPPORTED_EXTENSIONS
from executors.cel.reference import parse

SUBJECT = "things-value"
THING = {
    "type": "record",
    "name": "Thing",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "zero", "type": "long"},
        {"name": "name", "type": "string"},
    ],
}


def load(expr: str, rule_type: str = "CEL", tmp: Path | None = None) -> DataContract:
    rule = {"name": "r", "kind": "CONDITION", "type": rule_type, "mode": "WRITE", "expr": expr}
    return load_rules([rule], tmp)


def load_rules(rules: list[dict[str, Any]], tmp: Path | None = None) -> DataContract:
    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(THING), "ruleSet": {"domainRules": rules}})
    )
    sink = LocalTopicSink(tmp or Path("/nonexistent"))
    return DataContract(registry, SUBJECT, dlq_sink=sink)


def refusal(expr: str, rule_type: str = "CEL") -> ContractError:
    with pytest.raises(ContractError) as caught:
        load(expr, rule_type)
    error = caught.value
    assert (error.subject, error.version, error.rule) == (SUBJECT, 1, "r")
    return error


# -- functions and arities -------------------------------------------------------------------


def _reference_names() -> set[str]:
    """Every function name a CEL expression can call in the reference (operators, `_in_` and the
    like, aside)."""
    names = {*base_functions, *EXTRA_FUNCS}
    return {name for name in names if name.replace(".", "_").isidentifier() and name[0] != "_"}


def test_the_environment_is_the_references() -> None:
    assert set(FUNCTIONS) | UNSUPPORTED_EXTENSIONS == _reference_names()
    assert not set(FUNCTIONS) & UNSUPPORTED_EXTENSIONS


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_each_function_takes_the_arguments_the_references_takes(name: str) -> None:
    reference = EXTRA_FUNCS.get(name, base_functions.get(name))
    arity = FUNCTIONS[name]
    for count in range(5):
        try:
            inspect.signature(reference).bind(*range(count))
            binds = True
        except TypeError:
            binds = False
        except ValueError:  # no signature: null_type, a type called without arguments
            binds = count == 0
        assert arity.accepts(count) == binds, (name, count)


@pytest.mark.parametrize(
    ("expr", "position", "reason"),
    [
        ("message.name.substring(1) == 'a'", "1:14", "undeclared function substring()"),
        ("noSuch(message.id)", "1:1", "undeclared function noSuch()"),
        ("message.id > 0 &&\n  size(message.name, 1) == 1", "2:3", "size() takes 1 argument, not 2"),
        ("message.name.isEmail(1)", "1:14", "isEmail() takes 1 argument (the receiver counts"),
        ("message.name.startsWith()", "1:14", "startsWith() takes 2 arguments"),
        ("has(message.name, 1)", "1:1", "has() takes 1 argument, not 2"),
        ("[1].map(x)", "1:5", "map() takes 2 arguments, not 1"),
        ("[1].exists(x, x > 0, 1)", "1:5", "exists() takes 2 arguments, not 3"),
        ("[1].all(1, true)", "1:9", "the macro all() needs a variable name"),
        ("decimal('1.5') > decimal('1')", "1:1", "decimal() is a Confluent CEL extension"),
        ("decimals.add(message.id, 1) > 0", "1:10", "decimals.add() is a Confluent CEL extension"),
        (".size('a') == 1", "1:2", "a call with a leading dot"),
        ("message.id > 0 ; message.name.lowerAscii() == 'a'", "1:31", "undeclared function lowerAscii()"),
    ],
)
def test_a_call_outside_the_environment_is_refused_at_load(expr: str, position: str, reason: str) -> None:
    error = refusal(expr)
    assert error.position == position
    assert error.reason.startswith(f"CEL: {reason}")


def test_a_cel_field_rule_is_checked_too() -> None:
    error = refusal("typeName == 'STRING' ; value.substring(1) == 'a'", "CEL_FIELD")
    assert (error.position, error.reason) == (
        "1:30",
        "CEL: undeclared function substring(): not in Confluent's CEL environment",
    )


@pytest.mark.parametrize(
    "expr",
    [
        "message.name.size() == size(message.name)",
        "message.name.matches('^a') || matches(message.name, 'b')",
        "timestamp(message.id, 3) > timestamp(0)",
        "int(message.id) == message.id && dyn(message.id) > 0",
        "[3, 1].min() == 1 && [1, 2].reduce(acc, x, 0, acc + x) == 3",
        "'%d'.format([message.id]) != '' && type(message.id) == int",
        "has(message.name) && isEmail(message.name) == message.name.isEmail()",
        "[1].map(x, x + 1) == [2] && duration('1s') > duration('0s')",
    ],
)
def test_calls_of_the_environment_load(expr: str) -> None:
    load(expr)


def test_a_parenthesised_macro_variable_loads_as_the_reference_reads_it() -> None:
    """cel-python reads `all((x), …)` as `all(x, …)`; the load check unwraps the parentheses too."""
    expr = "[1, 2].all((x), x > 0) && [1].map((y), y + 1) == [2]"
    load(expr)
    record = runtime.to_cel({"id": 1, "zero": 0, "name": "a"})
    assert runtime.compile_program(expr).condition({"message": record}).passed


# -- nesting depth ---------------------------------------------------------------------------

DEEP = {
    "parentheses": lambda n: "(" * n + "100 / message.zero" + ")" * n + " > 0",
    "negations": lambda n: "!" * n + "(100 / message.zero > 0)",
    "additions": lambda n: "100 / message.zero" + " + 1" * n + " > 0",
    "conjunctions": lambda n: " && ".join(["100 / message.zero > 0"] * n),
    "calls": lambda n: "size(" * n + "string(100 / message.zero)" + ")" * n + " > 0",
    "lists": lambda n: "size(" + "[" * n + "100 / message.zero" + "]" * n + ") > 0",
    "macros": lambda n: "[1].all(x, " * n + "100 / message.zero > x" + ")" * n,
}


def _height(text: str) -> int:
    tree = parse(text)
    best, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        best = max(best, depth)
        stack.extend((child, depth + 1) for child in node.children if hasattr(child, "children"))
    return best


@functools.cache
def deepest(kind: str) -> tuple[str, str]:
    """The most deeply nested expression of a kind within MAX_DEPTH, and the same one level deeper:
    its nesting count found by doubling, then halving the gap (a tree's height grows with the count,
    and parsing every count in turn took 19 s for the conjunctions)."""
    build = DEEP[kind]

    def fits(n: int) -> bool:
        return _height(build(n)) <= MAX_DEPTH

    fitting, too_deep = 1, 2
    while fits(too_deep):
        fitting, too_deep = too_deep, too_deep * 2
    while too_deep - fitting > 1:
        middle = (fitting + too_deep) // 2
        fitting, too_deep = (middle, too_deep) if fits(middle) else (fitting, middle)
    return build(fitting), build(fitting + 1)


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_an_expression_nested_too_deeply_is_refused_at_load_naming_the_rule(kind: str) -> None:
    deep, deeper = deepest(kind)
    load(deep)
    error = refusal(deeper)
    assert (
        error.reason
        == f"CEL: the expression nests more than {MAX_DEPTH} levels deep in cel-python's parse tree"
    )
    line, column = map(int, str(error.position).split(":"))
    assert line == 1 and 1 <= column <= len(deeper)


@pytest.mark.parametrize("text", ["(" * 5000 + "1" + ")" * 5000, "!" * 5000 + "true", "1" + " + 1" * 5000])
def test_far_deeper_expressions_are_refused_without_recursing(text: str) -> None:
    assert "nests more than" in refusal(f"{text} == true").reason


def test_the_deepest_expressions_evaluate_on_spark_natively_and_in_python(spark: Any, tmp_path: Path) -> None:
    """Each kind at MAX_DEPTH on its own record, where it fails with an evaluation error (so the
    interpreter, the deepest of the runners, gives the reason): native where the compiler takes
    it, and in cel-python (`isUri()` has no native form). Outcomes and reasons are the runtime's."""
    rules, expected = [], {}
    record = {"id": 0, "zero": 0, "name": "x"}
    for kind in sorted(DEEP):
        deep, _ = deepest(kind)
        for runner, body in (("native", deep), ("python", f"message.name.isUri() || {deep}")):
            row = len(rules)
            outcome = runtime.compile_program(body).condition({"message": runtime.to_cel(record)})
            expected[row] = None if outcome.passed else outcome.reason
            rules.append(
                {
                    "name": f"{kind}-{runner}",
                    "kind": "CONDITION",
                    "type": "CEL",
                    "mode": "WRITE",
                    "expr": f"message.id == {row} ; {body}",
                    "onFailure": "DLQ",
                    "params": {"dlq.topic": "deep"},
                }
            )
    contract = load_rules(rules, tmp_path)
    assert contract.explain("WRITE").count("(python)") >= len(DEEP)
    df = spark.createDataFrame([(row, 0, "x") for row in expected], "id long, zero long, name string")
    result = contract.apply(df)
    reasons = {row["id"]: row["_contract"]["reason"] for row in result.rejected.collect()}
    passed = {row["id"]: None for row in result.valid.collect()}
    assert {**reasons, **passed} == expected
    assert sum(reason is not None for reason in expected.values()) >= len(DEEP)
    assert not any("recursion" in str(reason) for reason in expected.values())


def test_the_runtime_keeps_the_recursion_limit_cel_python_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(sys, "getrecursionlimit", lambda: 1000)
    raised: list[int] = []
    monkeypatch.setattr(sys, "setrecursionlimit", raised.append)
    runtime.compile_program("true")
    assert raised == [2500]
