"""`confluent.type.Decimal` fields (docs/semantics.md §1.6, §4.9): a schema imports the bundled
`confluent/type/decimal.proto`, a field is a Spark decimal of the precision and scale its
`(confluent.field_meta).params` declare, and records read and write byte for byte as the
reference's ProtobufSerializer and ProtobufDeserializer do (classes protoc generates at test time),
rules seeing the decimal's message fields as the reference's CEL does."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from protoc_classes import generated_module

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError

SUBJECT = "payments-value"
TOPIC = "payments"
PROTO_FILE = "contracts_test_payment.proto"
PAYMENT = """syntax = "proto3";
package acme;
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
message Payment {
  string id = 1;
  confluent.type.Decimal amount = 2 [(confluent.field_meta) = {
    params: [{key: "precision", value: "8"}, {key: "scale", value: "2"}], tags: ["MONEY"]}];
  confluent.type.Decimal widest = 3 [(confluent.field_meta) = {
    params: [{key: "precision", value: "38"}, {key: "scale", value: "10"}]}];
  repeated confluent.type.Decimal parts = 4 [(confluent.field_meta).params = {key: "scale", value: "1"}];
}
"""
WIDEST = "9" * 28 + "." + "9" * 10
"""decimal(38,10)'s largest value, as text: unary minus would round it to 28 digits."""
PAYMENTS: list[dict[str, Any]] = [
    {"id": "pos", "amount": Decimal("123456.78"), "widest": Decimal(WIDEST), "parts": [Decimal("1.5")]},
    {"id": "neg", "amount": Decimal("-1.28"), "widest": Decimal("-" + WIDEST),
     "parts": [Decimal("-128.0"), Decimal("0.1")]},
    {"id": "zero", "amount": Decimal("0.00"), "widest": Decimal("0E-10"), "parts": []},
    {"id": "unset", "amount": None, "widest": None, "parts": []},
]  # fmt: skip


@pytest.fixture(scope="module")
def payment_pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generated_module(tmp_path_factory.mktemp("payment_pb2"), PROTO_FILE, PAYMENT, confluent_meta=True)


def message(pb2: Any, payment: dict[str, Any]) -> Any:
    """The payment as a message of the generated class, its decimals as the reference converts them."""
    from confluent_kafka.schema_registry.confluent.type.decimal_utils import to_proto_decimal

    made = pb2.Payment(id=payment["id"], parts=[to_proto_decimal(part) for part in payment["parts"]])
    for name in ("amount", "widest"):
        if payment[name] is not None:
            getattr(made, name).CopyFrom(to_proto_decimal(payment[name]))
    return made


