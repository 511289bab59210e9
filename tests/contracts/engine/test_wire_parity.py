"""Parity of the newer wire formats with confluent-kafka 2.16.1 (docs/semantics.md §8.1): frames its
AvroSerializer writes with a schema GUID, in a V1 prefix or a schema id header, decode here, and
each framing `serialize` writes decodes with its AvroDeserializer (its dual schema id
deserializer). Both sides share one registry: a LocalRegistry served over REST on loopback, which
the reference reaches with its own HTTP client, so GUIDs travel as a real registry gives them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from reference_oracle import SourceRecord, read_by_reference, written_by_reference_with
from registry_server import RegistryServer, running_registry

from contracts import DataContract, LocalRegistry, Schema
from contracts.formats import avro

SUBJECT = "payments-value"
TOPIC = "payments"
SCHEMA = {
    "type": "record",
    "name": "Payment",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
RECORDS = [
    SourceRecord({"id": "pay-0001", "amount": 12.5, "note": None}, headers=(("trace", b"a"),)),
    SourceRecord({"id": "pay-0002", "amount": -3.0, "note": "refund"}),
    SourceRecord({"id": "pay-0003", "amount": 1e9, "note": "é"}, headers=(("trace", b"c"), ("x", None))),
]
HEADERS = "array<struct<key: string, value: binary>>"


@pytest.fixture
def server() -> Iterator[RegistryServer]:
    """The subject's one version, on a LocalRegistry behind the loopback REST server."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema(json.dumps(SCHEMA)))
    with running_registry(registry) as running:
        yield running


def reference_client(server: RegistryServer) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": server.url})


def _guid_prefix(payload: bytes, ctx: Any, schema_id: Any) -> bytes:
    """A `schema.id.serializer` writing the V1 prefix (magic byte 1, the GUID) with the reference's
    own SchemaId.guid_to_bytes: the framing its deserializers read, which no built-in one writes."""
    return schema_id.guid_to_bytes() + payload


def _serializers() -> dict[str, Any]:
    from confluent_kafka.schema_registry import header_schema_id_serializer, prefix_schema_id_serializer

    return {
        "prefix": prefix_schema_id_serializer,
        "prefix_guid": _guid_prefix,
        "header": header_schema_id_serializer,
    }


@pytest.mark.parametrize("serializer", ["prefix", "prefix_guid", "header"])
def test_frames_the_reference_writes_decode_here(spark: Any, server: RegistryServer, serializer: str) -> None:
    conf = {"schema.id.serializer": _serializers()[serializer]}
    written = written_by_reference_with(reference_client(server), RECORDS, TOPIC, conf)
    if serializer == "header":
        assert all(headers[-1][0] == "__value_schema_id" for _, headers in written)
    else:
        assert all(data[0] == (0 if serializer == "prefix" else 1) for data, _ in written)
    rows = [(i, data, [tuple(h) for h in headers]) for i, (data, headers) in enumerate(written)]
    df = spark.createDataFrame(rows, f"offset long, value binary, headers {HEADERS}")

    decoded = DataContract(server.registry, SUBJECT).deserialize(df).orderBy("offset").collect()

    parsed = avro.parse_schema(json.dumps(SCHEMA))
    names = [field["name"] for field in SCHEMA["fields"]]
    records = [avro.spark_to_avro_value({name: row[name] for name in names}, parsed) for row in decoded]
    assert records == [dict(record.value) for record in RECORDS]


@pytest.mark.parametrize("serializer", ["prefix", "prefix_guid", "header"])
def test_frames_serialized_here_decode_with_the_reference(
    spark: Any, server: RegistryServer, serializer: str
) -> None:
    from pyspark.sql.types import ArrayType, BinaryType, LongType, StringType, StructField, StructType

    parsed = avro.parse_schema(json.dumps(SCHEMA))
    record_type = avro.struct_type(parsed)
    rows = []
    for i, record in enumerate(RECORDS):
        value = avro.avro_to_spark_value(dict(record.value), parsed)
        rows.append((*(value[f.name] for f in record_type.fields), i, [tuple(h) for h in record.headers]))
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    kafka = [StructField("offset", LongType()), StructField("headers", ArrayType(header))]
    df = spark.createDataFrame(rows, StructType([*record_type.fields, *kafka]))

    out = DataContract(server.registry, SUBJECT).serialize(df, schema_id_serializer=serializer)

    serialized = out.orderBy("offset").collect()
    frames = [bytes(row["value"]) for row in serialized]
    sent = [
        SourceRecord(record.value, headers=tuple((h["key"], h["value"]) for h in row["headers"]))
        for record, row in zip(RECORDS, serialized, strict=True)
    ]
    outcomes = read_by_reference(reference_client(server), frames, sent, TOPIC, {})
    assert outcomes == [("record", dict(record.value)) for record in RECORDS]
