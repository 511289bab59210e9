"""The DataFrame API: a contract from the registry, enforced on Spark DataFrames, lazily."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actions._protocol import Action, ActionContext, ActionPlan
from contracts import loader
from contracts.errors import ContractError
from contracts.model import RuleMode
from contracts.planner import ORIGINAL, RECORD, STATUS, Plan, build_plan
from contracts.plugins import ACTION_GROUP, EXECUTOR_GROUP, PluginRegistry, load_group, with_overrides
from contracts.registry import Registry
from executors import as_executor

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation
    from pyspark.sql.types import StructType

    from actions.sink import DlqSink

DEFAULT_DLQ_DIR = "dlq-topics"


@dataclass(frozen=True)
class RuleCounts:
    """How one rule went: rows it passed and failed, and rows per action that ran."""

    rule: str
    mode: str
    passed: int
    failed: int
    by_action: dict[str, int]


class RuleMetrics:
    """Per-rule outcome counts, gathered with Spark's `observe()` by the first action on the result."""

    def __init__(self, plan: Plan, observation: Observation | None) -> None:
        self._plan = plan
        self._observation = observation

    def get(self) -> dict[str, RuleCounts]:
        """Counts per rule name; waits for the first Spark action on `valid`/`rejected` to finish."""
        observed = self._observation.get if self._observation is not None else {}
        counts: dict[str, RuleCounts] = {}
        for planned in self._plan.rules:
            passed = int(observed.get(f"{planned.index}.passed", 0) or 0)
            failed = int(observed.get(f"{planned.index}.failed", 0) or 0)
            by_action: dict[str, int] = {}
            for action, n in ((planned.on_success.name, passed), (planned.on_failure.name, failed)):
                by_action[action] = by_action.get(action, 0) + n
            counts[planned.rule.name] = RuleCounts(
                planned.rule.name, planned.ctx.mode.value, passed, failed, by_action
            )
        return counts

    def __repr__(self) -> str:
        return f"RuleMetrics({self._plan.mode.value}, rules={[r.rule.name for r in self._plan.rules]})"


@dataclass(frozen=True)
class RuleResult:
    """The lazy outcome of applying a contract: valid rows, rejected rows (+ `_contract`), metrics."""

    valid: DataFrame
    rejected: DataFrame
    metrics: RuleMetrics


