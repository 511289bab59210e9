"""The JSONATA rule type: transforms and conditions on a record's JSON view (docs/semantics.md §5)."""

from __future__ import annotations

from executors.jsonata.executor import JsonataExecutor

__all__ = ["JsonataExecutor"]
