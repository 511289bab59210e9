"""The dead-letter sink interface: where the DLQ action delivers rejected records (docs/semantics.md §7).

A `DlqSink` is a small picklable configuration object shipped to Spark tasks; each task opens one
`DlqWriter` named by a writer id that is the same for every attempt of that task (`writer_id`: a
run id chosen on the driver, the partition id, and the micro-batch id and pass where there are
several), so a retried task replaces its earlier output instead of duplicating it. A writer
buffers or sends as it goes and `commit` returns only once every record is durable; anything
undelivered raises `DlqError` and fails the task, so the job: no record is lost silently.

A sink that can start a run afresh (`RunScopedSink.begin_run`) makes a rerun with the same run
id replace an earlier run's output as a whole, whatever partitions either had, and keeps the
earlier run's stragglers (tasks of a failed job still finishing) from adding to it.

The shape follows a Kafka producer: `write` is `produce`, `commit` is `flush` plus the delivery
reports (or `commit_transaction` with a `transactional.id` derived from the writer id, which fences
an earlier attempt), `abort` is `purge` (or `abort_transaction`).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, runtime_checkable

from contracts.errors import DataContractError

MAX_TOPIC_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
# A run id chosen by a caller: no '.', which separates it from the rest of a writer id.
_RUN_ID = re.compile(r"[a-zA-Z0-9_-]{1,100}")
# What follows "<run id>." in a writer id: an optional pass name, micro-batch id, then the partition.
_WRITER_SUFFIX = re.compile(r"(?:[a-z]+\.)?(?:b[0-9]+\.)?[0-9]{5,}(?:p[0-9]{5,})?")


class DlqError(DataContractError):
    """A dead-letter record could not be delivered, or a sink was used wrongly (bad topic, closed writer)."""

    def __init__(self, message: str, *, topic: str | None = None, writer_id: str | None = None) -> None:
        self.reason = message
        self.topic = topic
        self.writer_id = writer_id
        where = ", ".join(
            f"{label} {value!r}"
            for label, value in (("topic", topic), ("writer", writer_id))
            if value is not None
        )
        super().__init__(f"{message} ({where})" if where else message)


@dataclass(frozen=True)
class DlqRecord:
    """One dead-letter record as a Kafka producer would send it; header values may be null as in Kafka."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


@dataclass(frozen=True)
class DlqBatch:
    """Records as columns, sent at one time (routing delivers each Arrow batch's records so): row i
    is `topics[i]`, `keys[i]`, `values[i]`, `headers[i]`, all stamped `timestamp_ms`."""

    topics: Sequence[str]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[tuple[tuple[str, bytes | None], ...]]
    timestamp_ms: int

    def __len__(self) -> int:
        return len(self.topics)

    def records(self) -> Iterator[DlqRecord]:
        """The batch row by row."""
        stamp = self.timestamp_ms
        for topic, key, value, headers in zip(self.topics, self.keys, self.values, self.headers, strict=True):
            yield DlqRecord(topic, key, value, headers, stamp)


def validate_topic(topic: str) -> str:
    """Return `topic` if Kafka would accept it as a topic name, else raise DlqError saying why."""
    if not isinstance(topic, str) or not topic:
        raise DlqError(f"DLQ topic must be a non-empty string, got {topic!r}")
    if topic in (".", ".."):
        raise DlqError("DLQ topic cannot be '.' or '..'", topic=topic)
    if len(topic) > MAX_TOPIC_LENGTH:
        raise DlqError(
            f"DLQ topic is {len(topic)} characters long; Kafka allows {MAX_TOPIC_LENGTH}", topic=topic
        )
    if not _TOPIC_CHARS.fullmatch(topic):
        raise DlqError("DLQ topic may contain only ASCII letters, digits, '.', '_' and '-'", topic=topic)
    return topic


def writer_id(
    run_id: str,
    partition: int,
    *,
    batch_id: str | None = None,
    stage: str | None = None,
    input_partition: int | None = None,
) -> str:
    """The writer id of one task of a run: `<run id>[.<stage>][.b<batch id>].<partition>[p<input>]`.

    Every attempt of the task gets the same id; `stage` tells apart the passes of one job that
    route rows (the decode pass of `deserialize`), `batch_id` the micro-batches of a stream, and
    `input_partition`, when it is not the task's own, the input partitions one task computes (a
    `coalesce` after the contract).
    """
    parts = [run_id, *([stage] if stage else []), *([f"b{batch_id}"] if batch_id is not None else [])]
    last = f"{partition:05d}"
    if input_partition is not None and input_partition != partition:
        last += f"p{input_partition:05d}"
    return ".".join([*parts, last])


def is_run_id(text: object) -> bool:
    """Whether a caller may choose `text` as a run id: 1-100 ASCII letters, digits, '_' or '-'."""
    return isinstance(text, str) and _RUN_ID.fullmatch(text) is not None


def in_run(writer: str, run_id: str) -> bool:
    """Whether `writer_id` made `writer` for a task of `run_id` (and of no other run id: the suffix
    after the run id has a fixed shape, so run ids that share a prefix are told apart)."""
    prefix = run_id + "."
    return writer.startswith(prefix) and _WRITER_SUFFIX.fullmatch(writer[len(prefix) :]) is not None


class DlqWriter(abc.ABC):
    """One task attempt's output to a sink; as a context manager it commits on success, aborts on error.

    A generator closed early (GeneratorExit: a `limit` stopped consuming, or the task's output was
    discarded) commits too: the records written so far belong to rows already passed on, and a
    re-executed task replaces them under the same writer id.
    """

    @abc.abstractmethod
    def write(self, record: DlqRecord) -> None:
        """Queue one record for delivery; raise DlqError if it can never be delivered."""

    def write_batch(self, batch: DlqBatch) -> None:
        """Queue a batch's records, in order, as `write` does each (a writer may do it at once)."""
        for record in batch.records():
            self.write(record)

    @abc.abstractmethod
    def commit(self) -> None:
        """Return once every written record is durable; raise DlqError if any was not delivered."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Discard every record not yet committed, so a failed attempt leaves nothing behind."""

    def __enter__(self) -> DlqWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, GeneratorExit):
            self.commit()
        else:
            self.abort()


@runtime_checkable
class DlqSink(Protocol):
    """A picklable sink configuration; Spark tasks call `open` to get their own writer."""

    def open(self, writer_id: str) -> DlqWriter:
        """Open the writer for one task attempt; every attempt of one task passes the same writer id."""
        ...


@runtime_checkable
class RunScopedSink(DlqSink, Protocol):
    """A sink where a run with a caller-chosen id can replace what an earlier run with that id wrote."""

    def begin_run(self, run_id: str) -> DlqSink:
        """Discard every record committed under `run_id` and return the sink this run's tasks write
        to: writers of the earlier run that commit afterwards (tasks of a failed job Spark could not
        stop in time) fail instead of adding their records."""
        ...
