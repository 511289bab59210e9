"""Evaluating CEL and CEL_FIELD expressions with cel-python, record by record, as confluent-kafka 2.16.1 does.

This module defines the per-record answers (docs/semantics.md §2-§4) that the batch steps run on
Spark workers and that any native compilation must reproduce:

- `compile_program(expr)` parses a rule's `guard ; expr` once per process and caches the program;
  a syntax error is a ContractError with the `line:column` where it sits in the rule's text.
- `CelProgram.condition` / `.transform` / `.field` evaluate it and return an `Outcome`; evaluation
  never raises for bad data: every CEL error is a failed Outcome carrying the reference's text.
- `to_cel` / `from_cel` convert Avro-shaped Python values (as fastavro gives them) to celpy
  values and back; `field_activation` builds a CEL_FIELD rule's variables.

Programs run on cel-python's transpiled ("compiled") form, several times faster than its
interpreter. The interpreter the reference uses is kept for the failure path: when the compiled
form reports an error, the interpreter re-evaluates the record so the outcome and the error text
are exactly the reference's (the two word their errors differently).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import Activation, CELEvalError, Evaluator, Transpiler, TranspilerTree

from contracts.bounded import BoundedCache
from contracts.errors import ContractError
from contracts.formats.markers import PresenceRecord, Unsigned
from executors.cel import confluent_functions
from executors.cel.checks import ExpressionProblem, check_expression, ensure_recursion_limit

_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluation's result: whether the rule passed, the value it produced, and why it failed.

    `value` is the new value of a TRANSFORM (plain Python, see `from_cel`), the raw result of a
    CEL_FIELD expression, or None for a CEL CONDITION. `reason` is the reference's error text when
    evaluation raised (`error` is then True), else "Rule expr failed: <expr>": the reference's
    wording for a rule without `doc`, which the caller replaces when the rule has one (§2.4).
    """

    passed: bool
    value: Any = None
    reason: str | None = None
    error: bool = False


class CelProgram:
    """A rule expression split at its first `;` into an optional guard and a body, each compiled once."""

    def __init__(self, expr: str, guard: _Part | None, body: _Part) -> None:
        self.expr = expr
        self.guard = guard
        self.body = body
        self.failure_reason = f"Rule expr failed: {expr}"
        # The reference binds `now` only when the text mentions it (a substring test, as there).
        self._uses_now = "now" in expr

    def condition(self, activation: Mapping[str, Any]) -> Outcome:
        """CEL CONDITION: passes on a truthy result or a falsy guard, fails on a falsy result or an error."""
        try:
            result = self._run(activation)
        except _Failed as failed:
            return Outcome(False, None, failed.reason, error=True)
        if result is _SKIPPED or result:
            return Outcome(True)
        return Outcome(False, None, self.failure_reason)

    def transform(self, activation: Mapping[str, Any], message: Any) -> Outcome:
        """CEL TRANSFORM: the result replaces `message` (kept by a falsy guard); null or an error fails."""
        try:
            result = self._run(activation)
        except _Failed as failed:
            return Outcome(False, message, failed.reason, error=True)
        if result is _SKIPPED:
            return Outcome(True, message)
        if result is None:
            return Outcome(False, message, self.failure_reason)
        return Outcome(True, from_cel(result))

    def field(self, activation: Mapping[str, Any], value: Any, *, condition: bool) -> Outcome:
        """One CEL_FIELD visit: the value the reference's field transform returns (docs/semantics.md §4).

        A falsy guard gives True for a condition and the unchanged `value` for a transform; the
        result is otherwise returned as it is (null included). Only an error fails here: whether
        the result fails the rule (a plain False for a condition) is the field walk's decision.
        """
        try:
            result = self._run(activation)
        except _Failed as failed:
            return Outcome(False, value, failed.reason, error=True)
        if result is _SKIPPED:
            return Outcome(True, True if condition else value)
        return Outcome(True, from_cel(result))

    def _run(self, activation: Mapping[str, Any]) -> Any:
        if self._uses_now and "now" not in activation:
            activation = {
                **activation,
                "now": celtypes.TimestampType(datetime.datetime.now(datetime.timezone.utc)),
            }
        if self.guard is not None and not self.guard.evaluate(activation):
            return _SKIPPED
        return self.body.evaluate(activation)


_SKIPPED = object()


