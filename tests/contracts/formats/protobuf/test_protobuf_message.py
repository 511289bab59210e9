"""A Protobuf contract whose records are another message of the file than the first
(`DataContract(protobuf_message=…)`, docs/semantics.md §1.6): a top-level one and a nested one,
framed with their message indexes byte for byte as the reference's ProtobufSerializer frames them,
read back both ways with its ProtobufDeserializer (classes protoc generates at test time), rules
on the chosen message, frames of another message of the file undecodable with why."""

from __future__ import annotations

import base64
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import SECRET, SUBJECT, TOPIC, ReferenceEncryption, encrypt_rule
from protoc_classes import generated_module

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError

pytestmark = pytest.mark.spark

PROTO_FILE = "contracts_test_refunds.proto"
TEXT = """syntax = "proto3";
package shop;
import "confluent/meta.proto";
message Order { int64 id = 1; }
message Refund {
  int64 order_id = 1;
  double amount = 2;
  string reason = 3 [(confluent.field_meta).tags = "PII"];
}
message Outer {
  string name = 1;
  message Other { bool flag = 1; }
  message Inner {
    int64 id = 1;
    string note = 2 [(confluent.field_meta).tags = "PII"];
    Level level = 3;
    enum Level { LOW = 0; HIGH = 1; }
  }
}
"""
MESSAGES = "shop.Order, shop.Refund, shop.Outer, shop.Outer.Other, shop.Outer.Inner"
RECORDS: dict[str, list[dict[str, Any]]] = {
    "shop.Refund": [
        {"order_id": 1, "amount": 2.5, "reason": "late"},
        {"order_id": 2, "amount": -1.0, "reason": "x"},
        {"order_id": 3, "amount": 9.0, "reason": ""},
    ],
    "shop.Outer.Inner": [
        {"id": 1, "note": "hi", "level": "HIGH"},
        {"id": 2, "note": "", "level": "LOW"},
    ],
}
INDEXES = {"shop.Refund": b"\x02\x02", "shop.Outer.Inner": b"\x04\x04\x02"}
"""The message indexes the reference writes: [1], and [2, 1] (zig-zag varints, count first)."""


@pytest.fixture(scope="module")
def pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The classes protoc generates for TEXT, importing the reference's bundled `confluent.meta_pb2`."""
    return generated_module(tmp_path_factory.mktemp("refunds_pb2"), PROTO_FILE, TEXT, confluent_meta=True)


def message_class(pb2: Any, name: str) -> Any:
    found = pb2
    for part in name.removeprefix("shop.").split("."):
        found = getattr(found, part)
    return found


def message(pb2: Any, name: str, record: dict[str, Any]) -> Any:
    cls = message_class(pb2, name)
    return cls(**{field: cls.Level.Value(v) if field == "level" else v for field, v in record.items()})


