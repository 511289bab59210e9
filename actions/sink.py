"""The dead-letter sink interface: where the DLQ action delivers rejected records (SEMANTICS.md §7).

A `DlqSink` is a small picklable configuration object shipped to Spark tasks; each task opens one
`DlqWriter` named by a writer id that is the same for every attempt of that task (a run id chosen
on the driver plus the partition id), so a retried task replaces its earlier output instead of
duplicating it. A writer buffers or sends as it goes and `commit` returns only once every record is
durable; anything undelivered raises `DlqError` and fails the task (DESIGN.md principle 4).

The shape follows a Kafka producer: `write` is `produce`, `commit` is `flush` plus the delivery
reports (or `commit_transaction` with a `transactional.id` derived from the writer id, which fences
an earlier attempt), `abort` is `purge` (or `abort_transaction`).
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, runtime_checkable

from contracts.errors import DataContractError

MAX_TOPIC_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


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


class DlqWriter(abc.ABC):
    """One task attempt's output to a sink; as a context manager it commits on success, aborts on error.

    A generator closed early (GeneratorExit: a `limit` stopped consuming, or the task's output was
    discarded) commits too: the records written so far belong to rows already passed on, and a
    re-executed task replaces them under the same writer id.
    """

    @abc.abstractmethod
    def write(self, record: DlqRecord) -> None:
        """Queue one record for delivery; raise DlqError if it can never be delivered."""

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