class _Failed(Exception):
    """An evaluation error, carrying the text the reference reports for it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Part:
    """One side of `guard ; body`: transpiled Python for speed, the interpreter for errors."""

    def __init__(self, text: str, ast: TranspilerTree) -> None:
        self.text = text
        self._code = None if _uses(ast, _UNTRANSPILABLE_MACROS) else _transpiled_code(ast)
        self._base = _base_activation()
        self._interpreted: lark.Tree | None = None
        # Transpiled `has()` asks whether reading the field fails: a PresenceMap needs the interpreter.
        self._has = any(
            node.data == "ident_arg" and str(node.children[0]) == "has" for node in ast.iter_subtrees()
        )

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """The part's value; raises _Failed with the reference's error text on a CEL error."""
        if self._code is None or (self._has and isinstance(activation.get("message"), PresenceMap)):
            return self._interpret(activation)
        try:
            value = self._transpiled(activation)
        except Exception:
            return self._interpret(activation)
        if isinstance(value, CELEvalError):
            return self._interpret(activation)
        return value

    def _transpiled(self, activation: Mapping[str, Any]) -> Any:
        """Run the transpiled code in a private scope: celpy's own evaluate shares module globals."""
        context = self._base.clone()
        context.identifiers.load_values(activation)
        scope = dict(_TRANSPILED_GLOBALS)
        scope["base_activation"] = context
        exec(self._code, scope)
        return scope["CEL"]

    def _interpret(self, activation: Mapping[str, Any]) -> Any:
        """Re-evaluate with cel-python's interpreter, which the reference runs, for its exact answer."""
        if self._interpreted is None:
            self._interpreted = _parse(self.text)
        try:
            evaluator = _PresenceEvaluator(ast=self._interpreted, activation=_base_activation())
            return evaluator.evaluate(dict(activation))
        except Exception as e:  # every evaluation error is a rule failure (docs/semantics.md §2.2)
            raise _Failed(evaluation_reason(e)) from e


class _PresenceEvaluator(Evaluator):
    """cel-python's interpreter with `has(x.f)` answering a PresenceMap's presence (its unset fields
    read as values, unlike a missing key), as the reference's evaluator answers a Protobuf message."""

    def macro_has_eval(self, exprlist: lark.Tree) -> celtypes.BoolType:
        selection = _selection(exprlist)
        if selection is not None:
            receiver = self.visit(selection.children[0])
            if isinstance(receiver, PresenceMap):
                name = str(selection.children[1])
                return celtypes.BoolType(name in receiver and name not in receiver.unset)
        return super().macro_has_eval(exprlist)


def _selection(tree: lark.Tree) -> lark.Tree | None:
    """The `x.f` a `has()` argument list holds, through the grammar's single-child levels."""
    node = tree
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "member_dot":
        node = node.children[0]
    return node if isinstance(node, lark.Tree) and node.data == "member_dot" else None


MAX_REASON = 500  # characters of an evaluation error's reason


def evaluation_reason(error: BaseException) -> str:
    """A CEL evaluation error as one readable line, at most MAX_REASON characters.

    The reference reports str() of cel-python's error: the tuple of its arguments, and for an
    undeclared name the whole activation (every variable and function, kilobytes of it). This keeps
    its meaning: cel-python's message and the Python error under it, e.g. `modulus or divide by zero:
    integer division or modulo by zero`, `undeclared reference to 'x'`, `no such key: tier`.
    """
    if isinstance(error, CELEvalError) and error.args:
        message = str(error.args[0]).split(" (in activation ")[0]
        cause = error.__cause__
        if isinstance(cause, KeyError) and cause.args:
            detail = _argument_text(cause.args[0])
        elif cause is not None:
            detail = str(cause)
        elif len(error.args) > 2 and isinstance(error.args[2], tuple):
            detail = ", ".join(_argument_text(argument) for argument in error.args[2])
        else:
            detail = ""
        text = f"{message}: {detail}" if detail and detail not in message else message
    else:
        text = str(error) or type(error).__name__
    line = " ".join(text.split())
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 1] + "…"


def _argument_text(argument: Any) -> str:
    # A CEL string's str() is its repr (StringType('k')); a key reads as Python quotes it.
    return repr(str.__str__(argument)) if isinstance(argument, str) else str(argument)


# cel-python's own macros, which its transpiler writes wrongly (`reduce` fails) or not at all (`min`).
_UNTRANSPILABLE_MACROS = frozenset({"reduce", "min"})


