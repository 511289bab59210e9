"""The CEL_FIELD executor: a rule's `guard ; expr` applied to every primitive field, as Confluent runs it.

Each rule compiles once into a native step — the format's field walk as a tree (`field_tree`)
unrolled into Column expressions, with every guard that reads only `name`, `fullName`, `typeName`
or `tags` decided per field at plan time — carrying its Python twin (the format's walk over
records, `field_walk`). A rule whose expressions cannot all compile natively, or whose format's
walk has no tree (JSON Schema: its branches are chosen by validating values), runs as that Python
step instead (docs/semantics.md §4, §4.8, §4.9). In a migration the walk follows the schema of the
record the rule receives, as Confluent's Java client walks a migration's record (§4.7); there a
result that may not fit its field keeps the rule in Python, which makes such a record undecodable
rather than failing the rule. A format without a field walk has no CEL_FIELD rules.
"""

from __future__ import annotations

import dataclasses

from contracts.errors import ContractError
from contracts.formats.fields import field_walking
from contracts.model import Rule
from executors.cel.compiler import NotNativeCel
from executors.cel.runtime import compile_program
from executors.cel_field.batch import CelFieldBatch
from executors.cel_field.native import NativePlanner
from executors.protocol import (
    BatchStep,
    MigrationResult,
    NativeStep,
    RuleContext,
    Step,
    condition_failure_message,
    same_tag_transforms,
)

__all__ = ["CelFieldExecutor"]


class CelFieldExecutor:
    """Compiles CEL_FIELD rules: natively when every visited field's expression compiles, else in Python."""

    type = "CEL_FIELD"
    native_migration = MigrationResult.RECORD

    def supersedes(self, rule: Rule, other: Rule) -> bool:
        return same_tag_transforms(rule, other)

    def compile(self, ctx: RuleContext) -> Step:
        rule = ctx.rule
        walking = field_walking(ctx.schema_format)
        if walking is None:
            raise ContractError(
                f"CEL_FIELD rules on {ctx.schema_format.schema_type} records are not supported: its"
                " format has no field walk (contracts.formats.fields.FieldWalking)",
                position="type",
            )
        expr = rule.expr or ""
        # Compiling on the driver reports syntax errors at load, with their position.
        compile_program(expr, subject=ctx.subject, version=ctx.version, rule=rule.name)
        walked = f"fields tagged {', '.join(sorted(rule.tags))}" if rule.tags else "every field"
        tags = frozenset(rule.tags)
        failure = condition_failure_message(rule)
        twin = CelFieldBatch(expr, rule.kind, tags, ctx.schema, walking, dict(ctx.metadata_tags), failure)
        batch = BatchStep(twin)
        per_record = f"touches {walked} its guard accepts, decided per record"
        tree = walking.field_tree(ctx.schema, ctx.metadata_tags)
        if tree is None:
            why = f"no native field walk for {ctx.schema_format.schema_type} records"
            return dataclasses.replace(batch, explain=per_record, why_not_native=why)
        try:
            planner = NativePlanner(
                expr,
                rule.kind,
                tags,
                fitting_only=ctx.mode.is_migration,
                converting_writes=tree.converting_writes,
            )
            build = planner.plan(tree.record, ctx.spark_type)
        except NotNativeCel as unsupported:
            return dataclasses.replace(
                batch, explain=per_record, why_not_native=f"no native form for {unsupported}"
            )
        return NativeStep(build, batch=batch, explain=f"touches {', '.join(planner.touched) or 'no field'}")
