"""Spark types as the Arrow types Spark's Python passes (`mapInArrow`) exchange, shared by the
formats and the engine: timestamps in UTC, no large types."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from contracts.errors import SerializationError


def arrow_schema(struct: T.StructType) -> pa.Schema:
    """The Arrow schema Spark uses for a StructType in mapInArrow (timestamps in UTC, no large types)."""
    return pa.schema([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in struct.fields])


_ARROW_READABLE = {T.TimestampType(): pa.int64(), T.TimestampNTZType(): pa.int64(), T.DateType(): pa.int32()}


def arrow_type(dtype: T.DataType) -> pa.DataType:
    """The Arrow type of a Spark type, as pyspark's to_arrow_type builds it for the types Avro maps to."""
    return _arrow(dtype, readable=False)


_ARROW_ATOMIC = {
    T.NullType(): pa.null(),
    T.BooleanType(): pa.bool_(),
    T.IntegerType(): pa.int32(),
    T.LongType(): pa.int64(),
    T.FloatType(): pa.float32(),
    T.DoubleType(): pa.float64(),
    T.StringType(): pa.string(),
    T.BinaryType(): pa.binary(),
    T.DateType(): pa.date32(),
    T.TimestampType(): pa.timestamp("us", tz="UTC"),
    T.TimestampNTZType(): pa.timestamp("us"),
    T.DayTimeIntervalType(): pa.duration("us"),  # Protobuf's Duration
}


def readable_arrow_type(dtype: T.DataType) -> pa.DataType:
    """The Arrow type Python code reads a Spark type's values as: all nullable, timestamps as int64 µs
    and dates as int32 days."""
    return _arrow(dtype, readable=True)


def _arrow(dtype: T.DataType, readable: bool) -> pa.DataType:
    """Spark's Arrow type; `readable`: all nullable, timestamps as int64 µs and dates as int32 days."""
    if isinstance(dtype, T.StructType):
        return pa.struct(
            [pa.field(f.name, _arrow(f.dataType, readable), readable or f.nullable) for f in dtype.fields]
        )
    if isinstance(dtype, T.ArrayType):
        return pa.list_(
            pa.field("element", _arrow(dtype.elementType, readable), readable or dtype.containsNull)
        )
    if isinstance(dtype, T.MapType):
        return pa.map_(
            pa.field("key", _arrow(dtype.keyType, readable), False),
            pa.field("value", _arrow(dtype.valueType, readable), readable or dtype.valueContainsNull),
        )
    if readable and dtype in _ARROW_READABLE:
        return _ARROW_READABLE[dtype]
    if isinstance(dtype, T.DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    if dtype in _ARROW_ATOMIC:
        return _ARROW_ATOMIC[dtype]
    raise SerializationError(f"Spark type {dtype.simpleString()} has no Arrow counterpart here")
