"""Kafka keys under their own contract (docs/semantics.md §8.9): `deserialize(key=…)` decodes the
key with the key subject's contract into one struct column, first, as Confluent's consumer does;
`serialize(key=…)` encodes it from one. The key's rules reject rows to its DLQ with the key and
value as they arrived; a null key is no record. Frames the reference client writes for keys and
values decode here, and both frames written here decode with the reference."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from query_start import start
from reference_oracle import CapturingProducer, rule_registry
from registry_server import RegistryServer, running_registry

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, SubjectNameStrategy, metrics_of
from contracts.errors import ContractError
from contracts.formats.wire import encode_frame

TOPIC = "orders"
KEY_SCHEMA = {
    "type": "record",
    "name": "OrderKey",
    "namespace": "com.acme",
    "fields": [{"name": "id", "type": "string"}, {"name": "region", "type": "string"}],
}
VALUE_SCHEMA = {  # shares the field name `id` with the key's record
    "type": "record",
    "name": "Order",
    "namespace": "com.acme",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
}
KEY_RULES = [
    {
        "name": "knownRegion",
        "kind": "CONDITION",
        "mode": "WRITEREAD",
        "type": "CEL",
        "expr": "message.region in ['eu', 'us']",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-keys"},
    },
]
VALUE_RULES = [
    {
        "name": "positive",
        "kind": "CONDITION",
        "mode": "WRITEREAD",
        "type": "CEL",
        "expr": "message.amount > 0.0",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-orders"},
    },
]
KAFKA = "key binary, value binary, topic string, partition int, offset long"


def _registry() -> LocalRegistry:
    registry = LocalRegistry()
    for subject, schema, rules in (
        (f"{TOPIC}-key", KEY_SCHEMA, KEY_RULES),
        (f"{TOPIC}-value", VALUE_SCHEMA, VALUE_RULES),
    ):
        payload = {"schema": json.dumps(schema), "ruleSet": {"domainRules": rules}}
        registry.register_schema(subject, Schema.from_dict(payload))
    return registry


@pytest.fixture
def server() -> Iterator[RegistryServer]:
    with running_registry(_registry()) as running:
        yield running


def _contracts(registry: Any, dlq: Path) -> tuple[DataContract, DataContract]:
    sink = LocalTopicSink(str(dlq))
    value = DataContract(registry, f"{TOPIC}-value", dlq_sink=sink)
    key_subject = SubjectNameStrategy.TOPIC_NAME.subject(TOPIC, is_key=True)
    return value, DataContract(registry, key_subject, dlq_sink=sink)


def _frame(registry: LocalRegistry, subject: str, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(schema), record)
    return encode_frame(registry.get_latest_version(subject).schema_id, body.getvalue())


def _reference_frames(server: RegistryServer, rows: list[tuple[Any, dict[str, Any]]]) -> list[Any]:
    """(key, value) frames the reference AvroSerializer writes, the key under `<topic>-key` (no rules:
    the rule-less serializer writes what the rules here then judge)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": server.url})
    conf = {"auto.register.schemas": False}
    keys = AvroSerializer(client, json.dumps(KEY_SCHEMA), conf=conf)
    values = AvroSerializer(client, json.dumps(VALUE_SCHEMA), conf=conf)
    key_ctx = SerializationContext(TOPIC, MessageField.KEY)
    value_ctx = SerializationContext(TOPIC, MessageField.VALUE)
    return [(None if k is None else keys(k, key_ctx), values(v, value_ctx)) for k, v in rows]


ROWS = [
    ({"id": "o-1", "region": "eu"}, {"id": "v-1", "amount": 10.0}),
    ({"id": "o-2", "region": "mars"}, {"id": "v-2", "amount": 20.0}),  # the key's rule rejects it
    ({"id": "o-3", "region": "us"}, {"id": "v-3", "amount": -5.0}),  # the value's rule rejects it
    (None, {"id": "v-4", "amount": 40.0}),  # no key
]


