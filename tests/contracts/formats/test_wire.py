"""Confluent framing (V0 ids, V1 GUIDs, schema id headers) and subject name strategies."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.errors import RegistryError, SerializationError
from contracts.formats.wire import (
    MAX_SCHEMA_ID,
    SubjectNameStrategy,
    decode_frame,
    decode_schema_id,
    describe,
    encode_frame,
    encode_prefix,
    schema_id_header,
    writer_schema,
)
from contracts.model import Schema


@given(schema_id=st.integers(0, MAX_SCHEMA_ID), body=st.binary(max_size=64))
def test_frame_round_trip(schema_id: int, body: bytes) -> None:
    frame = encode_frame(schema_id, body)
    assert frame[0] == 0
    assert len(frame) == 5 + len(body)
    assert decode_frame(frame) == (schema_id, body)


def test_schema_id_is_big_endian() -> None:
    assert encode_frame(258, b"x") == b"\x00\x00\x00\x01\x02x"


@given(guid=st.uuids(), body=st.binary(max_size=64))
def test_guid_frame_round_trip(guid: uuid.UUID, body: bytes) -> None:
    frame = encode_frame(guid, body)
    assert frame[0] == 1
    assert len(frame) == 17 + len(body)
    assert decode_frame(frame) == (guid, body)


def test_guid_is_written_as_its_16_uuid_bytes() -> None:
    guid = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    assert encode_frame(guid, b"x") == b"\x01" + bytes.fromhex("00112233445566778899aabbccddeeff") + b"x"


@given(schema=st.one_of(st.integers(0, MAX_SCHEMA_ID), st.uuids()), body=st.binary(max_size=16))
def test_prefixes_are_the_reference_schema_ids_bytes(schema: int | uuid.UUID, body: bytes) -> None:
    """confluent-kafka's SchemaId writes the same prefix and reads ours back, id or GUID."""
    import io

    from confluent_kafka.schema_registry.common.serde import SchemaId

    if isinstance(schema, uuid.UUID):
        assert encode_prefix(schema) == SchemaId("AVRO", guid=str(schema)).guid_to_bytes()
    else:
        assert encode_prefix(schema) == SchemaId("AVRO", schema).id_to_bytes()
    read = SchemaId("AVRO")
    rest = read.from_bytes(io.BytesIO(encode_frame(schema, body)))
    assert (read.guid if isinstance(schema, uuid.UUID) else read.id) == schema
    assert rest.read() == body


