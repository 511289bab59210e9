"""The format protocol: what the engine needs of a registry `schemaType` (AVRO, and more to come).

A format parses a registered schema (with the schemas it references) into its own parsed form,
gives the Spark type of its records, converts between records (plain Python values, as the
reference clients hand them to rules) and Arrow batches for the Python passes, gives JSONata the
record's JSON view and reads it back, decodes and encodes record bodies (the bytes after the
wire format's header), writes a record as a DLQ record's value and reads that value back into
its record. Everything the engine does between those points is format-independent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from contracts.registry.references import Reference

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class Records:
    """Records read from Arrow (None for a null struct). Spark's strings may hold any bytes: a row
    with a string that is not valid UTF-8 holds it with each such byte replaced by U+FFFD, and
    `unreadable` gives its index and why (the field holding it), so each caller decides what the
    row does."""

    records: list[Any]
    unreadable: dict[int, str]


@dataclass(frozen=True)
class RenderedValues:
    """WRITE-side DLQ values of a column of records rendered at once: `values[i]` is row i's value,
    None for a null record and for the rows `left` lists, which the caller renders one by one."""

    values: list[bytes | None]
    left: list[int]


@runtime_checkable
class RendersDlqValues(Protocol):
    """A format that can render a column of records' DLQ values at once, as `dlq_value` renders
    each: optional, for speed where every row of a batch is rejected (a DLQ storm)."""

    def render_dlq_values(self, column: pa.Array, parsed: Any) -> RenderedValues | None:
        """The values of a struct column's records, or None where this schema's are rendered one by one."""
        ...


@runtime_checkable
class SchemaFormat(Protocol):
    """One registry schema type. `parsed` is whatever `parse` returns; it must pickle (it ships to
    Spark's workers inside plans) and is passed back to every other method."""

    schema_type: str
    """The registry's `schemaType` this format reads, upper case ("AVRO")."""

    def parse(self, schema_str: str, references: Sequence[Reference]) -> Any:
        """The schema text, with the schemas it references (theirs too), dependencies first;
        ContractError if invalid."""
        ...

    def spark_type(self, parsed: Any) -> StructType:
        """The Spark type of one record: the DataFrame's columns."""
        ...

    def read_struct(self, column: pa.Array, parsed: Any, tagged: bool = False) -> Records:
        """A struct column of `spark_type(parsed)` as records (None where the struct is null).

        `tagged` (here and below): values carry the type tags the format has, where a plain value
        cannot tell its type (Avro: the branch of a union), so a record converts back exactly.
        A format without such tags ignores it."""
        ...

    def needs_tags(self, parsed: Any) -> bool:
        """Whether some value of `parsed` cannot tell its type when plain (Avro: a union of several
        non-null branches), so records read to go back to Spark exactly are read `tagged`."""
        ...

    def to_struct(
        self, records: list[Any], parsed: Any, record_type: pa.DataType, tagged: bool = False
    ) -> pa.Array:
        """Records (None for rows without one) as a struct column of `record_type`."""
        ...

    def conform(self, record: Any, parsed: Any) -> Any:
        """A TRANSFORM rule's result as the writer stores it (missing fields take their defaults);
        raises ValueError (or TypeError) naming what does not fit when it is no record of `parsed`."""
        ...

    def project(self, value: Any, parsed: Any) -> Any:
        """A migrated value (a migration rule's result, in the JSON view or as a record) read as a
        record of `parsed`, the target version's schema; SerializationError saying what does not fit."""
        ...

    def to_json_view(self, record: Any, parsed: Any) -> Any:
        """The record as the JSON value JSONata reads (docs/semantics.md §5.1)."""
        ...

    def from_json_view(self, value: Any, parsed: Any) -> Any:
        """A JSON value a rule returned, read back as a record of `parsed` (docs/semantics.md §5.2)."""
        ...

    def decode(self, body: bytes, writer: Any, reader: Any | None, tagged: bool = False) -> Any:
        """A record body written with `writer`, read as `reader` (None: as written); raises on bad bytes."""
        ...

    def encode(self, record: Any, parsed: Any) -> bytes:
        """A record's body; raises when the record does not fit `parsed`."""
        ...

    def dlq_value(self, record: Any, parsed: Any) -> bytes:
        """A record (not None) as the value of a WRITE-side DLQ record, as the reference's DLQ
        action writes one of this format (docs/semantics.md §7.3)."""
        ...

    def read_dlq_value(self, value: Column, parsed: Any) -> Column:
        """The record a WRITE-side DLQ value holds (binary: the record as JSON as this format's DLQ
        records write it, docs/semantics.md §7.3) as a struct of `spark_type(parsed)`'s fields;
        null where the value holds no record (a read-side record's frame). A value that holds a
        record `parsed` cannot read fails the Spark job, saying why (docs/semantics.md §7.7)."""
        ...


@runtime_checkable
class ParsedSchema(Protocol):
    """A parsed schema with the format that parsed it: what reads a record of it back. A
    DataContract is one (its target version's)."""

    @property
    def schema_format(self) -> SchemaFormat: ...

    @property
    def parsed(self) -> Any: ...


# Optional members a format may have, read through the functions below (absent: their default).
# The tagged-field walk of CEL_FIELD and ENCRYPT rules is `contracts.formats.fields.FieldWalking`.


def presence_view(schema_format: SchemaFormat, parsed: Any) -> Callable[[Any], Any] | None:
    """What turns a record into what CEL reads of it where a field's presence is not its being a
    key (`presence_view(record, parsed)`, a `contracts.formats.markers.PresenceRecord`: Protobuf's);
    None for a format whose records say presence by their keys (Avro's, JSON Schema's)."""
    view = getattr(schema_format, "presence_view", None)
    return None if view is None else functools.partial(view, parsed=parsed)


def display_name(schema_format: SchemaFormat) -> str:
    """How messages name the format's bodies (`display_name`; default: its schema type)."""
    return str(getattr(schema_format, "display_name", schema_format.schema_type))


def choose_record(schema_format: SchemaFormat, name: str) -> SchemaFormat:
    """The format reading a schema's record as the type `name` names, for a format whose schema
    declares several (`with_record(name)`: Protobuf's messages); ContractError for another."""
    from contracts.errors import ContractError

    with_record = getattr(schema_format, "with_record", None)
    if with_record is None:
        raise ContractError(
            f"protobuf_message chooses the record among a Protobuf schema's messages, and this"
            f" schema is {schema_format.schema_type.upper()}",
            position="protobuf_message",
        )
    chosen: SchemaFormat = with_record(name)
    return chosen


def clear_length(schema_format: SchemaFormat, body: bytes) -> int:
    """How many leading bytes of a body encoding rules leave in clear (`clear_length(body)`:
    Protobuf's message indexes; default none); ValueError when the body is cut short there."""
    measure = getattr(schema_format, "clear_length", None)
    return 0 if measure is None else int(measure(body))


def decodes_as_read_back(schema_format: SchemaFormat) -> bool:
    """Whether `decode`'s records are those `read_struct` reads back from their Spark struct
    (`decodes_as_read_back`; default False): then rules can run on them in the decode pass itself."""
    return bool(getattr(schema_format, "decodes_as_read_back", False))


def swaps_keep_schema(schema_format: SchemaFormat) -> bool:
    """Whether a record stays a record of its schema when a string value is swapped for another
    string and a bytes value for other bytes (`swaps_keep_schema`; default False: a JSON Schema's
    string may have a pattern or a length): a transform doing only that needs no second check."""
    return bool(getattr(schema_format, "swaps_keep_schema", False))
