"""How one call's per-rule counts are gathered: by Spark's `observe()` during the first action on
the result, or on demand by an aggregate of their own (docs/semantics.md §2.6).

Spark's CollectMetrics has no generated code: every row of an observed query passes through it
one at a time, which halves the speed of a cheap native rule wherever it sits. A batch call whose
rules all run as Spark expressions therefore counts on demand instead: its query stays one
generated stage, and the counts are one more job (the same rules, aggregated) when first asked.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from contracts.engine.columns import OUTCOME_PREFIX
from contracts.planning.plan import Plan, PlannedRule

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation


class CountOnDemand:
    """The counts of one call, computed when first asked from the DataFrame the rules produced (its
    outcome columns), then kept. Only for rules that run as Spark expressions: computing them again
    costs time and nothing else (no Python pass, no DLQ delivery, no action callback runs twice)."""

    def __init__(self, rules: Sequence[PlannedRule]) -> None:
        self._rules = tuple(rules)
        self._staged: DataFrame | None = None
        self._counts: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def attach(self, staged: DataFrame) -> None:
        """Count on `staged`, which holds the outcome column of every rule."""
        self._staged = staged

    @property
    def counted(self) -> bool:
        """Whether `counts()` has computed them (and keeps them)."""
        return self._counts is not None

    def counts(self) -> Mapping[str, Any]:
        """The counts `metric_columns` name, computed by one aggregate job the first time."""
        with self._lock:
            if self._counts is None:
                if self._staged is None:
                    raise RuntimeError("CountOnDemand.counts() before the rules' DataFrame was attached")
                (row,) = self._staged.agg(*metric_columns(self._rules)).collect()
                self._counts = row.asDict()
            return self._counts


@dataclass(frozen=True)
class Observed:
    """Counts observed by the first action on the result; `fallback`, where computing the rules
    again has no effect but time, counts them on demand when asked before an action has given them
    (or after one lost them: Spark's adaptive execution drops a finished stage, and the counts
    observed in it, below a grouping of no rows)."""

    observation: Observation
    fallback: CountOnDemand | None = None


Gatherer: TypeAlias = "Observed | str | CountOnDemand"
"""What gathers a call's counts: an observation (batch, first action), the name a streaming query's
progress reports them under, or a CountOnDemand."""

CollectMetrics: TypeAlias = "bool | Literal['observe']"
"""A contract's `collect_metrics`: True counts each call the cheapest exact way, "observe" always
during the first action, False not at all."""


@dataclass(frozen=True)
class Counting:
    """How one call's counts of `plan` are gathered: the name they go by, what answers them (none
    on a streaming DataFrame or for a plan without rules) and what the passes feed."""

    plan: Plan
    name: str
    source: CountOnDemand | Observed | None
    gatherer: Gatherer | None


def counting(plan: Plan, df: DataFrame, how: CollectMetrics, runs_on_input: bool) -> Counting:
    """Counts for one call of `plan` on `df`, under a name generated for it.

    On a streaming DataFrame (which Observation does not support): the name its query's progress
    reports them under. On a batch one: a CountOnDemand when `how` allows it, every rule runs as
    Spark expressions and the rules read `df` itself (`runs_on_input`: no decode or migration pass
    before them), else an Observation. Nothing when the plan has no rules."""
    from pyspark.sql import Observation

    name = f"contract_{plan.plan_id}_{uuid.uuid4().hex[:8]}"
    if not plan.rules:
        return Counting(plan, name, None, None)
    if df.isStreaming:
        return Counting(plan, name, None, name)
    if how is True and runs_on_input and plan.all_native:
        on_demand = CountOnDemand(plan.rules)
        return Counting(plan, name, on_demand, on_demand)
    # Rules run in Python may run again to count on demand when no action has counted them: they
    # are pure, unless a custom action calls back or a copy is routed with the counts.
    pure = not plan.copies and not any(rule.has_callbacks for rule in plan.rules)
    fallback = CountOnDemand(plan.rules) if how is True and runs_on_input and pure else None
    observed = Observed(Observation(name), fallback)
    return Counting(plan, name, observed, observed)


def gather(staged: DataFrame, rules: Sequence[PlannedRule], gatherer: Gatherer) -> DataFrame:
    """`staged`, holding the rules' outcome columns, with their counts gathered by `gatherer`."""
    if isinstance(gatherer, CountOnDemand):
        gatherer.attach(staged)
        return staged
    if isinstance(gatherer, Observed):
        if gatherer.fallback is not None:
            gatherer.fallback.attach(staged)
        return staged.observe(gatherer.observation, *metric_columns(rules))
    return staged.observe(gatherer, *metric_columns(rules))


def metric_columns(rules: Sequence[PlannedRule]) -> list[Column]:
    """Per rule: rows it passed and rows it evaluated (rows already rejected are not, so are not
    counted); failed is their difference. Two counts of the outcome column alone, the least work
    per row for CollectMetrics, which runs them without generated code."""
    from pyspark.sql import functions as F

    columns = []
    for rule in rules:
        outcome = F.col(OUTCOME_PREFIX + str(rule.index))
        columns.append(F.count_if(outcome).alias(f"{rule.index}.passed"))
        columns.append(F.count(outcome).alias(f"{rule.index}.evaluated"))
    return columns


def rule_counts(gathered: Mapping[str, Any], rule: PlannedRule) -> tuple[int, int]:
    """(passed, failed) of `rule`, read from the counts `metric_columns` gathered."""
    passed = int(gathered.get(f"{rule.index}.passed", 0) or 0)
    evaluated = int(gathered.get(f"{rule.index}.evaluated", 0) or 0)
    return passed, evaluated - passed
