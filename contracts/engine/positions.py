"""Where a row is, by the Kafka columns it has (topic, partition, offset; on write the key), for
the messages that fail a job on it; and the failure of a record no string of Spark can hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.errors import SerializationError

if TYPE_CHECKING:
    pass


DECODE_POSITION = ("topic", "partition", "offset")
ENCODE_POSITION = ("key", "topic", "partition")


def row_position(batch: pa.RecordBatch, i: int, columns: tuple[str, ...] = DECODE_POSITION) -> str:
    """Where row `i` is, by the Kafka columns the batch has: " at topic t, partition 0, offset 7"."""
    parts = [f"{name} {_shown(batch.column(name)[i])}" for name in columns if name in batch.schema.names]
    return f" at {', '.join(parts)}" if parts else ""


def _shown(value: pa.Scalar) -> Any:
    """A scalar for a message; a string that is not UTF-8 as its bytes."""
    try:
        return value.as_py()
    except UnicodeDecodeError:
        return value.cast(pa.binary()).as_py()


def refuse_unread(
    batch: pa.RecordBatch,
    rows_before: int,
    unreadable: Mapping[int, str],
    statuses: list[dict[str, Any] | None] | None,
    failures: list[str | None] | None,
    doing: str,
    numbering: tuple[int, list[int]] | None = None,
) -> None:
    """Fail the job on the first record that could not be read (a string that is not UTF-8) and
    that no rule routed elsewhere or failed (`statuses` and `failures` None: no rule ran), naming
    it by its Kafka columns and its row: Avro strings are UTF-8, so it cannot go on as it is, and
    no policy routes it. The row is the task's `rows_before + i`, or, for a batch of rows picked
    out of their partition, as `numbering` says (that partition, each row's number in it)."""
    from pyspark import TaskContext

    pending = [
        row
        for row in sorted(unreadable)
        if (statuses is None or statuses[row] is None) and (failures is None or failures[row] is None)
    ]
    if not pending:
        return
    row = pending[0]
    if numbering is None:
        task = TaskContext.get()
        partition, number = (task.partitionId() if task is not None else 0), rows_before + row
    else:
        partition, number = numbering[0], numbering[1][row]
    raise SerializationError(
        f"the record{row_position(batch, row, ENCODE_POSITION)} (row {number} of Spark partition"
        f" {partition}) cannot be {doing}: {unreadable[row]}"
    )
