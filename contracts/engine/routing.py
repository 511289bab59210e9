"""Routing rejected rows to their dead-letter topics in the same pass that yields the valid rows.

Each Spark task opens one sink writer named by the run id (chosen on the driver) and its
partition id, writes the DLQ records of its rejected rows, yields only valid rows, and commits
when its input is exhausted — so a retried or re-executed task rewrites the same DLQ output
instead of duplicating it, and an undelivered record fails the task (docs/semantics.md §9.4).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from actions.dlq.sink import DlqRecord, DlqSink, DlqWriter, writer_id
from contracts.engine.frame import OUTCOME_PREFIX, PARTITION, RECORD, STATUS
from contracts.engine.reasons import NativeReasons
from contracts.engine.runner import field_columns, keeps_field_columns
from contracts.formats.arrow_text import text_values
from contracts.formats.protobuf import protobuf_dlq_value
from contracts.formats.protocol import SchemaFormat
from contracts.planning.plan import CopyAction, Plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


RULE_NAME = "__rule.name"
RULE_MODE = "__rule.mode"
RULE_SUBJECT = "__rule.subject"
RULE_TOPIC = "__rule.topic"
RULE_EXCEPTION = "__rule.exception"
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
    redact: Callable[[Sequence[Any]], list[Any]] | None = None


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

    reasons = ((NativeReasons(plan), RECORD), *migration_reasons)
    router = Router(sink, run_id, layout, reasons, copies=plan.copies)
    if not keeps_field_columns(plan):
        return with_partition(staged).mapInArrow(router, staged.schema)
    # The record's field columns stay out of the Python pass (RECORD holds the same values).
    fields = field_columns(plan)
    unfolded = staged.drop(*fields)
    routed = with_partition(unfolded).mapInArrow(router, unfolded.schema)
    return routed.withColumns({column: F.col(RECORD)[name] for column, name in fields.items()})


def with_partition(df: DataFrame) -> DataFrame:
    """`df` with the PARTITION column a Router names its writer by: the partition each row comes
    from, computed below the pass, so it is the input partition even when a `coalesce` after the
    contract makes one task compute several."""
    from pyspark.sql import functions as F

    return df.withColumn(PARTITION, F.spark_partition_id())


@dataclass(frozen=True)
class Router:
    """The picklable per-partition function of route_rejected; a Python pass that sets statuses
    itself (the decode pass) chains it over its own output batches instead of adding a pass.

    Its input holds the PARTITION column (`with_partition`), which it takes out of its output.
    Each input partition gets its own DLQ writer, opened with the first row."""

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
        # The writer's own context commits on success or early close and aborts on an error.
        with contextlib.ExitStack() as opened:
            writer: DlqWriter | None = None
            for partitioned in batches:
                if writer is None and partitioned.num_rows:
                    partition = partitioned.column(PARTITION)[0].as_py()
                    writer = opened.enter_context(
                        self.sink.open(_writer_id(self.run_id, self.stage, partition))
                    )
                batch = partitioned.drop_columns([PARTITION])
                if writer is not None:
                    for record in self._copies(batch):
                        writer.write(record)
                rejected = pc.is_valid(batch.column(STATUS))
                if writer is not None and pc.any(rejected).as_py():
                    for record in self._dlq_records(batch.filter(rejected)):
                        writer.write(record)
                    batch = batch.filter(pc.invert(rejected))
                yield batch

    def _copies(self, batch: pa.RecordBatch) -> Iterator[DlqRecord]:
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
            yield from self._records(rows, [status] * rows.num_rows)

    def _dlq_records(self, rejected: pa.RecordBatch) -> Iterator[DlqRecord]:

        statuses = rejected.column(STATUS).to_pylist()
        for reasons, column in self.reasons:
            statuses = reasons.refine(statuses, rejected.column(column))
        return self._records(rejected, statuses)

    def _records(self, rejected: pa.RecordBatch, statuses: list[dict[str, Any]]) -> Iterator[DlqRecord]:
        """A record per row, to the topic its status names, with the rule headers."""
        layout = self.layout
        values = self._values(rejected)
        keys = _column(rejected, layout.key_column)
        incoming = _column(rejected, layout.headers_column)
        topics = _column(rejected, layout.topic_column)
        now_ms = int(time.time() * 1000)
        for i, status in enumerate(statuses):
            headers = [*_incoming_headers(incoming[i])]
            headers += [
                (RULE_NAME, _utf8(status["rule"])),
                (RULE_MODE, _utf8(status["mode"])),
                (RULE_SUBJECT, _utf8(status["subject"])),
                (RULE_TOPIC, _utf8(topics[i])),
            ]
            if status["reason"] is not None:
                headers.append((RULE_EXCEPTION, _utf8(status["reason"])))
            yield DlqRecord(
                topic=status["topic"],
                key=_bytes(keys[i]),
                value=values[i],
                headers=tuple(headers),
                timestamp_ms=now_ms,
            )

    def _values(self, rejected: pa.RecordBatch) -> list[bytes | None]:
        layout = self.layout
        if layout.value_column is not None:
            return [_bytes(value) for value in rejected.column(layout.value_column).to_pylist()]
        # A string that is not UTF-8 is written with each such byte as U+FFFD: the row goes to its
        # topic all the same, and JSON (UTF-8 text) can hold nothing else.
        read = layout.schema_format.read_struct(rejected.column(layout.record_column), layout.schema)
        records = read.records if layout.redact is None else layout.redact(read.records)
        if layout.schema_format.schema_type == "PROTOBUF":  # the message's JSON, as the reference writes it
            return [None if r is None else protobuf_dlq_value(r, layout.schema) for r in records]
        return [record_value_bytes(record) for record in records]


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


def record_value_bytes(record: Any) -> bytes | None:
    """A WRITE-side DLQ value as the reference writes it: bytes and strings as they are, numbers
    packed big-endian, anything else as JSON with bytes rendered as latin-1 text (docs/semantics.md §7).

    Unlike the reference, which writes bare `NaN` and `Infinity` (not JSON), a non-finite float
    inside a record is written as the string "NaN", "Infinity" or "-Infinity", as Jackson and
    the Protobuf JSON mapping write them, so every JSON reader accepts the value."""
    import struct

    if record is None:
        return None
    if isinstance(record, bytes | bytearray):
        return bytes(record)
    if isinstance(record, str):
        return record.encode("utf-8")
    if isinstance(record, int) and not isinstance(record, bool) and -(2**63) <= record < 2**63:
        return struct.pack(">q", record)
    if isinstance(record, float):
        return struct.pack(">d", record)
    try:
        text = json.dumps(record, default=_json_default, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(record), default=_json_default, allow_nan=False)
    return text.encode("utf-8")


_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _finite(value: Any) -> Any:
    """The value with each non-finite float replaced by its JSON string name."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else _NON_FINITE[value]
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _json_default(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1")
    return str(value)


def _column(batch: pa.RecordBatch, name: str | None) -> list[Any]:
    """A key, headers or topic column's values; a string column as its bytes, which Spark does not
    require to be UTF-8 and a DLQ record carries as they are anyway (a header key, as text)."""
    if name is None or name not in batch.schema.names:
        return [None] * batch.num_rows
    column = batch.column(name)
    return column.cast(pa.binary()).to_pylist() if pa.types.is_string(column.type) else text_values(column)


def _incoming_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """Kafka-source headers (a list of {key, value} structs) kept ahead of the rule headers."""
    if not headers:
        return []
    return [(header["key"], _bytes(header["value"])) for header in headers]


def _utf8(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode("utf-8")
