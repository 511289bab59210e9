"""Protobuf contracts end to end on Spark: CEL and JSONata rules on Protobuf records, DLQ records,
hostile frames, and Confluent frames both ways with the reference's ProtobufSerializer and
ProtobufDeserializer as the oracle (over Python classes protoc generates at test time)."""

from __future__ import annotations

import base64
import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from protoc_classes import generated_module

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, metrics_of
from contracts.formats.wire import encode_frame

pytestmark = pytest.mark.spark

SUBJECT = "orders-value"
TOPIC = "orders"
PROTO_FILE = "contracts_test_order.proto"
ORDER = """syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  Status status = 4;
  repeated string tags = 5;
  Address address = 6;
  google.protobuf.Timestamp at = 7;
  map<string, int32> counts = 8;
  uint64 big = 9;
  message Address { string city = 1; }
  enum Status { NEW = 0; PAID = 1; }
}
message Refund { int64 order_id = 1; }
"""
AT = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc)
ORDERS: list[dict[str, Any]] = [
    {
        "id": 1,
        "customer": "ann",
        "amount": 12.5,
        "status": 1,
        "tags": ["a"],
        "address": {"city": "Oslo"},
        "at": AT,
        "counts": {"x": 2},
        "big": 2**64 - 1,
    },
    {
        "id": 2,
        "customer": "bob",
        "amount": -1.5,
        "status": 0,
        "tags": [],
        "address": None,
        "at": None,
        "counts": {},
        "big": 0,
    },
    {
        "id": 3,
        "customer": "cy",
        "amount": 7.25,
        "status": 1,
        "tags": ["b", "c"],
        "address": {"city": ""},
        "at": AT,
        "counts": {},
        "big": 5,
    },
]
POSITIVE = {
    "name": "positiveAmount",
    "kind": "CONDITION",
    "type": "CEL",
    "mode": "WRITEREAD",
    "expr": "message.amount > 0.0 && size(message.tags) < 5",
    "onFailure": "DLQ",
    "params": {"dlq.topic": "bad-orders"},
}
SHOUT = {
    "name": "shout",
    "kind": "TRANSFORM",
    "type": "CEL",
    "mode": "WRITE",
    "expr": "{'id': message.id, 'customer': message.customer + '!', 'amount': message.amount,"
    " 'status': message.status, 'tags': message.tags, 'big': message.big}",
}
UPPER = {
    "name": "upperCustomer",
    "kind": "TRANSFORM",
    "type": "JSONATA",
    "mode": "WRITE",
    "expr": "$merge([$, {'customer': $uppercase(customer)}])",
}


