"""A record as the value of a WRITE-side DLQ record, as the reference's DLQ action writes it
(docs/semantics.md §7.3): the formats whose records are JSON-shaped (Avro, JSON Schema) give this."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def record_value_bytes(record: Any) -> bytes | None:
    """Bytes and strings as they are, numbers packed big-endian, anything else as JSON with bytes
    rendered as latin-1 text.

    Unlike the reference, which writes bare `NaN` and `Infinity` (not JSON), a non-finite float
    inside a record is written as the string "NaN", "Infinity" or "-Infinity", as Jackson and
    the Protobuf JSON mapping write them, so every JSON reader accepts the value (§10.12)."""
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
        text = _ENCODER.encode(record)
    except ValueError:
        text = _ENCODER.encode(_finite(record))
    return text.encode("utf-8")


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


# One encoder for every value: `json.dumps` with these options builds a new one per call.
_ENCODER = json.JSONEncoder(default=_json_default, allow_nan=False)
