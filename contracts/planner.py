"""The planner: which rules run, in which order, with which actions — and applying them to a DataFrame.

A plan is an ordered list of compiled rules (docs/semantics.md §2). Applying it packs the record
columns into one struct column, runs native steps as Column expressions and consecutive Python
steps in one `mapInArrow` pass, and leaves one status column `_contract` that is null for rows
still valid and names the rule, mode, action and reason for rows a DLQ action rejected. ERROR
actions fail the job natively (`raise_error`) when the failing row is computed, those of rules
evaluated in Python too: the pass marks the row and `raise_failures` raises right after it.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from actions._protocol import ActionContext, ActionPlan, Effect
from contracts import _batch
from contracts.errors import ContractError, RuleError
from contracts.model import Rule, RuleKind, RuleMode
from executors._protocol import BatchStep, NativeStep, RuleContext, Step, condition_failure_message

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation
    from pyspark.sql.types import StructField, StructType

RECORD = "__contract_record"
ORIGINAL = "__contract_original"
STATUS = "_contract"
OUTCOME_PREFIX = "__contract_outcome_"
FIELD_PREFIX = "__contract_field_"
FAILURE = "__contract_failure"
"""A Python pass's column: the message the job fails with, on a row whose ERROR action fired there."""


def status_type() -> StructType:
    """The `_contract` struct: which rule rejected the row, in which mode, with which action and why."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    return StructType(
        [
            StructField("rule", StringType()),
            StructField("mode", StringType()),
            StructField("action", StringType()),
            StructField("reason", StringType()),
            StructField("topic", StringType()),
            StructField("subject", StringType()),
            StructField("version", IntegerType()),
        ]
    )


@dataclass(frozen=True)
class PlannedRule:
    """One rule of a plan: its context, compiled step and the actions resolved for this direction.

    `step` is None when no executor handles the rule's type: the rule then fails for every record
    and the rules after it are skipped (docs/semantics.md §2.1).
    """

    index: int
    ctx: RuleContext
    step: Step | None
    on_success: ActionPlan
    on_failure: ActionPlan

    @property
    def rule(self) -> Rule:
        return self.ctx.rule

    @property
    def native(self) -> bool:
        """True when the rule is evaluated by Spark expressions (a missing executor is a constant failure)."""
        return not isinstance(self.step, BatchStep)

    @property
    def has_callbacks(self) -> bool:
        """Whether a custom action needs a Python pass after this rule."""
        return self.on_success.callback is not None or self.on_failure.callback is not None

    @property
    def missing_executor_reason(self) -> str:
        return f"Could not find rule executor of type {self.rule.type}"

    def failure_reason(self) -> str:
        """The reason a native failure reports (Python steps carry their own evaluation error)."""
        if self.step is None:
            return self.missing_executor_reason
        if self.rule.kind is RuleKind.CONDITION:
            return condition_failure_message(self.rule)
        return f"Rule failed: {self.rule.name}"

    def error_message(self, reason: str, cause: str | None = None) -> str:
        """The text an ERROR action fails the job with: a first line naming subject, version, rule,
        mode and reason, the same wherever the rule ran (Spark appends its SQLSTATE on the next
        line), then the cause, when Python knows one (an executor's traceback)."""
        ctx = self.ctx
        error = RuleError(
            reason, subject=ctx.subject, version=ctx.version, rule=self.rule.name, mode=ctx.mode.value
        )
        return f"{error}\n{cause or ''}"

    def status(self, action: ActionPlan, reason: str | None) -> dict[str, Any]:
        """The `_contract` value for a row this rule rejected."""
        ctx = self.ctx
        return {
            "rule": self.rule.name,
            "mode": ctx.mode.value,
            "action": action.name,
            "reason": reason,
            "topic": action.topic,
            "subject": ctx.subject,
            "version": ctx.version,
        }

    def describe(self) -> str:
        how = "native" if self.native else "python"
        if self.has_callbacks:
            how += ", custom action in python"
        if self.step is None:
            how = "no executor: fails every record, later rules skipped"
        failure = self.on_failure.name
        if self.on_failure.topic:
            failure += f" -> {self.on_failure.topic}"
        return (
            f"{self.index + 1}. {self.rule.name} [{self.rule.type} {self.rule.kind.value}, mode"
            f" {self.ctx.mode.value}] on success {self.on_success.name}, on failure {failure} ({how})"
        )


@dataclass(frozen=True)
class SkippedRuleSet:
    """Rules a plan leaves out because their rule set's `enableAt` is not for clients."""

    enable_at: str | None
    rules: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"the rule set's enableAt is {self.enable_at!r}: a client skips all {len(self.rules)} of its"
            f" rules ({', '.join(self.rules)})"
        )


