"""Runs a plan on a DataFrame: packs the record, evaluates runs of native rules as Column
expressions and consecutive Python rules in one `mapInArrow` pass, in the plan's order, and
gathers the per-rule counts (docs/semantics.md §2.6, §2.7).

ERROR actions fail the job natively (`raise_error`) when the failing row is computed, those of
rules evaluated in Python too: the pass marks the row and `raise_failures` raises right after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actions.protocol import Effect
from contracts.engine import python_pass
from contracts.engine.columns import (
    ERRED,
    FIELD_PREFIX,
    ORIGINAL,
    OUTCOME_PREFIX,
    RECORD,
    STATUS,
    check_record_columns,
    field_path,
    quote_name,
    record_columns,
    status_literal,
    status_type,
)
from contracts.engine.counts import CountOnDemand, Gatherer, gather
from contracts.planning.plan import Plan, PlannedRule, has_transforms, native_transforms
from executors.protocol import NativeStep

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def field_columns(plan: Plan) -> dict[str, str]:
    """The columns a run of native rules with a transform holds the record's fields in, by name."""
    return {f"{FIELD_PREFIX}{i}": f.name for i, f in enumerate(plan.record_type.fields)}


def keeps_field_columns(plan: Plan) -> bool:
    """Whether `run` leaves the final record's fields as separate columns next to RECORD: its
    last rules are native and one transforms (see `record_field`)."""
    groups = plan.groups()
    return bool(groups and field_columns(plan)) and native_transforms(groups[-1])


def counts_at_output(plan: Plan, gatherer: Gatherer | None) -> bool:
    """Whether the per-rule counts are observed on the output rather than inside the query: they
    are observed (not counted on demand), and no rule can reject a row, so every row a rule
    evaluated reaches the output (rows the rules skipped, rejected earlier by a decode or a
    migration, have no outcome and are not counted). `run` then keeps the outcome columns for
    `observe_output`. Spark's CollectMetrics has no generated code: in the middle of a plan it
    splits the query in two, with the rules' status and filter on one side; on the output it sees
    one boolean per rule (docs/semantics.md §2.6)."""
    observed = gatherer is not None and not isinstance(gatherer, CountOnDemand)
    return observed and bool(plan.rules) and not plan.can_reject


def outcome_columns(plan: Plan) -> list[str]:
    """The columns holding each rule's outcome: true, false, or null where it did not run."""
    return [OUTCOME_PREFIX + str(rule.index) for rule in plan.rules]


def observe_output(plan: Plan, output: DataFrame, gatherer: Gatherer) -> DataFrame:
    """`output`, which carries the outcome columns of a plan whose `counts_at_output`, observed
    with the per-rule counts and without those columns."""
    return gather(output, plan.rules, gatherer).drop(*outcome_columns(plan))


def record_field(plan: Plan, name: str) -> Column | str:
    """Field `name` of the record after `run`, as `select` takes it (named `name`). Read from its
    own column when kept, so Spark folds the rules into the projection that reads them, as it does
    a hand-written query (a struct of computed fields read field by field is never inlined); else
    the record's field by its path, a string, which builds no Column on the driver."""
    from pyspark.sql import functions as F

    if keeps_field_columns(plan):
        column = next(column for column, field_name in field_columns(plan).items() if field_name == name)
        return F.col(column).alias(name)
    return field_path(RECORD, name)


def stage(
    plan: Plan, df: DataFrame, gatherer: Gatherer | None = None, keep_outcomes: bool = False
) -> DataFrame:
    """Run every rule lazily: the record packed into one struct column, plus `_contract`;
    `gatherer` and `keep_outcomes` as in `run`."""
    groups = plan.groups()
    as_fields = bool(groups and field_columns(plan)) and native_transforms(groups[0])
    packed = pack(plan, df, as_fields)
    return _run(plan, packed, gatherer, packed_as_fields=as_fields, keep_outcomes=keep_outcomes)


def pack(plan: Plan, df: DataFrame, as_fields: bool = False) -> DataFrame:
    """The record columns as one struct (and its untouched original), with a null `_contract`.

    `as_fields` puts the record's columns in the field columns instead of RECORD, for a first
    run of native rules with a transform, which then reads the source columns themselves."""
    from pyspark.sql import functions as F

    record_names = check_record_columns(df, plan.record_type, plan.subject, plan.version)
    # Columns named by strings where they can be: each Column built on a classic session costs
    # PySpark round trips to the JVM, which add up on a record of many fields.
    columns: list[Column | str] = [quote_name(name) for name in df.columns if name not in record_names]
    fields = record_columns(df, plan.record_type)
    record = F.struct(*[_struct_member(name, column) for name, column in fields.items()])
    if as_fields:
        columns.extend(_aliased(fields[name], c) for c, name in field_columns(plan).items())
    else:
        columns.append(record.alias(RECORD))
    if has_transforms(plan.rules):
        columns.append(record.alias(ORIGINAL))
    columns.append(F.lit(None).cast(status_type()).alias(STATUS))
    return df.select(*columns)