@pytest.mark.parametrize("schema_id", [-1, MAX_SCHEMA_ID + 1])
def test_schema_id_out_of_range_is_rejected(schema_id: int) -> None:
    with pytest.raises(SerializationError, match="4-byte"):
        encode_frame(schema_id, b"")


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (None, "null"),
        (b"", "0 bytes is shorter"),
        (b"\x00\x00\x01", "3 bytes is shorter than the 5-byte"),
        (b"\x01\x00\x00\x00\x01abc", "8 bytes is shorter than the 17-byte Confluent header of magic byte 1"),
        (b"\x01" + bytes(15), "16 bytes is shorter than the 17-byte"),
        (b"\x02\x00\x00\x00\x01abc", r"unknown magic byte 2 in the frame \(expected 0 or 1\)"),
        (b'{"json": 1}', "unknown magic byte 123"),
    ],
)
def test_bad_frames_say_what_is_wrong(frame: bytes | None, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        decode_frame(frame)


def test_empty_body_is_a_valid_frame() -> None:
    assert decode_frame(b"\x00\x00\x00\x00\x07") == (7, b"")
    assert decode_frame(b"\x01" + bytes(16)) == (uuid.UUID(int=0), b"")


@given(schema=st.one_of(st.integers(0, MAX_SCHEMA_ID), st.uuids()))
def test_schema_id_header_holds_a_prefix_alone(schema: int | uuid.UUID) -> None:
    assert decode_schema_id(encode_prefix(schema), "__value_schema_id") == schema


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "header __value_schema_id of 0 bytes is shorter than the 5-byte schema id"),
        (b"\x00\x00\x01", "header __value_schema_id of 3 bytes is shorter than the 5-byte"),
        (b"\x01" + bytes(8), "header __value_schema_id of 9 bytes is shorter than the 17-byte schema id"),
        (b"\x00\x00\x00\x00\x07\x02", "header __value_schema_id holds 6 bytes: a schema id header is 5"),
        (b"\x01" + bytes(17), "holds 18 bytes"),
        (b"42", "unknown magic byte 52 in the header __value_schema_id"),
    ],
)
def test_bad_schema_id_headers_say_what_is_wrong(value: bytes, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        decode_schema_id(value, "__value_schema_id")


def test_header_names_and_descriptions() -> None:
    assert schema_id_header(is_key=False) == "__value_schema_id"
    assert schema_id_header(is_key=True) == "__key_schema_id"
    assert describe(7) == "schema id 7"
    assert describe(uuid.UUID(int=1)) == "schema guid 00000000-0000-0000-0000-000000000001"


_KNOWN_GUID = uuid.UUID("0b4e6f7a-0000-4000-8000-000000000001")


class _OneSchemaRegistry:
    """Only what writer_schema needs: get_schema for id 1, get_schema_by_guid for _KNOWN_GUID."""

    def __init__(self, failure: RegistryError | None = None) -> None:
        self.failure = failure

    def get_schema(self, schema_id: int) -> Schema:
        if self.failure is not None:
            raise self.failure
        if schema_id == 1:
            return Schema('"string"')
        raise RegistryError("Schema not found", status=404, error_code=40403)

    def get_schema_by_guid(self, guid: str) -> Schema:
        if self.failure is not None:
            raise self.failure
        if guid == str(_KNOWN_GUID):
            return Schema('"int"')
        raise RegistryError("Schema not found", status=404, error_code=40403)


def test_unknown_schema_id_is_a_serialization_error() -> None:
    registry = _OneSchemaRegistry()
    assert writer_schema(registry, 1) == Schema('"string"')  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match="unknown schema id 9") as caught:
        writer_schema(registry, 9)  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, RegistryError)


def test_unknown_schema_guid_is_a_serialization_error() -> None:
    registry = _OneSchemaRegistry()
    assert writer_schema(registry, _KNOWN_GUID) == Schema('"int"')  # type: ignore[arg-type]
    unknown = uuid.UUID(int=5)
    with pytest.raises(SerializationError, match=f"unknown schema guid {unknown}: the registry has no such"):
        writer_schema(registry, unknown)  # type: ignore[arg-type]


@pytest.mark.parametrize("schema", [1, _KNOWN_GUID])
def test_registry_outage_is_not_mistaken_for_an_unknown_id(schema: int | uuid.UUID) -> None:
    registry = _OneSchemaRegistry(RegistryError("unreachable", status=None))
    with pytest.raises(RegistryError, match="unreachable"):
        writer_schema(registry, schema)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("strategy", "is_key", "expected"),
    [
        (SubjectNameStrategy.TOPIC_NAME, False, "orders-value"),
        (SubjectNameStrategy.TOPIC_NAME, True, "orders-key"),
        (SubjectNameStrategy.RECORD_NAME, False, "com.acme.Order"),
        (SubjectNameStrategy.RECORD_NAME, True, "com.acme.Order"),
        (SubjectNameStrategy.TOPIC_RECORD_NAME, False, "orders-com.acme.Order"),
    ],
)
def test_subject_name_strategies(strategy: SubjectNameStrategy, is_key: bool, expected: str) -> None:
    assert strategy.subject("orders", is_key=is_key, record_name="com.acme.Order") == expected


def test_record_strategies_need_a_record_name() -> None:
    with pytest.raises(SerializationError, match="record's full name"):
        SubjectNameStrategy.RECORD_NAME.subject("orders")