@dataclass(frozen=True)
class Plan:
    """The ordered rules one contract version runs in one mode, ready to apply to a DataFrame."""

    subject: str
    version: int
    mode: RuleMode
    record_type: StructType
    rules: tuple[PlannedRule, ...]
    plan_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    skipped: SkippedRuleSet | None = None

    def explain(self) -> str:
        header = f"Plan {self.mode.value} for subject {self.subject!r} version {self.version}"
        if self.skipped is not None:
            return f"{header}: no rules, {self.skipped.describe()}"
        if not self.rules:
            return f"{header}: no rules"
        return "\n".join([f"{header}:", *(f"  {rule.describe()}" for rule in self.rules)])

    def __repr__(self) -> str:
        return self.explain()

    @property
    def can_reject(self) -> bool:
        """Whether any rule's action can send a row to a dead-letter topic."""
        actions = (action for rule in self.rules for action in (rule.on_success, rule.on_failure))
        return any(action.effect is Effect.REJECT for action in actions)

    @property
    def has_transforms(self) -> bool:
        return _transforms(self.rules)

    @cached_property
    def counts_at_output(self) -> bool:
        """Whether the per-rule counts can be observed on the output: no rule can reject a row and
        every rule is native, without callbacks, and passes whatever the record holds, so each
        rule's counts are the output's row count. Spark's CollectMetrics has no generated code: on
        the output it costs little, in the middle of a plan it splits the query in two."""
        from pyspark.sql import functions as F

        if not self.rules or self.can_reject:
            return False
        return all(
            isinstance(rule.step, NativeStep)
            and not rule.has_callbacks
            and rule.step.build(F.col(RECORD)).always_passes
            for rule in self.rules
        )

    def observe_output(self, output: DataFrame, observation: Observation | str) -> DataFrame:
        """`output` observed with the per-rule counts, for a plan whose `counts_at_output`."""
        from pyspark.sql import functions as F

        columns = []
        for rule in self.rules:
            columns.append(F.count(F.lit(1)).alias(f"{rule.index}.passed"))
            columns.append(F.count(F.lit(None)).alias(f"{rule.index}.failed"))
        return output.observe(observation, *columns)

    @property
    def field_columns(self) -> dict[str, str]:
        """The columns a run of native rules with a transform holds the record's fields in, by name."""
        return {f"{FIELD_PREFIX}{i}": f.name for i, f in enumerate(self.record_type.fields)}

    @property
    def keeps_field_columns(self) -> bool:
        """Whether `run` leaves the final record's fields as separate columns next to RECORD: its
        last rules are native and one transforms (see `record_field`)."""
        groups = self._groups()
        return bool(groups and self.field_columns) and _native_transforms(groups[-1])

    def record_field(self, name: str) -> Column:
        """Field `name` of the record after `run`. Read from its own column when kept, so Spark
        folds the rules into the projection that reads them, as it does a hand-written query (a
        struct of computed fields read field by field is never inlined)."""
        from pyspark.sql import functions as F

        if self.keeps_field_columns:
            column = next(column for column, field_name in self.field_columns.items() if field_name == name)
            return F.col(column)
        return F.col(RECORD).getField(name)

    def stage(self, df: DataFrame, observation: Observation | str | None = None) -> DataFrame:
        """Run every rule lazily: the record packed into one struct column, plus `_contract`."""
        groups = self._groups()
        as_fields = bool(groups and self.field_columns) and _native_transforms(groups[0])
        return self._run(self.pack(df, as_fields), observation, packed_as_fields=as_fields)

    def pack(self, df: DataFrame, as_fields: bool = False) -> DataFrame:
        """The record columns as one struct (and its untouched original), with a null `_contract`.

        `as_fields` puts the record's columns in the field columns instead of RECORD, for a first
        run of native rules with a transform, which then reads the source columns themselves."""
        from pyspark.sql import functions as F

        record_names = check_record_columns(df, self.record_type, self.subject, self.version)
        passthrough = [F.col(_quote(name)) for name in df.columns if name not in record_names]
        record = F.struct(*[F.col(_quote(name)) for name in record_names])
        if as_fields:
            columns = [
                *passthrough,
                *(F.col(_quote(name)).alias(c) for c, name in self.field_columns.items()),
            ]
        else:
            columns = [*passthrough, record.alias(RECORD)]
        if self.has_transforms:
            columns.append(record.alias(ORIGINAL))
        columns.append(F.lit(None).cast(status_type()).alias(STATUS))
        return df.select(*columns)

    def run(self, staged: DataFrame, observation: Observation | str | None = None) -> DataFrame:
        """Apply the rules to a packed DataFrame; rows whose `_contract` is already set are skipped.

        `observation` gathers the per-rule counts: an Observation, or on a streaming DataFrame
        the name its query reports them under (`observedMetrics` of each progress)."""
        return self._run(staged, observation, packed_as_fields=False)

    def _run(
        self, staged: DataFrame, observation: Observation | str | None, packed_as_fields: bool
    ) -> DataFrame:
        groups = self._groups()
        for position, (native, rules) in enumerate(groups):
            if native:
                from_fields = packed_as_fields and position == 0
                last = position == len(groups) - 1
                staged = _apply_native_run(staged, rules, self.field_columns, from_fields, keep_fields=last)
            else:
                staged = _batch.apply_batch_rules(staged, tuple(rules), self.plan_id)
        outcome_columns = [OUTCOME_PREFIX + str(rule.index) for rule in self.rules]
        if observation is not None and self.rules:
            staged = staged.observe(observation, *_metric_columns(self.rules))
        return staged.drop(*outcome_columns) if outcome_columns else staged

    def _groups(self) -> list[tuple[bool, list[PlannedRule]]]:
        """The operations grouped into runs: (True, native rules) or (False, one Python pass's rules)."""
        return [
            (native, [rule for _, rule in group])
            for native, group in itertools.groupby(self._operations(), key=lambda op: op[0])
        ]

    def _operations(self) -> list[tuple[bool, PlannedRule]]:
        """(native?, rule) in order: native rules with custom actions get a Python pass after them,
        so consecutive Python work shares one mapInArrow pass."""
        operations: list[tuple[bool, PlannedRule]] = []
        for rule in self.rules:
            if rule.native:
                operations.append((True, rule))
                if rule.has_callbacks:
                    operations.append((False, rule))
            else:
                operations.append((False, rule))
        return operations