def test_keys_the_reference_writes_decode_into_a_struct_and_their_rules_route_rejects(
    spark: Any, server: RegistryServer, tmp_path: Path
) -> None:
    frames = _reference_frames(server, ROWS)
    df = spark.createDataFrame([(k, v, TOPIC, 0, i) for i, (k, v) in enumerate(frames)], KAFKA)
    value, key = _contracts(server.registry, tmp_path)

    out = value.deserialize(df, key=key, run_id="keyed")

    assert out.columns == ["id", "amount", "key", "topic", "partition", "offset"]
    key_fields = out.schema["key"].dataType.fields
    assert [(f.name, f.dataType) for f in key_fields] == [(f.name, f.dataType) for f in key.spark_schema]
    rows = sorted((r["offset"], r["id"], r["amount"], r["key"] and r["key"].asDict()) for r in out.collect())
    assert rows == [
        (0, "v-1", 10.0, {"id": "o-1", "region": "eu"}),
        (3, "v-4", 40.0, None),
    ]
    sink = LocalTopicSink(str(tmp_path))
    bad_keys = sink.read("bad-keys")
    assert [(r.key, r.value) for r in bad_keys] == [frames[1]]
    assert dict(bad_keys[0].headers)["__rule.name"] == b"knownRegion"
    assert dict(bad_keys[0].headers)["__rule.subject"] == f"{TOPIC}-key".encode()
    assert [(r.key, r.value) for r in sink.read("bad-orders")] == [frames[2]]
    key_counts = metrics_of(out, key=True).get()["knownRegion"]
    assert (key_counts.passed, key_counts.failed) == (2, 1)
    assert metrics_of(out).get()["positive"].failed == 1


def test_records_serialized_with_a_key_contract_decode_with_the_reference(
    spark: Any, server: RegistryServer, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    df = spark.createDataFrame(
        [(v["id"], v["amount"], k, i) for i, (k, v) in enumerate(ROWS)],
        "id string, amount double, key struct<id: string, region: string>, offset long",
    )
    value, key = _contracts(server.registry, tmp_path)

    out = value.serialize(df, key=key, schema_id_serializer="header")

    assert out.columns == ["key", "offset", "headers", "value"]
    written = sorted(out.collect(), key=lambda r: r["offset"])
    assert [r["offset"] for r in written] == [0, 3]
    client = SchemaRegistryClient({"url": server.url})
    read = AvroDeserializer(client, rule_registry=rule_registry(CapturingProducer()))
    decoded = []
    for row in written:
        headers = [(h["key"], h["value"]) for h in row["headers"] or ()]
        key_ctx = SerializationContext(TOPIC, MessageField.KEY, headers)
        value_ctx = SerializationContext(TOPIC, MessageField.VALUE, headers)
        key_bytes = None if row["key"] is None else bytes(row["key"])
        decoded.append(
            (None if key_bytes is None else read(key_bytes, key_ctx), read(bytes(row["value"]), value_ctx))
        )
    assert decoded == [ROWS[0], ROWS[3]]
    assert [h["key"] for h in written[0]["headers"]] == ["__key_schema_id", "__value_schema_id"]
    assert [h["key"] for h in written[1]["headers"]] == ["__value_schema_id"]
    assert [json.loads(r.value) for r in LocalTopicSink(str(tmp_path)).read("bad-keys")] == [ROWS[1][0]]
    assert metrics_of(out, key=True).get()["knownRegion"].failed == 1


def test_a_key_contract_round_trips_with_prefixed_frames(spark: Any, tmp_path: Path) -> None:
    registry = _registry()
    value, key = _contracts(registry, tmp_path)
    df = spark.createDataFrame(
        [("v-1", 1.5, ("o-1", "eu"), "t"), ("v-2", 2.5, None, "t")],
        "id string, amount double, key struct<id: string, region: string>, topic string",
    )
    framed = value.serialize(df, key=key)
    assert framed.columns == ["key", "topic", "value"]
    back = value.deserialize(framed, key=key)
    assert sorted(tuple(r) for r in back.collect()) == sorted(
        tuple(r) for r in df.select("id", "amount", "key", "topic").collect()
    )


def test_a_key_contract_needs_the_key_column_and_a_struct_to_encode(spark: Any, tmp_path: Path) -> None:
    value, key = _contracts(_registry(), tmp_path)
    frames = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(
        ContractError, match="a key contract needs the Kafka key's column, and there is no column 'key'"
    ):
        value.deserialize(frames, key=key)
    with pytest.raises(ContractError, match="key_col=None"):
        value.deserialize(frames, key_col=None, key=key)
    records = spark.createDataFrame([("v-1", 1.5, b"k")], "id string, amount double, key binary")
    with pytest.raises(ContractError, match="column 'key' holds binary, and the key's record is a struct"):
        value.serialize(records, key=key)


def test_an_undecodable_key_follows_the_decode_policy_with_both_frames(spark: Any, tmp_path: Path) -> None:
    registry = _registry()
    value, key = _contracts(registry, tmp_path)
    good = encode_frame(registry.get_latest_version(f"{TOPIC}-value").schema_id, b"\x06v-1" + bytes(8))
    df = spark.createDataFrame([(b"\x07junk", good, TOPIC, 0, 0)], KAFKA)

    out = value.deserialize(df, key=key, on_decode_error="DLQ", decode_dlq_topic="undecodable", run_id="u")

    assert out.collect() == []
    [record] = LocalTopicSink(str(tmp_path)).read("undecodable")
    assert (record.key, record.value) == (b"\x07junk", good)
    assert dict(record.headers)["__rule.subject"] == f"{TOPIC}-key".encode()


def test_a_json_schema_key_goes_with_an_avro_value(spark: Any, tmp_path: Path) -> None:
    registry = _registry()
    key_schema = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "region": {"type": "string"}},
        "required": ["id", "region"],
    }
    payload = {"schemaType": "JSON", "schema": json.dumps(key_schema), "ruleSet": {"domainRules": KEY_RULES}}
    registry.register_schema("json-orders-key", Schema.from_dict(payload))
    sink = LocalTopicSink(str(tmp_path))
    key = DataContract(registry, "json-orders-key", dlq_sink=sink)
    value = DataContract(registry, f"{TOPIC}-value", dlq_sink=sink)
    df = spark.createDataFrame(
        [("v-1", 1.5, ("o-1", "eu")), ("v-2", 2.5, ("o-2", "mars"))],
        "id string, amount double, key struct<id: string, region: string>",
    )

    framed = value.serialize(df, key=key).collect()

    assert [json.loads(bytes(row["key"])[5:]) for row in framed] == [{"id": "o-1", "region": "eu"}]
    back = value.deserialize(spark.createDataFrame(framed), key=key).collect()
    assert [(r["id"], r["key"]["region"]) for r in back] == [("v-1", "eu")]
    assert [json.loads(r.value) for r in sink.read("bad-keys")] == [{"id": "o-2", "region": "mars"}]


