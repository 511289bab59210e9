"""CEL rules: compiled to native Spark Columns where possible, else evaluated with cel-python in batches."""

from __future__ import annotations

from executors.cel.executor import CelExecutor

__all__ = ["CelExecutor"]