def build_plan(
    subject: str,
    version: int,
    mode: RuleMode,
    record_type: StructType,
    rules: Sequence[tuple[RuleContext, Step | None]],
    resolve_action: Any,
    skipped: SkippedRuleSet | None = None,
) -> Plan:
    """Resolve each rule's actions and truncate after a rule without executor (docs/semantics.md §2.1);
    `skipped` names the rules the rule set's `enableAt` leaves out, for `explain`."""
    planned: list[PlannedRule] = []
    for index, (ctx, step) in enumerate(rules):
        action_ctx = ActionContext(ctx.rule, subject, version, mode, ctx.properties)
        planned.append(
            PlannedRule(
                index=index,
                ctx=ctx,
                step=step,
                on_success=resolve_action(ctx.rule.action_for(mode, outcome_failed=False), action_ctx),
                on_failure=resolve_action(ctx.rule.action_for(mode, outcome_failed=True), action_ctx),
            )
        )
        if step is None:
            break
    return Plan(subject, version, mode, record_type, tuple(planned), skipped=skipped)


def check_record_columns(df: DataFrame, record_type: StructType, subject: str, version: int) -> list[str]:
    """The record's field names, after checking the DataFrame has each with the schema's type."""
    present = {f.name: f.dataType for f in df.schema.fields}
    for expected in record_type.fields:
        if expected.name not in present:
            raise ContractError(
                f"the DataFrame has no column {expected.name!r}, a field of the contract's schema"
                f" (columns: {', '.join(df.columns)})",
                subject=subject,
                version=version,
                position=expected.name,
            )
        # simpleString ignores nullability and field metadata, which may differ harmlessly.
        if present[expected.name].simpleString() != expected.dataType.simpleString():
            raise ContractError(
                f"column {expected.name!r} is {present[expected.name].simpleString()} but the schema"
                f" says {expected.dataType.simpleString()}",
                subject=subject,
                version=version,
                position=expected.name,
            )
    return [f.name for f in record_type.fields]


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _transforms(rules: Sequence[PlannedRule]) -> bool:
    return any(rule.rule.kind is RuleKind.TRANSFORM for rule in rules)


def _native_transforms(group: tuple[bool, list[PlannedRule]]) -> bool:
    """Whether a group of `Plan._groups` is a run of native rules holding a transform."""
    native, rules = group
    return native and _transforms(rules)


