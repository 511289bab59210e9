"""A WRITE-side DLQ value's Protobuf message read back into its record (docs/semantics.md §7.7).

The value is the message in the protobuf JSON mapping, as `MessageToJson` prints it (JSON names,
64-bit integers as strings, bytes in base64, enums by name, well-known types in their JSON form,
fields at their default left out). Spark has no reader of that mapping, so the values are read
by protobuf's own parser, the exact inverse of the printer, in an Arrow UDF: only the value
column crosses to Python, a batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.errors import SerializationError
from contracts.formats.protobuf.values import to_record
from contracts.registry.protobuf_schema import ProtoSchema

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class DlqValues:
    """The picklable UDF body: each batch of DLQ values as a struct column of records, null where
    a value holds no JSON object (a read-side record's frame)."""

    schema_format: Any
    """The ProtobufFormat that parsed `parsed` (it turns records into Spark's struct)."""
    parsed: ProtoSchema
    spark_type_json: str
    """The struct type of the result, without field metadata (as Spark reads an Arrow result)."""

    def column(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        def read(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
            return self(batches)

        return F.arrow_udf(read, self._spark_type)(value)

    @property
    def _spark_type(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.spark_type_json))

    def __call__(self, batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        from google.protobuf.json_format import Parse, ParseError
        from google.protobuf.message_factory import GetMessageClass
        from pyspark.sql.pandas.types import to_arrow_type

        message_type = GetMessageClass(self.parsed.message())
        record_type = to_arrow_type(self._spark_type, timezone="UTC")
        for values in batches:
            records: list[Any] = []
            for value in values.to_pylist():
                if value is None or not value.lstrip().startswith(b"{"):
                    records.append(None)
                    continue
                message = message_type()
                try:
                    Parse(value, message)
                except (ParseError, UnicodeDecodeError) as e:
                    raise SerializationError(
                        f"a DLQ value holds no {self.parsed.message_name} message in the protobuf JSON"
                        f" mapping: {e}"
                    ) from e
                records.append(to_record(message))
            yield self.schema_format.to_struct(records, self.parsed, record_type)


def read_dlq_value(value: Column, parsed: ProtoSchema, schema_format: Any, spark_type: StructType) -> Column:
    """The records `value`'s DLQ values hold, as a struct column of `spark_type` (DlqValues)."""
    plain = json.dumps(_without_metadata(spark_type.jsonValue()))
    return DlqValues(schema_format, parsed, plain).column(value)


def _without_metadata(node: Any) -> Any:
    """A Spark type's JSON with every field's metadata emptied: an Arrow UDF's result type must be
    the one Spark reads back from Arrow, which carries none."""
    if isinstance(node, dict):
        return {key: {} if key == "metadata" else _without_metadata(item) for key, item in node.items()}
    if isinstance(node, list):
        return [_without_metadata(item) for item in node]
    return node