def _struct_member(name: str, column: Column | str) -> Column | str:
    """`column` as the record struct's field `name`: a column of that name as it is."""
    return column if isinstance(column, str) else column.alias(name)


def _aliased(column: Column | str, name: str) -> Column:
    from pyspark.sql import functions as F

    return (F.col(column) if isinstance(column, str) else column).alias(name)


def run(
    plan: Plan,
    staged: DataFrame,
    gatherer: Gatherer | None = None,
    leading_ran: bool = False,
    keep_outcomes: bool = False,
) -> DataFrame:
    """Apply the rules to a packed DataFrame; rows whose `_contract` is already set are skipped.

    `gatherer` gathers the per-rule counts (contracts.engine.counts). When the plan
    `counts_at_output` it is not used here: the outcome columns stay, for `observe_output` on
    the caller's output (which drops them); `keep_outcomes` keeps them too, for `warnings_column`.
    `leading_ran`: the plan's first run of rules has run already, in the decode pass
    (python_pass.LeadingRules), which left its outcome columns."""
    skipped = 1 if leading_ran else 0
    return _run(plan, staged, gatherer, packed_as_fields=False, skipped=skipped, keep_outcomes=keep_outcomes)


def warnings_column(plan: Plan) -> Column:
    """The names of the rules a row failed whose failure action let it go on (NONE), in running
    order; read from the outcome columns `run` kept (docs/semantics.md §2.6)."""
    from pyspark.sql import functions as F

    names = [
        F.when(~F.col(OUTCOME_PREFIX + str(rule.index)), F.lit(rule.rule.name))
        for rule in plan.rules
        if rule.on_failure.effect is Effect.CONTINUE
    ]
    if not names:
        return F.array().cast("array<string>")
    return F.filter(F.array(*names), lambda name: name.isNotNull())


def marks_errors(plan: Plan) -> bool:
    """Whether a native rule of `plan` may reject a row whose exact reason only its Python twin
    knows: `run` then marks such rows in ERRED, so the twin runs on them alone."""
    return any(_marks_errors(rule) for rule in plan.rules)


def _marks_errors(rule: PlannedRule) -> bool:
    return (
        isinstance(rule.step, NativeStep)
        and rule.step.batch is not None
        and rule.on_failure.effect is Effect.REJECT
    )


def _run(
    plan: Plan,
    staged: DataFrame,
    gatherer: Gatherer | None,
    packed_as_fields: bool,
    skipped: int = 0,
    keep_outcomes: bool = False,
) -> DataFrame:
    from pyspark.sql import functions as F

    groups = plan.groups()
    if marks_errors(plan):
        staged = staged.withColumn(ERRED, F.lit(None).cast("boolean"))
    for position, (native, rules) in enumerate(groups):
        if position < skipped:
            continue
        if native:
            from_fields = packed_as_fields and position == 0
            last = position == len(groups) - 1
            staged = _apply_native_run(staged, rules, field_columns(plan), from_fields, keep_fields=last)
        else:
            staged = python_pass.apply_batch_rules(staged, tuple(rules), plan.plan_id)
    if counts_at_output(plan, gatherer):
        return staged
    if gatherer is not None and plan.rules:
        staged = gather(staged, plan.rules, gatherer)
    # A copy action's rows are told by their rule's outcome, which the routing pass reads.
    keep = keep_outcomes or bool(plan.copies)
    return staged.drop(*outcome_columns(plan)) if plan.rules and not keep else staged


def _apply_native_run(
    staged: DataFrame, rules: list[PlannedRule], fields: dict[str, str], from_fields: bool, keep_fields: bool
) -> DataFrame:
    """Evaluate consecutive native rules. With a transform among them the record's fields travel
    as separate columns (`fields`, taken from RECORD unless `from_fields`: `pack` put them there) and are read
    only through field accesses, so Spark collapses packing, transforms and unpacking into one
    projection, as it does for the same query written by hand (a struct column read field by
    field with computed fields is never inlined). `keep_fields` leaves them next to RECORD."""
    from pyspark.sql import functions as F

    if not has_transforms(rules) or not fields:
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
    erred = None
    if rule.step is None:
        passed: Column = F.lit(False)
        transformed = None
    else:
        assert isinstance(rule.step, NativeStep)
        result = rule.step.build(record)
        passed = F.coalesce(result.passed, F.lit(False))
        transformed = result.record
        if _marks_errors(rule):
            # A step that cannot tell an error from a clean failure leaves every failure to its twin.
            erred = F.lit(True) if result.error is None else F.coalesce(result.error, F.lit(False))
    staged = staged.select("*", F.when(active, passed).alias(outcome_name))
    outcome = F.col(outcome_name)
    updates: dict[str, Column] = {STATUS: native_status(rule, outcome)}
    if erred is not None:
        # `outcome` is null for rows rejected earlier: their mark stays as it was.
        updates[ERRED] = F.when(~outcome & erred, F.lit(True)).otherwise(F.col(ERRED))
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
            status = F.when(fired, status_literal(value)).otherwise(status)
    # `fired` is null for rows already rejected, so `when` leaves their status as it was.
    return status
