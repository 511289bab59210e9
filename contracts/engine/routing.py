"""Routing rejected rows to their dead-letter topics in the same job that yields the valid rows.

The rows to route (rejected ones, and those a copy action fires on) reach Python in one of two
ways. `route_beside`: a branch of their own, unioned with the valid rows, which Spark filters
alone, so a valid row never reaches Python (when the input reads twice safely, the caller says).
`route_rejected`: one Arrow UDF in the scan that yields the valid rows, given the parts of their
DLQ records in a struct; every other row reaches it as a null, so a valid row never crosses to
Python whole. Each input partition opens one sink writer named by the run id (chosen on the
driver) and the partitions, writes its records a batch at a time, and commits when its input is
exhausted — so a retried or re-executed task rewrites the same DLQ output instead of duplicating
it, and an undelivered record fails the task (docs/semantics.md §7.5, §9.4). A Python pass that
sets statuses itself (the decode pass) chains the same Router over its own batches.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from actions.dlq.record import RecordValues, Redact, as_bytes, incoming_headers, rule_headers
from actions.dlq.sink import DlqBatch, DlqSink, DlqWriter, writer_id
from contracts.engine.columns import (
    ERRED,
    OUTCOME_PREFIX,
    PARTITION,
    RECORD,
    RESERVED_PREFIX,
    STATUS,
    quote_name,
    status_values,
)
from contracts.engine.reasons import NativeReasons
from contracts.engine.runner import marks_errors
from contracts.formats.arrow_text import text_values
from contracts.formats.protocol import SchemaFormat
from contracts.planning.plan import CopyAction, Plan

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


ROUTED = RESERVED_PREFIX + "dlq_routed"
"""True on a row `route_rejected` sent to its DLQ topic: it leaves the output."""
STREAMING_BATCH_ID = "streaming.sql.batchId"
"""The local property Spark's micro-batch execution sets on every task of a micro-batch."""


@dataclass(frozen=True)
class DlqLayout:
    """Where a DLQ record's parts come from in the staged rows (docs/semantics.md §7).

    `value_column` names a column of original bytes (READ side); when None the value is the
    record as JSON, read from `record_column` with the parsed `schema` by its format (WRITE side),
    after `redact` (the fields ENCRYPT rules tag, redacted) when given.
    """

    record_column: str
    schema: Any
    schema_format: SchemaFormat
    value_column: str | None = None
    key_column: str | None = None
    headers_column: str | None = None
    topic_column: str | None = None
    redact: Redact | None = None


def route_rejected(
    staged: DataFrame,
    sink: DlqSink,
    run_id: str,
    layout: DlqLayout,
    plan: Plan,
    migration_reasons: tuple[tuple[NativeReasons, str], ...] = (),
) -> DataFrame:
    """Send every row with a `_contract` status to its DLQ topic and keep only the valid rows.

    `plan`'s native rules get their exact failure reasons (contracts.engine.reasons), and so do native
    migration rules: `migration_reasons` pairs each with the column of the record it saw."""
    from pyspark.sql import functions as F

    router = _router(sink, run_id, layout, plan, migration_reasons)
    partitioned = with_partition(staged)
    names = router.given_columns(partitioned.columns)
    given = F.when(_fires(plan), F.struct(*[quote_name(name) for name in names]))
    routed = _routing_udf(router)(F.col(PARTITION), given)
    kept = partitioned.withColumn(ROUTED, routed).filter(~F.coalesce(F.col(ROUTED), F.lit(False)))
    return kept.drop(ROUTED, PARTITION)


def route_beside(staged: DataFrame, sink: DlqSink, run_id: str, layout: DlqLayout, plan: Plan) -> DataFrame:
    """`route_rejected`'s result as the two branches of one query: the valid rows, which Spark alone
    filters, and the rows to route, which alone reach Python, whose pass delivers their records and
    yields no row. Each branch reads `staged`: only for one that reads twice safely
    (contracts.engine.read_twice) and holds no Python pass of the plan's own."""
    from pyspark.sql import functions as F

    router = _router(sink, run_id, layout, plan, ())
    partitioned = with_partition(staged)
    names = router.given_columns(partitioned.columns)
    routed = partitioned.filter(_fires(plan)).select(PARTITION, *[quote_name(name) for name in names])
    delivered = routed.mapInArrow(router.deliver, staged.schema)
    return staged.filter(F.col(STATUS).isNull()).union(delivered)


def _router(
    sink: DlqSink,
    run_id: str,
    layout: DlqLayout,
    plan: Plan,
    migration_reasons: tuple[tuple[NativeReasons, str], ...],
) -> Router:
    reasons = ((NativeReasons(plan, marked=marks_errors(plan)), RECORD), *migration_reasons)
    return Router(sink, run_id, layout, reasons, copies=plan.copies)


