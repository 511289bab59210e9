"""ENCRYPT rules on JSON Schema records (docs/semantics.md §11): the reference's JSON walk finds the
tagged fields (`confluent:tags`, nested objects, arrays, nullable type lists), parity both ways with
confluent-kafka 2.16.1's JSONSerializer/JSONDeserializer and FieldEncryptionExecutor
(tests/support/encrypt_oracle.py), AES256_SIV byte for byte; WRITE-side DLQ values redact the tagged
fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import SECRET, SUBJECT, ReferenceEncryption, encrypt_rule

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "ssn": {"type": "string", "confluent:tags": ["PII"]},
        "note": {"type": ["string", "null"], "confluent:tags": ["PII"]},
        "aliases": {"type": "array", "items": {"type": "string"}, "confluent:tags": ["PII"]},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string", "confluent:tags": ["PII"]}, "zip": {"type": "string"}},
            "required": ["city", "zip"],
        },
        "age": {"type": "integer"},
    },
    "required": ["name", "ssn", "aliases", "address", "age"],
}
RECORDS = [
    {"name": "Ada", "ssn": "123-45-6789", "note": "vip", "aliases": ["A", "Countess"],
     "address": {"city": "London", "zip": "N1"}, "age": 36},
    {"name": "Bob", "ssn": "", "note": None, "aliases": [],
     "address": {"city": "Zürich ✓", "zip": "8000"}, "age": 7},
]  # fmt: skip


def _payload(algorithm: str, rules: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    domain = [*rules, encrypt_rule(algorithm)]
    return {"schemaType": "JSON", "schema": json.dumps(SCHEMA), "ruleSet": {"domainRules": domain}}


def _contract(payload: dict[str, Any], registry: LocalRegistry, **kwargs: Any) -> DataContract:
    if not registry.get_subjects():
        assert registry.register_schema(SUBJECT, Schema.from_dict(payload)) == 1
    return DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, **kwargs)


def _records(spark: Any, contract: DataContract) -> Any:
    from pyspark.sql.types import IntegerType, StructField, StructType

    schema = StructType([StructField("row", IntegerType()), *contract.spark_schema.fields])
    rows = [(i, *(r.get(f.name) for f in contract.spark_schema.fields)) for i, r in enumerate(RECORDS)]
    return spark.createDataFrame(rows, schema)


def _plain(row: Any) -> dict[str, Any]:
    record = row.asDict(recursive=True)
    record.pop("row")
    assert record.pop("_absent") is None  # every optional property that accepts null was there
    return record


@pytest.mark.parametrize("algorithm", ["AES256_GCM", "AES256_SIV"])
def test_json_fields_encrypt_and_decrypt_as_the_reference_does(spark: Any, algorithm: str) -> None:
    payload = _payload(algorithm)
    reference = ReferenceEncryption(payload, SECRET)
    theirs = [reference.serialize(record) for record in RECORDS]
    registry = LocalRegistry()
    reference.export_keys(registry)
    contract = _contract(payload, registry)

    framed = contract.serialize(_records(spark, contract)).orderBy("row").collect()
    ours = [bytes(row["value"]) for row in framed]

    written = json.loads(ours[0][5:])
    assert written["name"] == "Ada" and written["address"]["zip"] == "N1" and written["age"] == 36
    assert b"123-45-6789" not in ours[0] and b"London" not in ours[0] and b"Countess" not in ours[0]
    if algorithm == "AES256_SIV":
        assert ours == theirs  # deterministic: byte for byte
    assert [reference.deserialize(frame) for frame in ours] == RECORDS
    frames = spark.createDataFrame([(i, v) for i, v in enumerate(theirs)], "row int, value binary")
    read = contract.deserialize(frames, key_col=None).orderBy("row").collect()
    assert [_plain(row) for row in read] == RECORDS


def test_a_write_rule_rejecting_a_record_sends_its_tagged_fields_redacted(spark: Any, tmp_path: Path) -> None:
    adults = {
        "name": "adults",
        "kind": "CONDITION",
        "mode": "WRITE",
        "type": "CEL",
        "expr": "message.age >= 18",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "minors"},
    }
    registry = LocalRegistry()
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = _contract(_payload("AES256_GCM", [adults]), registry, dlq_sink=sink)

    assert contract.serialize(_records(spark, contract)).count() == 1

    (rejected,) = sink.read("minors")
    value = json.loads(rejected.value or b"")
    assert value["ssn"] == "<REDACTED>" and value["address"] == {"city": "<REDACTED>", "zip": "8000"}
    assert value["name"] == "Bob" and value["aliases"] == []
