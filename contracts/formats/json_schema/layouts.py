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

if TYPE_CHECKING:
    from pyspark.sql import Column


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