def payload(domain: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {"schemaType": "PROTOBUF", "schema": TEXT, "ruleSet": {"domainRules": list(domain)}}


def serialized(pb2: Any, ours: dict[str, Any]) -> dict[str, Any]:
    """The payload as the reference's mock registry holds it: the schema a serialized descriptor."""
    return {**ours, "schema": base64.standard_b64encode(pb2.DESCRIPTOR.serialized_pb).decode("ascii")}


def contract(tmp_path: Path, name: str, domain: list[dict[str, Any]] = (), **kwargs: Any) -> DataContract:  # type: ignore[assignment]
    registry = LocalRegistry()
    assert registry.register_schema(SUBJECT, Schema.from_dict(payload(domain))) == 1
    sink = LocalTopicSink(tmp_path / "dlq")
    return DataContract(registry, SUBJECT, protobuf_message=name, dlq_sink=sink, **kwargs)


def frame_of(records: DataContract, spark: Any, name: str) -> Any:
    rows = [tuple(record[field] for field in records.spark_schema.names) for record in RECORDS[name]]
    return spark.createDataFrame(rows, records.spark_schema)


def ctx() -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(TOPIC, MessageField.VALUE)


def reference_serdes(pb2: Any, name: str, rules: Any = None, domain: list[dict[str, Any]] = ()) -> Any:  # type: ignore[assignment]
    """The reference's serializer and deserializer of the message class `name` on a mock registry
    holding the contract as id 1. With rules, the serializer runs them on the registry's latest
    version (the reference can: the message is top-level); without, it looks its schema up."""
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from reference_oracle import mock_client

    client = mock_client(f"mock://protobuf-message-{name}-{len(domain)}")
    # Without rules, as the serializer looks its schema up: the file alone.
    registered = serialized(pb2, payload(domain) if domain else {"schemaType": "PROTOBUF"})
    assert client.register_schema(SUBJECT, ReferenceSchema.from_dict(registered)) == 1
    conf = {"auto.register.schemas": False, "use.latest.version": rules is not None}
    cls = message_class(pb2, name)
    serializer = ProtobufSerializer(cls, client, conf=conf, rule_registry=rules)
    return serializer, ProtobufDeserializer(cls, {"use.latest.version": False}, client)


@pytest.mark.parametrize("name", ["shop.Refund", "shop.Outer.Inner"])
def test_frames_of_a_chosen_message_are_the_reference_frames_both_ways(
    spark: Any, tmp_path: Path, pb2: Any, name: str
) -> None:
    records = contract(tmp_path, name)
    assert records.spark_schema.names == list(RECORDS[name][0])
    serializer, deserializer = reference_serdes(pb2, name)
    theirs = [serializer(message(pb2, name, record), ctx()) for record in RECORDS[name]]
    assert all(frame[5:].startswith(INDEXES[name]) for frame in theirs)

    ours = [bytes(row["value"]) for row in records.serialize(frame_of(records, spark, name)).collect()]
    read = records.deserialize(spark.createDataFrame([(frame,) for frame in theirs], "value binary"))

    assert sorted(ours) == sorted(theirs)  # byte for byte, message indexes included
    assert sorted(deserializer(frame, ctx()).SerializeToString() for frame in ours) == sorted(
        message(pb2, name, record).SerializeToString() for record in RECORDS[name]
    )
    assert sorted((row.asDict() for row in read.collect()), key=str) == sorted(RECORDS[name], key=str)


def test_rules_on_a_non_first_message_write_what_the_reference_writes(
    spark: Any, tmp_path: Path, pb2: Any
) -> None:
    from confluent_kafka.schema_registry.common.serde import RuleError
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor

    domain = [
        {"name": "refundsOnly", "kind": "CONDITION", "type": "CEL", "mode": "WRITE",
         "expr": "message.amount > 0.0 && message.order_id > 0", "onFailure": "DLQ",
         "params": {"dlq.topic": "bad-refunds"}},
        {"name": "pii", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "WRITE", "tags": ["PII"],
         "expr": "typeName == 'STRING' ; fullName + '=' + value"},
    ]  # fmt: skip
    refunds = contract(tmp_path, "shop.Refund", domain)
    rules = RuleRegistry()
    rules.register_executor(CelExecutor())
    rules.register_executor(CelFieldExecutor())
    serializer, _ = reference_serdes(pb2, "shop.Refund", rules, domain)
    theirs = []
    for record in RECORDS["shop.Refund"]:
        with contextlib.suppress(RuleError):  # failed the condition (the reference has no DLQ action here)
            theirs.append(serializer(message(pb2, "shop.Refund", record), ctx()))

    ours = [
        bytes(row["value"]) for row in refunds.serialize(frame_of(refunds, spark, "shop.Refund")).collect()
    ]

    assert sorted(ours) == sorted(theirs) and len(ours) == 2
    written = sorted(pb2.Refund.FromString(frame[7:]).reason for frame in ours)
    assert written == ["shop.Refund.reason=", "shop.Refund.reason=late"]
    (rejected,) = LocalTopicSink(tmp_path / "dlq").read("bad-refunds")
    assert json.loads(rejected.value or b"") == {"orderId": "2", "amount": -1.0, "reason": "x"}


def test_an_encrypted_field_of_a_non_first_message_reads_and_writes_as_the_reference(
    spark: Any, tmp_path: Path, pb2: Any
) -> None:
    encrypt = encrypt_rule("AES256_SIV")  # deterministic: ciphertexts compare byte for byte
    reference = ReferenceEncryption(serialized(pb2, payload([encrypt])), SECRET, message_class=pb2.Refund)
    theirs = [reference.serialize(message(pb2, "shop.Refund", r)) for r in RECORDS["shop.Refund"]]
    registry = LocalRegistry()
    reference.export_keys(registry)
    assert registry.register_schema(SUBJECT, Schema.from_dict(payload([encrypt]))) == 1
    refunds = DataContract(registry, SUBJECT, protobuf_message="shop.Refund", rule_config={"secret": SECRET})

    ours = [
        bytes(row["value"]) for row in refunds.serialize(frame_of(refunds, spark, "shop.Refund")).collect()
    ]

    assert sorted(ours) == sorted(theirs) and b"late" not in b"".join(ours)  # AES256_SIV: byte for byte
    expected = [message(pb2, "shop.Refund", record) for record in RECORDS["shop.Refund"]]
    assert sorted(str(reference.deserialize(frame)) for frame in ours) == sorted(map(str, expected))


def test_rules_on_a_nested_message_see_it_and_frames_of_other_messages_are_undecodable(
    spark: Any, tmp_path: Path, pb2: Any
) -> None:
    """The reference cannot run rules on a nested message (its serializer looks the message up
    among the file's top-level ones), so its frames of one are read back here and there."""
    name = "shop.Outer.Inner"
    domain = [
        {"name": "upper", "kind": "TRANSFORM", "type": "JSONATA", "mode": "WRITE",
         "expr": "$merge([$, {'note': $uppercase(note)}])"},
        {"name": "pii", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "WRITE", "tags": ["PII"],
         "expr": "typeName == 'STRING' ; value + '!'"},
        {"name": "high", "kind": "CONDITION", "type": "CEL", "mode": "READ", "expr": "message.level == 1",
         "onFailure": "DLQ", "params": {"dlq.topic": "low"}},
    ]  # fmt: skip
    inner = contract(tmp_path, name, domain)
    serializer, deserializer = reference_serdes(pb2, name)
    other, _ = reference_serdes(pb2, "shop.Outer.Other")
    order, _ = reference_serdes(pb2, "shop.Order")

    ours = [bytes(row["value"]) for row in inner.serialize(frame_of(inner, spark, name)).collect()]
    back = sorted((m.id, m.note, m.level) for m in (deserializer(frame, ctx()) for frame in ours))
    assert back == [(1, "HI!", 1), (2, "!", 0)]
    frames = [
        (b"inner", serializer(message(pb2, name, RECORDS[name][0]), ctx())),
        (b"low", serializer(message(pb2, name, RECORDS[name][1]), ctx())),
        (b"other", other(pb2.Outer.Other(flag=True), ctx())),
        (b"order", order(pb2.Order(id=7), ctx())),
    ]
    read = inner.deserialize(
        spark.createDataFrame(frames, "key binary, value binary"),
        on_decode_error="DLQ",
        decode_dlq_topic="undecodable",
    )

    assert [(row["key"], row["id"], row["note"], row["level"]) for row in read.collect()] == [
        (b"inner", 1, "hi", "HIGH")
    ]
    sink = LocalTopicSink(tmp_path / "dlq")
    assert [r.key for r in sink.read("low")] == [b"low"]
    reasons = {r.key: (dict(r.headers)["__rule.exception"] or b"").decode() for r in sink.read("undecodable")}
    assert sorted(reasons) == [b"order", b"other"]
    assert (
        "the message indexes [2, 0] name message shop.Outer.Other; the contract's records are"
        " shop.Outer.Inner (message indexes [2, 1])" in reasons[b"other"]
    )
    assert (
        "the message indexes [0] name message shop.Order; the contract's records are shop.Outer.Inner"
        in (reasons[b"order"])
    )


def test_a_message_the_file_lacks_is_refused_at_construction_naming_the_messages(tmp_path: Path) -> None:
    with pytest.raises(ContractError) as refused:
        contract(tmp_path, "shop.Inner")
    error = refused.value
    assert (error.subject, error.version, error.position) == (SUBJECT, 1, "protobuf_message")
    assert (
        error.reason == f"the Protobuf schema declares no message 'shop.Inner'; its messages are {MESSAGES}"
    )
    registry = LocalRegistry()
    registry.register_schema("avro-value", Schema.from_dict({"schema": '{"type": "string"}'}))
    with pytest.raises(ContractError, match="this schema is AVRO"):
        DataContract(registry, "avro-value", protobuf_message="shop.Refund")


def test_frames_of_a_version_without_the_message_are_undecodable(spark: Any, tmp_path: Path) -> None:
    """Version 1 declares only Order; version 2 adds Refund. Version 1's frames cannot be
    Refunds: they are undecodable, and version 2's read as usual."""
    from contracts.formats.wire import encode_frame

    registry = LocalRegistry()
    first = 'syntax = "proto3"; package shop; message Order { int64 id = 1; }'
    registry.register_schema(SUBJECT, Schema.from_dict({"schemaType": "PROTOBUF", "schema": first}))
    registry.register_schema(SUBJECT, Schema.from_dict({"schemaType": "PROTOBUF", "schema": TEXT}))
    with pytest.raises(ContractError, match=r"its messages are shop\.Order \("):
        DataContract(registry, SUBJECT, version=1, protobuf_message="shop.Refund")
    sink = LocalTopicSink(tmp_path / "dlq")
    refunds = DataContract(registry, SUBJECT, protobuf_message="shop.Refund", dlq_sink=sink)
    old = encode_frame(1, b"\x00\x08\x07")  # version 1 (schema id 1): an Order, id 7
    new = encode_frame(2, INDEXES["shop.Refund"] + b"\x08\x05")  # version 2: a Refund, order_id 5
    rows = [(b"old", old), (b"new", new)]

    read = refunds.deserialize(
        spark.createDataFrame(rows, "key binary, value binary"),
        on_decode_error="DLQ",
        decode_dlq_topic="undecodable",
    )

    assert [(row["key"], row["order_id"]) for row in read.collect()] == [(b"new", 5)]
    (undecodable,) = sink.read("undecodable")
    reason = (dict(undecodable.headers)["__rule.exception"] or b"").decode()
    assert undecodable.key == b"old"
    assert "cannot read version 1's records as version 2's: the Protobuf schema declares no message" in reason


COMMANDS = [["apply", "--mode", "READ", "--format", "avro-parquet", "--input", "in"], ["dlq", "replay", "t"]]


@pytest.mark.parametrize("command", COMMANDS)
def test_the_cli_passes_protobuf_message_to_the_contract(tmp_path: Path, command: list[str]) -> None:
    """The contract is built before any job runs, so the message it was given shows in its error."""
    from contracts.cli.main import run

    registry = tmp_path / "registry"
    LocalRegistry(registry, create=True).register_schema(SUBJECT, Schema.from_dict(payload()))
    err = io.StringIO()
    chosen = ["--protobuf-message", "shop.Inner"]
    places = ["--output", str(tmp_path / "out"), "--dlq-dir", str(tmp_path)]
    argv = [*command, "--registry", str(registry), "--subject", SUBJECT, *chosen, *places]
    assert run(argv, spark=object(), stderr=err) == 1, err.getvalue()
    assert f"declares no message 'shop.Inner'; its messages are {MESSAGES}" in err.getvalue()
