"""Load-time checks of a CEL expression's parse tree: how deep it nests, and what it calls.

Both run before anything walks the tree recursively (cel-python's transpiler and interpreter, the
native compiler), so an expression that would exhaust Python's recursion on a worker, or call a
function the reference's CEL environment lacks, is refused when the contract loads, with the place
in the expression, instead of failing every record at run time.

The environment is the reference's: cel-python's standard functions and macros plus Confluent's
extensions. A function is found by name and called with the receiver of a method call as its
first argument (`s.size()` is `size(s)`), as cel-python does; its arity is that of the
function this engine runs. Macros take CEL's arities, which the Java client enforces too (cel-python
itself ignores extra arguments to `has` and `dyn`).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import lark
from celpy.evaluation import base_functions

from executors.cel import confluent_functions
from executors.cel.reference import unwrap

__all__ = ["MAX_DEPTH", "ExpressionProblem", "check_expression", "ensure_recursion_limit"]

MAX_DEPTH = 250
"""Levels of cel-python's parse tree an expression may nest (cel-go's and cel-cpp's parsers default
to the same 250). Each parenthesis, call, list or map literal and `?:` adds about 11 levels (the grammar's
chain from `expr` down to `primary`), each `+`, `*`, `==` or field selection 2, each `!`, unary `-`,
`&&` or `||` 1: about 20 nested parentheses, or 240 terms joined by `&&`."""

RECURSION_LIMIT = 2500
"""The Python recursion limit evaluating an expression MAX_DEPTH levels deep needs: cel-python's
interpreter takes about 4 frames a level. cel-python's own `Environment` raises the limit to this
value, so the reference evaluates with it too."""

# Method-call macros and the arguments each takes (a variable first, for all but `min`): CEL's own
# plus cel-python's `reduce(acc, x, init, expr)` and `min()`, which the reference runs too.
_MACROS = {"all": 2, "exists": 2, "exists_one": 2, "map": 2, "filter": 2, "reduce": 4, "min": 0}
_MACRO_VARIABLES = {"reduce": 2}
# Function-call macros: `has(x.f)` and `dyn(x)`.
_GLOBAL_MACROS = {"has": 1, "dyn": 1}
# Confluent's extensions this engine does not implement (decimals and variants): known names, so
# they are reported as unsupported here rather than as unknown.
UNSUPPORTED_EXTENSIONS = frozenset(
    {
        "decimal",
        "decimals.abs",
        "decimals.add",
        "decimals.ceil",
        "decimals.div",
        "decimals.eq",
        "decimals.floor",
        "decimals.ge",
        "decimals.greatest",
        "decimals.gt",
        "decimals.le",
        "decimals.least",
        "decimals.lt",
        "decimals.mod",
        "decimals.mul",
        "decimals.neg",
        "decimals.round",
        "decimals.sign",
        "decimals.sqrt",
        "decimals.sub",
        "decimals.trunc",
        "variant",
        "variants.as",
        "variants.field",
        "variants.index",
        "variants.isNull",
        "variants.parseJson",
        "variants.path",
        "variants.toJson",
        "variants.tryAs",
        "variants.tryParseJson",
        "variants.type",
    }
)


class ExpressionProblem(Exception):
    """What is wrong with an expression, and the 1-based line and column where, in the text parsed."""

    def __init__(self, reason: str, line: int, column: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.column = column


@dataclass(frozen=True)
class _Arity:
    low: int
    high: int | None  # None: any number from `low` up

    def accepts(self, count: int) -> bool:
        return count >= self.low and (self.high is None or count <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"at least {self.low}"
        if self.high == self.low:
            return str(self.low)
        return f"{self.low} to {self.high}"


def _arity(function: Callable[..., Any]) -> _Arity:
    """How many positional arguments a Python function takes."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except ValueError:  # a builtin type without a signature (null_type): called without arguments
        return _Arity(0, 0)
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is p.empty)
    variadic = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    return _Arity(required, None if variadic else len(positional))


def _functions() -> dict[str, _Arity]:
    """Every function a CEL expression can call by name here, with its arity (operators aside)."""
    implementations = {**base_functions, **confluent_functions.FUNCTIONS}
    return {name: _arity(f) for name, f in implementations.items() if name.isidentifier() and name[0] != "_"}


FUNCTIONS = _functions()


