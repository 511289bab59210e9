"""The JSON texts of a record read by Spark's `from_json` that `json.loads` provably reads back as
that record (docs/semantics.md §8.11): `to_json`'s compact text, and the same text with the
separators Python's `json.dumps` writes by default (", " and ": ").

Each is a serialization of the record itself (properties in the Spark type's order, a null struct
field absent, an array's null item a present null), so a body equal to either has exactly the
record's values: no unknown or duplicate property, no other number form, no trailing text.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from contracts.formats.markers import pointer

if TYPE_CHECKING:
    from pyspark.sql import Column

    from contracts.formats.json_schema.types import Shape


def written_from(record: Column, spark_type: Any, text: Column) -> Column:
    """True where `text` is `record`'s compact or spaced JSON text (the spaced one built only
    where the compact one differs)."""
    from pyspark.sql import functions as F

    return F.when(F.to_json(record) == text, F.lit(True)).otherwise(spaced(record, spark_type) == text)


def spaced(value: Column, data_type: Any) -> Column:
    """The JSON text of a non-null `value` with ", " and ": " between items, as `json.dumps`
    writes (strings and numbers as `to_json` writes them)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        members = [
            F.when(
                value.getField(f.name).isNotNull(),
                F.concat(F.lit(json.dumps(f.name) + ": "), spaced(value.getField(f.name), f.dataType)),
            )
            for f in data_type.fields
        ]
        return F.concat(F.lit("{"), F.concat_ws(", ", *members), F.lit("}"))
    if isinstance(data_type, T.ArrayType):
        element = data_type.elementType

        def item(x: Column) -> Column:
            return F.when(x.isNull(), F.lit("null")).otherwise(spaced(x, element))

        return F.concat(F.lit("["), F.array_join(F.transform(value, item), ", "), F.lit("]"))
    # A scalar: `to_json` of a one-field struct, `{"v":` and `}` cut off.
    wrapped = F.to_json(F.struct(value.alias("v")))
    return wrapped.substr(F.lit(6), F.length(wrapped) - F.lit(6))


def absent_pointers(record: Column, shape: Shape) -> Column:
    """The `ABSENT_FIELD` of a record read from such a text: the JSON pointers of its null optional
    properties that accept null (the text left them out: both layouts omit a null struct field),
    null when there are none (docs/semantics.md §1.5)."""
    from pyspark.sql import functions as F

    pointers = _pointers(record, shape, F.lit(""))
    return F.when(F.size(pointers) > 0, pointers)


def _pointers(value: Column, shape: Shape, at: Column) -> Column:
    """array<string>: the pointers below `value` (at pointer `at`) of null optional nullable
    properties, in document order (as the Python decoder lists them); none below a null value."""
    from pyspark.sql import functions as F

    empty = F.array().cast("array<string>")
    parts: list[Column] = []
    if shape.kind == "object":
        for name, field, required in shape.fields:
            where = F.concat(at, F.lit(pointer("", name)))
            item = value.getField(name)
            if field.nullable and not required:
                parts.append(F.when(item.isNull(), F.array(where)).otherwise(empty))
            if field.has_optional_nulls:
                parts.append(_pointers(item, field, where))
    elif shape.kind == "array" and shape.item is not None and shape.item.has_optional_nulls:
        item_shape = shape.item
        nested = F.transform(
            value,
            lambda x, i: _pointers(x, item_shape, F.concat(at, F.lit("/"), i.cast("string"))),
        )
        parts.append(F.flatten(nested))
    if not parts:
        return empty
    joined = parts[0] if len(parts) == 1 else F.concat(*parts)
    return F.when(value.isNull(), empty).otherwise(joined)


def absent_in_text(text: Column, shape: Shape) -> Column:
    """The `ABSENT_FIELD` of the record whose JSON document is `text` (any layout): the JSON
    pointers of the optional properties that accept null and that the document leaves out, in
    document order as the Python decoder lists them; null when there are none."""
    from pyspark.sql import functions as F

    pointers = _text_pointers(text, shape, F.lit(""))
    return F.when(F.size(pointers) > 0, pointers)


def _text_pointers(text: Column, shape: Shape, at: Column) -> Column:
    """array<string>: `_pointers` for the JSON text of a value (null: none), read by its keys."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    empty = F.array().cast("array<string>")
    parts: list[Column] = []
    if shape.kind == "object":
        keys = F.json_object_keys(text)
        nested = [(name, field) for name, field, _ in shape.fields if field.has_optional_nulls]
        # Each nested value's own text: from_json gives a string field the raw JSON of its value.
        raw = F.from_json(text, T.StructType([T.StructField(name, T.StringType()) for name, _ in nested]))
        for name, field, required in shape.fields:
            where = F.concat(at, F.lit(pointer("", name)))
            if field.nullable and not required:
                left_out = ~F.coalesce(F.array_contains(keys, name), F.lit(False))
                parts.append(F.when(left_out, F.array(where)).otherwise(empty))
            if field.has_optional_nulls:
                parts.append(_text_pointers(raw.getField(name), field, where))
    elif shape.kind in ("array", "map") and shape.item is not None and shape.item.has_optional_nulls:
        item = shape.item
        if shape.kind == "array":
            elements = F.from_json(text, T.ArrayType(T.StringType()))
            nested = F.transform(
                elements, lambda x, i: _text_pointers(x, item, F.concat(at, F.lit("/"), i.cast("string")))
            )
        else:
            entries = F.map_entries(F.from_json(text, T.MapType(T.StringType(), T.StringType())))
            nested = F.transform(
                entries,
                lambda e: _text_pointers(
                    e["value"],
                    item,
                    F.concat(
                        at,
                        F.lit("/"),
                        F.replace(F.replace(e["key"], F.lit("~"), F.lit("~0")), F.lit("/"), F.lit("~1")),
                    ),
                ),
            )
        parts.append(F.coalesce(F.flatten(nested), empty))
    if not parts:
        return empty
    joined = parts[0] if len(parts) == 1 else F.concat(*parts)
    return F.when(text.isNull() | (F.trim(text) == F.lit("null")), empty).otherwise(joined)
