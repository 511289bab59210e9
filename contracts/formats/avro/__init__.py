"""Avro ↔ Spark: schemas to Spark types (spark-avro's conventions) and values.

Schemas are fastavro parsed schemas (`parse_schema`). Spark types follow spark-avro's
`SchemaConverters.toSqlType`: records → structs, arrays → ArrayType, maps → MapType(string, …),
enums and uuid → string, fixed and bytes → binary, ["null", T] → nullable T, other unions →
struct<member0, …, memberN> (nulls dropped), date → DateType, time-millis/micros → int/long,
timestamp-* → TimestampType, local-timestamp-* → TimestampNTZType, decimal → DecimalType.
Every record field's StructField metadata holds `avro.fullName`, `avro.type` and, when the
field has any, its inline `confluent:tags`.

Values: `avro_to_spark_value` / `spark_to_avro_value` convert one value (record dicts as fastavro
reads them ↔ createDataFrame input / collected Rows); `records_to_arrow` / `arrow_to_records`
convert whole batches for `mapInArrow`; `read_records` also reads rows whose strings are not valid
UTF-8 (Spark's strings may hold any bytes), naming them instead of failing the batch. Converters
are compiled once per parsed schema object and cached, so pass the same parsed schema each time.
A non-record top-level schema has no DataFrame of its own: wrap its value as
`StructType([StructField("value", *spark_type(schema))])`.
"""

from __future__ import annotations

from contracts.formats.arrow_types import arrow_schema, arrow_type
from contracts.formats.avro.types import (
    ARRAY_ELEMENT,
    FULL_NAME_KEY,
    LOGICAL_TYPES_KEY,
    MAP_VALUE,
    TAGS_PROP,
    TYPE_KEY,
    AvroSchema,
    parse_schema,
    spark_type,
    struct_type,
    type_name,
)
from contracts.formats.avro.values import (
    Records,
    arrow_ready,
    arrow_to_records,
    avro_to_spark_value,
    chooses_union_branches,
    read_records,
    read_struct,
    records_to_arrow,
    records_to_struct,
    spark_to_avro_value,
)

__all__ = [
    "ARRAY_ELEMENT",
    "FULL_NAME_KEY",
    "LOGICAL_TYPES_KEY",
    "MAP_VALUE",
    "TAGS_PROP",
    "TYPE_KEY",
    "AvroSchema",
    "Records",
    "arrow_ready",
    "arrow_schema",
    "arrow_to_records",
    "arrow_type",
    "avro_to_spark_value",
    "chooses_union_branches",
    "parse_schema",
    "read_records",
    "read_struct",
    "records_to_arrow",
    "records_to_struct",
    "spark_to_avro_value",
    "spark_type",
    "struct_type",
    "type_name",
]
