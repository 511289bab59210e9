"""Schema id headers: a Kafka header (`__value_schema_id`, `__key_schema_id`) naming the schema of
a bare body, read on decode and written or dropped on encode (docs/semantics.md §8.1)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from contracts.errors import ContractError
from contracts.formats.arrow_text import text_values
from contracts.formats.wire import (
    SchemaRef,
    encode_prefix,
)
from contracts.planning.loader import ContractVersion

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


SCHEMA_ID_SERIALIZERS = ("prefix", "prefix_guid", "header")
"""Where `serialize` names the schema: "prefix", its id in a V0 prefix (the reference's
prefix_schema_id_serializer); "prefix_guid", its GUID in a V1 prefix; "header", its GUID in a
schema id header, the payload the bare body (the reference's header_schema_id_serializer)."""


def is_kafka_headers(data_type: Any) -> bool:
    """Whether a Spark type is Kafka headers as Spark's Kafka source reads them (includeHeaders):
    array<struct<key: string, value: binary>>."""
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructType

    element = data_type.elementType if isinstance(data_type, ArrayType) else None
    if not isinstance(element, StructType) or element.fieldNames() != ["key", "value"]:
        return False
    return isinstance(element["key"].dataType, StringType) and isinstance(
        element["value"].dataType, BinaryType
    )


@dataclass(frozen=True)
class SchemaIdHeaders:
    """What the encode pass does to the rows' Kafka headers in `column` (created when the input
    has none): every `key` header goes, as it named the schema of a value being replaced, and
    with a `value`, one header `key` naming the new value's schema is added last."""

    column: str
    key: str
    value: bytes | None
    from_input: bool

    def rewritten(self, batch: pa.RecordBatch, data_type: pa.DataType, framed: list[bool]) -> pa.Array:
        """The batch's headers column, rewritten (the input's own when there is nothing to change);
        the schema id header is added to the `framed` rows only (a null record has no schema)."""
        headers = batch.column(self.column) if self.from_input else pa.nulls(batch.num_rows, data_type)
        if self.value is None and (
            not self.from_input or schema_id_headers(batch, self.column, self.key) is None
        ):
            return headers
        added = [] if self.value is None else [{"key": self.key, "value": self.value}]
        rows = [
            None
            if row is None and not (added and has_frame)
            else [*(h for h in row or () if h["key"] != self.key), *(added if has_frame else ())]
            for row, has_frame in zip(headers.to_pylist(), framed, strict=True)
        ]
        return pa.array(rows, type=data_type)


def schema_id_headers(
    batch: pa.RecordBatch, headers_column: str | None, header: str
) -> list[bytes | None] | None:
    """Per row, the value of its last `header` (None where it has none, or a null one); None for
    the whole batch when no row has one, the common case, found without leaving Arrow."""
    if headers_column is None:
        return None
    headers = batch.column(headers_column)
    entries = pc.list_flatten(headers)
    if not len(entries) or not pc.any(pc.equal(entries.field("key"), header)).as_py():
        return None
    return [_last_header(row, header) for row in text_values(headers)]


def _last_header(row: list[dict[str, Any]] | None, header: str) -> bytes | None:
    """The value of the last header called `header` in one row's headers, as Kafka's
    `Headers.lastHeader` and Confluent's Java deserializer take it."""
    for entry in reversed(row or ()):
        if entry["key"] == header:
            return entry["value"]
    return None


def schema_ref(target: ContractVersion, schema_id_serializer: str) -> SchemaRef:
    """What `serialize` names the target's schema by: its id, or its GUID (for "prefix_guid" and
    "header"), which the registry must have given."""
    if schema_id_serializer not in SCHEMA_ID_SERIALIZERS:
        raise ContractError(
            f"schema_id_serializer must be one of {', '.join(SCHEMA_ID_SERIALIZERS)},"
            f" not {schema_id_serializer!r}",
            subject=target.subject,
            version=target.version,
        )
    if schema_id_serializer == "prefix":
        return target.schema_id
    if target.guid is None:
        raise ContractError(
            f"the registry gave no GUID for this version (Confluent Schema Registry gives one from"
            f" 8.0), so schema_id_serializer={schema_id_serializer!r} cannot name it: use 'prefix'",
            subject=target.subject,
            version=target.version,
        )
    return uuid.UUID(target.guid)


def serialized_headers(
    df: DataFrame, target: ContractVersion, schema_id_serializer: str, schema_ref: SchemaRef, header: str
) -> SchemaIdHeaders | None:
    """What `serialize` does to the `headers` column: adds the schema id header ("header"),
    drops the input's own schema id headers, or (no Kafka headers to touch) nothing."""
    present = "headers" in df.columns and "headers" not in target.spark_type.fieldNames()
    kafka = present and is_kafka_headers(df.schema["headers"].dataType)
    if schema_id_serializer != "header":
        return SchemaIdHeaders("headers", header, None, True) if kafka else None
    if "headers" in target.spark_type.fieldNames() or (present and not kafka):
        what = (
            "is a field of the record"
            if not present
            else f"is {df.schema['headers'].dataType.simpleString()}"
        )
        raise ContractError(
            f"schema_id_serializer='header' writes the schema id into a `headers` column of Kafka"
            f" headers (array<struct<key:string,value:binary>>), and `headers` {what}",
            subject=target.subject,
            version=target.version,
        )
    return SchemaIdHeaders("headers", header, encode_prefix(schema_ref), present)


def headers_field() -> Any:
    """The `headers` column `serialize` adds for a schema id header, typed as Spark's Kafka source
    and sink type Kafka headers."""
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    entry = StructType([StructField("key", StringType(), False), StructField("value", BinaryType(), True)])
    return StructField("headers", ArrayType(entry, False), True)
