"""The PROTOBUF schema type: `.proto` schemas, Spark types for their messages, Confluent's framed
message bodies (message indexes, then the message's bytes)."""

from typing import Any

from contracts.formats.protobuf.format import ProtobufFormat
from contracts.formats.protobuf.types import spark_differs
from contracts.registry.protobuf_schema import ProtoSchema, Reference, parse_proto


def records_differ_from_spark(parsed: Any) -> bool:
    """Whether a record of this parsed schema holds a value its Spark row holds otherwise (an enum's
    number, an unsigned integer), so a rule must see the record rather than the row."""
    return isinstance(parsed, ProtoSchema) and spark_differs(parsed.message())


__all__ = ["ProtoSchema", "ProtobufFormat", "Reference", "parse_proto", "records_differ_from_spark"]
