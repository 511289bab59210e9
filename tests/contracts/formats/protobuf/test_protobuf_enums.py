"""Enum numbers an enum does not name, as the protobuf runtime reads them (docs/semantics.md §1.6):
a proto3 (open) enum keeps the number, so its Spark value is the number's digits and CEL sees the
number, as the reference's CEL sees it; a proto2 (closed) enum sets such a number aside as an
unknown field, so the field reads as unset and a repeated field drops the element."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from protoc_classes import generated_module

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.wire import encode_frame

SUBJECT = "orders-value"
PROTO3 = """syntax = "proto3";
package enums3;
message Order {
  int64 id = 1;
  Status status = 2;
  repeated Status history = 3;
  enum Status { NEW = 0; PAID = 1; }
}
"""
PROTO2 = PROTO3.replace('"proto3"', '"proto2"').replace("enums3", "enums2")
PROTO2 = PROTO2.replace("int64 id", "optional int64 id").replace("Status status", "optional Status status")
NON_NEGATIVE = {
    "name": "knownStatus",
    "kind": "CONDITION",
    "type": "CEL",
    "mode": "READ",
    "expr": "message.history.all(s, s >= 0) && size(message.history) == 2",
    "onFailure": "DLQ",
    "params": {"dlq.topic": "bad-orders"},
}


def varint(n: int) -> bytes:
    """A protobuf varint; a negative int32 or enum number takes ten bytes, as the runtime writes it."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out) + bytes([n])


def body(order_id: int, status: int) -> bytes:
    """An Order with `status` in its field and as the first of two history entries (then PAID)."""
    return b"\x08" + varint(order_id) + b"\x10" + varint(status) + b"\x18" + varint(status) + b"\x18\x01"


def payload(text: str, action: str) -> dict[str, Any]:
    rule = {**NON_NEGATIVE, "onFailure": action}
    return {"schemaType": "PROTOBUF", "schema": text, "ruleSet": {"domainRules": [rule]}}


def run(
    spark: Any, tmp_path: Path, text: str, statuses: list[int], action: str
) -> tuple[list[Any], list[bytes]]:
    """deserialize on frames of each status (message index 0): the rows, and the DLQ records' keys."""
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema.from_dict(payload(text, action)))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    rows = [(b"k%d" % i, encode_frame(schema_id, b"\x00" + body(i, s))) for i, s in enumerate(statuses)]
    read = contract.deserialize(spark.createDataFrame(rows, "key binary, value binary"))
    got = sorted(read.collect(), key=lambda row: row["id"])
    rejected = sorted(r.key for r in sink.read("bad-orders")) if sink.topics() else []
    return [(row["id"], row["status"], row["history"]) for row in got], rejected


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The classes protoc generates for each file, by its text (the reference reads instances)."""
    out = tmp_path_factory.mktemp("enums_pb2")
    return {
        text: generated_module(out, f"contracts_test_enums{n}.proto", text)
        for n, text in ((2, PROTO2), (3, PROTO3))
    }


def reference_outcomes(module: Any, text: str, statuses: list[int], action: str) -> list[Any]:
    """The reference's ProtobufDeserializer with its CEL executor on the same frames: the message's
    status and history, or the rule that failed it."""
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
    from reference_oracle import mock_client

    client = mock_client(f"mock://enums-{id(module)}-{action}")
    serialized = base64.standard_b64encode(module.DESCRIPTOR.serialized_pb).decode("ascii")
    schema_id = client.register_schema(
        SUBJECT, ReferenceSchema.from_dict({**payload(text, action), "schema": serialized})
    )
    rules = RuleRegistry()
    rules.register_executor(CelExecutor())
    deserializer = ProtobufDeserializer(
        module.Order, {"use.latest.version": True}, client, rule_registry=rules
    )
    outcomes = []
    for i, status in enumerate(statuses):
        try:
            read = deserializer(
                encode_frame(schema_id, b"\x00" + body(i, status)),
                SerializationContext("orders", MessageField.VALUE),
            )
        except SerializationError as e:
            outcomes.append(("failed", type(e).__name__))
            continue
        outcomes.append((read.id, read.HasField("status") if "proto2" in text else True, list(read.history)))
    return outcomes


@pytest.mark.spark
@pytest.mark.one_pass
def test_an_open_enum_keeps_numbers_it_does_not_name(spark: Any, tmp_path: Path) -> None:
    """The Spark value is the number's digits; the rule sees the number (negative ones fail it)."""
    rows, rejected = run(spark, tmp_path, PROTO3, [1, 7, -1, -2], "DLQ")
    assert rows == [(0, "PAID", ["PAID", "PAID"]), (1, "7", ["7", "PAID"])]
    assert rejected == [b"k2", b"k3"]


def test_the_reference_keeps_an_open_enums_numbers_and_sees_them_in_cel(modules: dict[str, Any]) -> None:
    reference = reference_outcomes(modules[PROTO3], PROTO3, [1, 7, -1, -2], "ERROR")
    assert reference == [
        (0, True, [1, 1]),
        (1, True, [7, 1]),
        ("failed", "SerializationError"),
        ("failed", "SerializationError"),
    ]


@pytest.mark.spark
@pytest.mark.one_pass
def test_a_closed_enum_sets_numbers_it_does_not_name_aside(spark: Any, tmp_path: Path) -> None:
    """The unknown number leaves the field unset (null, as from_protobuf reads an unset optional
    field) and drops the history entry, so the rule sees one entry and fails."""
    rows, rejected = run(spark, tmp_path, PROTO2, [1, 7, -1], "DLQ")
    assert rows == [(0, "PAID", ["PAID", "PAID"])]
    assert rejected == [b"k1", b"k2"]
    rows, _ = run(spark, tmp_path / "none", PROTO2, [1, 7, -1], "NONE")
    assert rows == [(0, "PAID", ["PAID", "PAID"]), (1, None, ["PAID"]), (2, None, ["PAID"])]


def test_the_reference_and_the_runtime_set_a_closed_enums_unknown_numbers_aside(
    modules: dict[str, Any],
) -> None:
    from google.protobuf.message_factory import GetMessageClass

    from contracts.formats.protobuf import ProtobufFormat

    reference = reference_outcomes(modules[PROTO2], PROTO2, [1, 7, -1], "ERROR")
    assert reference == [
        (0, True, [1, 1]),
        ("failed", "SerializationError"),
        ("failed", "SerializationError"),
    ]
    reference = reference_outcomes(modules[PROTO2], PROTO2, [1, 7, -1], "NONE")
    assert reference == [(0, True, [1, 1]), (1, False, [1]), (2, False, [1])]
    parsed = ProtobufFormat().parse(PROTO2, ())
    runtime = GetMessageClass(parsed.message())()
    runtime.ParseFromString(body(1, 7))
    assert not runtime.HasField("status") and list(runtime.history) == [1]
    record = ProtobufFormat().decode(b"\x00" + body(1, 7), parsed, None)
    assert record == {"id": 1, "status": None, "history": [1]}
