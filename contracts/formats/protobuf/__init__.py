"""The PROTOBUF schema type: `.proto` schemas, Spark types for their messages, Confluent's framed
message bodies (message indexes, then the message's bytes)."""

from contracts.formats.protobuf.format import ProtobufFormat, protobuf_dlq_value
from contracts.formats.protobuf.types import CEL_DIFFERS_KEY
from contracts.registry.protobuf_schema import ProtoSchema, parse_proto

__all__ = ["CEL_DIFFERS_KEY", "ProtoSchema", "ProtobufFormat", "parse_proto", "protobuf_dlq_value"]
