"""Confluent framing and subject name strategies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.errors import RegistryError, SerializationError
from contracts.formats.wire import (
    MAX_SCHEMA_ID,
    SubjectNameStrategy,
    decode_frame,
    encode_frame,
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


@pytest.mark.parametrize("schema_id", [-1, MAX_SCHEMA_ID + 1])
def test_schema_id_out_of_range_is_rejected(schema_id: int) -> None:
    with pytest.raises(SerializationError, match="4-byte"):
        encode_frame(schema_id, b"")


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (None, "null"),
        (b"", "0 bytes is shorter"),
        (b"\x00\x00\x01", "3 bytes is shorter"),
        (b"\x01\x00\x00\x00\x01abc", "unknown magic byte 1"),
        (b'{"json": 1}', "unknown magic byte 123"),
    ],
)
def test_bad_frames_say_what_is_wrong(frame: bytes | None, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        decode_frame(frame)


def test_empty_body_is_a_valid_frame() -> None:
    assert decode_frame(b"\x00\x00\x00\x00\x07") == (7, b"")


class _OneSchemaRegistry:
    """Only what writer_schema needs: get_schema for id 1."""

    def __init__(self, failure: RegistryError | None = None) -> None:
        self.failure = failure

    def get_schema(self, schema_id: int) -> Schema:
        if self.failure is not None:
            raise self.failure
        if schema_id == 1:
            return Schema('"string"')
        raise RegistryError("Schema not found", status=404, error_code=40403)


def test_unknown_schema_id_is_a_serialization_error() -> None:
    registry = _OneSchemaRegistry()
    assert writer_schema(registry, 1) == Schema('"string"')  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match="unknown schema id 9") as caught:
        writer_schema(registry, 9)  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, RegistryError)


def test_registry_outage_is_not_mistaken_for_an_unknown_id() -> None:
    registry = _OneSchemaRegistry(RegistryError("unreachable", status=None))
    with pytest.raises(RegistryError, match="unreachable"):
        writer_schema(registry, 1)  # type: ignore[arg-type]


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