def payload(domain: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {"schemaType": "PROTOBUF", "schema": PAYMENT, "ruleSet": {"domainRules": list(domain)}}


def contract(ours: dict[str, Any], **kwargs: Any) -> DataContract:
    registry = LocalRegistry()
    assert registry.register_schema(SUBJECT, Schema.from_dict(ours)) == 1
    return DataContract(registry, SUBJECT, **kwargs)


def reference_serdes(pb2: Any, ours: dict[str, Any], rules: Any = None) -> tuple[Any, Any]:
    import base64

    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from reference_oracle import mock_client

    client = mock_client(f"mock://protobuf-decimal-{id(ours)}")
    theirs = {**ours, "schema": base64.standard_b64encode(pb2.DESCRIPTOR.serialized_pb).decode("ascii")}
    assert client.register_schema(SUBJECT, ReferenceSchema.from_dict(theirs)) == 1
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = ProtobufSerializer(pb2.Payment, client, conf=conf, rule_registry=rules)
    deserializer = ProtobufDeserializer(
        pb2.Payment, {"use.latest.version": True}, client, rule_registry=rules
    )
    return serializer, deserializer


def context() -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(TOPIC, MessageField.VALUE)


def payments_frame(spark: Any, contract: DataContract) -> Any:
    from pyspark.sql.types import IntegerType, StructField, StructType

    schema = StructType([StructField("row", IntegerType()), *contract.spark_schema.fields])
    rows = [(i, *(p[name] for name in contract.spark_schema.names)) for i, p in enumerate(PAYMENTS)]
    return spark.createDataFrame(rows, schema)


@pytest.mark.spark
def test_decimals_read_and_write_as_the_reference_does(spark: Any, payment_pb2: Any) -> None:
    from pyspark.sql.types import ArrayType, DecimalType

    payments = contract(payload())
    types = {field.name: field.dataType for field in payments.spark_schema.fields}
    assert (types["amount"], types["widest"]) == (DecimalType(8, 2), DecimalType(38, 10))
    assert types["parts"] == ArrayType(DecimalType(10, 1), False)  # the default precision, 10
    serializer, deserializer = reference_serdes(payment_pb2, payload())
    theirs = [serializer(message(payment_pb2, p), context()) for p in PAYMENTS]

    ours = {
        row["row"]: bytes(row["value"])
        for row in payments.serialize(payments_frame(spark, payments)).collect()
    }
    read = payments.deserialize(
        spark.createDataFrame(list(enumerate(theirs)), "row int, value binary"), key_col=None
    )

    assert [ours[i] for i in range(len(PAYMENTS))] == theirs  # byte for byte
    assert [deserializer(frame, context()) for frame in theirs] == [message(payment_pb2, p) for p in PAYMENTS]
    rows = [row.asDict(recursive=True) for row in read.orderBy("row").collect()]
    assert [{k: v for k, v in row.items() if k != "row"} for row in rows] == PAYMENTS


@pytest.mark.spark
def test_rules_see_a_decimal_as_the_reference_does(spark: Any, payment_pb2: Any, tmp_path: Path) -> None:
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor

    rules = [
        {"name": "scaled", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
         "expr": "message.parts.all(p, p.scale == 1 && p.precision < 4u && size(p.value) > 0)",
         "onFailure": "DLQ", "params": {"dlq.topic": "bad"}},
        {"name": "small", "kind": "CONDITION", "mode": "WRITE", "type": "CEL_FIELD", "tags": ["MONEY"],
         "expr": "typeName == 'BYTES' && fullName == 'acme.Payment.amount' && size(value.value) < 4",
         "onFailure": "DLQ", "params": {"dlq.topic": "bad"}},
        {"name": "same", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD", "tags": ["MONEY"],
         "expr": "typeName == 'BYTES' ; value"},
    ]  # fmt: skip
    sink = LocalTopicSink(tmp_path / "dlq")
    payments = contract(payload(rules), dlq_sink=sink)
    reference_rules = RuleRegistry()
    reference_rules.register_executor(CelExecutor())
    reference_rules.register_executor(CelFieldExecutor())
    serializer, _ = reference_serdes(payment_pb2, payload(rules), reference_rules)
    theirs: list[bytes | None] = []
    for p in PAYMENTS:
        try:
            theirs.append(serializer(message(payment_pb2, p), context()))
        except Exception:
            theirs.append(None)

    written = payments.serialize(payments_frame(spark, payments)).collect()

    ours = {row["row"]: bytes(row["value"]) for row in written}
    assert [ours.get(i) for i in range(len(PAYMENTS))] == theirs
    assert [frame is not None for frame in theirs] == [False, False, True, True]
    rejected = sorted((dict(r.headers)["__rule.name"], r.value) for r in sink.read("bad"))
    assert [(rule, b'"id": "neg"' in value or b'"id": "pos"' in value) for rule, value in rejected] == [
        (b"scaled", True),  # -128.0 has 4 digits
        (b"small", True),  # 123456.78 takes 4 bytes
    ]


@pytest.mark.spark
def test_a_decimal_its_spark_type_cannot_hold_is_undecodable(spark: Any, tmp_path: Path) -> None:
    from contracts.formats.protobuf.values import decimal_record

    sink = LocalTopicSink(tmp_path / "dlq")
    payments = contract(payload(), dlq_sink=sink)
    registry_frames = []
    for amount in (Decimal("1.505"), Decimal("1234567.1"), Decimal("1.500")):  # scale 3, 8 digits, exact
        record = {"id": "x", "amount": decimal_record(amount), "widest": None, "parts": []}
        body = payments.target.format.encode(record, payments.target.parsed)
        registry_frames.append(b"\x00\x00\x00\x00\x01" + body)
    frames = spark.createDataFrame(list(enumerate(registry_frames)), "row int, value binary")

    read = payments.deserialize(
        frames, key_col=None, on_decode_error="DLQ", decode_dlq_topic="undecodable"
    ).collect()

    assert [row["amount"] for row in read] == [Decimal("1.50")]
    reasons = sorted((dict(r.headers)["__rule.exception"] or b"").decode() for r in sink.read("undecodable"))
    assert "acme.Payment.amount: 1.505 has more fractional digits than decimal(8,2)" in reasons[0]
    assert "acme.Payment.amount: 1234567.1 has more digits than decimal(8,2)" in reasons[1]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ('{key: "precision", value: "39"}', "decimal(39,0), which Spark cannot hold"),
        ('{key: "scale", value: "11"}', "decimal(10,11), which Spark cannot hold"),
        ('{key: "scale", value: "two"}', "declares scale 'two', which is no integer"),
    ],
)
def test_a_decimal_field_spark_cannot_hold_fails_at_load(params: str, says: str) -> None:
    text = PAYMENT.replace(
        '(confluent.field_meta).params = {key: "scale", value: "1"}',
        f"(confluent.field_meta).params = {params}",
    )
    with pytest.raises(ContractError, match=r"acme\.Payment\.parts") as raised:
        contract({**payload(), "schema": text})
    assert says in str(raised.value)