def _uses(ast: lark.Tree, macros: frozenset[str]) -> bool:
    return any(
        node.data == "member_dot_arg" and str(node.children[1]) in macros for node in ast.iter_subtrees()
    )


def _transpiled_code(ast: TranspilerTree) -> Any:
    """The transpiled program, or None when Python cannot compile it (more than 200 nested
    parentheses): the interpreter alone runs it then."""
    transpiler = Transpiler(ast=ast, activation=_base_activation())
    try:
        transpiler.transpile()
    except SyntaxError:
        return None
    return transpiler.executable_code


def _base_activation() -> Activation:
    return Activation(annotations=dict(celpy.googleapis), functions=confluent_functions.FUNCTIONS)


def _transpiled_globals() -> dict[str, Any]:
    """The names transpiled code resolves: celpy.evaluation's globals plus our functions' packages.

    The transpiler names a function by its module path (`executors.cel.confluent_functions.is_email`), so
    the root package must be visible; a private copy keeps celpy's module globals untouched.
    """
    scope = dict(celpy.evaluation.__dict__)
    for function in confluent_functions.FUNCTIONS.values():
        root = function.__module__.partition(".")[0]
        scope[root] = __import__(root)
    return scope


_TRANSPILED_GLOBALS = _transpiled_globals()


def _new_parser() -> lark.Lark:
    """A private CEL parser building TranspilerTree nodes.

    celpy keeps one parser per process in `CELParser.CEL_PARSER`, built with the tree class of
    whoever came first; the transpiler needs TranspilerTree (a known celpy pitfall). We build
    our own and leave the shared one as it was.
    """
    shared = celpy.CELParser.CEL_PARSER
    try:
        celpy.CELParser.CEL_PARSER = None
        celpy.CELParser(tree_class=TranspilerTree)
        return celpy.CELParser.CEL_PARSER
    finally:
        celpy.CELParser.CEL_PARSER = shared


_PARSER: lark.Lark | None = None


def _parse(text: str) -> TranspilerTree:
    global _PARSER
    if _PARSER is None:
        _PARSER = _new_parser()
    return _PARSER.parse(text)


_PROGRAMS: BoundedCache[str, CelProgram] = BoundedCache(1024)
"""Per process: compiled programs by expression text."""


def compile_program(
    expr: str, *, subject: str | None = None, version: int | None = None, rule: str | None = None
) -> CelProgram:
    """The program for `expr`, compiled once per process; a syntax error is a ContractError at line:column.

    Evaluating it needs Python's recursion limit at RECURSION_LIMIT, which this sets in the process.
    """
    ensure_recursion_limit()
    return _PROGRAMS.get_or_make(expr, lambda: _compile(expr, subject=subject, version=version, rule=rule))


def _compile(expr: str, *, subject: str | None, version: int | None, rule: str | None) -> CelProgram:
    # Split at the first ';' even inside a string literal, as the reference does (docs/semantics.md §3).
    head, semicolon, _ = expr.partition(";")
    guard = None
    if semicolon and head.strip():
        guard = _compile_part(expr, 0, head, subject=subject, version=version, rule=rule)
    body_start = len(head) + 1 if semicolon else 0
    body = _compile_part(expr, body_start, expr[body_start:], subject=subject, version=version, rule=rule)
    return CelProgram(expr, guard, body)


def _compile_part(
    expr: str, start: int, text: str, *, subject: str | None, version: int | None, rule: str | None
) -> _Part:
    """One side of the rule, parsed and checked (nesting depth, function names and arities) before
    anything walks it recursively."""
    try:
        tree = _parse(text)
    except lark.exceptions.UnexpectedInput as e:
        first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ContractError(
            f"CEL syntax error: {first_line}",
            subject=subject,
            version=version,
            rule=rule,
            position=_position(expr, start, e.line, e.column),
        ) from e
    try:
        check_expression(tree)
    except ExpressionProblem as e:
        raise ContractError(
            f"CEL: {e.reason}",
            subject=subject,
            version=version,
            rule=rule,
            position=_position(expr, start, e.line, e.column),
        ) from e
    return _Part(text, tree)


def _position(expr: str, start: int, line: int, column: int) -> str:
    """`line:column` in the whole rule text of a position found in the part beginning at `start`."""
    if line < 1:
        line, column = 1, 1
    lines_before = expr.count("\n", 0, start)
    if line == 1:
        column += start - (expr.rfind("\n", 0, start) + 1)
    return f"{line + lines_before}:{column}"


