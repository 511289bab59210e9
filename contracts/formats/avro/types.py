"""Avro schemas → Spark types, following spark-avro's SchemaConverters.toSqlType.

Schemas here are fastavro *parsed* schemas: named types carry their full name in `name`, and a
type used again later appears as that name string (resolved through the `_Names` registry).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import fastavro
from pyspark.sql import types as T

from contracts.errors import ContractError
from contracts.formats.markers import LOGICAL_TYPES_KEY, TYPE_KEY

AvroSchema = str | list[Any] | dict[str, Any]

TAGS_PROP = "confluent:tags"
FULL_NAME_KEY = "avro.fullName"
ARRAY_ELEMENT = "[]"
MAP_VALUE = "{}"

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "enum", "fixed"})
_SIMPLE_SPARK = {
    "null": T.NullType(),
    "boolean": T.BooleanType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "bytes": T.BinaryType(),
    "fixed": T.BinaryType(),
    "string": T.StringType(),
    "enum": T.StringType(),
}
_LOGICAL_SPARK = {
    "date": T.DateType(),
    "timestamp-millis": T.TimestampType(),
    "timestamp-micros": T.TimestampType(),
    "local-timestamp-millis": T.TimestampNTZType(),
    "local-timestamp-micros": T.TimestampNTZType(),
}
# spark-avro widens a two-branch union of these primitives (no null) to the wider type.
_WIDENED = {frozenset({"int", "long"}): T.LongType(), frozenset({"float", "double"}): T.DoubleType()}
_MAX_DECIMAL_PRECISION = 38
MAX_SPARK_FIELDS = 100_000
"""The most fields (nested ones included) a Spark type of an Avro schema may have: a record type
used by several fields is a copy in each, so a schema of a few dozen named types can expand to
millions (docs/semantics.md §1.4)."""


def parse_schema(schema: str | AvroSchema, references: Sequence[str | AvroSchema] = ()) -> AvroSchema:
    """Parse Avro schema text (or JSON data) with fastavro, resolving names from referenced schemas.

    `references` are the schema strings of the registered schemas this one refers to, dependencies
    first (as Confluent lists them); their named types become visible to `schema`.
    """
    named: dict[str, Any] = {}
    for index, reference in enumerate(references):
        _parse_one(reference, named, f"references[{index}]")
    return _parse_one(schema, named, None)


def _parse_one(schema: str | AvroSchema, named: dict[str, Any], position: str | None) -> AvroSchema:
    try:
        data = json.loads(schema) if isinstance(schema, str) and schema.lstrip()[:1] in '{["' else schema
        return fastavro.parse_schema(data, named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as e:
        raise ContractError(f"invalid Avro schema: {e}", position=position) from e


class _Names:
    """Resolves name references of a parsed schema to their definitions (fastavro keeps full names)."""

    def __init__(self, schema: AvroSchema) -> None:
        self.named: dict[str, Any] = (
            dict(schema.get("__named_schemas", {})) if isinstance(schema, dict) else {}
        )

    def resolve(self, schema: AvroSchema, where: str) -> dict[str, Any] | list[Any]:
        """The schema as a dict (or a union list): primitives as {"type": p}, names looked up."""
        if isinstance(schema, list):
            return schema
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return {"type": schema}
            if schema not in self.named:
                raise ContractError(
                    f"unknown Avro type {schema!r}: is a schema reference missing?", position=where
                )
            return self.named[schema]
        if schema.get("type") in _NAMED:
            self.named.setdefault(schema["name"], schema)
        return schema


def non_null_branches(union: list[Any]) -> list[Any]:
    """The union's branches other than null (spark-avro drops null and makes the type nullable)."""
    return [branch for branch in union if branch != "null" and branch != {"type": "null"}]


def type_name(schema: AvroSchema) -> str:
    """Confluent's FieldType name of a schema; a ["null", T] union is named after T (COMBINED otherwise)."""
    return _type_name(schema, _Names(schema))


def _type_name(schema: AvroSchema, names: _Names) -> str:
    resolved = names.resolve(schema, "")
    if isinstance(resolved, list):
        branches = non_null_branches(resolved)
        if len(branches) > 1:
            return "COMBINED"
        return _type_name(branches[0], names) if branches else "NULL"
    return str(resolved["type"]).upper()


def _logical_types(schema: AvroSchema, names: _Names) -> set[str]:
    resolved = names.resolve(schema, "")
    if isinstance(resolved, list):
        return set().union(*(_logical_types(branch, names) for branch in resolved))
    kind = resolved["type"]
    if kind == "array":
        return _logical_types(resolved["items"], names)
    if kind == "map":
        return _logical_types(resolved["values"], names)
    logical = resolved.get("logicalType")
    return {logical} if isinstance(logical, str) else set()


def spark_type(schema: AvroSchema) -> tuple[T.DataType, bool]:
    """The Spark type and nullability of values of any Avro schema (spark-avro's toSqlType).

    For a non-record top-level schema the caller wraps the value in a one-column struct:
    `StructType([StructField("value", dtype, nullable)])`, and converts values one by one.
    """
    return _Converter(_Names(schema)).convert(schema, (), "")


