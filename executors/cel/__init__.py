"""CEL rules: compiled to native Spark Columns where possible, else evaluated with cel-python in batches.

The executor (`executor`) and the CEL engine that CEL_FIELD builds on, each part public: the
native compiler (`compiler`, a sub-package), cel-python programs with their activations and
reasons (`runtime`: `compile_program`, `field_activation`, `evaluation_reason`), the load-time
checks of an expression (`checks`), Confluent's extra functions (`confluent_functions`) and the
reference runtime's plan-time answers (`reference`).
"""

from __future__ import annotations

from executors.cel.executor import CelExecutor

__all__ = ["CelExecutor"]
