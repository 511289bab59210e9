"""The CEL_FIELD executor: a rule's `guard ; expr` applied to every primitive field, as Confluent runs it.

Each rule compiles once into a native step — the schema walk unrolled into Column expressions,
with every guard that reads only `name`, `fullName`, `typeName` or `tags` decided per field at
plan time — carrying its Python twin (the reference's walk over Avro-shaped records). A rule
whose expressions cannot all compile natively runs as that Python step instead (docs/semantics.md §4).
In a migration the walk follows the schema of the record the rule receives, as Confluent's Java
client walks a migration's record (docs/semantics.md §4.7); there a result that may not fit its
field keeps the rule in Python, which makes such a record undecodable rather than failing the rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.model import Rule, RuleKind, RuleMode
from executors.cel import _runtime
from executors.cel._native_types import Unsupported
from executors.cel_field.batch import CelFieldBatch
from executors.cel_field.native import NativePlanner
from executors.cel_field.schema import schema_tree
from executors.protocol import (
    BatchStep,
    NativeStep,
    RuleContext,
    Step,
    condition_failure_message,
)

__all__ = ["FIELD_RULE_TYPES", "CelFieldExecutor", "superseded_field_transforms"]

FIELD_RULE_TYPES = frozenset({"CEL_FIELD", "ENCRYPT"})
"""The reference's FieldRuleExecutor types, whose same-tag TRANSFORMs supersede one another."""


class CelFieldExecutor:
    """Compiles CEL_FIELD rules: natively when every visited field's expression compiles, else in Python."""

    type = "CEL_FIELD"

    def compile(self, ctx: RuleContext) -> Step:
        rule = ctx.rule
        expr = rule.expr or ""
        # Compiling on the driver reports syntax errors at load, with their position.
        _runtime.compile_program(expr, subject=ctx.subject, version=ctx.version, rule=rule.name)
        batch = BatchStep(
            CelFieldBatch(
                expr,
                rule.kind,
                frozenset(rule.tags),
                ctx.schema,
                dict(ctx.metadata_tags),
                condition_failure_message(rule),
            )
        )
        tree = schema_tree(ctx.schema, ctx.metadata_tags)
        try:
            planner = NativePlanner(expr, rule.kind, frozenset(rule.tags), fitting_only=ctx.mode.is_migration)
            build = planner.plan(tree, ctx.spark_type)
        except Unsupported:
            return batch
        return NativeStep(build, batch=batch)


def superseded_field_transforms(rules: Sequence[Rule], mode: RuleMode) -> frozenset[int]:
    """Indexes of field rules (CEL_FIELD, ENCRYPT) that must not run: another TRANSFORM supersedes them.

    `rules` is the rule list in running order for `mode`, as the reference builds it — every
    rule of the ruleSet's list, disabled ones and other modes included, reversed for READ and
    DOWNGRADE. Two TRANSFORM field rules of the same type, mode and identical non-empty tags:
    in WRITE/UPGRADE a rule is dropped when an earlier one matches it, in READ/DOWNGRADE when a
    later one does — even when that other rule is disabled (docs/semantics.md §4, FieldRuleExecutor).
    """
    if mode in (RuleMode.WRITE, RuleMode.UPGRADE):
        others = lambda index: range(index)  # noqa: E731
    elif mode in (RuleMode.READ, RuleMode.DOWNGRADE):
        others = lambda index: range(index + 1, len(rules))  # noqa: E731
    else:
        return frozenset()
    return frozenset(
        index
        for index, rule in enumerate(rules)
        if rule.type.upper() in FIELD_RULE_TYPES
        and any(_same_field_transform(rule, rules[other]) for other in others(index))
    )


def _same_field_transform(rule: Rule, other: Rule) -> bool:
    return (
        bool(rule.tags)
        and rule.kind is RuleKind.TRANSFORM
        and other.kind is RuleKind.TRANSFORM
        and rule.mode is other.mode
        and rule.type == other.type
        and tuple(rule.tags) == tuple(other.tags)
    )