class DataContract:
    """A subject's data contract, resolved and compiled once, applied to DataFrames.

    The target version is `version`, else the latest whose metadata matches
    `use_latest_with_metadata`, else the latest. `executors` adds or replaces rule executors (a
    sequence registers by type, a mapping by rule name); `actions` adds or replaces actions by
    name; `dlq_sink` receives rejected rows (default: a LocalTopicSink under ./dlq-topics).
    """

    def __init__(
        self,
        registry: Registry,
        subject: str,
        version: int | None = None,
        use_latest_with_metadata: Mapping[str, str] | None = None,
        executors: Iterable[Any] | Mapping[str, Any] | None = None,
        actions: Iterable[Action] | None = None,
        dlq_sink: DlqSink | None = None,
    ) -> None:
        self.registry = registry
        self.subject = subject
        registered = loader.resolve(registry, subject, version, use_latest_with_metadata)
        self.target = loader.load_version(registry, registered)
        self._executors = _executor_registry(executors)
        self._actions = with_overrides(load_group(ACTION_GROUP, lambda action: action.name), actions)
        self._dlq_sink = dlq_sink
        self._last_metrics: RuleMetrics | None = None
        self._plans = {mode: self._plan(mode) for mode in (RuleMode.WRITE, RuleMode.READ)}

    @property
    def spark_schema(self) -> StructType:
        """The Spark type of the target version's record."""
        return self.target.spark_type

    @property
    def version(self) -> int:
        return self.target.version

    @property
    def schema_id(self) -> int:
        return self.target.schema_id

    @property
    def dlq_sink(self) -> DlqSink:
        if self._dlq_sink is None:
            from actions.local_topic import LocalTopicSink

            self._dlq_sink = LocalTopicSink(os.path.abspath(DEFAULT_DLQ_DIR))
        return self._dlq_sink

    @property
    def metrics(self) -> RuleMetrics | None:
        """The metrics of the latest `write`/`read` DataFrame (filled by its first Spark action)."""
        return self._last_metrics

    def plan(self, mode: str | RuleMode = RuleMode.WRITE) -> Plan:
        """The compiled plan for WRITE or READ; `print(contract.plan("WRITE"))` explains it."""
        return self._plans[_mode(mode)]

    def explain(self, mode: str | RuleMode = RuleMode.WRITE) -> str:
        return self.plan(mode).explain()

    def apply(self, df: DataFrame, mode: str | RuleMode = RuleMode.WRITE) -> RuleResult:
        """Run the rules of `mode` lazily: nothing executes until an action on the result."""
        plan = self.plan(mode)
        observation = _observation(plan)
        staged = plan.stage(df, observation)
        return RuleResult(
            valid=staged.filter(_status().isNull()).select(*_valid_columns(df, plan)),
            rejected=staged.filter(_status().isNotNull()).select(*_rejected_columns(df, plan)),
            metrics=RuleMetrics(plan, observation),
        )

    def write(self, df: DataFrame) -> DataFrame:
        """WRITE rules; rejected rows go to their DLQ topics as the valid rows are computed."""
        return self._enforce(df, RuleMode.WRITE)

    def read(self, df: DataFrame) -> DataFrame:
        """READ rules (in reverse order) on an already-decoded DataFrame of the target version."""
        return self._enforce(df, RuleMode.READ)

    def _enforce(self, df: DataFrame, mode: RuleMode) -> DataFrame:
        from contracts._routing import DlqLayout, route_rejected

        plan = self.plan(mode)
        observation = _observation(plan)
        self._last_metrics = RuleMetrics(plan, observation)
        staged = plan.stage(df, observation)
        layout = DlqLayout(
            record_column=ORIGINAL if plan.has_transforms else RECORD,
            schema=self.target.avro_schema,
            key_column=None,
            headers_column="headers" if "headers" in df.columns else None,
            topic_column="topic" if "topic" in df.columns else None,
        )
        routed = route_rejected(staged, self.dlq_sink, uuid.uuid4().hex, layout)
        return routed.select(*_valid_columns(df, plan))

    def _plan(self, mode: RuleMode) -> Plan:
        version = self.target
        rules = loader.rules_for(version, mode)
        compiled = loader.compile_rules(version, mode, rules, self._executors)
        return build_plan(
            version.subject, version.version, mode, version.spark_type, compiled, self._resolve_action
        )

    def _resolve_action(self, name: str, ctx: ActionContext) -> ActionPlan:
        action = self._actions.find(name)
        if action is None:
            raise ContractError(
                f"unknown action {name!r} (known: {', '.join(self._actions.names())})",
                subject=ctx.subject,
                version=ctx.version,
                rule=ctx.rule.name,
                position="onFailure/onSuccess",
            )
        return action.plan(ctx)

    def __repr__(self) -> str:
        return f"DataContract(subject={self.subject!r}, version={self.version}, id={self.schema_id})"


def _executor_registry(executors: Iterable[Any] | Mapping[str, Any] | None) -> PluginRegistry[Any]:
    base = load_group(EXECUTOR_GROUP, lambda executor: executor.type)
    if isinstance(executors, Mapping):
        return with_overrides(base, {name: as_executor(e) for name, e in executors.items()})
    return with_overrides(base, [as_executor(e) for e in executors] if executors else None)


def _mode(mode: str | RuleMode) -> RuleMode:
    try:
        chosen = RuleMode(mode.upper() if isinstance(mode, str) else mode)
    except ValueError:
        raise ContractError(f"mode must be WRITE or READ, not {mode!r}") from None
    if chosen not in (RuleMode.WRITE, RuleMode.READ):
        raise ContractError(f"mode must be WRITE or READ, not {chosen.value}")
    return chosen


def _observation(plan: Plan) -> Observation | None:
    from pyspark.sql import Observation

    return Observation(f"contract_{plan.plan_id}_{uuid.uuid4().hex[:8]}") if plan.rules else None


def _status() -> Column:
    from pyspark.sql import functions as F

    return F.col(STATUS)


def _valid_columns(df: DataFrame, plan: Plan) -> list[Column]:
    """The input's columns in their order, record fields taken from the (transformed) record."""
    return _columns_from(df, plan, RECORD)


def _rejected_columns(df: DataFrame, plan: Plan) -> list[Column]:
    """The input's columns as they arrived, plus `_contract`."""
    return [*_columns_from(df, plan, ORIGINAL if plan.has_transforms else RECORD), _status()]


def _columns_from(df: DataFrame, plan: Plan, struct_column: str) -> list[Column]:
    from pyspark.sql import functions as F

    record_fields = set(plan.record_type.fieldNames())
    return [
        F.col(struct_column).getField(name).alias(name) if name in record_fields else F.col(f"`{name}`")
        for name in df.columns
    ]