def _fires(plan: Plan) -> Column:
    """True on a row to route: rejected, or given the outcome a copy action fires on."""
    from pyspark.sql import functions as F

    fires = F.col(STATUS).isNotNull()
    for copy in plan.copies:
        fired = F.col(OUTCOME_PREFIX + str(copy.rule.index)) == F.lit(copy.passed)
        fires = fires | F.coalesce(fired, F.lit(False))
    return fires


def _routing_udf(router: Router) -> Any:
    """The Arrow UDF of `route_rejected` (nondeterministic to the optimizer, so the filter on its
    result stays above it): per row, whether it left for its DLQ topic."""
    from pyspark.sql import functions as F

    def route(batches: Iterator[tuple[pa.Array, pa.Array]]) -> Iterator[pa.Array]:
        return router.route_given(batches)

    return F.arrow_udf(route, "boolean").asNondeterministic()


def with_partition(df: DataFrame) -> DataFrame:
    """`df` with the PARTITION column a Router names its writer by: the partition each row comes
    from, computed below the pass, so it is the input partition even when a `coalesce` after the
    contract makes one task compute several."""
    from pyspark.sql import functions as F

    return df.withColumn(PARTITION, F.spark_partition_id())


@dataclass(frozen=True)
class Router:
    """The picklable per-partition function routing rows to their DLQ topics: the Arrow UDF of
    route_rejected (`route_given`), or chained by a Python pass that sets statuses itself (the
    decode pass) over its own output batches (`__call__`, which takes PARTITION out of them).
    Each input partition gets its own DLQ writer, opened with its first row."""

    sink: DlqSink
    run_id: str
    layout: DlqLayout
    reasons: tuple[tuple[NativeReasons, str], ...] = ()
    stage: str | None = None
    """Names this pass in the writer ids when one job routes rows in two passes (decode, then rules)."""
    copies: tuple[CopyAction, ...] = ()
    """Copy actions: each row its rule gave the firing outcome (read from the rule's outcome column)
    is also sent to the action's topic, whatever happens to the row after."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Over a Python pass's batches (with PARTITION): its records written, its valid rows yielded."""
        # The writer's own context commits on success or early close and aborts on an error.
        with contextlib.ExitStack() as opened:
            writer: DlqWriter | None = None
            for partitioned in batches:
                if writer is None and partitioned.num_rows:
                    writer = opened.enter_context(self._open(partitioned.column(PARTITION)[0].as_py()))
                batch = partitioned.drop_columns([PARTITION])
                if writer is not None:
                    self._deliver(writer, batch)
                rejected = pc.is_valid(batch.column(STATUS))
                if pc.any(rejected).as_py():
                    batch = batch.filter(pc.invert(rejected))
                yield batch

    def deliver(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Over the rows to route alone (with PARTITION): their records written, no row yielded
        (`route_beside`'s pass, whose valid rows come from the other branch)."""
        for _ in self(batches):
            pass
        yield from ()

    def route_given(self, batches: Iterator[tuple[pa.Array, pa.Array]]) -> Iterator[pa.Array]:
        """Over `route_rejected`'s UDF input (each row's input partition, and the struct of the
        columns `given_columns` names, null for a row with nothing to send): its records written,
        and per row whether it left (it had a status)."""
        with contextlib.ExitStack() as opened:
            writer: DlqWriter | None = None
            for partitions, given in batches:
                if writer is None and len(partitions):
                    writer = opened.enter_context(self._open(partitions[0].as_py()))
                chosen = given.is_valid()
                if given.null_count == len(given):
                    yield pa.nulls(len(given), pa.bool_())
                    continue
                rows = pa.RecordBatch.from_struct_array(given).filter(chosen)
                if writer is not None:
                    self._deliver(writer, rows)
                left = pc.is_valid(rows.column(STATUS))
                positions = pc.subtract(pc.cumulative_sum(chosen.cast(pa.int64())), 1)
                yield left.take(pc.if_else(chosen, positions, pa.scalar(None, pa.int64())))

    def given_columns(self, columns: list[str]) -> list[str]:
        """The columns of `columns` the records of a row are made of: its status, key, headers,
        source topic and value (or record), the records the twins read, its ERRED mark and the
        outcomes the copy actions fire on."""
        layout = self.layout
        wanted = [
            STATUS,
            layout.key_column,
            layout.headers_column,
            layout.topic_column,
            layout.value_column if layout.value_column is not None else layout.record_column,
            *(column for _, column in self.reasons),
            ERRED,
            *(OUTCOME_PREFIX + str(copy.rule.index) for copy in self.copies),
        ]
        return list(dict.fromkeys(name for name in wanted if name is not None and name in columns))

    def _open(self, input_partition: int) -> DlqWriter:
        return self.sink.open(_writer_id(self.run_id, self.stage, input_partition))

    def _deliver(self, writer: DlqWriter, batch: pa.RecordBatch) -> None:
        """Write the copies the batch's rows fire and the DLQ records of its rejected rows."""
        for copies in self._copies(batch):
            writer.write_batch(copies)
        rejected = pc.is_valid(batch.column(STATUS))
        if pc.any(rejected).as_py():
            writer.write_batch(self._dlq_records(batch.filter(rejected)))

    def _copies(self, batch: pa.RecordBatch) -> Iterator[DlqBatch]:
        """The copies the copy actions send for this batch's rows, rule by rule."""
        for copy in self.copies:
            outcome = batch.column(OUTCOME_PREFIX + str(copy.rule.index))
            fired = pc.fill_null(pc.equal(outcome, pa.scalar(copy.passed)), False)
            if not pc.any(fired).as_py():
                continue
            rows = batch.filter(fired)
            ctx = copy.rule.ctx
            status = {
                "rule": copy.rule.rule.name,
                "mode": ctx.mode.value,
                "subject": ctx.subject,
                "topic": copy.action.topic,
                "reason": copy.reason(),
            }
            yield self._records(rows, [status] * rows.num_rows)

    def _dlq_records(self, rejected: pa.RecordBatch) -> DlqBatch:
        statuses = status_values(rejected.column(STATUS))
        for reasons, column in self.reasons:
            statuses = reasons.refine(statuses, rejected.column(column), reasons.erred(rejected))
        return self._records(rejected, statuses)

    def _records(self, rejected: pa.RecordBatch, statuses: list[dict[str, Any]]) -> DlqBatch:
        """A record per row, to the topic its status names, with the rule headers."""
        layout = self.layout
        incoming = _column(rejected, layout.headers_column)
        sources = _column(rejected, layout.topic_column)
        # The rows a rule rejects with one status from one topic share their rule headers, made
        # once per distinct (status, topic); statuses equal in value are one dict (status_values).
        # Without a source topic column the status alone tells them apart.
        status_ids = list(map(id, statuses))
        from_one_source = sources.count(None) == len(sources)
        groups: list[Any] = status_ids if from_one_source else list(zip(status_ids, sources, strict=True))
        row_of = dict(zip(groups, range(len(groups)), strict=True))
        shared = {group: tuple(rule_headers(statuses[i], sources[i])) for group, i in row_of.items()}
        headers = list(map(shared.__getitem__, groups))
        if any(incoming):
            headers = [
                (*incoming_headers(arrived), *rule) if arrived else rule
                for arrived, rule in zip(incoming, headers, strict=True)
            ]
        return DlqBatch(
            topics=[status["topic"] for status in statuses],
            keys=_key_bytes(rejected, layout.key_column),
            values=self._values(rejected),
            headers=headers,
            timestamp_ms=int(time.time() * 1000),
        )

    def _values(self, rejected: pa.RecordBatch) -> list[bytes | None]:
        layout = self.layout
        if layout.value_column is not None:
            return [as_bytes(value) for value in rejected.column(layout.value_column).to_pylist()]
        values = RecordValues(layout.schema_format, layout.schema, layout.redact)
        return values(rejected.column(layout.record_column))


def _writer_id(run_id: str, stage: str | None, input_partition: int) -> str:
    """The same for every attempt of the task computing an input partition: run id, pass, the
    task's partition and the input partition, and in a streaming query the micro-batch id too
    (each micro-batch reuses the ids). Both partitions, as either alone can repeat: one task may
    compute several input partitions (`coalesce`), and Spark computes `spark_partition_id()` on the
    driver, as 0, for a projection of driver-local rows (a LocalRelation) that tasks then split."""
    from pyspark import TaskContext

    task = TaskContext.get()
    partition = task.partitionId() if task is not None else 0
    batch_id = task.getLocalProperty(STREAMING_BATCH_ID) if task is not None else None
    return writer_id(run_id, partition, batch_id=batch_id, stage=stage, input_partition=input_partition)


def _key_bytes(batch: pa.RecordBatch, name: str | None) -> list[bytes | None]:
    """The key column's values as bytes (a string key as its UTF-8, any other value as its text)."""
    keys = _column(batch, name)
    if name is None or name not in batch.schema.names:
        return keys
    kind = batch.column(name).type
    if pa.types.is_binary(kind) or pa.types.is_string(kind):
        return keys
    return [as_bytes(key) for key in keys]


def _column(batch: pa.RecordBatch, name: str | None) -> list[Any]:
    """A key, headers or topic column's values; a string column as its bytes, which Spark does not
    require to be UTF-8 and a DLQ record carries as they are anyway (a header key, as text)."""
    if name is None or name not in batch.schema.names:
        return [None] * batch.num_rows
    column = batch.column(name)
    return column.cast(pa.binary()).to_pylist() if pa.types.is_string(column.type) else text_values(column)
