"""Bounds on the sizes an Avro body declares, checked before fastavro reads it."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from avro_strategies import schemas_and_records
from fastavro import schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.errors import SerializationError
from contracts.formats.avro import parse_schema
from contracts.formats.avro.sizes import MAX_ZERO_SIZE_ITEMS, _Cursor, _SizeWalker, size_check


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _record(*types: Any) -> Any:
    fields = [{"name": f"f{i}", "type": t} for i, t in enumerate(types)]
    return parse_schema(json.dumps({"type": "record", "name": "R", "fields": fields}))


EMPTY = {"type": "record", "name": "Empty", "fields": []}
NULLS = {"type": "array", "items": "null"}


@pytest.mark.parametrize(
    "field_type",
    [
        "int",
        {"type": "array", "items": "int"},
        {"type": "map", "values": "null"},
        {"type": "array", "items": ["null", "int"]},
        {"type": "array", "items": {"type": "array", "items": "int"}},
        {"type": "array", "items": {"type": "fixed", "name": "One", "size": 1}},
    ],
)
def test_schemas_whose_items_all_take_bytes_need_no_check(field_type: Any) -> None:
    assert size_check(_record(field_type)) is None


@pytest.mark.parametrize(
    "field_type",
    [
        NULLS,
        {"type": "array", "items": EMPTY},
        {"type": "array", "items": {"type": "fixed", "name": "Zero", "size": 0}},
        {
            "type": "array",
            "items": {"type": "record", "name": "N", "fields": [{"name": "n", "type": "null"}]},
        },
        ["null", {"type": "map", "values": {"type": "array", "items": "null"}}],
    ],
)
def test_arrays_of_zero_size_items_are_bounded(field_type: Any) -> None:
    check = size_check(_record("string", field_type))
    assert check is not None
    prefix = b"\x02x" + (b"\x02" + _zigzag(1) + b"\x02k" if isinstance(field_type, list) else b"")
    check(
        prefix + _zigzag(MAX_ZERO_SIZE_ITEMS) + b"\x00" + (b"\x00" if isinstance(field_type, list) else b"")
    )
    started = time.perf_counter()
    with pytest.raises(SerializationError, match=f"at most {MAX_ZERO_SIZE_ITEMS}"):
        check(prefix + _zigzag(2**62) + b"\x00")
    assert time.perf_counter() - started < 0.1


def test_the_maximum_counts_every_array_of_the_record_together() -> None:
    check = size_check(_record(NULLS, {"type": "array", "items": NULLS}))
    assert check is not None
    half = _zigzag(MAX_ZERO_SIZE_ITEMS // 2)
    check(half + b"\x00" + _zigzag(1) + half + b"\x00\x00")
    with pytest.raises(SerializationError, match="at most"):
        check(half + b"\x00" + _zigzag(2) + half + b"\x00" + _zigzag(1) + b"\x00\x00")
    # Negative block counts (a count followed by the block's byte size) count the same.
    with pytest.raises(SerializationError, match="at most"):
        check(_zigzag(-(MAX_ZERO_SIZE_ITEMS + 1)) + _zigzag(0) + b"\x00\x00")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x02x\x00\x00" + _zigzag(2**40) + b"\x00", "takes no bytes"),
        (_zigzag(2**40) + b"x", "declares 1099511627776 bytes, but 1 remain"),
        (_zigzag(-1) + b"x", "declares -1 bytes"),
        (b"\x02x" + _zigzag(5) + b"\x00\x00", "declares 5 items, but only 2 bytes remain"),
        (b"\x02x\x00" + _zigzag(3), "union branch 3 does not exist"),
        (b"\x02x\x00\x02", "ends inside a number"),
        (b"\x02x\x00\x02" + b"\xff" * 11, "more than 10 bytes"),
    ],
)
def test_what_a_body_cannot_hold_is_refused_with_the_reason(body: bytes, message: str) -> None:
    check = size_check(
        _record("string", {"type": "array", "items": ["null", "int"]}, ["null", "long"], NULLS)
    )
    assert check is not None
    with pytest.raises(SerializationError, match=message):
        check(body)


def test_a_recursive_schema_is_walked() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "marks", "type": NULLS}, {"name": "next", "type": ["null", "Node"]}],
    }
    schema = parse_schema(json.dumps(node))
    body = io.BytesIO()
    schemaless_writer(body, schema, {"marks": [None], "next": {"marks": [None, None], "next": None}})
    check = size_check(schema)
    assert check is not None
    check(body.getvalue())


@settings(max_examples=60, deadline=None)
@given(schemas_and_records(), st.data())
def test_the_walk_reads_exactly_the_bodies_fastavro_writes(
    case: tuple[Any, list[Any]], data: st.DataObject
) -> None:
    """Every body of a valid record is walked to its last byte without complaint; any cut of it is
    refused with a SerializationError."""
    schema, records = case
    walk = _SizeWalker(schema).walk(schema)
    for record in records:
        buffer = io.BytesIO()
        schemaless_writer(buffer, schema, record)
        body = buffer.getvalue()
        cursor = _Cursor(body)
        walk(cursor)
        assert cursor.position == len(body)
        if body:
            with pytest.raises(SerializationError):
                walk(_Cursor(body[: data.draw(st.integers(0, len(body) - 1))]))
