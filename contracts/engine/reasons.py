"""Exact failure reasons for rows a native rule rejected, from the rule's Python twin.

A native Spark expression knows that a rule failed, and whether it failed cleanly (a false
condition, whose reason is the rule's own) or because evaluating it raised an error, whose text
the reference puts in the DLQ `__rule.exception` header (docs/semantics.md §2.2, §7). Only the
rows a native rule rejected with an error (marked in ERRED) are evaluated again by the twin.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine import python_pass, runner
from contracts.engine.columns import ERRED, RECORD, STATUS
from contracts.planning.plan import Plan, PlannedRule
from executors.protocol import NativeStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class NativeReasons:
    """The native rules of a plan whose generic failure reason a twin can make exact; picklable."""

    plan: Plan
    marked: bool = False
    """The rows the twin must see are marked in ERRED (the plan ran through `runner`); else it sees
    every row whose reason is a native rule's generic one (a native migration's rules)."""

    def twins(self) -> dict[tuple[str, str], PlannedRule]:
        """Rules with a Python twin, by (rule name, mode) as the `_contract` status names them."""
        return {
            (rule.rule.name, rule.ctx.mode.value): rule
            for rule in self.plan.rules
            if isinstance(rule.step, NativeStep) and rule.step.batch is not None
        }

    def refine(
        self,
        statuses: list[dict[str, Any] | None],
        records: pa.Array,
        erred: list[bool | None] | None = None,
    ) -> list[dict[str, Any] | None]:
        """The statuses with each native rule's generic reason replaced by the twin's error text.

        `records` is the record struct column as the failing rule saw it (a rejected row goes no
        further); `erred` the ERRED column, when `marked`: a row without the mark failed cleanly and
        keeps its reason. A twin that passes, or fails without a reason, leaves the status as it was.
        """
        twins = self.twins()
        pending: dict[tuple[str, str], list[int]] = {}
        # Marked rows alone are looked at: in a storm of clean failures, none.
        candidates = range(len(statuses)) if erred is None else [i for i, mark in enumerate(erred) if mark]
        for i in candidates:
            status = statuses[i]
            if status is None or status["subject"] != self.plan.subject:
                continue
            key = (status["rule"], status["mode"])
            rule = twins.get(key)
            if (
                rule is not None
                and status["version"] == self.plan.version
                and status["reason"] == rule.failure_reason()
            ):
                pending.setdefault(key, []).append(i)
        if not pending:
            return statuses
        refined = list(statuses)
        for key, rows in pending.items():
            rule = twins[key]
            ctx = self.plan.rules[0].ctx
            read = ctx.schema_format.read_struct(records.take(pa.array(rows, type=pa.int64())), ctx.schema)
            # A record the twin cannot read (a string that is not UTF-8) keeps the native reason.
            readable = [n for n in range(len(rows)) if n not in read.unreadable]
            outcomes = python_pass.evaluator_for(self.plan.plan_id, rule)([read.records[n] for n in readable])
            for n, outcome in zip(readable, outcomes, strict=True):
                i = rows[n]
                if not outcome.passed and outcome.reason:
                    refined[i] = {**statuses[i], "reason": outcome.reason}
        return refined

    def erred(self, batch: pa.RecordBatch) -> list[bool | None] | None:
        """The batch's ERRED marks when the rows are `marked` (none there: no row is)."""
        if not self.marked:
            return None
        if ERRED not in batch.schema.names:
            return [None] * batch.num_rows
        marks: list[bool | None] = batch.column(ERRED).to_pylist()
        return marks


def with_exact_reasons(rejected: DataFrame, plan: Plan) -> DataFrame:
    """Staged rows already filtered to the rejected ones, their `_contract` reasons made exact: the
    twin's error text for the rows marked in ERRED, given by an Arrow UDF those rows alone reach
    (the others reach it as nulls). No Python runs when no native rule can mark a row."""
    from pyspark.sql import functions as F

    if not runner.marks_errors(plan):
        return rejected
    reasons = NativeReasons(plan, marked=True)
    erred = F.coalesce(F.col(ERRED), F.lit(False))
    given = F.when(erred, F.struct(F.col(STATUS).alias(STATUS), F.col(RECORD).alias(RECORD)))
    udf = _ExactReasons(reasons)

    def exact_reasons(arrays: Iterator[pa.Array]) -> Iterator[pa.Array]:
        return udf(arrays)

    exact = F.arrow_udf(exact_reasons, "string").asNondeterministic()(given)
    status = F.col(STATUS)
    exact_status = status.withField("reason", F.coalesce(exact, status["reason"]))
    return rejected.withColumn(STATUS, F.when(erred, exact_status).otherwise(status))


@dataclass(frozen=True)
class _ExactReasons:
    """The Arrow UDF of `with_exact_reasons`: per row given (a struct of its status and record), the
    twin's reason (null where the twin gives none, or for a row not given)."""

    reasons: NativeReasons

    def __call__(self, arrays: Iterator[pa.Array]) -> Iterator[pa.Array]:
        for given in arrays:
            rows = pa.RecordBatch.from_struct_array(given)
            statuses = rows.column(STATUS).to_pylist()
            refined = self.reasons.refine(statuses, rows.column(RECORD), given.is_valid().to_pylist())
            yield pa.array(
                [
                    None if after is None or after is before else after["reason"]
                    for before, after in zip(statuses, refined, strict=True)
                ],
                type=pa.string(),
            )
