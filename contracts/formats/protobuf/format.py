"""Protobuf as a `SchemaFormat` (docs/semantics.md §1.6): `.proto` schemas compiled by protoc,
records as the reference's CEL sees a message (contracts/formats/protobuf/values.py), the JSON
view as the protobuf JSON mapping, and bodies as Confluent writes them: the message indexes of
the record's type, then the message's bytes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from contracts.formats.arrow_text import struct_values
from contracts.formats.fields import FieldTree, FieldVisit
from contracts.formats.protobuf import dlq_value
from contracts.formats.protobuf.fields import ProtobufFieldWalk
from contracts.formats.protobuf.indexes import read_indexes, write_indexes
from contracts.formats.protobuf.tree import protobuf_tree
from contracts.formats.protobuf.types import holds_decimal, struct_type
from contracts.formats.protobuf.values import (
    from_spark,
    presence_view,
    record_reader,
    spark_converters,
    to_message,
    to_record,
    to_spark,
)
from contracts.formats.protocol import Records, Reference
from contracts.registry.protobuf_schema import ProtoSchema, parse_proto

if TYPE_CHECKING:
    import pyarrow as pa
    from google.protobuf.descriptor import Descriptor
    from google.protobuf.message import Message
    from pyspark.sql import Column
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class _BodyReader:
    """What decoding a writer schema's bodies needs, looked up once per schema and process."""

    descriptor: Descriptor
    indexes: bytes
    """The record's message indexes as the reference serializer writes them."""
    parse: Callable[[bytes], Message]
    """The message's bytes parsed; ValueError naming the message when they are not one."""
    read: Callable[[Message], dict[str, Any]]
    holds_decimal: bool
    """Whether its records can hold a Decimal (then decode checks they fit their Spark decimal)."""


@lru_cache(maxsize=64)  # per row: a C-level cache, cheaper than a locked BoundedCache
def _body_reader(writer: ProtoSchema) -> _BodyReader:
    descriptor = writer.message()
    return _BodyReader(
        descriptor,
        write_indexes(writer.message_indexes),
        _parser(descriptor),
        record_reader(descriptor),
        holds_decimal(descriptor),
    )


def _parser(descriptor: Descriptor) -> Callable[[bytes], Message]:
    from google.protobuf.message import DecodeError
    from google.protobuf.message_factory import GetMessageClass

    message_type = GetMessageClass(descriptor)

    def parse(data: bytes) -> Message:
        message = message_type()
        try:
            message.ParseFromString(data)
        except DecodeError as e:
            raise ValueError(f"not a {descriptor.full_name} message: {e}") from e
        return message

    return parse


def protobuf_dlq_value(record: Any, parsed: ProtoSchema) -> bytes:
    """A WRITE-side DLQ record's value: the message's protobuf JSON as `MessageToJson` prints it,
    as the reference's DLQ action writes a message (a record that is no message: its repr)."""
    from google.protobuf.json_format import MessageToJson

    try:
        return MessageToJson(to_message(record, parsed.message())).encode("utf-8")
    except (TypeError, ValueError) as e:
        return f"{record!r} (not a {parsed.message_name} message: {e})".encode()


