"""WRITE-side DLQ values of Avro records rendered column by column (docs/semantics.md §7.3): in a
DLQ storm every row's record becomes JSON, and rendering each field's column at once in Arrow is
many times faster than a JSON encoder called per record. Gives exactly `record_value_bytes` of each
record; the rows it cannot render so (a string that is not printable ASCII, a non-finite double)
and schemas with other field types are left to the caller, which renders them record by record.
"""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.compute as pc

from contracts.formats.avro.types import AvroSchema
from contracts.formats.avro.values import plain_fields
from contracts.formats.protocol import RenderedValues

_NUMBERS = (pa.int32(), pa.int64())
_TEXTS = (pa.string(), pa.large_string())


def render(column: pa.Array, schema: AvroSchema) -> RenderedValues | None:
    """The JSON values of a struct column of `schema`'s records, or None when a field's type is not
    one this renders (a long, int, boolean, string or double, or its union with null)."""
    fields = plain_fields(schema)
    if not fields or [field.name for field in column.type] != [name for name, _ in fields]:
        return None
    parts: list[pa.Array | str] = []
    by_record = pa.array([False] * len(column), pa.bool_())
    for position, (name, arrow_type) in enumerate(fields):
        child = pc.struct_field(column, [position])
        if child.type != arrow_type:
            return None
        rendered = _field_json(child)
        if rendered is None:
            return None
        text, needs_record = rendered
        parts.append(("{" if position == 0 else ", ") + json.dumps(name) + ": ")
        parts.append(text)
        by_record = pc.or_(by_record, needs_record)
    parts.append("}")
    joined = pc.binary_join_element_wise(*parts, "")
    present = column.is_valid()
    record_rows = pc.indices_nonzero(pc.and_(present, by_record)).to_pylist()
    kept = pc.if_else(pc.and_(present, pc.invert(by_record)), joined, pa.scalar(None, pa.string()))
    return RenderedValues(kept.cast(pa.binary()).to_pylist(), record_rows)


def _field_json(child: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """A field's values as JSON text (null as "null"), and the rows JSON must render another way."""
    kind = child.type
    if kind in _NUMBERS or kind == pa.bool_():
        # Python's str of an int and json's true/false are what Arrow's cast writes.
        return pc.fill_null(pc.cast(child, pa.string()), "null"), pa.array([False] * len(child), pa.bool_())
    if kind == pa.float64():
        # json writes a float as its repr; a non-finite one is left to the record's own rendering.
        values = child.to_pylist()
        text = pa.array(
            ["null" if v is None else float.__repr__(v) if math.isfinite(v) else None for v in values],
            pa.string(),
        )
        return text, pc.is_null(text)
    if kind in _TEXTS:
        # What JSON writes as it is inside quotes: printable ASCII, but for the two it escapes.
        printable = pc.fill_null(pc.ascii_is_printable(child), True)
        plain = pc.if_else(printable, child, pa.scalar("", kind))
        escaped = pc.replace_substring(pc.replace_substring(plain, "\\", "\\\\"), '"', '\\"')
        quoted = pc.binary_join_element_wise('"', escaped, '"', "")
        return pc.fill_null(pc.cast(quoted, pa.string()), "null"), pc.invert(printable)
    return None