def struct_type(schema: AvroSchema) -> T.StructType:
    """The StructType of a DataFrame holding records of a record schema, with tags in field metadata."""
    names = _Names(schema)
    resolved = names.resolve(schema, "")
    if not isinstance(resolved, dict) or resolved["type"] != "record":
        raise ContractError(
            "a DataFrame needs a record schema at the top level; wrap other values with spark_type()",
            position=str(schema)[:80],
        )
    dtype, _ = _Converter(names).convert(resolved, (), "")
    assert isinstance(dtype, T.StructType)
    return dtype


class _Converter:
    """One schema's type conversion: tracks the records being expanded to refuse recursion, and
    converts each record type once (`done`), counting the fields its expansion holds (`sizes`) to
    refuse an expansion beyond MAX_SPARK_FIELDS before building it."""

    def __init__(self, names: _Names) -> None:
        self.names = names
        self.done: dict[str, T.StructType] = {}
        self.sizes: dict[int, int] = {}  # by id() of a StructType in `done`, which keeps it alive

    def convert(
        self, schema: AvroSchema, open_records: tuple[str, ...], where: str
    ) -> tuple[T.DataType, bool]:
        resolved = self.names.resolve(schema, where)
        if isinstance(resolved, list):
            return self._union(resolved, open_records, where)
        kind = resolved["type"]
        if kind == "record":
            return self._record(resolved, open_records, where), False
        if kind == "array":
            element, contains_null = self.convert(
                resolved["items"], open_records, _join(where, ARRAY_ELEMENT)
            )
            return T.ArrayType(element, contains_null), False
        if kind == "map":
            value, value_null = self.convert(resolved["values"], open_records, _join(where, MAP_VALUE))
            return T.MapType(T.StringType(), value, value_null), False
        return _leaf_type(resolved, where), kind == "null"

    def _record(self, record: dict[str, Any], open_records: tuple[str, ...], where: str) -> T.StructType:
        name = record["name"]
        if name in self.done:
            # Converted without meeting itself: the same type wherever it is used.
            return self.done[name]
        if name in open_records:
            # spark-avro refuses recursion too (unless recursiveFieldMaxDepth truncates it).
            raise ContractError(
                f"recursive Avro schema: record {name!r} contains itself, which Spark types cannot represent",
                position=where or name,
            )
        inner = (*open_records, name)
        fields = []
        for field in record["fields"]:
            path = _join(where, field["name"])
            dtype, nullable = self.convert(field["type"], inner, path)
            metadata = {
                FULL_NAME_KEY: f"{name}.{field['name']}",
                TYPE_KEY: _type_name(field["type"], self.names),
            }
            logical = sorted(_logical_types(field["type"], self.names))
            if logical:
                metadata[LOGICAL_TYPES_KEY] = logical
            if field.get(TAGS_PROP):
                metadata[TAGS_PROP] = list(field[TAGS_PROP])
            fields.append(T.StructField(field["name"], dtype, nullable, metadata))
        struct = T.StructType(fields)
        size = self._size(struct)
        if size > MAX_SPARK_FIELDS:
            raise ContractError(
                f"Avro record {name!r} expands to {size} Spark fields (each use of a record type is a"
                f" copy), more than the {MAX_SPARK_FIELDS} allowed",
                position=where or name,
            )
        self.done[name], self.sizes[id(struct)] = struct, size
        return struct

    def _size(self, dtype: T.DataType) -> int:
        """The fields nested in `dtype` when expanded, each converted record's counted once."""
        if isinstance(dtype, T.ArrayType):
            return self._size(dtype.elementType)
        if isinstance(dtype, T.MapType):
            return self._size(dtype.valueType)
        if not isinstance(dtype, T.StructType):
            return 0
        known = self.sizes.get(id(dtype))
        return known if known is not None else sum(1 + self._size(f.dataType) for f in dtype.fields)

    def _union(self, union: list[Any], open_records: tuple[str, ...], where: str) -> tuple[T.DataType, bool]:
        branches = non_null_branches(union)
        nullable = len(branches) < len(union)
        if not branches:
            return T.NullType(), True
        if len(branches) == 1:
            dtype, branch_null = self.convert(branches[0], open_records, where)
            return dtype, nullable or branch_null
        widened = _widened(branches)
        if widened is not None:
            return widened, nullable
        members = [
            T.StructField(
                f"member{i}", self.convert(branch, open_records, _join(where, f"member{i}"))[0], True
            )
            for i, branch in enumerate(branches)
        ]
        return T.StructType(members), nullable


def is_widened_union(branches: list[Any]) -> bool:
    """Whether spark-avro maps these non-null branches to one numeric type instead of member structs."""
    return _widened(branches) is not None


def _widened(branches: list[Any]) -> T.DataType | None:
    # Only bare primitives: spark-avro also widens int+long logical types (date, timestamps) to
    # LongType, which would lose the logical values fastavro returns — those get member structs.
    if all(isinstance(branch, str) for branch in branches):
        return _WIDENED.get(frozenset(branches)) if len(branches) == 2 else None
    return None


def _leaf_type(schema: dict[str, Any], where: str) -> T.DataType:
    logical = schema.get("logicalType")
    if logical == "decimal" and schema["type"] in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if not 0 < precision <= _MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
            raise ContractError(
                f"decimal({precision}, {scale}) does not fit Spark's DecimalType (precision 1..38)",
                position=where,
            )
        return T.DecimalType(precision, scale)
    if logical in _LOGICAL_SPARK and schema["type"] == ("int" if logical == "date" else "long"):
        return _LOGICAL_SPARK[logical]
    return _SIMPLE_SPARK[schema["type"]]


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name
