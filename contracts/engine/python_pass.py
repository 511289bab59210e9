"""The Python pass: consecutive batch-step rules (and custom actions) in one `mapInArrow`.

Each Arrow batch is converted to Avro-shaped records once, every rule of the pass runs over the
records still valid, and the record, status and outcome columns are written back. Evaluators
are built once per Python worker and cached, never per row or batch. An ERROR action does not
raise in the worker: the row is marked with the message the job fails with (planner.FAILURE)
and `planner.raise_failures` fails the job right after the pass, as a native ERROR rule does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from actions.protocol import ActionContext, ActionPlan, Effect
from contracts.bounded import BoundedCache
from contracts.engine.columns import (
    FAILURE,
    OUTCOME_PREFIX,
    RECORD,
    STATUS,
    failed_batch,
    failure_field,
    raise_failures,
)
from contracts.engine.gc_pause import gc_paused
from contracts.errors import ContractError, DataContractError, SerializationError, in_one_line
from contracts.formats.arrow_types import arrow_schema
from contracts.model import RuleKind
from contracts.planning.plan import Plan, PlannedRule
from executors.protocol import BatchEvaluator, BatchStep, NativeStep, Outcome

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


_EVALUATORS: BoundedCache[tuple[str, int], BatchEvaluator] = BoundedCache(256)
"""Per worker: each plan's rules' evaluators, by plan id and rule index."""


def apply_batch_rules(staged: DataFrame, rules: Sequence[PlannedRule], plan_id: str) -> DataFrame:
    """Add a mapInArrow pass running `rules` over `staged`, with an outcome column per evaluated rule."""
    from pyspark.sql.types import BooleanType, StructField, StructType

    present = set(staged.columns)
    new_outcomes = [
        StructField(OUTCOME_PREFIX + str(rule.index), BooleanType())
        for rule in rules
        if OUTCOME_PREFIX + str(rule.index) not in present
    ]
    output = StructType([*staged.schema.fields, *new_outcomes, failure_field()])
    return raise_failures(staged.mapInArrow(_BatchPass(tuple(rules), plan_id, output.json()), output))


@dataclass(frozen=True)
class _BatchPass:
    """The picklable function Spark runs per partition."""

    rules: tuple[PlannedRule, ...]
    plan_id: str
    output_json: str

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.types import StructType

        output = StructType.fromJson(json.loads(self.output_json))
        output_arrow = arrow_schema(output)
        for batch in batches:
            try:
                with gc_paused():
                    ruled = _RowsInFlight(self, batch).run(output_arrow)
            except DataContractError as error:
                if not batch.num_rows:
                    raise
                # The job fails on these rows natively, with the one line a native failure has
                # (raise_failures), not with a Python worker's traceback (docs/semantics.md §9.9).
                ruled = failed_batch(batch, output_arrow, in_one_line(error))
            yield ruled


class _RowsInFlight:
    """One Arrow batch being processed: its records, statuses and rule outcomes as Python lists."""

    def __init__(self, owner: _BatchPass, batch: pa.RecordBatch) -> None:

        self.owner = owner
        self.batch = batch
        self.schema = owner.rules[0].ctx.schema
        self.format = owner.rules[0].ctx.schema_format
        read = self.format.read_struct(batch.column(RECORD), self.schema)
        self.records = read.records
        self.unreadable = read.unreadable
        self.statuses: list[dict[str, Any] | None] = batch.column(STATUS).to_pylist()
        self.failures: list[str | None] = [None] * batch.num_rows
        self.outcomes: dict[str, list[bool | None]] = {}
        self.records_changed = False

    def run(self, arrow_schema: pa.Schema) -> pa.RecordBatch:
        for rule in self.owner.rules:
            if isinstance(rule.step, BatchStep):
                self.records_changed |= _evaluate(
                    self.owner.plan_id,
                    rule,
                    self.records,
                    self.statuses,
                    self.failures,
                    self.outcomes,
                    self.unreadable,
                )
            else:
                self._callbacks_after_native(rule)
        return self._to_batch(arrow_schema)

    def _callbacks_after_native(self, rule: PlannedRule) -> None:

        outcome = self.batch.column(OUTCOME_PREFIX + str(rule.index)).to_pylist()
        reason = rule.failure_reason()
        for i, passed in enumerate(outcome):
            if passed is not None:
                action = rule.on_success if passed else rule.on_failure
                _run_callback(rule, action, self.records[i], None if passed else reason)

    def _to_batch(self, arrow_schema: pa.Schema) -> pa.RecordBatch:

        columns = []
        for arrow_field in arrow_schema:
            name = arrow_field.name
            if name == RECORD and self.records_changed:
                packed = self.format.to_struct(self.records, self.schema, arrow_field.type)
                columns.append(_keeping(packed, self.batch.column(RECORD), self.unreadable))
            elif name == STATUS:
                columns.append(pa.array(self.statuses, type=arrow_field.type))
            elif name in self.outcomes:
                columns.append(pa.array(self.outcomes[name], type=pa.bool_()))
            elif name == FAILURE:
                columns.append(pa.array(self.failures, type=arrow_field.type))
            else:
                columns.append(self.batch.column(name))
        return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


@dataclass(frozen=True)
class LeadingRules:
    """A plan's first rules, all batch steps, run by the decode pass on the records it has just
    read instead of by a Python pass of their own: one pass over the rows, not two (§8.12)."""

    rules: tuple[PlannedRule, ...]
    plan_id: str

    def outcome_names(self) -> list[str]:
        """The outcome columns the decode pass adds for these rules."""
        return [OUTCOME_PREFIX + str(rule.index) for rule in self.rules]

    def outcome_fields(self) -> list[Any]:
        """The outcome columns as Spark fields."""
        from pyspark.sql.types import BooleanType, StructField

        return [StructField(name, BooleanType()) for name in self.outcome_names()]

    def run(
        self,
        records: list[Any],
        statuses: list[dict[str, Any] | None],
        failures: list[str | None],
        unreadable: Mapping[int, str],
    ) -> dict[str, list[bool | None]]:
        """Run the rules over the records still valid, in place as `run_rule` does (`unreadable`
        rows fail them with its reasons); each rule's outcomes by column name."""
        outcomes: dict[str, list[bool | None]] = {}
        for rule in self.rules:
            _evaluate(self.plan_id, rule, records, statuses, failures, outcomes, unreadable)
        return outcomes