@pytest.fixture(scope="module")
def order_pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The Python classes protoc generates for ORDER (the reference serializes instances of them)."""
    return generated_module(tmp_path_factory.mktemp("order_pb2"), PROTO_FILE, ORDER)


def payload(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schemaType": "PROTOBUF", "schema": ORDER, "ruleSet": {"domainRules": rules}}


def contract(tmp_path: Path, rules: list[dict[str, Any]]) -> tuple[DataContract, LocalTopicSink]:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(payload(rules)))
    sink = LocalTopicSink(tmp_path / "dlq")
    return DataContract(registry, SUBJECT, dlq_sink=sink), sink


def spark_row(order: dict[str, Any]) -> tuple[Any, ...]:
    status = ["NEW", "PAID"][order["status"]]
    return (
        *[order[k] for k in ("id", "customer", "amount")],
        status,
        order["tags"],
        order["address"],
        order["at"],
        order["counts"],
        Decimal(order["big"]),
    )


def orders_frame(spark: Any, contract: DataContract) -> Any:
    return spark.createDataFrame([spark_row(o) for o in ORDERS], contract.spark_schema)


def message(order_pb2: Any, order: dict[str, Any]) -> Any:
    made = order_pb2.Order(
        id=order["id"],
        customer=order["customer"],
        amount=order["amount"],
        status=order["status"],
        tags=order["tags"],
        counts=order["counts"],
        big=order["big"],
    )
    if order["address"] is not None:
        made.address.city = order["address"]["city"]
    if order["at"] is not None:
        made.at.FromDatetime(order["at"])
    return made


def reference_client(order_pb2: Any, rules: list[dict[str, Any]]) -> Any:
    """A reference mock registry holding the same contract under id 1; the reference's clients ask
    the registry for the schema as a serialized FileDescriptorProto (base64), so that is what the
    mock holds."""
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from reference_oracle import mock_client

    client = mock_client(f"mock://protobuf-{id(rules)}")
    serialized = base64.standard_b64encode(order_pb2.DESCRIPTOR.serialized_pb).decode("ascii")
    schema = ReferenceSchema.from_dict({**payload(rules), "schema": serialized})
    assert client.register_schema(SUBJECT, schema) == 1
    return client


def reference_rules() -> Any:
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor

    registry = RuleRegistry()
    registry.register_executor(CelExecutor())
    return registry


def ctx() -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(TOPIC, MessageField.VALUE)


def test_write_runs_cel_and_jsonata_rules_on_protobuf_records(
    spark: Any, tmp_path: Path, order_pb2: Any
) -> None:
    from google.protobuf.json_format import MessageToJson

    orders, sink = contract(tmp_path, [POSITIVE, SHOUT, UPPER])
    explained = orders.explain()
    assert (
        "positiveAmount [CEL CONDITION, mode WRITE] on success NONE, on failure DLQ -> bad-orders (native)"
        in explained
    )
    assert (
        "shout [CEL TRANSFORM, mode WRITE] on success NONE, on failure ERROR (python); no native form for"
        " field status, whose Spark value is not what CEL sees (a Protobuf enum or uint)" in explained
    )
    written = orders.write(orders_frame(spark, orders))
    rows = sorted(written.collect(), key=lambda row: row["id"])
    assert [(row["id"], row["customer"], row["status"]) for row in rows] == [
        (1, "ANN!", "PAID"),
        (3, "CY!", "PAID"),
    ]
    assert rows[0]["address"] is None and rows[0]["big"] == Decimal(2**64 - 1)  # the CEL transform replaced
    (rejected,) = sink.read("bad-orders")
    assert dict(rejected.headers)["__rule.name"] == b"positiveAmount"
    # The message's JSON, as the reference's DLQ action writes a rejected message.
    assert rejected.value == MessageToJson(message(order_pb2, ORDERS[1])).encode()
    counts = metrics_of(written).get()  # type: ignore[union-attr]
    assert (counts["positiveAmount"].passed, counts["positiveAmount"].failed) == (2, 1)


def test_serialize_writes_the_frames_the_reference_serializer_writes(
    spark: Any, tmp_path: Path, order_pb2: Any
) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    rules = [{**POSITIVE, "onFailure": "NONE"}, SHOUT]
    orders, _ = contract(tmp_path, rules)
    framed = orders.serialize(orders_frame(spark, orders).where("id != 2")).collect()
    client = reference_client(order_pb2, rules)
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = ProtobufSerializer(order_pb2.Order, client, conf=conf, rule_registry=reference_rules())
    expected = [serializer(message(order_pb2, order), ctx()) for order in ORDERS if order["id"] != 2]
    assert sorted(bytes(row["value"]) for row in framed) == sorted(expected)
    plain_conf = {"use.latest.version": False}
    deserializer = ProtobufDeserializer(order_pb2.Order, plain_conf, client)
    read = [deserializer(bytes(row["value"]), ctx()) for row in framed]
    assert sorted((m.id, m.customer, m.big) for m in read) == [(1, "ann!", 2**64 - 1), (3, "cy!", 5)]


def test_serialize_without_rules_is_byte_for_byte_the_reference(
    spark: Any, tmp_path: Path, order_pb2: Any
) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    orders, _ = contract(tmp_path, [])
    framed = orders.serialize(orders_frame(spark, orders)).collect()
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = ProtobufSerializer(order_pb2.Order, reference_client(order_pb2, []), conf=conf)
    expected = [serializer(message(order_pb2, order), ctx()) for order in ORDERS]
    assert sorted(bytes(row["value"]) for row in framed) == sorted(expected)


def test_deserialize_reads_reference_frames_with_read_rules_and_routes_hostile_ones(
    spark: Any, tmp_path: Path, order_pb2: Any
) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    orders, sink = contract(tmp_path, [POSITIVE])
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = ProtobufSerializer(order_pb2.Order, reference_client(order_pb2, []), conf=conf)
    frames = [serializer(message(order_pb2, order), ctx()) for order in ORDERS]
    body = frames[0][6:]
    hostile = [
        encode_frame(1, b"\x00" + body[: len(body) // 2]),  # truncated message
        encode_frame(1, b"\x02\x02" + body),  # indexes [1]: a Refund, not an Order
        encode_frame(1, b"\x02\x0a" + body),  # indexes [5]: no such message
        encode_frame(1, b"\x04\x02"),  # indexes cut short
    ]
    rows = [(f"k{i}".encode(), frame) for i, frame in enumerate(frames + hostile)]
    read = orders.deserialize(
        spark.createDataFrame(rows, "key binary, value binary"),
        on_decode_error="DLQ",
        decode_dlq_topic="undecodable",
    )
    got = sorted(read.collect(), key=lambda row: row["id"])
    seen = [(r["id"], r["customer"], r["status"], r["address"]["city"], r["at"] is not None) for r in got]
    assert seen == [
        (1, "ann", "PAID", "Oslo", True),
        (3, "cy", "PAID", "", True),
    ]
    assert (
        got[0]["big"] == Decimal(2**64 - 1) and got[0]["counts"] == {"x": 2} and got[1]["tags"] == ["b", "c"]
    )
    assert [r.key for r in sink.read("bad-orders")] == [b"k1"]
    undecodable = {
        r.key: (dict(r.headers)["__rule.exception"] or b"").decode() for r in sink.read("undecodable")
    }
    assert sorted(undecodable) == [b"k3", b"k4", b"k5", b"k6"]
    assert "PROTOBUF body of schema id 1 cannot be decoded: not a acme.Order message" in undecodable[b"k3"]
    assert "name message acme.Refund; the contract's records are acme.Order" in undecodable[b"k4"]
    assert "message index 5 out of range: the file has 2 message type(s)" in undecodable[b"k5"]
    assert "the body ends inside message index 2 of 2" in undecodable[b"k6"]


def test_a_jsonata_migration_reads_as_the_reference_reads(spark: Any, tmp_path: Path, order_pb2: Any) -> None:
    """Version 1 (major 1) names the buyer `customer`, version 2 (major 2) `buyer`; a JSONata
    UPGRADE rule renames it on the protobuf JSON mapping, as the reference's deserializer runs it."""
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
    from reference_oracle import mock_client

    from contracts.formats.protobuf import ProtobufFormat

    renamed = ORDER.replace("string customer = 2;", "string buyer = 10;")
    upgrade = {
        "name": "customerToBuyer",
        "kind": "TRANSFORM",
        "type": "JSONATA",
        "mode": "UPGRADE",
        "expr": "$merge([$sift($, function($v, $k) {$k != 'customer'}), {'buyer': $uppercase(customer)}])",
    }
    first = {"schemaType": "PROTOBUF", "schema": ORDER, "metadata": {"properties": {"major": "1"}}}
    second = {
        "schemaType": "PROTOBUF",
        "schema": renamed,
        "metadata": {"properties": {"major": "2"}},
        "ruleSet": {"migrationRules": [upgrade]},
    }
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibility="NONE")
    for version in (first, second):
        registry.register_schema(SUBJECT, Schema.from_dict(version))
    client = mock_client("mock://protobuf-migration")
    for version in (first, second):
        parsed = ProtobufFormat().parse(version["schema"], ())
        from google.protobuf import descriptor_pb2

        main = descriptor_pb2.FileDescriptorSet.FromString(parsed.descriptor_set).file[-1]
        serialized = base64.standard_b64encode(main.SerializeToString()).decode("ascii")
        client.register_schema(SUBJECT, ReferenceSchema.from_dict({**version, "schema": serialized}))
    conf = {"auto.register.schemas": False, "use.latest.with.metadata": {"major": "1"}}
    serializer = ProtobufSerializer(order_pb2.Order, client, conf=conf)
    frames = [serializer(message(order_pb2, order), ctx()) for order in ORDERS]
    rules = RuleRegistry()
    rules.register_executor(JsonataExecutor())
    deserializer = ProtobufDeserializer(
        order_pb2.Order, {"use.latest.with.metadata": {"major": "2"}}, client, rule_registry=rules
    )
    expected = [deserializer(frame, ctx()) for frame in frames]
    reader = DataContract(registry, SUBJECT, use_latest_with_metadata={"major": "2"})
    read = reader.deserialize(spark.createDataFrame([(frame,) for frame in frames], "value binary"))
    assert "buyer" in read.columns and "customer" not in read.columns
    got = sorted(read.collect(), key=lambda row: row["id"])
    assert [(row["id"], row["buyer"], row["at"] is not None) for row in got] == [
        (m.id, m.buyer, m.HasField("at")) for m in expected
    ]
    assert [row["buyer"] for row in got] == ["ANN", "BOB", "CY"]


