"""Enum and union indexes outside their schema make a body undecodable (docs/semantics.md §8.3), as
Java's decoder and spark-avro refuse them: fastavro alone would read -1 as the last symbol or branch."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from decode_paths import SUBJECT
from test_jvm_avro_differential import both_paths

from contracts import LocalRegistry, Schema
from contracts.formats.avro import parse_schema
from contracts.formats.avro.format import AvroFormat
from contracts.formats.avro.strict import StrictReader
from contracts.formats.wire import encode_frame

STATE = {"type": "enum", "name": "State", "namespace": "shop", "symbols": ["NEW", "PAID", "SENT"]}
SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "state", "type": STATE},
        {"name": "again", "type": "State"},
        {"name": "either", "type": ["null", "string", "State"]},
        {"name": "lines", "type": {"type": "array", "items": ["null", "State"]}},
        {"name": "notes", "type": {"type": "map", "values": ["null", "string"]}},
    ],
}
PARSED = parse_schema(json.dumps(SCHEMA))
RECORD = {"state": "SENT", "again": "NEW", "either": "x", "lines": [None, "PAID"], "notes": {"k": "v"}}


def zigzag(n: int) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, "long", n)
    return buffer.getvalue()


def body(*, state: int = 2, again: int = 0, either: int = 1, line: int = 1, note: int = 1) -> bytes:
    """RECORD's body with the indexes given (the valid ones by default)."""
    return b"".join(
        [
            zigzag(state),
            zigzag(again),
            zigzag(either) + (b"\x02x" if either == 1 else b""),
            zigzag(2) + zigzag(0) + zigzag(line) + (zigzag(1) if line == 1 else b"") + zigzag(0),
            zigzag(1) + b"\x02k" + zigzag(note) + (b"\x02v" if note == 1 else b"") + zigzag(0),
        ]
    )


def test_the_valid_body_is_fastavros_own() -> None:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, PARSED, RECORD)
    assert body() == buffer.getvalue()
    assert AvroFormat().decode(body(), PARSED, None) == RECORD
    assert AvroFormat().decode(body(), PARSED, PARSED, tagged=True)["either"] == "x"


@pytest.mark.parametrize(
    ("indexes", "reason"),
    [
        ({"state": -1}, "index -1 is outside enum shop.State's 3 symbols"),
        ({"state": -2}, "index -2 is outside enum shop.State's 3 symbols"),
        ({"state": 3}, "index 3 is outside enum shop.State's 3 symbols"),
        ({"again": -1}, "index -1 is outside enum shop.State's 3 symbols"),
        ({"again": -(2**63)}, f"index {-(2**63)} is outside enum"),
        ({"either": -1}, "index -1 is outside the union's 3 branches"),
        ({"either": -3}, "index -3 is outside the union's 3 branches"),
        ({"line": -1}, "index -1 is outside the union's 2 branches"),
        ({"note": -2}, "index -2 is outside the union's 2 branches"),
        ({"note": 2}, "index 2 is outside the union's 2 branches"),
    ],
)
@pytest.mark.parametrize("reader", [None, PARSED])
@pytest.mark.parametrize("tagged", [False, True])
def test_an_index_outside_the_schema_is_refused_with_the_reason(
    indexes: dict[str, int], reason: str, reader: Any, tagged: bool
) -> None:
    with pytest.raises(IndexError, match=reason):
        AvroFormat().decode(body(**indexes), PARSED, reader, tagged)


def test_a_field_the_reader_skips_is_checked_too() -> None:
    reader = parse_schema(json.dumps({**SCHEMA, "fields": SCHEMA["fields"][:2]}))
    assert AvroFormat().decode(body(), PARSED, reader) == {"state": "SENT", "again": "NEW"}
    with pytest.raises(IndexError, match="index -1 is outside the union's 3 branches"):
        AvroFormat().decode(body(either=-1), PARSED, reader)


def test_the_strict_schema_equals_the_writers_and_leaves_it_alone() -> None:
    assert StrictReader(PARSED).schema == PARSED
    assert type(PARSED["fields"][2]["type"]) is list
    assert type(PARSED["fields"][0]["type"]["symbols"]) is list


@pytest.mark.parametrize(
    ("schema", "good", "value", "bad", "reason"),
    [
        (["null", STATE], zigzag(1) + zigzag(1), "PAID", zigzag(-1), "outside the union's 2 branches"),
        (STATE, zigzag(2), "SENT", zigzag(-1), "outside enum shop.State's 3 symbols"),
        ({"type": "array", "items": ["null", "int"]}, b"\x02\x02\x0e\x00", [7], b"\x02\x03", "union's 2"),
        ({"type": "map", "values": STATE}, b"\x02\x02k\x00\x00", {"k": "NEW"}, b"\x02\x02k\x05", "State's 3"),
        ("string", b"\x02x", "x", b"\x01", "ends early"),
    ],
)
def test_a_schema_other_than_a_record_is_checked_too(
    schema: Any, good: bytes, value: Any, bad: bytes, reason: str
) -> None:
    parsed = parse_schema(json.dumps(schema))
    assert AvroFormat().decode(good, parsed, None) == value
    assert AvroFormat().decode(good, parsed, parsed) == value
    with pytest.raises((IndexError, EOFError), match=reason):
        AvroFormat().decode(bad, parsed, None)


@pytest.mark.one_pass
def test_both_decode_paths_route_a_negative_enum_or_union_index(spark: Any, tmp_path: Path) -> None:
    """fastavro and spark-avro's from_avro (whose PERMISSIVE record of nulls sends the row to the
    Python decoder) route each such frame alone, with the same reason."""
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(SCHEMA)))
    bodies = [body(), body(state=-1), body(again=-2), body(state=3), body(either=-1), body(line=-1)]
    rows = [(b"k%d" % i, encode_frame(schema_id, b), "orders", 0, i) for i, b in enumerate(bodies)]
    result = both_paths(spark, tmp_path, registry, rows)
    python, jvm = result["python"], result["jvm"]
    assert jvm[:2] == python[:2]
    assert len(python[0]) == 1
    reasons = sorted(dict(headers)["__rule.exception"].decode() for _, _, headers in python[1])
    assert [reason.split(": ", 1)[1] for reason in reasons] == [
        "index -1 is outside enum shop.State's 3 symbols",
        "index -1 is outside the union's 2 branches",
        "index -1 is outside the union's 3 branches",
        "index -2 is outside enum shop.State's 3 symbols",
        "index 3 is outside enum shop.State's 3 symbols",
    ]
