"""CEL rules: compiled to native Spark Columns where possible, else evaluated with cel-python in batches.

Besides the executor, the CEL engine that CEL_FIELD builds on: cel-python programs and their
activations and reasons (`compile_program`, `field_activation`, `evaluation_reason`), and the
native compiler's terms (`compile_term`, `split_rule`, `CelType`, `Term`, `any_error`,
`NotNativeCel`).
"""

from __future__ import annotations

from executors.cel._compiler import compile_term, split_rule
from executors.cel._native_types import CelType, NotNativeCel, Term, any_error
from executors.cel._runtime import compile_program, evaluation_reason, field_activation
from executors.cel.executor import CelExecutor

__all__ = [
    "CelExecutor",
    "CelType",
    "NotNativeCel",
    "Term",
    "any_error",
    "compile_program",
    "compile_term",
    "evaluation_reason",
    "field_activation",
    "split_rule",
]