CEL_CONDITIONS = [
    "message.status == 1",
    "message.big > 10u",
    "size(message.tags) == 1",
    "message.customer.startsWith('a') || message.amount < 0.0",
    "message.counts['x'] == 2",
    "has(message.address) && message.address.city != ''",
    "message.at > timestamp('2024-01-01T00:00:00Z')",
    "message.id + 1 == 2 ? true : message.id == 3",
]


@pytest.mark.parametrize("expr", CEL_CONDITIONS)
def test_cel_conditions_judge_records_as_the_reference_judges_messages(expr: str, order_pb2: Any) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import SerializationError

    from contracts.formats.protobuf import ProtobufFormat
    from executors.cel import runtime

    rule = {"name": "judge", "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": expr}
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = ProtobufSerializer(
        order_pb2.Order, reference_client(order_pb2, [rule]), conf=conf, rule_registry=reference_rules()
    )
    parsed = ProtobufFormat().parse(ORDER, ())
    program = runtime.compile_program(expr)
    for order in ORDERS:
        framed = message(order_pb2, order)
        try:
            serializer(framed, ctx())
            expected = True
        except SerializationError:
            expected = False
        record = ProtobufFormat().decode(b"\x00" + framed.SerializeToString(), parsed, None)
        assert program.condition({"message": runtime.to_cel(record)}).passed == expected, order["id"]


