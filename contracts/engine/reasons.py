"""Exact failure reasons for rows a native rule rejected, from the rule's Python twin.

A native Spark expression knows that a rule failed, not which evaluation error made it fail; the
reference puts that error's text in the DLQ `__rule.exception` header (docs/semantics.md §2.2, §7).
Rejected rows are few, so they alone are evaluated again by the twin to recover it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine import python_pass
from contracts.engine.frame import RECORD, STATUS
from contracts.planning.plan import Plan, PlannedRule
from executors.protocol import NativeStep

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class NativeReasons:
    """The native rules of a plan whose generic failure reason a twin can make exact; picklable."""

    plan: Plan

    def twins(self) -> dict[tuple[str, str], PlannedRule]:
        """Rules with a Python twin, by (rule name, mode) as the `_contract` status names them."""
        return {
            (rule.rule.name, rule.ctx.mode.value): rule
            for rule in self.plan.rules
            if isinstance(rule.step, NativeStep) and rule.step.batch is not None
        }

    def refine(self, statuses: list[dict[str, Any] | None], records: pa.Array) -> list[dict[str, Any] | None]:
        """The statuses with each native rule's generic reason replaced by the twin's error text.

        `records` is the record struct column as the failing rule saw it (a rejected row goes no
        further). A twin that passes, or fails without a reason, leaves the status as it was.
        """
        twins = self.twins()
        pending: dict[tuple[str, str], list[int]] = {}
        for i, status in enumerate(statuses):
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

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """mapInArrow over rejected rows: the same rows with exact reasons in `_contract`."""

        for batch in batches:
            index = batch.schema.get_field_index(STATUS)
            statuses = self.refine(batch.column(STATUS).to_pylist(), batch.column(RECORD))
            column = pa.array(statuses, type=batch.schema.field(index).type)
            yield batch.set_column(index, batch.schema.field(index), column)


def with_exact_reasons(rejected: DataFrame, plan: Plan) -> DataFrame:
    """Staged rows already filtered to the rejected ones, their `_contract` reasons made exact."""
    if not NativeReasons(plan).twins():
        return rejected
    return rejected.mapInArrow(NativeReasons(plan), rejected.schema)
