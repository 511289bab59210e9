"""The CEL executor: a rule's expression over the `message` variable, as the Confluent clients run it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.formats.protocol import presence_view
from contracts.model import RuleKind
from executors.cel import _runtime
from executors.cel._compiler import NotNativeCel, compile_rule
from executors.protocol import BatchEvaluator, BatchStep, NativeStep, Outcome, RuleContext, Step


class CelExecutor:
    """Compiles CEL rules to native Spark Columns, or — per rule, for what has no exact native
    form — to a batch step evaluating them with cel-python (docs/semantics.md §9.1)."""

    type = "CEL"

    def compile(self, ctx: RuleContext) -> Step:
        expr = ctx.rule.expr or ""
        # Compiling on the driver reports syntax errors at load, with their position.
        _runtime.compile_program(expr)
        batch = BatchStep(_CelBatch(expr, ctx.rule.kind, presence_view(ctx.schema_format, ctx.schema)))
        try:
            build = compile_rule(expr, ctx.rule.kind, ctx.spark_type)
        except NotNativeCel as unsupported:
            return dataclasses.replace(batch, why_not_native=f"no native form for {unsupported}")
        return NativeStep(build, batch=batch)


@dataclass(frozen=True)
class _CelBatch:
    """Picklable factory: on a worker, the compiled program (cached per process) over each record."""

    expr: str
    kind: RuleKind
    view: Callable[[Any], Any] | None = None
    """The record as CEL reads it, where its format decides presence otherwise than by keys (§3.6)."""

    def __call__(self) -> BatchEvaluator:
        program = _runtime.compile_program(self.expr)
        is_condition = self.kind is RuleKind.CONDITION
        view = self.view

        def evaluate(records: Sequence[Any]) -> Sequence[Outcome]:
            outcomes = []
            for record in records:
                activation = {"message": _runtime.to_cel(record if view is None else view(record))}
                result = (
                    program.condition(activation) if is_condition else program.transform(activation, record)
                )
                # A condition keeps its record; only an evaluation error carries its own reason,
                # otherwise the rule's doc or expression explains the failure (docs/semantics.md §2.4).
                kept = record if is_condition else result.value
                outcomes.append(Outcome(result.passed, kept, result.reason if result.error else None))
            return outcomes

        return evaluate