class ProtobufFormat:
    """The PROTOBUF schema type: `.proto` schemas whose record is the message named `message`
    (a full name, nested messages too: `acme.Outer.Inner`), by default the file's first."""

    schema_type = "PROTOBUF"

    def __init__(self, message: str | None = None) -> None:
        self.message = message

    def presence_view(self, record: Any, parsed: ProtoSchema) -> Any:
        """The record as CEL reads it, with protobuf's presence (docs/semantics.md §3.6)."""
        return presence_view(record, parsed.message())

    def with_record(self, message: str) -> ProtobufFormat:
        """This format reading each schema's record as the message of full name `message`."""
        return ProtobufFormat(message)

    def clear_length(self, body: bytes) -> int:
        """The body's message indexes, which encoding rules leave in clear (§11.5)."""
        return read_indexes(body)[1]

    def parse(self, schema_str: str, references: Sequence[Reference]) -> ProtoSchema:
        """The `.proto` text compiled with the referenced files, each under its reference's name,
        its record the chosen message; ContractError naming the file's messages when it lacks it."""
        parsed = parse_proto(schema_str, [(reference.name, reference.schema_str) for reference in references])
        if self.message is not None:
            parsed = parsed.choose(self.message)
        struct_type(parsed.message())  # a message without a Spark type fails at load
        return parsed

    def spark_type(self, parsed: ProtoSchema) -> StructType:
        return struct_type(parsed.message())

    def read_struct(self, column: pa.Array, parsed: ProtoSchema, tagged: bool = False) -> Records:
        """Each struct as a record (None for a null struct); a row whose value has no record (an
        enum name the enum lacks, a string that is not UTF-8) is unreadable, with why."""
        values, unreadable = struct_values(column)
        message = parsed.message()
        records: list[Any] = []
        for row, value in enumerate(values):
            try:
                records.append(None if value is None else from_spark(value, message))
            except ValueError as e:
                unreadable.setdefault(row, str(e))
                records.append(None)
        return Records(records, unreadable)

    def needs_tags(self, parsed: ProtoSchema) -> bool:
        return False

    def to_struct(
        self, records: list[Any], parsed: ProtoSchema, record_type: pa.DataType, tagged: bool = False
    ) -> pa.Array:
        import pyarrow as pa

        from contracts.errors import SerializationError

        converters = spark_converters(parsed.message())
        try:
            # Column by column: Arrow builds a column of plain values far faster than structs of dicts.
            children = []
            for (name, convert), arrow_field in zip(converters, record_type, strict=True):
                values = [None if record is None else record.get(name) for record in records]
                if convert is not None:
                    values = [None if value is None else convert(value) for value in values]
                children.append(pa.array(values, type=arrow_field.type))
            missing = pa.array([record is None for record in records], type=pa.bool_())
            return pa.StructArray.from_arrays(children, fields=list(record_type), mask=missing)
        except (TypeError, ValueError, AttributeError, pa.ArrowException) as e:
            raise SerializationError(f"records do not match the Protobuf message's Spark type: {e!r}") from e

    def conform(self, record: Any, parsed: ProtoSchema) -> Any:
        """The record as a message of the schema holds it: unset fields take their defaults;
        ValueError naming a field that is not the message's or a value its type cannot hold."""
        return to_record(to_message(record, parsed.message()))

    def project(self, value: Any, parsed: ProtoSchema) -> Any:
        """A migrated value as a record of the target message, read as protobuf reads another
        version's data: fields the target lacks are left out. The value is a record, or the JSON
        view a JSONata migration returns (read by the protobuf JSON mapping)."""
        from contracts.errors import SerializationError

        if not isinstance(value, Mapping):
            raise SerializationError(f"migrated record is a {type(value).__name__}, not a message")
        message = parsed.message()
        try:
            return to_record(to_message(value, message, strict=False))
        except (TypeError, ValueError) as as_record:
            try:
                return self.from_json_view(value, parsed)
            except SerializationError:
                raise SerializationError(
                    f"migrated record does not fit the target schema: {as_record}"
                ) from None

    def to_json_view(self, record: Any, parsed: ProtoSchema) -> Any:
        """The protobuf JSON mapping of the record, as the reference hands a migration the message
        (fields by JSON name, fields without presence printed, 64-bit integers as strings)."""
        from google.protobuf.json_format import MessageToDict

        from contracts.errors import SerializationError

        try:
            message = to_message(record, parsed.message())
        except (TypeError, ValueError) as e:
            raise SerializationError(f"the record is no {parsed.message_name} message: {e}") from e
        return MessageToDict(message, always_print_fields_with_no_presence=True)

    def from_json_view(self, value: Any, parsed: ProtoSchema) -> Any:
        from google.protobuf.json_format import ParseDict, ParseError
        from google.protobuf.message_factory import GetMessageClass

        from contracts.errors import SerializationError

        message = GetMessageClass(parsed.message())()
        try:
            ParseDict(value, message)
        except (ParseError, TypeError, ValueError, AttributeError) as e:
            raise SerializationError(
                f"not a {parsed.message_name} message in the protobuf JSON mapping: {e}"
            ) from e
        return to_record(message)

    def decode(
        self, body: bytes, writer: ProtoSchema, reader: ProtoSchema | None, tagged: bool = False
    ) -> Any:
        """The message the body's indexes name, which must be the record's message of the writer's
        schema, parsed by the protobuf runtime (protobuf needs no reader schema: a version's
        changes are resolved when the record is projected onto it); a Decimal value that its
        field's Spark decimal cannot hold exactly makes the body undecodable, saying which."""
        known = _body_reader(writer)
        if body.startswith(known.indexes):  # the record's own message indexes: nothing to look up
            start = len(known.indexes)
        else:
            indexes, start = read_indexes(body)
            descriptor = writer.message_at(indexes)
            if descriptor.full_name != writer.message_name:
                raise ValueError(
                    f"the message indexes {indexes} name message {descriptor.full_name}; the contract's"
                    f" records are {writer.message_name} (message indexes {list(writer.message_indexes)})"
                )
        record = known.read(known.parse(body[start:]))
        if known.holds_decimal:
            to_spark(record, known.descriptor)
        return record

    def encode(self, record: Any, parsed: ProtoSchema) -> bytes:
        """The record's message indexes (the first message: one 0 byte) and its bytes, as the
        reference serializer writes them."""
        body = to_message(record, parsed.message()).SerializeToString()
        return write_indexes(parsed.message_indexes) + body

    def dlq_value(self, record: Any, parsed: ProtoSchema) -> bytes:
        """The message's protobuf JSON, as the reference's DLQ action writes a message."""
        return protobuf_dlq_value(record, parsed)

    def field_tree(
        self, parsed: ProtoSchema, metadata_tags: Mapping[str, tuple[str, ...]]
    ) -> FieldTree | None:
        """The message's tree; results are set as the protobuf runtime sets a field (converting some)."""
        return FieldTree(protobuf_tree(parsed, metadata_tags), converting_writes=True)

    def field_walk(
        self,
        parsed: ProtoSchema,
        metadata_tags: Mapping[str, tuple[str, ...]],
        rule_tags: frozenset[str],
        visit: FieldVisit,
        condition: bool = False,
    ) -> Callable[[Any], Any]:
        return ProtobufFieldWalk(parsed, metadata_tags, rule_tags, visit, condition)

    def read_dlq_value(self, value: Column, parsed: ProtoSchema) -> Column:
        """By protobuf's JSON parser, in an Arrow UDF (contracts.formats.protobuf.dlq_value)."""
        return dlq_value.read_dlq_value(value, parsed, self, self.spark_type(parsed))

    def __repr__(self) -> str:
        return "ProtobufFormat()" if self.message is None else f"ProtobufFormat(message={self.message!r})"
