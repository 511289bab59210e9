"""The CEL_FIELD rule type: a CEL expression applied to every primitive field (docs/semantics.md §4)."""

from __future__ import annotations

from executors.cel_field.executor import CelFieldExecutor

__all__ = ["CelFieldExecutor"]
