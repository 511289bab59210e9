"""A dead-letter record, built in one place: its `__rule.*` headers, its value per schema format
(through the format protocol) and the redaction of a WRITE-side value (docs/semantics.md §7).

The engine's routing only says which rows go where; what a DLQ record holds is decided here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from contracts.formats.protocol import SchemaFormat

RULE_NAME = "__rule.name"
RULE_MODE = "__rule.mode"
RULE_SUBJECT = "__rule.subject"
RULE_TOPIC = "__rule.topic"
RULE_EXCEPTION = "__rule.exception"
RULE_HEADERS = (RULE_NAME, RULE_MODE, RULE_SUBJECT, RULE_TOPIC, RULE_EXCEPTION)
"""Every header a DLQ record carries after the ones the row arrived with (§7.4), in their order."""

Redact = Callable[[Sequence[Any]], list[Any]]
"""The redaction hook: records (None stays None) with the fields a WRITE-side DLQ value must not
show replaced (the fields ENCRYPT rules tag, §7.3); the engine gives it, from the contract."""


@dataclass(frozen=True)
class RecordValues:
    """How a WRITE-side DLQ value is made: each record of a struct column read by its format, passed
    through `redact` when given, and written as the format's DLQ value; picklable."""

    schema_format: SchemaFormat
    parsed: Any
    redact: Redact | None = None

    def __call__(self, column: pa.Array) -> list[bytes | None]:
        """The values of a struct column's records (None for a null struct): rendered at once where
        the format can (nothing to redact), else record by record. (Imports on a worker only:
        reading DLQ records, as `spark-contracts dlq show` does, needs neither Arrow nor formats.)"""
        import pyarrow as pa

        from contracts.formats.protocol import RendersDlqValues

        if self.redact is None and isinstance(self.schema_format, RendersDlqValues):
            rendered = self.schema_format.render_dlq_values(column, self.parsed)
            if rendered is not None:
                values = rendered.values
                if rendered.left:
                    left = self.one_by_one(column.take(pa.array(rendered.left, pa.int64())))
                    for row, value in zip(rendered.left, left, strict=True):
                        values[row] = value
                return values
        return self.one_by_one(column)

    def one_by_one(self, column: pa.Array) -> list[bytes | None]:
        """The values rendered record by record. A string that is not UTF-8 is written with each
        such byte as U+FFFD: the row goes to its topic all the same, and JSON (UTF-8 text) can hold
        nothing else (§8.6)."""
        schema_format, parsed = self.schema_format, self.parsed
        read = schema_format.read_struct(column, parsed)
        records = read.records if self.redact is None else self.redact(read.records)
        return [None if record is None else schema_format.dlq_value(record, parsed) for record in records]


def rule_headers(status: Mapping[str, Any], source_topic: bytes | None) -> list[tuple[str, bytes | None]]:
    """The `__rule.*` headers of a record `status` (a `_contract` value) sent from `source_topic`: name,
    mode, subject and source topic, then the exception when the status has a reason (§7.4)."""
    headers = [
        (RULE_NAME, utf8(status["rule"])),
        (RULE_MODE, utf8(status["mode"])),
        (RULE_SUBJECT, utf8(status["subject"])),
        (RULE_TOPIC, source_topic),
    ]
    if status["reason"] is not None:
        headers.append((RULE_EXCEPTION, utf8(status["reason"])))
    return headers


def incoming_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """Kafka-source headers (a list of {key, value} structs), kept ahead of the rule headers."""
    if not headers:
        return []
    return [(header["key"], as_bytes(header["value"])) for header in headers]


def utf8(value: Any) -> bytes | None:
    """A header value from text (None stays None, bytes stay as they are)."""
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


def as_bytes(value: Any) -> bytes | None:
    """A key or value as bytes: bytes as they are, anything else as its text in UTF-8."""
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode("utf-8")
