"""Avro as a `SchemaFormat`: fastavro parses schemas and reads and writes bodies; the Spark types,
Arrow conversions and JSON view are this package's (types, values, json_view, sizes)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from contracts.bounded import BoundedCache
from contracts.formats.avro import dlq_columns
from contracts.formats.avro.dlq_value import read_dlq_value
from contracts.formats.avro.fields import AvroFieldWalk, schema_tree
from contracts.formats.avro.json_view import from_json_view, to_json_view
from contracts.formats.avro.project import project
from contracts.formats.avro.sizes import size_check
from contracts.formats.avro.strict import StrictReader
from contracts.formats.avro.types import AvroSchema, parse_schema, struct_type
from contracts.formats.avro.values import chooses_union_branches, read_struct, records_to_struct
from contracts.formats.dlq_value import record_value_bytes
from contracts.formats.fields import FieldTree, FieldVisit, Record
from contracts.formats.protocol import Records, Reference, RenderedValues

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

_Reader = tuple[AvroSchema, StrictReader, Callable[[bytes], None] | None]
_READERS: BoundedCache[int, _Reader] = BoundedCache(256)
"""Per process, for each writer schema (keyed by id, holding the schema): its reader and its
declared-size check."""
_BUFFER_REPR = re.compile(r"\s*from <_io\.BytesIO object at 0x[0-9a-fA-F]+>")


class AvroFormat:
    """The AVRO schema type (docs/semantics.md §1.4, §5.1, §8)."""

    schema_type = "AVRO"
    display_name = "Avro"
    decodes_as_read_back = True
    swaps_keep_schema = True

    def parse(self, schema_str: str, references: Sequence[Reference]) -> AvroSchema:
        return parse_schema(schema_str, tuple(reference.schema_str for reference in references))

    def spark_type(self, parsed: AvroSchema) -> StructType:
        return struct_type(parsed)

    def read_struct(self, column: pa.Array, parsed: AvroSchema, tagged: bool = False) -> Records:
        """With `tagged`, a multi-branch union's value carries its branch, as a writer needs it."""
        return read_struct(column, parsed, union_branches=tagged)

    def needs_tags(self, parsed: AvroSchema) -> bool:
        return chooses_union_branches(parsed)

    def to_struct(
        self, records: list[Any], parsed: AvroSchema, record_type: pa.DataType, tagged: bool = False
    ) -> pa.Array:
        return records_to_struct(records, parsed, record_type, tagged)

    def conform(self, record: Any, parsed: AvroSchema) -> Any:
        """Validated as fastavro validates (its message names the field), then written and read
        back with fastavro's writer, which fills defaults as the reference's serializer does."""
        try:
            validate(record, parsed, raise_errors=True)
        except ValidationError as e:
            raise ValueError("; ".join(map(str, e.errors)) or str(e)) from e
        buffer = io.BytesIO()
        schemaless_writer(buffer, parsed, record)
        buffer.seek(0)
        return schemaless_reader(buffer, parsed, None)

    def project(self, value: Any, parsed: AvroSchema) -> Any:
        return project(value, parsed)

    def to_json_view(self, record: Any, parsed: AvroSchema) -> Any:
        return to_json_view(record, parsed)

    def from_json_view(self, value: Any, parsed: AvroSchema) -> Any:
        return from_json_view(value, parsed)

    def decode(self, body: bytes, writer: AvroSchema, reader: AvroSchema | None, tagged: bool = False) -> Any:
        """The body's declared sizes are bounded first (docs/semantics.md §8.5), and an enum or
        union index outside its schema is refused (§8.3); with `tagged`, a multi-branch union's
        value is read with its branch name."""
        strict, check = _reader(writer)
        if check is not None:
            check(body)
        try:
            return strict.read(body, reader, tagged)
        except EOFError as e:
            raise EOFError(_ended_early(e)) from None

    def encode(self, record: Any, parsed: AvroSchema) -> bytes:
        body = io.BytesIO()
        schemaless_writer(body, parsed, record, strict=True)
        return body.getvalue()

    def dlq_value(self, record: Any, parsed: AvroSchema) -> bytes:
        """The record as JSON, bytes as latin-1 text, as the reference's DLQ action writes it."""
        return record_value_bytes(record) or b""

    def render_dlq_values(self, column: pa.Array, parsed: AvroSchema) -> RenderedValues | None:
        """`dlq_value` of a column's records, rendered field by field in Arrow where the record's
        fields are numbers, booleans and strings (contracts.formats.avro.dlq_columns)."""
        return dlq_columns.render(column, parsed)

    def field_tree(
        self, parsed: AvroSchema, metadata_tags: Mapping[str, tuple[str, ...]]
    ) -> FieldTree | None:
        tree = schema_tree(parsed, metadata_tags)
        return FieldTree(tree) if isinstance(tree, Record) else None

    def field_walk(
        self,
        parsed: AvroSchema,
        metadata_tags: Mapping[str, tuple[str, ...]],
        rule_tags: frozenset[str],
        visit: FieldVisit,
        condition: bool = False,
    ) -> Callable[[Any], Any]:
        return AvroFieldWalk(schema_tree(parsed, metadata_tags), rule_tags, visit, condition)

    def read_dlq_value(self, value: Column, parsed: AvroSchema) -> Column:
        """Natively: `from_json`, then Column expressions for the values JSON holds as text (a
        union of several non-null types, whose JSON does not say its branch, is refused)."""
        return read_dlq_value(value, parsed)

    def __repr__(self) -> str:
        return "AvroFormat()"


def _reader(schema: AvroSchema) -> tuple[StrictReader, Callable[[bytes], None] | None]:
    """What decoding a body of the writer `schema` takes: its reader and its size check."""
    hit = _READERS.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = _READERS.put(id(schema), (schema, StrictReader(schema), size_check(schema)))
    return hit[1], hit[2]


def _ended_early(error: EOFError) -> str:
    """fastavro's message for a body that ends before its schema does, without the buffer's repr
    (its address changes from run to run, and DLQ reasons must not)."""
    said = _BUFFER_REPR.sub("", str(error)).strip()
    return f"the body ends early ({said})" if said else "the body ends early"