def leading_rules(plan: Plan) -> LeadingRules | None:
    """The plan's first run of rules when a decode pass can run it: every rule in it a batch step
    (a native rule with custom actions needs its outcome column, computed after the pass)."""
    groups = plan.groups()
    if not groups or groups[0][0]:
        return None
    rules = groups[0][1]
    if not all(isinstance(rule.step, BatchStep) for rule in rules):
        return None
    return LeadingRules(tuple(rules), plan.plan_id)


def _evaluate(
    plan_id: str,
    rule: PlannedRule,
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    outcomes: dict[str, list[bool | None]],
    unreadable: Mapping[int, str] | None = None,
) -> bool:
    """Run one batch-step rule (`run_rule`), its outcomes into `outcomes`; whether a record changed."""
    assert isinstance(rule.step, BatchStep)
    outcome, changed = run_rule(
        rule,
        evaluator_for(plan_id, rule),
        records,
        statuses,
        failures,
        validate_against=None if rule.step.keeps_schema else rule.ctx.schema,
        unreadable=unreadable,
    )
    outcomes[OUTCOME_PREFIX + str(rule.index)] = outcome
    return changed


def run_rule(
    rule: PlannedRule,
    evaluator: BatchEvaluator,
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    *,
    validate_against: Any = None,
    unreadable: Mapping[int, str] | None = None,
) -> tuple[list[bool | None], bool]:
    """Run one rule over the records still valid (no status, no failure), in place: transforms
    replace records, actions run, DLQ rejections set the status, ERROR sets the failure. Returns
    the per-row outcome (None where not evaluated) and whether any record changed.

    A row in `unreadable` (its record could not be read, e.g. a string that is not UTF-8) is not
    evaluated: it fails the rule with the reason given there, and its action runs."""
    unreadable = unreadable or {}
    active = [
        i
        for i, status in enumerate(statuses)
        if status is None and failures[i] is None and i not in unreadable
    ]
    results = evaluator([records[i] for i in active]) if active else []
    outcome: list[bool | None] = [None] * len(statuses)
    changed = False
    for i, result in zip(active, results, strict=True):
        if validate_against is not None:
            try:
                result = _conforming(rule, result, validate_against)
            except SerializationError as error:
                failures[i] = in_one_line(error)  # fails the job natively, cause included
                continue
        outcome[i] = result.passed
        if result.passed and rule.rule.kind is RuleKind.TRANSFORM:
            records[i] = result.record
            changed = True
        statuses[i], failures[i] = act(rule, records[i], result.passed, result.reason, result.cause)
    for i, reason in unreadable.items():
        if statuses[i] is None and failures[i] is None:
            outcome[i] = False
            statuses[i], failures[i] = act(rule, records[i], False, reason)
    return outcome, changed


