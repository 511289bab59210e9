"""Confluent wire formats (docs/semantics.md §8.1) and the subject name strategies that map a
topic and record to the subject a schema lives under.

A schema is named in one of two framings, each followed by the body: V0, magic byte 0 and a
4-byte big-endian schema id; V1, magic byte 1 and the 16 bytes of the schema's GUID (a UUID, as
Confluent Schema Registry 8 gives every schema). The same prefix alone, without a body, is what a
`__value_schema_id` / `__key_schema_id` Kafka header holds when the id travels in the headers and
the payload is the bare body.
"""

from __future__ import annotations

import enum
import struct
import uuid

from contracts.codes import SCHEMA_NOT_FOUND
from contracts.errors import RegistryError, SerializationError
from contracts.model import Schema
from contracts.registry import Registry
from contracts.registry.local import copy_note

MAGIC_BYTE_V0 = 0
MAGIC_BYTE_V1 = 1
MAGIC_BYTE = MAGIC_BYTE_V0
HEADER_SIZE = 5
"""The length of a V0 prefix: magic byte and 4-byte id."""
GUID_HEADER_SIZE = 17
"""The length of a V1 prefix: magic byte and 16-byte GUID."""
MAX_SCHEMA_ID = 0xFFFFFFFF
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"
_HEADER = struct.Struct(">bI")

SchemaRef = int | uuid.UUID
"""What a frame names its writer's schema by: a schema id (V0) or a schema GUID (V1)."""


def schema_id_header(is_key: bool) -> str:
    """The Kafka header that holds the schema id of a record's key or value."""
    return KEY_SCHEMA_ID_HEADER if is_key else VALUE_SCHEMA_ID_HEADER


def encode_prefix(schema: SchemaRef) -> bytes:
    """The prefix naming `schema`: V0 for an id, V1 for a GUID (also a schema id header's value)."""
    if isinstance(schema, uuid.UUID):
        return bytes([MAGIC_BYTE_V1]) + schema.bytes
    if not 0 <= schema <= MAX_SCHEMA_ID:
        raise SerializationError(f"schema id {schema} does not fit the 4-byte unsigned id of the wire format")
    return _HEADER.pack(MAGIC_BYTE_V0, schema)


def encode_frame(schema: SchemaRef, body: bytes) -> bytes:
    """Prefix a body with the magic byte and the schema id (V0) or GUID (V1)."""
    return encode_prefix(schema) + body


def decode_frame(frame: bytes | bytearray | memoryview | None) -> tuple[SchemaRef, bytes]:
    """Split a frame of either framing into (schema id or GUID, body); SerializationError says what
    is wrong otherwise."""
    if frame is None:
        raise SerializationError("no bytes to decode: the value is null")
    data = frame if isinstance(frame, bytes) else bytes(frame)
    schema, size = _read_prefix(data, "frame", "Confluent header")
    return schema, data[size:]


def decode_schema_id(value: bytes | bytearray | memoryview, header: str) -> SchemaRef:
    """The schema id or GUID a schema id header holds: exactly a V0 or a V1 prefix."""
    data = value if isinstance(value, bytes) else bytes(value)
    schema, size = _read_prefix(data, f"header {header}", "schema id")
    if len(data) != size:
        raise SerializationError(
            f"header {header} holds {len(data)} bytes: a schema id header is {HEADER_SIZE} bytes"
            f" (magic byte 0 and an id) or {GUID_HEADER_SIZE} (magic byte 1 and a GUID)"
        )
    return schema


def _read_prefix(data: bytes, what: str, expected: str) -> tuple[SchemaRef, int]:
    """The schema named at the start of `data` and the prefix's length; `what` names `data` in errors."""
    if not data:
        raise SerializationError(f"{what} of 0 bytes is shorter than the {HEADER_SIZE}-byte {expected}")
    magic = data[0]
    if magic == MAGIC_BYTE_V0:
        size = HEADER_SIZE
    elif magic == MAGIC_BYTE_V1:
        size = GUID_HEADER_SIZE
    else:
        raise SerializationError(
            f"unknown magic byte {magic} in the {what} (expected {MAGIC_BYTE_V0} or {MAGIC_BYTE_V1}):"
            " not Confluent wire format"
        )
    if len(data) < size:
        raise SerializationError(
            f"{what} of {len(data)} bytes is shorter than the {size}-byte {expected} of magic byte {magic}"
        )
    if magic == MAGIC_BYTE_V1:
        return uuid.UUID(bytes=data[1:size]), size
    return int.from_bytes(data[1:size], "big"), size


def describe(schema: SchemaRef) -> str:
    """A schema reference for a message: "schema id 7" or "schema guid 0f…"."""
    return f"schema guid {schema}" if isinstance(schema, uuid.UUID) else f"schema id {schema}"


def writer_schema(registry: Registry, schema: SchemaRef) -> Schema:
    """The schema a frame was written with, by id or GUID; one the registry does not know is a
    SerializationError ("unknown schema id 9", "unknown schema guid …")."""
    try:
        if isinstance(schema, uuid.UUID):
            return registry.get_schema_by_guid(str(schema))
        return registry.get_schema(schema)
    except RegistryError as e:
        if e.error_code == SCHEMA_NOT_FOUND:
            # A GUID names no order, so whether a copy could lack it for being a copy is unknown.
            note = "" if isinstance(schema, uuid.UUID) else copy_note(registry, schema)
            raise SerializationError(
                f"unknown {describe(schema)}: the registry has no such schema{note}"
            ) from e
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
