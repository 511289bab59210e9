"""Plan-time answers of the reference runtime: cel-python's parse tree of an expression (and which
of its grammar's nodes only pass a child on) and its interpreter with Confluent's functions, which
the load checks and the native compiler consult to fold constants and to learn how a function
behaves on sample values (docs/semantics.md §3.5)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import celpy
from celpy.evaluation import Activation, Evaluator
from lark import Tree

from executors.cel import confluent_functions

# cel-python's grammar rules that only hand their one child on: the precedence levels and parentheses.
PASS_THROUGH = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
        "paren_expr",
    }
)


@lru_cache(maxsize=1024)
def parse(text: str) -> Tree:
    """cel-python's parse tree of an expression (its Lark grammar), cached per process."""
    return celpy.Environment().compile(text)


def reference_evaluate(tree: Any, variables: Mapping[str, Any]) -> Any:
    """Evaluate a parse tree at plan time as the reference runtime does: cel-python's interpreter
    with Confluent's functions (which replace `string`, `double`, `==` …); raises on an error."""
    activation = Activation(annotations=dict(celpy.googleapis), functions=confluent_functions.FUNCTIONS)
    value = Evaluator(ast=tree, activation=activation).evaluate(dict(variables))
    if isinstance(value, Exception):
        raise value
    return value


def unwrap(tree: Tree) -> Tree:
    """The first node under `tree` that is more than a pass-through rule: `(x)` and `x` alike."""
    while tree.data in PASS_THROUGH and len(tree.children) == 1 and isinstance(tree.children[0], Tree):
        tree = tree.children[0]
    return tree