def act(
    rule: PlannedRule, record: Any, passed: bool, reason: str | None, cause: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """Run the action for this outcome: the row's new status (a DLQ rejection) and, when an ERROR
    action fired, the message the job fails with (the first line a native rule fails with, then
    `cause`); both None when the row goes on."""
    action = rule.on_success if passed else rule.on_failure
    why = None if passed else (reason or rule.failure_reason())
    _run_callback(rule, action, record, why)
    if action.effect is Effect.FAIL:
        return None, rule.error_message(why or "rule passed", cause)
    if action.effect is Effect.REJECT:
        return rule.status(action, why), None
    return None, None


def _conforming(rule: PlannedRule, result: Outcome, schema: Any) -> Outcome:
    """A transform result that does not fit the schema is an error, not a rule failure: the
    reference's serializer raises after the rule ran, so no action handles it."""
    if not result.passed or rule.rule.kind is not RuleKind.TRANSFORM:
        return result
    ctx = rule.ctx
    try:
        written = ctx.schema_format.conform(result.record, schema)
    except (TypeError, ValueError) as e:
        raise SerializationError(
            f"the result of TRANSFORM rule {rule.rule.name!r} ({ctx.mode.value}) does not match the"
            f" schema of subject {ctx.subject!r} version {ctx.version}: {e}"
        ) from e
    return Outcome(True, written, result.reason)


def _keeping(packed: pa.Array, original: pa.Array, rows: Mapping[int, str]) -> pa.Array:
    """The repacked record column, with the original values of `rows` (records read with
    replacements, which must leave the pass as they came)."""
    if not rows:
        return packed
    index = list(range(len(packed)))
    for row in rows:
        index[row] = len(packed) + row
    both = pa.concat_arrays([packed, original.cast(packed.type)])
    return both.take(pa.array(index, type=pa.int64()))


def _run_callback(rule: PlannedRule, action: ActionPlan, record: Any, reason: str | None) -> None:
    if action.callback is not None:
        ctx = rule.ctx
        action.callback(
            ActionContext(ctx.rule, ctx.subject, ctx.version, ctx.mode, ctx.properties), record, reason
        )


def evaluator_for(plan_id: str, rule: PlannedRule) -> BatchEvaluator:
    """The rule's evaluator, built once per Python worker (a native step's Python twin if needed),
    its failure reasons as the rule carries them (`PlannedRule.reason_text`)."""
    return _EVALUATORS.get_or_make(
        (plan_id, rule.index), lambda: _Reasoned(python_step(rule).factory(), rule)
    )


@dataclass(frozen=True)
class _Reasoned:
    """An evaluator whose failed outcomes carry their reason and cause as `rule.reason_text` makes
    them, for the record each came from: here, where reasons are made, so every pass, twin and
    error message gets the same text."""

    evaluator: BatchEvaluator
    rule: PlannedRule

    def __call__(self, records: Sequence[Any]) -> Sequence[Outcome]:
        outcomes = list(self.evaluator(records))
        for i, (record, outcome) in enumerate(zip(records, outcomes, strict=True)):
            if not outcome.passed and (outcome.reason is not None or outcome.cause is not None):
                reason = self.rule.reason_text(record, outcome.reason)
                cause = self.rule.reason_text(record, outcome.cause)
                outcomes[i] = Outcome(outcome.passed, outcome.record, reason, cause)
        return outcomes


def python_step(rule: PlannedRule) -> BatchStep:
    """The rule as a batch step: its own, or the Python twin of its native step."""
    step = rule.step
    if isinstance(step, BatchStep):
        return step
    if isinstance(step, NativeStep) and step.batch is not None:
        return step.batch
    raise ContractError(
        "rule compiles only to a native Spark step, but runs where Python must evaluate it"
        " (a migration inside deserialize)",
        subject=rule.ctx.subject,
        version=rule.ctx.version,
        rule=rule.rule.name,
    )
