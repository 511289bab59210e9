"""The CEL executor: a rule's expression over the `message` variable, as the Confluent clients run it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.formats.markers import PRESENCE_KEY, SET_OR_DEFAULT
from contracts.formats.protocol import presence_view
from contracts.model import RuleKind
from executors.cel import runtime
from executors.cel.compiler import NotNativeCel, compile_rule
from executors.protocol import BatchEvaluator, BatchStep, NativeStep, Outcome, RuleContext, Step

if TYPE_CHECKING:
    from pyspark.sql.types import StructField, StructType


class CelExecutor:
    """Compiles CEL rules to native Spark Columns, or — per rule, for what has no exact native
    form — to a batch step evaluating them with cel-python (docs/semantics.md §9.1)."""

    type = "CEL"

    def compile(self, ctx: RuleContext) -> Step:
        expr = ctx.rule.expr or ""
        # Compiling on the driver reports syntax errors at load, with their position.
        runtime.compile_program(expr)
        view = presence_view(ctx.schema_format, ctx.schema) if _reads_presence(expr, ctx.spark_type) else None
        batch = BatchStep(_CelBatch(expr, ctx.rule.kind, view))
        try:
            build = compile_rule(expr, ctx.rule.kind, ctx.spark_type)
        except NotNativeCel as unsupported:
            return dataclasses.replace(batch, why_not_native=f"no native form for {unsupported}")
        return NativeStep(build, batch=batch)


def _reads_presence(expr: str, record_type: StructType) -> bool:
    """Whether the records' presence can change the rule's answer (§3.6): it asks `has()`, or a
    field reads its default when unset (a Protobuf `optional` scalar)."""
    return "has" in expr or any(_defaults_when_unset(field) for field in record_type.fields)


def _defaults_when_unset(field: StructField) -> bool:
    from pyspark.sql import types as T

    if field.metadata.get(PRESENCE_KEY) == SET_OR_DEFAULT:
        return True
    dtype = field.dataType
    while isinstance(dtype, T.ArrayType | T.MapType):
        dtype = dtype.elementType if isinstance(dtype, T.ArrayType) else dtype.valueType
    return isinstance(dtype, T.StructType) and any(_defaults_when_unset(inner) for inner in dtype.fields)


@dataclass(frozen=True)
class _CelBatch:
    """Picklable factory: on a worker, the compiled program (cached per process) over each record."""

    expr: str
    kind: RuleKind
    view: Callable[[Any], Any] | None = None
    """The record as CEL reads it, where its format decides presence otherwise than by keys (§3.6)."""

    def __call__(self) -> BatchEvaluator:
        program = runtime.compile_program(self.expr)
        is_condition = self.kind is RuleKind.CONDITION
        view = self.view

        def evaluate(records: Sequence[Any]) -> Sequence[Outcome]:
            outcomes = []
            for record in records:
                activation = {"message": runtime.to_cel(record if view is None else view(record))}
                result = (
                    program.condition(activation) if is_condition else program.transform(activation, record)
                )
                # A condition keeps its record; only an evaluation error carries its own reason,
                # otherwise the rule's doc or expression explains the failure (docs/semantics.md §2.4).
                kept = record if is_condition else result.value
                outcomes.append(Outcome(result.passed, kept, result.reason if result.error else None))
            return outcomes

        return evaluate
