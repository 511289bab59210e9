"""Per-rule counts of one call, reachable from that call's own result.

Each `apply`, `write`, `read`, `serialize` or `deserialize` call gathers its counts under a name
of its own and ties them to the DataFrame it returns: `RuleResult.metrics`, or `metrics_of(df)`
for the DataFrame-returning calls (a weak-key map, so the counts live as long as that DataFrame
and no longer; nothing is kept on the contract). Two calls never share counts, and the batch a
`foreach_batch` writer receives answers `metrics_of` with that micro-batch's counts.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.engine.counts import Counting, CountOnDemand, Observed, rule_counts
from contracts.errors import ContractError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from contracts.planning.plan import Plan

DEFAULT_METRICS_TIMEOUT_S = 2.0
"""How long `RuleMetrics.get` waits for the first action on an observed batch result to finish."""

COUNTS_COLUMNS = ("rule", "mode", "passed", "failed", "by_action")
COUNTS_SCHEMA = "rule string, mode string, passed long, failed long, by_action map<string, long>"
"""The columns of `RuleMetrics.to_df` and `to_pandas`: a row per rule."""


@dataclass(frozen=True)
class RuleCounts:
    """How one rule went: rows it passed and failed, and rows per action that ran."""

    rule: str
    mode: str
    passed: int
    failed: int
    by_action: dict[str, int]


class RuleMetrics:
    """Per-rule outcome counts of one call.

    A batch call whose rules all run as Spark expressions counts on demand: the first `get()` runs
    one aggregate job over the same input and rules, so the call's own query stays as fast as the
    rules alone (its input must read the same rows again, as Spark's sources, caches and
    checkpoints do; a non-deterministic input wants `collect_metrics="observe"`). Other batch calls
    gather them with Spark's `observe()` during the first action on the result; asked before one,
    those whose rules read the call's input and have no side effect (rules run in Python: `apply`,
    `write`, `read` without migration, `serialize`) count on demand too, as native rules do.
    On a streaming DataFrame each micro-batch reports its own counts: they appear in the query's
    progress under `observedMetrics[metrics.name]`, and `get(query.lastProgress)` reads them.
    """

    def __init__(self, plan: Plan, name: str, source: Observed | CountOnDemand | None) -> None:
        self._plan = plan
        self._name = name
        self._source = source
        self._lock = threading.Lock()
        self._waiting: Future[Mapping[str, Any]] | None = None

    @property
    def name(self) -> str:
        """The name the counts are observed under, generated for this call."""
        return self._name

    def get(
        self, progress: Any = None, *, timeout: float = DEFAULT_METRICS_TIMEOUT_S
    ) -> dict[str, RuleCounts]:
        """Counts per rule name.

        Counted on demand: computed by the first call (one Spark job), then kept.
        Observed batch: the counts of the first Spark action on the result. When no action has
        finished within `timeout` seconds (raise it to wait for one running in another thread) they
        are counted on demand where the rules may run again; otherwise (a decode or migration pass,
        a custom action's callback, `collect_metrics="observe"`) this is a ContractError, where
        Spark's own `Observation.get` would wait forever.
        Streaming: the counts of the micro-batch whose `progress` (e.g. `query.lastProgress`) is given.
        """
        if not self._plan.rules:
            return {}
        observed = self._observed(progress, timeout)
        counts: dict[str, RuleCounts] = {}
        for planned in self._plan.rules:
            passed, failed = rule_counts(observed, planned)
            by_action: dict[str, int] = {}
            for action, n in ((planned.on_success.name, passed), (planned.on_failure.name, failed)):
                by_action[action] = by_action.get(action, 0) + n
            counts[planned.rule.name] = RuleCounts(
                planned.rule.name, planned.ctx.mode.value, passed, failed, by_action
            )
        return counts

    def to_df(
        self,
        spark: SparkSession | None = None,
        progress: Any = None,
        *,
        timeout: float = DEFAULT_METRICS_TIMEOUT_S,
    ) -> DataFrame:
        """The counts as a small DataFrame, a row per rule in running order: `rule`, `mode`,
        `passed`, `failed` and `by_action` (a map from action name to rows); `progress` and
        `timeout` as in `get`. Made on `spark` (default: the active session) from driver-side values."""
        from pyspark.sql import SparkSession

        session = spark or SparkSession.active()
        rows = [
            (c.rule, c.mode, c.passed, c.failed, c.by_action)
            for c in self.get(progress, timeout=timeout).values()
        ]
        return session.createDataFrame(rows, COUNTS_SCHEMA)

    def to_pandas(self, progress: Any = None, *, timeout: float = DEFAULT_METRICS_TIMEOUT_S) -> Any:
        """The counts as a pandas DataFrame with the columns of `to_df` (needs pandas installed)."""
        try:
            import pandas as pd
        except ImportError as missing:
            raise ContractError(
                "RuleMetrics.to_pandas needs pandas, which is not installed: pip install pandas",
                subject=self._plan.subject,
            ) from missing
        return pd.DataFrame(self._rows(progress, timeout), columns=list(COUNTS_COLUMNS))

    def _rows(self, progress: Any, timeout: float) -> list[tuple[str, str, int, int, dict[str, int]]]:
        """A tuple per rule, in the order of COUNTS_COLUMNS."""
        counts = self.get(progress, timeout=timeout).values()
        return [(c.rule, c.mode, c.passed, c.failed, c.by_action) for c in counts]

    def summary(self, progress: Any = None, *, timeout: float = DEFAULT_METRICS_TIMEOUT_S) -> str:
        """The counts as a text table (rule, mode, passed, failed, actions that ran), as the CLI
        prints them."""
        return counts_table(self.get(progress, timeout=timeout))

    def show(self, progress: Any = None, *, timeout: float = DEFAULT_METRICS_TIMEOUT_S) -> None:
        """Print `summary()`, as `DataFrame.show()` prints rows."""
        print(self.summary(progress, timeout=timeout), end="")

    def _observed(self, progress: Any, timeout: float) -> Mapping[str, Any]:
        if isinstance(self._source, CountOnDemand):
            return self._source.counts()
        if self._source is not None:
            return self._first_action(self._source, timeout)
        if progress is None:
            raise ContractError(
                "these metrics come from a streaming query: pass its progress, e.g."
                " metrics.get(query.lastProgress)",
                subject=self._plan.subject,
            )
        metrics = progress["observedMetrics"] if isinstance(progress, Mapping) else progress.observedMetrics
        row = (metrics or {}).get(self._name)
        if row is None:
            return {}
        values = row.asDict() if hasattr(row, "asDict") else dict(row)
        if set(values) == {"values", "schema"}:
            # Spark Connect's progress keeps each observed row as its values and JSON schema.
            names = [field["name"] for field in values["schema"]["fields"]]
            return dict(zip(names, values["values"], strict=True))
        return values

    def _first_action(self, observed: Observed, timeout: float) -> Mapping[str, Any]:
        """The counts of the first action on the result, waiting at most `timeout` seconds for it;
        else, where the rules may run again, counted on demand (and kept). A classic session's
        `Observation.get` blocks until an action finishes, so it waits in a background thread,
        one per RuleMetrics however often it is asked; Spark Connect's answers an empty dict."""
        with self._lock:
            if self._waiting is None:
                self._waiting = _in_background(lambda: observed.observation.get)
            waiting = self._waiting
        wait([waiting], timeout=timeout)
        lost = waiting.done() and waiting.exception() is not None
        answer = waiting.result() if waiting.done() and not lost else {}
        if answer and not (observed.fallback is not None and observed.fallback.counted):
            return answer
        if observed.fallback is not None:
            return observed.fallback.counts()
        with self._lock:
            if self._waiting is waiting and waiting.done() and not lost:
                self._waiting = None  # Connect's empty answer: ask again next time
        if lost:
            raise ContractError(
                "the first Spark action on the result lost the per-rule counts (a grouping of no"
                " rows: Spark's adaptive execution dropped the stage that observed them); run a"
                " count, collect or write on the result itself first",
                subject=self._plan.subject,
                version=self._plan.version,
            ) from waiting.exception()
        raise ContractError(
            f"no Spark action on the result has finished within {timeout:g} s, and the per-rule"
            " counts are gathered by the first one: run an action (count, collect, a write) on the"
            " result first, or give get() a longer timeout to wait for one still running",
            subject=self._plan.subject,
            version=self._plan.version,
        )

    def __repr__(self) -> str:
        rules = [r.rule.name for r in self._plan.rules]
        return f"RuleMetrics({self._plan.mode.value}, {self._name!r}, rules={rules})"


class SummedMetrics(RuleMetrics):
    """The counts of calls over parts of one input (a replay's parts, each with its own plan),
    summed per rule in the order the parts first ran it: `get()` asks each part."""

    def __init__(self, parts: Sequence[RuleMetrics]) -> None:
        super().__init__(parts[0]._plan, parts[0].name, None)
        self._parts = tuple(parts)

    def get(
        self, progress: Any = None, *, timeout: float = DEFAULT_METRICS_TIMEOUT_S
    ) -> dict[str, RuleCounts]:
        """Per rule name, the sum of the parts' counts (`progress` and `timeout` as each part's)."""
        counts: dict[str, RuleCounts] = {}
        for part in self._parts:
            for name, more in part.get(progress, timeout=timeout).items():
                seen = counts.get(name)
                if seen is None:
                    counts[name] = RuleCounts(name, more.mode, more.passed, more.failed, dict(more.by_action))
                    continue
                by_action = dict(seen.by_action)
                for action, n in more.by_action.items():
                    by_action[action] = by_action.get(action, 0) + n
                counts[name] = RuleCounts(
                    name, seen.mode, seen.passed + more.passed, seen.failed + more.failed, by_action
                )
        return counts


def counts_table(counts: Mapping[str, RuleCounts]) -> str:
    """Per rule, in running order: mode, rows passed, rows failed, rows per action that ran."""
    header = ("rule", "mode", "passed", "failed", "actions")
    rows = [
        (
            c.rule,
            c.mode,
            str(c.passed),
            str(c.failed),
            " ".join(f"{action}={n}" for action, n in c.by_action.items() if n) or "-",
        )
        for c in counts.values()
    ]
    if not rows:
        return "no rules ran\n"
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    numeric = {2, 3}

    def render(row: tuple[str, ...]) -> str:
        cells = (
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        return "  ".join(cells).rstrip()

    rule_line = "  ".join("-" * w for w in widths)
    return "\n".join([render(header), rule_line, *(render(row) for row in rows)]) + "\n"


_COUNTS: weakref.WeakKeyDictionary[DataFrame, RuleMetrics] = weakref.WeakKeyDictionary()
_KEY_COUNTS: weakref.WeakKeyDictionary[DataFrame, RuleMetrics] = weakref.WeakKeyDictionary()
_COUNTS_LOCK = threading.Lock()


def metrics_of(df: DataFrame, *, key: bool = False) -> RuleMetrics | None:
    """The per-rule counts of the call that returned `df` (`write`, `read`, `serialize`,
    `deserialize`, or `apply`'s valid and rejected rows); None for any other DataFrame, and when
    the contract's `collect_metrics` is off or its plan has no rules. With `key`, those of the key
    contract of a `deserialize`/`serialize` call given one (`key=`).

    Only that very DataFrame object answers: one derived from it (`df.select(...)`) is another
    DataFrame, though its first action still gathers the counts `metrics_of(df)` reads.
    """
    with _COUNTS_LOCK:
        return (_KEY_COUNTS if key else _COUNTS).get(df)


def with_metrics(
    df: DataFrame, metrics: RuleMetrics | None, key_metrics: RuleMetrics | None = None
) -> DataFrame:
    """`df`, from now on answering `metrics_of` with `metrics` (and `key=True` with `key_metrics`)."""
    with _COUNTS_LOCK:
        if metrics is not None:
            _COUNTS[df] = metrics
        if key_metrics is not None:
            _KEY_COUNTS[df] = key_metrics
    return df


def metrics_for(counting: Counting | None) -> RuleMetrics | None:
    """The `RuleMetrics` of a call whose counts the engine gathers as `counting` (None: metrics off)."""
    return None if counting is None else RuleMetrics(counting.plan, counting.name, counting.source)


def _in_background(call: Callable[[], Mapping[str, Any]]) -> Future[Mapping[str, Any]]:
    """`call()` run in a daemon thread (it may never return), its answer in the future."""
    future: Future[Mapping[str, Any]] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as error:  # handed to whoever waits on the future
            future.set_exception(error)

    threading.Thread(target=run, name="contract-metrics", daemon=True).start()
    return future
