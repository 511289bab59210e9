"""Avro ↔ Spark: schemas to Spark types (spark-avro's conventions), the CEL_FIELD field walk, and values.

Schemas are fastavro parsed schemas (`parse_schema`). Spark types follow spark-avro's
`SchemaConverters.toSqlType`: records → structs, arrays → ArrayType, maps → MapType(string, …),
enums and uuid → string, fixed and bytes → binary, ["null", T] → nullable T, other unions →
struct<member0, …, memberN> (nulls dropped), date → DateType, time-millis/micros → int/long,
timestamp-* → TimestampType, local-timestamp-* → TimestampNTZType, decimal → DecimalType.
Every record field's StructField metadata holds `avro.fullName`, `avro.type` and, when the
field has any, its inline `confluent:tags`.
"""

from __future__ import annotations

from contracts._avro_types import (
    ARRAY_ELEMENT,
    FULL_NAME_KEY,
    MAP_VALUE,
    TAGS_PROP,
    TYPE_KEY,
    AvroField,
    AvroSchema,
    avro_fields,
    parse_schema,
    spark_type,
    struct_type,
    type_name,
)

__all__ = [
    "ARRAY_ELEMENT",
    "FULL_NAME_KEY",
    "MAP_VALUE",
    "TAGS_PROP",
    "TYPE_KEY",
    "AvroField",
    "AvroSchema",
    "avro_fields",
    "parse_schema",
    "spark_type",
    "struct_type",
    "type_name",
]