def test_keys_decode_on_a_stream_through_foreach_batch(spark: Any, tmp_path: Path) -> None:
    registry = _registry()
    value, key = _contracts(registry, tmp_path / "dlq")
    keys = [{"id": f"o-{i}", "region": "mars" if i == 2 else "eu"} for i in range(4)]
    values = [{"id": f"v-{i}", "amount": 1.0 + i} for i in range(4)]
    rows = [
        (
            _frame(registry, f"{TOPIC}-key", KEY_SCHEMA, k),
            i,
            _frame(registry, f"{TOPIC}-value", VALUE_SCHEMA, v),
        )
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]
    spark.createDataFrame(rows, "key binary, offset long, value binary").write.parquet(
        str(tmp_path / "topic")
    )
    stream = spark.readStream.schema("key binary, offset long, value binary").parquet(str(tmp_path / "topic"))
    out = str(tmp_path / "valid")

    def write_valid(batch: Any, batch_id: int) -> None:
        # On Spark Connect this runs in the server's Python worker: results go through a file.
        batch.write.mode("append").parquet(out)

    writer = value.foreach_batch(write_valid, name="keyed", apply="deserialize", key=key)
    query = start(
        stream.writeStream.foreachBatch(writer)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck"))
    )
    query.awaitTermination()

    seen = spark.read.parquet(out).collect()
    assert sorted((r["id"], r["key"]["id"]) for r in seen) == [("v-0", "o-0"), ("v-1", "o-1"), ("v-3", "o-3")]
    [rejected] = LocalTopicSink(str(tmp_path / "dlq")).read("bad-keys")
    assert rejected.value is not None and rejected.key is not None
