"""Rule executors: one per rule type (CEL, CEL_FIELD, JSONATA or custom), found by type or rule name."""

from __future__ import annotations

from typing import Any

from executors.protocol import (
    BatchEvaluator,
    BatchStep,
    Executor,
    NativeOutcome,
    NativeStep,
    Outcome,
    RecordExecutor,
    RecordExecutorAdapter,
    RuleContext,
    Step,
)


def as_executor(plugin: Any) -> Executor:
    """An Executor as it is, or a per-record RecordExecutor wrapped to run batched."""
    if hasattr(plugin, "compile"):
        return plugin
    if hasattr(plugin, "transform") and hasattr(plugin, "type"):
        return RecordExecutorAdapter(plugin)
    raise TypeError(f"{plugin!r} is neither an Executor (compile) nor a RecordExecutor (type + transform)")


__all__ = [
    "BatchEvaluator",
    "BatchStep",
    "Executor",
    "NativeOutcome",
    "NativeStep",
    "Outcome",
    "RecordExecutor",
    "RecordExecutorAdapter",
    "RuleContext",
    "Step",
    "as_executor",
]