def test_a_schema_without_a_spark_type_fails_at_load_naming_subject_and_version() -> None:
    from contracts.errors import ContractError

    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT,
        Schema.from_dict(
            {
                "schemaType": "PROTOBUF",
                "schema": 'syntax = "proto3"; message Node { Node next = 1; int32 v = 2; }',
            }
        ),
    )
    with pytest.raises(ContractError, match=r"the recursive message Node \(Node -> Node\)") as refused:
        DataContract(registry, SUBJECT)
    assert (refused.value.subject, refused.value.version) == (SUBJECT, 1)


def test_a_protobuf_key_goes_with_a_protobuf_value(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    key_proto = (
        'syntax = "proto3";'
        " message OrderKey { string id = 1; Region region = 2; enum Region { EU = 0; US = 1; } }"
    )
    known = {
        "name": "euOnly",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITEREAD",
        "expr": "message.region == 0",
    }
    key_rules = [{**known, "onFailure": "DLQ", "params": {"dlq.topic": "bad-keys"}}]
    registry.register_schema(
        "orders-key",
        Schema.from_dict(
            {"schemaType": "PROTOBUF", "schema": key_proto, "ruleSet": {"domainRules": key_rules}}
        ),
    )
    registry.register_schema(SUBJECT, Schema.from_dict(payload([])))
    sink = LocalTopicSink(tmp_path / "dlq")
    key = DataContract(registry, "orders-key", dlq_sink=sink)
    value = DataContract(registry, SUBJECT, dlq_sink=sink)
    keys = "named_struct('id', cast(id as string), 'region', if(id = 1, 'EU', 'US')) as key"
    df = orders_frame(spark, value).where("id != 2").selectExpr("*", keys)

    framed = value.serialize(df, key=key).collect()

    assert [bytes(row["key"])[5:] for row in framed] == [b"\x00\n\x011"]  # indexes [0], id "1", region EU (0)
    back = value.deserialize(spark.createDataFrame(framed), key=key).collect()
    assert [(r["id"], r["key"]["id"], r["key"]["region"]) for r in back] == [(1, "1", "EU")]
    (rejected,) = sink.read("bad-keys")
    assert dict(rejected.headers)["__rule.name"] == b"euOnly"


def test_frames_of_an_earlier_version_read_as_the_target_by_field_name(spark: Any, tmp_path: Path) -> None:
    """Version 2 drops `tags`, adds `note` and widens nothing: version 1's frames read as version 2
    records (the dropped field left out, the new one at its default), as protobuf reads old data."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(payload([])))
    second = ORDER.replace("repeated string tags = 5;", "string note = 10;")
    registry.register_schema(SUBJECT, Schema.from_dict({"schemaType": "PROTOBUF", "schema": second}))
    writer, _ = contract(tmp_path, [])
    framed = writer.serialize(orders_frame(spark, writer)).select("value")
    reader = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / "dlq"))
    assert reader.version == 2
    read = sorted(reader.deserialize(framed).collect(), key=lambda row: row["id"])
    assert "tags" not in read[0].asDict() and [row["note"] for row in read] == ["", "", ""]
    assert [(row["id"], row["customer"], row["status"]) for row in read] == [
        (1, "ann", "PAID"),
        (2, "bob", "NEW"),
        (3, "cy", "PAID"),
    ]


def test_schemas_the_reference_registers_over_rest_read_with_the_same_contract(
    spark: Any, tmp_path: Path, order_pb2: Any
) -> None:
    """The reference serializer auto-registers its message's descriptor (serialized, base64) in a
    LocalRegistry served over REST; the contract reads that schema and the frames it wrote."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as ReferenceClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from registry_server import running_registry

    registry = LocalRegistry()
    with running_registry(registry) as server:
        client = ReferenceClient({"url": server.url})
        serializer = ProtobufSerializer(order_pb2.Order, client, conf={"auto.register.schemas": True})
        frames = [serializer(message(order_pb2, order), ctx()) for order in ORDERS]
    stored = registry.get_latest_version(SUBJECT).schema
    assert stored.schema_type == "PROTOBUF" and "message" not in stored.schema_str  # base64, not text
    orders = DataContract(registry, SUBJECT)
    read = sorted(orders.deserialize(spark.createDataFrame([(f,) for f in frames], "value binary")).collect())
    assert [(row["id"], row["customer"], row["status"], row["big"]) for row in read] == [
        (1, "ann", "PAID", Decimal(2**64 - 1)),
        (2, "bob", "NEW", Decimal(0)),
        (3, "cy", "PAID", Decimal(5)),
    ]
    registry.register_schema(SUBJECT, Schema.from_dict(payload([])))  # the same schema as text: compatible
    assert registry.get_latest_version(SUBJECT).version == 2


def test_well_known_types_oneofs_and_optional_fields_round_trip_on_spark(spark: Any, tmp_path: Path) -> None:
    text = """syntax = "proto3";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
message Shipment {
  string id = 1;
  google.protobuf.Duration wait = 2;
  google.protobuf.Int64Value weight = 3;
  oneof via { string truck = 4; string ship = 5; }
  optional sint32 priority = 6;
  map<int64, Stop> stops = 7;
  message Stop { string city = 1; fixed32 minutes = 2; }
}
"""
    registry = LocalRegistry()
    registry.register_schema("shipments-value", Schema.from_dict({"schemaType": "PROTOBUF", "schema": text}))
    shipments = DataContract(registry, "shipments-value", dlq_sink=LocalTopicSink(tmp_path / "dlq"))
    rows = [
        ("s1", datetime.timedelta(hours=2, microseconds=5), 40, "t-9", None, -3, {7: ("Oslo", 2**32 - 1)}),
        ("s2", None, None, None, "ms-1", None, {}),
    ]
    df = spark.createDataFrame(rows, shipments.spark_schema)
    back = shipments.deserialize(shipments.serialize(df).select("value"))
    assert sorted(back.collect()) == sorted(df.collect())