def ensure_recursion_limit() -> None:
    """Raise Python's recursion limit to RECURSION_LIMIT (never lower it), as cel-python does."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def check_expression(tree: lark.Tree) -> None:
    """Raise ExpressionProblem for the first place `tree` nests deeper than MAX_DEPTH, else for the
    first call of an unknown function or with the wrong number of arguments."""
    _check_depth(tree)
    for node in tree.iter_subtrees_topdown():
        _check_call(node)


def _check_depth(tree: lark.Tree) -> None:
    stack: list[tuple[lark.Tree, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            line, column = _where(node)
            raise ExpressionProblem(
                f"the expression nests more than {MAX_DEPTH} levels deep in cel-python's parse tree",
                line,
                column,
            )
        children = [child for child in node.children if isinstance(child, lark.Tree)]
        stack.extend((child, depth + 1) for child in reversed(children))


def _check_call(node: lark.Tree) -> None:
    if node.data == "ident_arg":
        name, arguments = node.children[0], _arguments(node, 1)
        if name in _GLOBAL_MACROS:
            _expect(name, _Arity(_GLOBAL_MACROS[name], _GLOBAL_MACROS[name]), len(arguments), "")
        else:
            _check_function(name, len(arguments), "")
    elif node.data == "member_dot_arg":
        receiver, name, arguments = node.children[0], node.children[1], _arguments(node, 2)
        namespaced = _namespace(receiver)
        if name in _MACROS:
            _check_macro(name, arguments)
        elif namespaced is not None and f"{namespaced}.{name}" in UNSUPPORTED_EXTENSIONS:
            _unsupported(f"{namespaced}.{name}", name)
        else:
            _check_function(name, 1 + len(arguments), " (the receiver counts as the first)")
    elif node.data == "dot_ident_arg":
        name = node.children[0]
        raise ExpressionProblem(
            f"a call with a leading dot (.{name}(…)): the reference's CEL runtime does not call it",
            *_where(name),
        )


def _check_function(name: lark.Token, count: int, note: str) -> None:
    if name in UNSUPPORTED_EXTENSIONS:
        _unsupported(str(name), name)
    arity = FUNCTIONS.get(str(name))
    if arity is None:
        raise ExpressionProblem(
            f"undeclared function {name!s}(): not in Confluent's CEL environment", *_where(name)
        )
    _expect(name, arity, count, note)


def _check_macro(name: lark.Token, arguments: list[lark.Tree]) -> None:
    _expect(name, _Arity(_MACROS[name], _MACROS[name]), len(arguments), "")
    for argument in arguments[: _MACRO_VARIABLES.get(str(name), 1 if arguments else 0)]:
        if _identifier(argument) is None:
            raise ExpressionProblem(f"the macro {name!s}() needs a variable name here", *_where(argument))


def _expect(name: lark.Token, arity: _Arity, count: int, note: str) -> None:
    if not arity.accepts(count):
        plural = "" if str(arity) == "1" else "s"
        raise ExpressionProblem(
            f"{name!s}() takes {arity} argument{plural}{note}, not {count}", *_where(name)
        )


def _unsupported(qualified: str, token: lark.Token) -> None:
    raise ExpressionProblem(
        f"{qualified}() is a Confluent CEL extension spark-data-contracts does not implement", *_where(token)
    )


def _arguments(node: lark.Tree, index: int) -> list[lark.Tree]:
    exprlist = node.children[index] if len(node.children) > index else None
    return [] if exprlist is None else list(exprlist.children)


def _identifier(node: lark.Tree) -> str | None:
    node = unwrap(node)
    return str(node.children[0]) if node.data == "ident" else None


def _namespace(receiver: lark.Tree) -> str | None:
    """`a.b.c` when the receiver of a method call is a plain dotted name, as the reference reads
    `decimals.add(x, y)`: the function `decimals.add` rather than a method of `decimals`."""
    parts: list[str] = []
    node = unwrap(receiver)
    while node.data == "member_dot":
        parts.append(str(node.children[1]))
        node = unwrap(node.children[0])
    if node.data != "ident":
        return None
    return ".".join([str(node.children[0]), *reversed(parts)])


def _where(node: lark.Tree | lark.Token) -> tuple[int, int]:
    """Line and column of a token, or of the first token under a node."""
    for token in _tokens(node):
        if token.line is not None and token.column is not None:
            return token.line, token.column
    return 1, 1


def _tokens(node: lark.Tree | lark.Token) -> Iterator[lark.Token]:
    if isinstance(node, lark.Token):
        yield node
        return
    stack: list[lark.Tree | lark.Token] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, lark.Token):
            yield item
        else:
            stack.extend(reversed(item.children))