def to_cel(value: Any) -> Any:
    """An Avro value as fastavro gives it, as the reference's `msg_to_cel` presents it to CEL (§3)."""
    convert = _TO_CEL.get(type(value))
    return convert(value) if convert is not None else _to_cel_other(value)


def _map_to_cel(value: dict[Any, Any]) -> celtypes.MapType:
    # Keys stay plain `str`, as the reference leaves them.
    return celtypes.MapType({key: to_cel(item) for key, item in value.items()})


class PresenceMap(celtypes.MapType):
    """A record whose fields' presence is not their being keys (a format's PresenceRecord): reading
    an unset field gives what the record holds (its default, or null), `has()` finds it absent."""

    def __init__(self, fields: Mapping[Any, Any], unset: frozenset[str]) -> None:
        super().__init__(fields)
        self.unset = unset


def _presence_to_cel(value: PresenceRecord) -> PresenceMap:
    return PresenceMap({key: to_cel(item) for key, item in value.items()}, value.unset)


def _list_to_cel(value: list[Any]) -> celtypes.ListType:
    return celtypes.ListType([to_cel(item) for item in value])


def _to_cel_other(value: Any) -> Any:
    """Subclasses and the rarer types, in the reference's order: bool before int, datetime before date."""
    if isinstance(value, dict):
        return _map_to_cel(value)
    if isinstance(value, list):
        return _list_to_cel(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, bytes):
        return celtypes.BytesType(value)
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    if isinstance(value, datetime.date):
        return celtypes.IntType(value.toordinal() - _EPOCH_ORDINAL)
    if isinstance(value, uuid.UUID):
        return celtypes.StringType(str(value))
    # Decimal, time-of-day, a (branch, value) union tuple and None reach CEL unconverted.
    return value


_TO_CEL: dict[type, Callable[[Any], Any]] = {
    PresenceRecord: _presence_to_cel,
    Unsigned: celtypes.UintType,
    dict: _map_to_cel,
    list: _list_to_cel,
    str: celtypes.StringType,
    bytes: celtypes.BytesType,
    bool: celtypes.BoolType,
    int: celtypes.IntType,
    float: celtypes.DoubleType,
    type(None): lambda value: value,
}


def from_cel(value: Any) -> Any:
    """A CEL result as plain Python values (dict, list, str, int, …) for the record it replaces."""
    convert = _FROM_CEL.get(type(value))
    return convert(value) if convert is not None else value


def _map_from_cel(value: Mapping[Any, Any]) -> dict[str, Any]:
    return {str(key): from_cel(item) for key, item in value.items()}


def _tuple_from_cel(value: tuple[Any, ...]) -> tuple[Any, ...]:
    # A (branch, value) union pair stays a pair, as the reference keeps it for fastavro.
    return tuple(from_cel(item) for item in value)


def _list_from_cel(value: Iterable[Any]) -> list[Any]:
    return [from_cel(item) for item in value]


def _timestamp_from_cel(value: datetime.datetime) -> datetime.datetime:
    return datetime.datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=value.tzinfo,
    )


_FROM_CEL: dict[type, Callable[[Any], Any]] = {
    celtypes.MapType: _map_from_cel,
    dict: _map_from_cel,
    celtypes.ListType: _list_from_cel,
    list: _list_from_cel,
    tuple: _tuple_from_cel,
    celtypes.StringType: str,
    celtypes.BytesType: bytes,
    celtypes.BoolType: bool,
    celtypes.IntType: int,
    celtypes.UintType: int,
    celtypes.DoubleType: float,
    celtypes.TimestampType: _timestamp_from_cel,
    celtypes.DurationType: lambda value: datetime.timedelta(value.days, value.seconds, value.microseconds),
}


def field_activation(
    value: Any, name: str, full_name: str, type_name: str, tags: Iterable[str], message: Any
) -> dict[str, Any]:
    """A CEL_FIELD rule's variables for one field, as the reference binds them (docs/semantics.md §4).

    `name`, `fullName` and `typeName` stay plain `str` and `tags` a plain list of CEL strings, as
    there; so `name.isHostname()` is an error (the builtins accept only CEL strings).
    """
    return {
        "value": to_cel(value),
        "fullName": full_name,
        "name": name,
        "typeName": type_name,
        "tags": [celtypes.StringType(tag) for tag in tags],
        "message": to_cel(message),
    }
