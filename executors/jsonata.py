"""The JSONata executor: TRANSFORM and CONDITION rules, domain and migration (SEMANTICS.md §5).

Every rule gets a batch step running jsonata-python exactly as the reference does; the common
shapes (renames, drops, constants, field copies, `&`, arithmetic, comparisons, boolean logic)
also compile to native Spark Columns that give the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping

from contracts.errors import ContractError
from contracts.model import RuleMode
from executors._jsonata_runtime import Bounds, JsonataBatch, parse
from executors._protocol import BatchStep, NativeStep, RuleContext, Step

TIMEOUT_PARAM = "jsonata.timeout.ms"
MAX_DEPTH_PARAM = "jsonata.max.depth"
MIGRATION_MODES = frozenset({RuleMode.UPGRADE, RuleMode.DOWNGRADE, RuleMode.UPDOWN})


class JsonataExecutor:
    """Compiles JSONata rules to native Spark Columns where provably identical, else to a batch step."""

    type = "JSONATA"

    def compile(self, ctx: RuleContext) -> Step:
        """Check syntax and bounds on the driver, then pick the native form when there is one."""
        from executors._jsonata_native import Unsupported, compile_rule

        expr = ctx.rule.expr or ""
        _check_syntax(expr)
        batch = BatchStep(JsonataBatch(expr, ctx.rule.kind, bounds(ctx.params)))
        try:
            build = compile_rule(parse(expr).ast, ctx, migration=ctx.mode in MIGRATION_MODES)
        except Unsupported:
            return batch
        return NativeStep(build, batch=batch)


def bounds(params: Mapping[str, str]) -> Bounds:
    """The rule's time and depth bounds; a param that is not a positive integer is a bad contract."""
    return Bounds(_positive(params, TIMEOUT_PARAM), _positive(params, MAX_DEPTH_PARAM))


def _positive(params: Mapping[str, str], name: str) -> int | None:
    text = params.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ContractError(f"rule param {name} must be a positive integer, not {text!r}", position=name)
    return value


def _check_syntax(expr: str) -> None:
    """Parse on the driver so a syntax error fails the contract at load, with its character position."""
    import jsonata

    try:
        parse(expr)
    except jsonata.JException as e:
        raise ContractError(f"invalid JSONata expression: {e}", position=e.location) from e
