"""The Protobuf field walk against the reference (docs/semantics.md §4.9): a message with the shapes
the walk treats apart — Duration and wrapper fields (walked as messages), Timestamp (a LONG
value), map values (MAP, never visited), repeated enums, a oneof holding a message, an unset
optional field — through CEL_FIELD rules here and through confluent-kafka's ProtobufSerializer
with its CelFieldExecutor; the messages written must be the same. (A Duration's nanoseconds
below a microsecond do not survive a record, a timedelta: docs/semantics.md §10.23.)"""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from protoc_classes import generated_module

from contracts.formats.protobuf import ProtobufFormat, parse_proto
from contracts.formats.protobuf.fields import type_name
from contracts.formats.protobuf.values import to_record
from contracts.model import RuleKind
from executors.cel_field.batch import CelFieldBatch

PROTO_FILE = "contracts_test_shapes.proto"
SHAPES = """syntax = "proto3";
package shapes;
import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Shapes {
  google.protobuf.Duration wait = 1;
  google.protobuf.Int64Value count = 2;
  google.protobuf.Timestamp at = 3;
  map<string, string> labels = 4;
  repeated Color colors = 5;
  oneof choice {
    Inner inner = 6;
    string label = 7;
  }
  optional int32 maybe = 8;
  uint32 small = 9;
  float ratio = 10;
  message Inner { int64 n = 1; string s = 2; }
  enum Color { RED = 0; BLUE = 1; }
}
"""
RULES = [
    ("TRANSFORM", "typeName == 'LONG' && name != 'at' ? value + 1 : typeName == 'INT' && name != 'small'"
     " ? value + 2000 : typeName == 'STRING' ? value + ':' + fullName + ':' + typeName : value"),
    ("TRANSFORM", "typeName == 'FLOAT' ? value * 2.0 : typeName == 'LONG' && name == 'at'"
     " ? value + duration('1s') : value"),
    ("TRANSFORM", "name == 's' || name == 'label' ; name == 's' ? value + string(message.n)"
     " : string(message.maybe) + string(message.ratio)"),
    ("CONDITION", "typeName == 'INT' ; value < 10"),
]  # fmt: skip


@pytest.fixture(scope="module")
def shapes_pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generated_module(tmp_path_factory.mktemp("shapes_pb2"), PROTO_FILE, SHAPES)


def messages(pb2: Any) -> list[Any]:
    full = pb2.Shapes(labels={"k": "v"}, colors=[0, 1], maybe=3, small=7, ratio=1.5)
    full.wait.FromTimedelta(datetime.timedelta(seconds=5, microseconds=250))
    full.count.value = 41
    full.at.FromDatetime(datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc))
    full.inner.n, full.inner.s = 9, "in"
    other = pb2.Shapes(label="lbl", maybe=20)
    return [full, other, pb2.Shapes()]


def reference(pb2: Any, kind: str, expr: str) -> list[bytes | None]:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext
    from reference_oracle import mock_client

    client = mock_client(f"mock://cel-field-protobuf-{abs(hash(expr))}")
    rule = {"name": "r", "kind": kind, "type": "CEL_FIELD", "mode": "WRITE", "expr": expr}
    schema = base64.standard_b64encode(pb2.DESCRIPTOR.serialized_pb).decode("ascii")
    payload = {"schemaType": "PROTOBUF", "schema": schema, "ruleSet": {"domainRules": [rule]}}
    client.register_schema("t-value", Schema.from_dict(payload))
    rules = RuleRegistry()
    rules.register_executor(CelFieldExecutor())
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = ProtobufSerializer(pb2.Shapes, client, conf=conf, rule_registry=rules)
    results: list[bytes | None] = []
    for message in messages(pb2):
        try:
            results.append(serializer(message, SerializationContext("t", MessageField.VALUE))[5:])
        except Exception:
            results.append(None)
    return results


@pytest.mark.parametrize(("kind", "expr"), RULES)
def test_the_protobuf_walk_writes_what_the_reference_writes(shapes_pb2: Any, kind: str, expr: str) -> None:
    parsed = parse_proto(SHAPES)
    batch = CelFieldBatch(expr, RuleKind(kind), frozenset(), parsed, ProtobufFormat(), {}, "failed")
    records = [to_record(message) for message in messages(shapes_pb2)]
    outcomes = batch()(records)
    ours = [ProtobufFormat().encode(o.record, parsed) if o.passed else None for o in outcomes]
    assert ours == reference(shapes_pb2, kind, expr)


def test_type_names_follow_the_reference() -> None:
    fields = parse_proto(SHAPES).message().fields
    assert [type_name(field) for field in fields] == [
        "RECORD", "RECORD", "LONG", "MAP", "ENUM", "RECORD", "STRING", "INT", "INT", "FLOAT",
    ]  # fmt: skip