def _apply_native_run(
    staged: DataFrame, rules: list[PlannedRule], fields: dict[str, str], from_fields: bool, keep_fields: bool
) -> DataFrame:
    """Evaluate consecutive native rules. With a transform among them the record's fields travel
    as separate columns (`fields`, taken from RECORD unless `from_fields`: `pack` put them there) and are read
    only through field accesses, so Spark collapses packing, transforms and unpacking into one
    projection, as it does for the same query written by hand (a struct column read field by
    field with computed fields is never inlined). `keep_fields` leaves them next to RECORD."""
    from pyspark.sql import functions as F

    if not _transforms(rules) or not fields:
        for rule in rules:
            staged = _apply_native(staged, rule, F.col(RECORD), None)
        return staged
    if not from_fields:
        staged = staged.withColumns({column: F.col(RECORD)[name] for column, name in fields.items()})
    record = F.struct(*[F.col(column).alias(name) for column, name in fields.items()])
    for rule in rules:
        staged = _apply_native(staged, rule, record, fields)
    staged = staged.withColumn(RECORD, record)
    return staged if keep_fields else staged.drop(*fields)


def _apply_native(
    staged: DataFrame, rule: PlannedRule, record: Column, fields: dict[str, str] | None
) -> DataFrame:
    """Evaluate one native rule on `record`: an outcome column, then the status it implies and,
    for a transform, the new record (into the field columns `fields` when given, else RECORD)."""
    from pyspark.sql import functions as F

    outcome_name = OUTCOME_PREFIX + str(rule.index)
    active = F.col(STATUS).isNull()
    if rule.step is None:
        passed: Column = F.lit(False)
        transformed = None
    else:
        assert isinstance(rule.step, NativeStep)
        result = rule.step.build(record)
        passed = F.coalesce(result.passed, F.lit(False))
        transformed = result.record
    staged = staged.select("*", F.when(active, passed).alias(outcome_name))
    outcome = F.col(outcome_name)
    updates: dict[str, Column] = {STATUS: native_status(rule, outcome)}
    if transformed is not None and fields is None:
        updates[RECORD] = F.when(outcome, transformed).otherwise(F.col(RECORD))
    elif transformed is not None:
        for column, name in (fields or {}).items():
            updates[column] = F.when(outcome, transformed[name]).otherwise(F.col(column))
    return staged.withColumns(updates)


def native_status(rule: PlannedRule, outcome: Column) -> Column:
    """The `_contract` column after this rule: unchanged, rejected (DLQ) or the job failed (ERROR)."""
    from pyspark.sql import functions as F

    status = F.col(STATUS)
    reason = rule.failure_reason()
    for fired, action, why in ((outcome, rule.on_success, None), (~outcome, rule.on_failure, reason)):
        if action.effect is Effect.FAIL:
            status = F.when(fired, F.raise_error(F.lit(rule.error_message(why or "rule passed")))).otherwise(
                status
            )
        elif action.effect is Effect.REJECT:
            value = rule.status(action, why)
            status = F.when(fired, _status_literal(value)).otherwise(status)
    # `fired` is null for rows already rejected, so `when` leaves their status as it was.
    return status


def failure_field() -> StructField:
    """The FAILURE column a Python pass adds to its output (see `raise_failures`)."""
    from pyspark.sql.types import StringType, StructField

    return StructField(FAILURE, StringType(), True)


def raise_failures(staged: DataFrame) -> DataFrame:
    """After a Python pass that marked rows in FAILURE instead of raising: fail the job on such a
    row natively, in `_contract` as a native ERROR rule does, so both raise Spark's own
    USER_RAISED_EXCEPTION with the same first line, on a classic session and on Spark Connect
    (an exception raised in a Python worker reaches the user as a PythonException instead)."""
    from pyspark.sql import functions as F

    failure = F.col(FAILURE)
    status = F.when(failure.isNotNull(), F.raise_error(failure)).otherwise(F.col(STATUS))
    return staged.withColumn(STATUS, status).drop(FAILURE)


def _status_literal(value: dict[str, Any]) -> Column:
    from pyspark.sql import functions as F

    return F.struct(*[F.lit(value[f.name]).cast(f.dataType).alias(f.name) for f in status_type().fields])


def _metric_columns(rules: Sequence[PlannedRule]) -> list[Column]:
    """Per rule: rows passed and failed (rows already rejected are not evaluated, so not counted)."""
    from pyspark.sql import functions as F

    columns = []
    for rule in rules:
        outcome = F.col(OUTCOME_PREFIX + str(rule.index))
        columns.append(F.count_if(outcome).alias(f"{rule.index}.passed"))
        columns.append(F.count_if(~outcome).alias(f"{rule.index}.failed"))
    return columns
