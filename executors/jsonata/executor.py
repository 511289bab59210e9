"""The JSONata executor: TRANSFORM and CONDITION rules, domain and migration (docs/semantics.md §5).

Every rule gets a batch step running jsonata-python on the record's JSON view (as Java's client
does: bytes, decimals, dates, times and timestamps in Avro's JSON form); the common shapes
(renames, drops, constants, field copies, `&`, arithmetic, comparisons, boolean logic) also
compile to native Spark Columns that give the same answers. Each evaluation is bounded in time
and depth (docs/guide.md, "JSONata rules"), so a runaway expression fails its rule for that record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from contracts.errors import ContractError
from contracts.model import RuleMode
from executors.jsonata.native import NotNativeJsonata, compile_rule
from executors.jsonata.runtime import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_TIMEOUT_MS,
    Bounds,
    InvalidRegex,
    JsonataBatch,
    parse,
)
from executors.protocol import BatchStep, MigrationResult, NativeStep, RuleContext, Step

TIMEOUT_PARAM = "jsonata.timeout.ms"
MAX_DEPTH_PARAM = "jsonata.max.depth"
MIGRATION_MODES = frozenset({RuleMode.UPGRADE, RuleMode.DOWNGRADE, RuleMode.UPDOWN})


class JsonataExecutor:
    """Compiles JSONata rules to native Spark Columns where provably identical, else to a batch step."""

    type = "JSONATA"
    native_migration = MigrationResult.JSON_VIEW

    def compile(self, ctx: RuleContext) -> Step:
        """Check syntax and bounds on the driver, then pick the native form when there is one."""
        expr = ctx.rule.expr or ""
        _check_syntax(expr)
        migration = ctx.mode in MIGRATION_MODES
        limits = bounds(ctx.params)
        batch = BatchStep(JsonataBatch(expr, ctx.rule.kind, limits, ctx.schema, ctx.schema_format, migration))
        if limits.max_depth < DEFAULT_MAX_DEPTH:
            # How deep jsonata-python's evaluation goes decides whether a record fails the bound.
            why = f"{MAX_DEPTH_PARAM} below {DEFAULT_MAX_DEPTH}: the reference's evaluation depth decides"
            return dataclasses.replace(batch, why_not_native=why)
        try:
            build = compile_rule(parse(expr).ast, ctx, migration=migration)
        except NotNativeJsonata as unsupported:
            return dataclasses.replace(batch, why_not_native=f"no native form for {unsupported}")
        return NativeStep(build, batch=batch)


def bounds(params: Mapping[str, str]) -> Bounds:
    """The rule's time and depth bounds, the defaults unless its params say otherwise; a param that
    is not a positive integer is a bad contract."""
    return Bounds(
        _positive(params, TIMEOUT_PARAM, DEFAULT_TIMEOUT_MS),
        _positive(params, MAX_DEPTH_PARAM, DEFAULT_MAX_DEPTH),
    )


def _positive(params: Mapping[str, str], name: str, default: int) -> int:
    text = params.get(name)
    if text is None:
        return default
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
    except InvalidRegex as e:
        raise ContractError(f"invalid JSONata expression: {e}", position="expr") from e
