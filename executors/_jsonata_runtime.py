"""JSONata in Python: expressions parsed once per process, evaluated with per-record time and depth bounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonata

from contracts.model import RuleKind
from executors._protocol import BatchEvaluator, Outcome

_ENTRY_CALLBACK = "__evaluate_entry"
_EXIT_CALLBACK = "__evaluate_exit"
_EXPRESSIONS: dict[str, jsonata.Jsonata] = {}


@dataclass(frozen=True)
class Bounds:
    """A rule's `jsonata.timeout.ms` and `jsonata.max.depth` (None: unbounded, as the reference runs)."""

    timeout_ms: int | None = None
    max_depth: int | None = None


def parse(expr: str) -> jsonata.Jsonata:
    """The parsed expression, once per process; bad syntax raises jsonata.JException with its location."""
    expression = _EXPRESSIONS.get(expr)
    if expression is None:
        expression = _EXPRESSIONS[expr] = jsonata.Jsonata(expr)
    return expression


def evaluate(expression: jsonata.Jsonata, record: Any, bounds: Bounds) -> Any:
    """Evaluate on one record; a timeout or depth overrun raises like any other JSONata error.

    jsonata-python's Timebox measures from its own construction, so a reused expression gets a
    fresh one before every evaluation (DESIGN.md, known pitfalls); without bounds its callbacks
    are cleared, since an expression is shared by every rule with the same text.
    """
    environment = expression.environment
    if bounds.timeout_ms is None and bounds.max_depth is None:
        environment.bind(_ENTRY_CALLBACK, None)
        environment.bind(_EXIT_CALLBACK, None)
    else:
        environment.set_runtime_bounds(bounds.timeout_ms, bounds.max_depth)
    return expression.evaluate(record)


def outcome(kind: RuleKind, expression: jsonata.Jsonata, record: Any, bounds: Bounds) -> Outcome:
    """One record's outcome as the reference decides it (SEMANTICS.md §2.2): an error is a failure
    carrying its message; a CONDITION passes on a Python-truthy result; a TRANSFORM fails on None."""
    try:
        result = evaluate(expression, record, bounds)
    except Exception as e:  # any JSONata, type or recursion error is a rule failure (DESIGN.md §3)
        return Outcome(False, record, str(e) or type(e).__name__)  # the reference's text: str(error)
    if kind is RuleKind.CONDITION:
        return Outcome(bool(result), record)
    if result is None:
        return Outcome(False, record)
    return Outcome(True, result)


@dataclass(frozen=True)
class JsonataBatch:
    """Picklable factory: on a worker, the parsed expression (cached per process) over each record.

    Records are passed as the Avro-shaped dicts they are, which is what the reference hands
    jsonata-python; a TRANSFORM's result is returned as plain data. For a domain rule the engine
    checks it against the record's schema; for a migration rule it is the next version's record
    (another shape) and the engine projects it onto the target schema (SEMANTICS.md §6).
    """

    expr: str
    kind: RuleKind
    bounds: Bounds

    def __call__(self) -> BatchEvaluator:
        expression = parse(self.expr)
        kind, bounds = self.kind, self.bounds

        def evaluate_batch(records: Sequence[Any]) -> Sequence[Outcome]:
            return [outcome(kind, expression, record, bounds) for record in records]

        return evaluate_batch
