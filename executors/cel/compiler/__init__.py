"""The native CEL compiler: a CEL expression compiled to Spark Columns over the record struct,
equal to cel-python's answers, or `NotNativeCel` when it has no exact native form.

`expressions` compiles rules and expressions into typed terms (`terms`): operators in
`operators`, functions, macros and selection in `functions`, `matches()` and the Confluent
validators in `patterns`, field presence in `presence`. CEL_FIELD builds on the names exported
here (`compile_term`, `split_rule`, `CelType`, `Term`, `any_error`, `NotNativeCel`).
"""

from __future__ import annotations

from executors.cel.compiler.expressions import compile_expression, compile_rule, compile_term, split_rule
from executors.cel.compiler.terms import CelType, NotNativeCel, Term, any_error

__all__ = [
    "CelType",
    "NotNativeCel",
    "Term",
    "any_error",
    "compile_expression",
    "compile_rule",
    "compile_term",
    "split_rule",
]
