"""A WRITE-side DLQ value's JSON record read back into the Spark record of its Avro schema,
natively (docs/semantics.md §7.7).

A WRITE-side DLQ value is the record as JSON (docs/semantics.md §7.3): bytes as latin-1 text,
decimals, dates, timestamps and times as their Python text, non-finite floats as "NaN",
"Infinity" or "-Infinity". Spark's `from_json` reads each field as text where its JSON form is
text, and Column expressions turn that text into the field's Spark value, so reading a DLQ
topic back needs no Python pass. A union of several non-null branches has no such reading: its
JSON value does not say which branch it belongs to, so such a schema is refused here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from contracts.errors import ContractError
from contracts.formats.avro.types import AvroSchema, _Names, is_widened_union, non_null_branches, spark_type

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

Convert = Callable[["Column"], "Column"]
"""Turns the value `from_json` read for a field into the field's Spark value."""

_TIME_UNITS = {"time-millis": 1_000, "time-micros": 1_000_000}


def read_dlq_value(value: Column, schema: AvroSchema) -> Column:
    """The record a DLQ `value` (binary) holds as a JSON object, as the Spark struct of `schema`;
    null where the value is no JSON object (a deserialize reject's wire bytes, a primitive).

    A JSON object that does not fit the schema (a field of the wrong type) fails the Spark job
    with from_json's error, instead of reading as nulls."""
    from pyspark.sql import functions as F

    read_type, convert = _reader(_Names(schema), schema, "")
    text = value.cast("string")
    parsed = F.from_json(text, read_type, {"mode": "FAILFAST"})
    record = parsed if convert is None else convert(parsed)
    return F.when(text.startswith("{"), record)


def _reader(names: _Names, schema: AvroSchema, where: str) -> tuple[DataType, Convert | None]:
    """What `from_json` reads a value of `schema` as, and how that becomes its Spark value."""
    from pyspark.sql import types as T

    resolved = names.resolve(schema, where)
    if isinstance(resolved, list):
        return _union(names, resolved, where)
    kind = resolved["type"]
    if kind == "record":
        return _record(names, resolved, where)
    if kind == "array":
        item_type, item = _reader(names, resolved["items"], _join(where, "[]"))
        return T.ArrayType(item_type), None if item is None else _each(item)
    if kind == "map":
        value_type, value = _reader(names, resolved["values"], _join(where, "{}"))
        return T.MapType(T.StringType(), value_type), None if value is None else _each_value(value)
    return _leaf(resolved)


def _record(names: _Names, record: dict[str, Any], where: str) -> tuple[DataType, Convert | None]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = [
        (field["name"], *_reader(names, field["type"], _join(where, field["name"])))
        for field in record["fields"]
    ]
    read_type = T.StructType([T.StructField(name, dtype) for name, dtype, _ in fields])
    if all(convert is None for _, _, convert in fields):
        return read_type, None

    def convert(column: Column) -> Column:
        values = [
            (column[name] if each is None else each(column[name])).alias(name) for name, _, each in fields
        ]
        return F.when(column.isNotNull(), F.struct(*values))

    return read_type, convert


def _union(names: _Names, union: list[Any], where: str) -> tuple[DataType, Convert | None]:
    from pyspark.sql import types as T

    branches = non_null_branches(union)
    if not branches:
        return T.NullType(), None
    if len(branches) == 1:
        return _reader(names, branches[0], where)
    if is_widened_union(branches):
        return spark_type(branches)[0], None
    raise ContractError(
        "a DLQ value's JSON does not tell which branch of this union a value belongs to, so it"
        " cannot be read back into the record; read the `value` column as text instead",
        position=where or "the record",
    )


def _leaf(schema: dict[str, Any]) -> tuple[DataType, Convert | None]:
    """Text in JSON, typed in Spark: bytes (latin-1 text), decimals, dates, timestamps, times."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    target, _ = spark_type(schema)
    logical = schema.get("logicalType")
    if logical in _TIME_UNITS and isinstance(target, T.IntegerType | T.LongType):
        return T.StringType(), _time(_TIME_UNITS[logical], target)
    if isinstance(target, T.BinaryType):
        return T.StringType(), lambda column: F.encode(column, "ISO-8859-1")
    if isinstance(target, T.DecimalType | T.DateType | T.TimestampType | T.TimestampNTZType):
        return T.StringType(), lambda column: column.cast(target)
    return target, None


def _time(units_per_second: int, target: DataType) -> Convert:
    """Python's text of a time of day ("HH:MM:SS" or "HH:MM:SS.ffffff") → units since midnight."""
    from pyspark.sql import functions as F

    def convert(column: Column) -> Column:
        parts = F.split(column, ":")
        seconds = F.get(parts, 0).cast("long") * 3600 + F.get(parts, 1).cast("long") * 60
        whole = F.split(F.get(parts, 2), r"\.")
        fraction = F.coalesce(F.rpad(F.get(whole, 1), 6, "0").cast("long"), F.lit(0))
        micros = (seconds + F.get(whole, 0).cast("long")) * 1_000_000 + fraction
        units = micros * units_per_second / 1_000_000
        return F.when(column.isNotNull(), units.cast("long").cast(target))

    return convert


def _each(convert: Convert) -> Convert:
    from pyspark.sql import functions as F

    return lambda column: F.transform(column, convert)


def _each_value(convert: Convert) -> Convert:
    from pyspark.sql import functions as F

    return lambda column: F.transform_values(column, lambda _, value: convert(value))


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name
