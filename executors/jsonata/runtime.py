"""JSONata in Python: expressions parsed once per process, evaluated on each record's JSON view
with per-record time and depth bounds; their regular expressions matched by RE2, in time linear in
the text (one search cannot be interrupted by the time bound, so it must not be able to run long)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonata

from contracts.bounded import BoundedCache
from contracts.errors import DataContractError, SerializationError
from contracts.formats.protocol import SchemaFormat
from contracts.formats.regex import compiled, refusal
from contracts.model import RuleKind
from executors.protocol import BatchEvaluator, Outcome

_ENTRY_CALLBACK = "__evaluate_entry"
_EXIT_CALLBACK = "__evaluate_exit"
_EXPRESSIONS: BoundedCache[str, jsonata.Jsonata] = BoundedCache(1024)
"""Per process: parsed expressions by text."""
DEFAULT_TIMEOUT_MS = 1000
"""Per record: JSONata rules take microseconds, so a second only stops a runaway expression."""
DEFAULT_MAX_DEPTH = 1000
"""Nested evaluations, as Java's client bounds them: ~4,000 Python frames, within the 10,000
jsonata-python allows, so deep recursion fails with JSONata's error rather than Python's."""


@dataclass(frozen=True)
class Bounds:
    """A rule's `jsonata.timeout.ms` and `jsonata.max.depth` (the reference runs unbounded)."""

    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_depth: int = DEFAULT_MAX_DEPTH


class InvalidRegex(DataContractError, ValueError):
    """A regular expression of the expression that RE2 refuses (a lookaround, a backreference)."""


def parse(expr: str) -> jsonata.Jsonata:
    """The parsed expression, once per process; bad syntax raises jsonata.JException with its
    location, a regex RE2 refuses InvalidRegex."""
    return _EXPRESSIONS.get_or_make(expr, lambda: jsonata.Jsonata(expr, _re2_regex))


def _re2_regex(pattern: str, flags: Any) -> Any:
    """A JSONata regex literal (`/pattern/flags`) compiled by RE2 (docs/semantics.md §5.3)."""
    import re2

    try:
        return compiled(pattern, case_insensitive=flags.case_insensitive, multiline=flags.multiline)
    except re2.error:
        raise InvalidRegex(
            f"the regular expression /{pattern}/ is not an RE2 pattern ({refusal(pattern)})"
        ) from None


class _Limits:
    """One evaluation's time and depth bounds, as jsonata-python's Timebox checks them (same errors,
    D1011 and D1012) but cheaper: the clock is read every 32nd step, not at each one."""

    __slots__ = ("deadline", "depth", "max_depth", "steps", "timeout_ms")

    def __init__(self, bounds: Bounds) -> None:
        self.timeout_ms = bounds.timeout_ms
        self.max_depth = bounds.max_depth
        self.deadline = time.monotonic() + bounds.timeout_ms / 1000
        self.depth = 0
        self.steps = 0

    def enter(self, expr: Any, input: Any, environment: Any) -> None:
        if environment.is_parallel_call:
            return
        self.depth += 1
        if self.depth > self.max_depth:
            raise jsonata.JException("D1011", -1)
        self.steps += 1
        if not self.steps & 31 and time.monotonic() > self.deadline:
            raise jsonata.JException("D1012", -1, self.timeout_ms)

    def leave(self, expr: Any, input: Any, environment: Any, result: Any) -> None:
        if not environment.is_parallel_call:
            self.depth -= 1


def evaluate(expression: jsonata.Jsonata, record: Any, bounds: Bounds) -> Any:
    """Evaluate on one record; a timeout or depth overrun raises like any other JSONata error.

    The expression is shared by every rule with the same text, so each evaluation binds its own
    bounds, counted from its start (jsonata-python's Timebox counts from its construction).
    """
    limits = _Limits(bounds)
    expression.environment.bind(_ENTRY_CALLBACK, limits.enter)
    expression.environment.bind(_EXIT_CALLBACK, limits.leave)
    return expression.evaluate(record)


def outcome(kind: RuleKind, expression: jsonata.Jsonata, record: Any, bounds: Bounds) -> Outcome:
    """One record's outcome as the reference decides it (docs/semantics.md §2.2): an error is a failure
    carrying its message; a CONDITION passes on a Python-truthy result; a TRANSFORM fails on None."""
    try:
        result = evaluate(expression, record, bounds)
    except Exception as e:  # any JSONata, type or recursion error (RecursionError too) fails the rule
        return Outcome(False, record, str(e) or type(e).__name__)  # the reference's text: str(error)
    if kind is RuleKind.CONDITION:
        return Outcome(bool(result), record)
    if result is None:
        return Outcome(False, record)
    return Outcome(True, result)


@dataclass(frozen=True)
class JsonataBatch:
    """Picklable factory: on a worker, the parsed expression (cached per process) over each record.

    Each record is handed to jsonata-python as its JSON view by `schema`, the schema of the record
    the rule receives, read by its `schema_format` (for Avro contracts.formats.avro.json_view, as
    Java's client does; a JSON Schema record is its own view); a CONDITION's record is left as it
    was. A domain TRANSFORM's result is read back as that schema (a value it cannot hold fails the
    rule), and the engine then checks it fits. A migration's result is another
    version's record in the view: the engine reads it as the target version when projecting it.
    """

    expr: str
    kind: RuleKind
    bounds: Bounds
    schema: Any
    schema_format: SchemaFormat
    migration: bool = False

    def __call__(self) -> BatchEvaluator:
        expression = parse(self.expr)
        kind, bounds, schema, migration = self.kind, self.bounds, self.schema, self.migration
        to_json_view, from_json_view = self.schema_format.to_json_view, self.schema_format.from_json_view

        def one(record: Any) -> Outcome:
            try:
                view = to_json_view(record, schema)
            except SerializationError as e:
                return Outcome(False, record, str(e))
            result = outcome(kind, expression, view, bounds)
            if not result.passed or kind is RuleKind.CONDITION:
                return Outcome(result.passed, record, result.reason)
            if migration:
                return result
            try:
                return Outcome(True, from_json_view(result.record, schema))
            except SerializationError as e:
                return Outcome(False, record, f"the rule's result: {e}")

        def evaluate_batch(records: Sequence[Any]) -> Sequence[Outcome]:
            return [one(record) for record in records]

        return evaluate_batch
