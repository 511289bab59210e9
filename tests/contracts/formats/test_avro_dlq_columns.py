"""WRITE-side DLQ values of Avro records rendered column by column equal the record-by-record ones."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from actions.dlq.record import RecordValues
from contracts.formats.arrow_types import arrow_type
from contracts.formats.avro.format import AvroFormat
from contracts.formats.dlq_value import record_value_bytes

AVRO = AvroFormat()
_KINDS = {
    "long": st.integers(-(2**63), 2**63 - 1),
    "int": st.integers(-(2**31), 2**31 - 1),
    "boolean": st.booleans(),
    "double": st.floats(allow_nan=True, allow_infinity=True),
    # Quotes, backslashes, control characters, DEL, non-ASCII and astral characters.
    "string": st.text(
        st.sampled_from(["a", " ", '"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "名", "😀", "~"])
    ),
}
_field_kinds = st.lists(st.tuples(st.sampled_from(sorted(_KINDS)), st.booleans()), min_size=1, max_size=5)


def _schema(kinds: list[tuple[str, bool]]) -> dict[str, Any]:
    fields = [
        {"name": f"f{i}", "type": ["null", kind] if nullable else kind}
        for i, (kind, nullable) in enumerate(kinds)
    ]
    return {"type": "record", "name": "R", "fields": fields}


@st.composite
def _column_of_records(draw: st.DrawFn) -> tuple[Any, pa.Array, list[Any]]:
    kinds = draw(_field_kinds)
    parsed = AVRO.parse(json.dumps(_schema(kinds)), [])
    record = st.fixed_dictionaries(
        {
            f"f{i}": (st.none() | _KINDS[kind]) if nullable else _KINDS[kind]
            for i, (kind, nullable) in enumerate(kinds)
        }
    )
    drawn = draw(st.lists(st.none() | record, max_size=12))
    # In the schema's field order, as records read from Arrow are.
    records = [None if r is None else {f"f{i}": r[f"f{i}"] for i in range(len(kinds))} for r in drawn]
    struct = arrow_type(AVRO.spark_type(parsed))
    return parsed, pa.array(records, struct), records


@given(_column_of_records())
def test_rendered_values_equal_each_records_json(case: tuple[Any, pa.Array, list[Any]]) -> None:
    parsed, column, records = case
    assert AVRO.render_dlq_values(column, parsed) is not None
    expected = [None if r is None else record_value_bytes(r) for r in records]
    assert RecordValues(AVRO, parsed)(column) == expected
    assert RecordValues(AVRO, parsed).one_by_one(column) == expected


def test_records_with_other_field_types_are_rendered_one_by_one() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "b", "type": "bytes"},
            {"name": "xs", "type": {"type": "array", "items": "long"}},
        ],
    }
    parsed = AVRO.parse(json.dumps(schema), [])
    records = [{"b": b"\xff\x00", "xs": [1, 2]}, None]
    column = pa.array(records, arrow_type(AVRO.spark_type(parsed)))
    assert AVRO.render_dlq_values(column, parsed) is None
    assert RecordValues(AVRO, parsed)(column) == [record_value_bytes(records[0]), None]


def test_a_string_that_is_not_utf8_is_rendered_with_replacement_characters() -> None:
    parsed = AVRO.parse(json.dumps(_schema([("string", False), ("long", False)])), [])
    column = pa.StructArray.from_arrays(
        [pa.array([b"ok", b"\xffbad"], pa.binary()).cast(pa.string(), safe=False), pa.array([1, 2])],
        names=["f0", "f1"],
    )
    assert RecordValues(AVRO, parsed)(column) == [b'{"f0": "ok", "f1": 1}', b'{"f0": "\\ufffdbad", "f1": 2}']
