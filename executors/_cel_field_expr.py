"""A CEL_FIELD rule's `guard ; body`: split as the reference splits it, each part compiled once.

Knowing which variables each part reads is what lets the executor decide a guard at plan time:
one that reads only `name`, `fullName`, `typeName` and `tags` has one value per field and type
(DESIGN.md principle 2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from contracts.errors import ContractError
from contracts.model import RuleKind

if TYPE_CHECKING:
    from lark import Tree


FieldEvaluator = Callable[[Any, str, str, str, Iterable[str], Any], Any]


@dataclass(frozen=True)
class FieldExpression:
    """The rule's expression, split at its first `;` (even inside a string literal, as the reference)."""

    text: str
    kind: RuleKind
    guard: str | None
    body: str
    guard_reads: frozenset[str]
    body_reads: frozenset[str]

    @classmethod
    def parse(cls, text: str, kind: RuleKind) -> FieldExpression:
        """Split and syntax-check `text`; a bad expression fails at load with its position."""
        guard: str | None = None
        body = text
        if ";" in text:
            head, body = text.split(";", 1)
            guard = head if head.strip() else None
        return cls(
            text,
            kind,
            guard,
            body,
            _variables(guard, "guard") if guard is not None else frozenset(),
            _variables(body, "expression"),
        )

    @property
    def guard_tree(self) -> Tree | None:
        """The guard's parse tree (None without a non-empty guard), parsed once per process."""
        return None if self.guard is None else _tree(self.guard)

    @property
    def body_tree(self) -> Tree:
        return _tree(self.body)

    def python(self) -> FieldEvaluator:
        """The reference's per-field evaluation (a false guard passes a CONDITION, keeps the value)."""
        guard = None if self.guard is None else _program(self.guard)
        body = _program(self.body)
        condition = self.kind is RuleKind.CONDITION
        reads = self.guard_reads | self.body_reads

        def evaluate(
            value: Any, name: str, full_name: str, type_name: str, tags: Iterable[str], message: Any
        ) -> Any:
            activation = _activation(value, name, full_name, type_name, tags, message, reads)
            if guard is not None and not guard(activation):
                return True if condition else value
            result = body(activation)
            return result if condition else _plain(result)

        return evaluate


def _variables(text: str, where: str) -> frozenset[str]:
    """The identifiers an expression reads (comprehension variables too: an over-approximation)."""
    import celpy

    try:
        tree = celpy.CELParser().parse(text)
    except celpy.CELParseError as e:
        raise ContractError(f"invalid CEL {where}: {e}", position=where) from e
    return frozenset(str(node.children[0]) for node in tree.find_data("ident"))


def _activation(
    value: Any,
    name: str,
    full_name: str,
    type_name: str,
    tags: Iterable[str],
    message: Any,
    reads: frozenset[str],
) -> dict[str, Any]:
    from celpy import celtypes

    return {
        "value": _to_cel(value),
        "name": celtypes.StringType(name),
        "fullName": celtypes.StringType(full_name),
        "typeName": celtypes.StringType(type_name),
        "tags": celtypes.ListType([celtypes.StringType(tag) for tag in sorted(tags)]),
        # Converting the containing record per field is the walk's main cost: only when read.
        "message": _to_cel(message) if "message" in reads else None,
    }


@lru_cache(maxsize=1024)
def _tree(text: str) -> Tree:
    import celpy

    return celpy.Environment().compile(text)


@lru_cache(maxsize=1024)
def _program(text: str) -> Callable[[dict[str, Any]], Any]:
    import celpy
    from celpy import celtypes

    program = celpy.Environment().program(_tree(text))

    def run(activation: dict[str, Any]) -> Any:
        result = program.evaluate(activation)
        if isinstance(result, celpy.CELEvalError):
            raise result
        return bool(result) if isinstance(result, celtypes.BoolType) else result

    return run


def _to_cel(value: Any) -> Any:
    import datetime
    import uuid

    from celpy import celtypes

    if value is None:
        return None
    if isinstance(value, dict):
        return celtypes.MapType({celtypes.StringType(k): _to_cel(v) for k, v in value.items()})
    if isinstance(value, list):
        return celtypes.ListType([_to_cel(v) for v in value])
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, bytes | bytearray):
        return celtypes.BytesType(bytes(value))
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, datetime.date):
        return celtypes.IntType(value.toordinal() - datetime.date(1970, 1, 1).toordinal())
    if isinstance(value, uuid.UUID):
        return celtypes.StringType(str(value))
    return value


def _plain(value: Any) -> Any:
    """A CEL result as the plain Python value a record holds."""
    from celpy import celtypes

    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.BytesType):
        return bytes(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.ListType):
        return [_plain(v) for v in value]
    if isinstance(value, celtypes.MapType):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value
