"""Confluent wire format: magic byte 0, a 4-byte big-endian schema id, then the body (docs/semantics.md §8).

Also the subject name strategies that map a topic and record to the subject a schema lives under.
"""

from __future__ import annotations

import enum
import struct

from contracts.codes import SCHEMA_NOT_FOUND
from contracts.errors import RegistryError, SerializationError
from contracts.model import Schema
from contracts.registry import Registry

MAGIC_BYTE = 0
HEADER_SIZE = 5
MAX_SCHEMA_ID = 0xFFFFFFFF
_HEADER = struct.Struct(">bI")


def encode_frame(schema_id: int, body: bytes) -> bytes:
    """Prefix an Avro body with the magic byte and the schema id."""
    if not 0 <= schema_id <= MAX_SCHEMA_ID:
        raise SerializationError(
            f"schema id {schema_id} does not fit the 4-byte unsigned id of the wire format"
        )
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def decode_frame(frame: bytes | bytearray | memoryview | None) -> tuple[int, bytes]:
    """Split a frame into (schema id, Avro body); SerializationError says what is wrong otherwise."""
    if frame is None:
        raise SerializationError("no bytes to decode: the value is null")
    data = frame if isinstance(frame, bytes) else bytes(frame)
    if len(data) < HEADER_SIZE:
        raise SerializationError(
            f"frame of {len(data)} bytes is shorter than the {HEADER_SIZE}-byte Confluent header"
        )
    if data[0] != MAGIC_BYTE:
        raise SerializationError(
            f"unknown magic byte {data[0]} (expected {MAGIC_BYTE}): not Confluent wire format"
        )
    return int.from_bytes(data[1:HEADER_SIZE], "big"), data[HEADER_SIZE:]


def writer_schema(registry: Registry, schema_id: int) -> Schema:
    """The schema a frame was written with; an id the registry does not know is a SerializationError."""
    try:
        return registry.get_schema(schema_id)
    except RegistryError as e:
        if e.error_code == SCHEMA_NOT_FOUND:
            raise SerializationError(f"unknown schema id {schema_id}: the registry has no such schema") from e
        raise


class SubjectNameStrategy(str, enum.Enum):
    """How a subject is named from the topic and the record's full name (as Confluent's serializers)."""

    TOPIC_NAME = "TopicNameStrategy"
    RECORD_NAME = "RecordNameStrategy"
    TOPIC_RECORD_NAME = "TopicRecordNameStrategy"

    def subject(self, topic: str, *, is_key: bool = False, record_name: str | None = None) -> str:
        """The subject for a key or value of `topic` whose record has full name `record_name`."""
        if self is SubjectNameStrategy.TOPIC_NAME:
            return f"{topic}-{'key' if is_key else 'value'}"
        if not record_name:
            raise SerializationError(f"{self.value} needs the record's full name, and none was given")
        if self is SubjectNameStrategy.RECORD_NAME:
            return record_name
        return f"{topic}-{record_name}"
