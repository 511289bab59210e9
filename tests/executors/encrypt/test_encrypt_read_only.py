"""A contract built to read never creates keys (docs/semantics.md §11.2): a mode's plan is compiled
only when that mode is used, so constructing a contract, `explain()`, `plan()` and `deserialize`
leave the DEK registry as they found it; a READ without its KEK or DEK fails each record saying
which is missing, never "wrong key or tampered ciphertext"."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import KMS_PARAMS, SUBJECT, contract_payload

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.wire import encode_prefix

SCHEMA = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    ],
}


def _state(root: Path) -> dict[str, bytes]:
    """Every file of a directory registry, by path: its whole state."""
    return {
        str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()
    }


def _registry(tmp_path: Path) -> LocalRegistry:
    registry = LocalRegistry(tmp_path / "registry", create=True)
    payload = contract_payload(SCHEMA, {**KMS_PARAMS, "dlq.topic": "people-dlq"})
    payload["ruleSet"]["domainRules"][0]["onFailure"] = "DLQ"
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return registry


def _frame(ssn: str) -> bytes:
    """A version 1 frame whose `ssn` holds `ssn` (as a producer's ciphertext would be held)."""
    import io

    import fastavro

    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(SCHEMA), {"name": "Ada", "ssn": ssn})
    return encode_prefix(1) + body.getvalue()


@pytest.mark.one_pass
def test_building_explaining_and_planning_a_contract_creates_no_key(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    before = _state(tmp_path / "registry")
    contract = DataContract(registry, SUBJECT, rule_config={"secret": "s"})
    for mode in ("READ", "WRITE"):
        assert "encryptPII" in contract.explain(mode)
        assert [rule.rule.name for rule in contract.plan(mode).rules] == ["encryptPII"]
    assert _state(tmp_path / "registry") == before


def test_deserialize_without_a_kek_creates_none_and_says_so(spark: Any, tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    before = _state(tmp_path / "registry")
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = DataContract(registry, SUBJECT, rule_config={"secret": "s"}, dlq_sink=sink)
    ciphertext = base64.b64encode(b"\x01" * 40).decode("ascii")
    kafka = spark.createDataFrame([(_frame(ciphertext),)], "value binary")
    assert reader.deserialize(kafka, key_col=None).count() == 0
    assert _state(tmp_path / "registry") == before
    (record,) = sink.read("people-dlq")
    reason = dict(record.headers)["__rule.exception"].decode()
    assert f"no KEK named 'kek1' for subject '{SUBJECT}'" in reason, reason
    assert "tampered" not in reason


def test_deserialize_without_a_dek_creates_none_and_says_so(spark: Any, tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    registry.register_kek("kek1", "local-kms", "key1")
    before = _state(tmp_path / "registry")
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = DataContract(registry, SUBJECT, rule_config={"secret": "s"}, dlq_sink=sink)
    ciphertext = base64.b64encode(b"\x01" * 40).decode("ascii")
    kafka = spark.createDataFrame([(_frame(ciphertext),)], "value binary")
    assert reader.deserialize(kafka, key_col=None).count() == 0
    assert _state(tmp_path / "registry") == before
    (record,) = sink.read("people-dlq")
    reason = dict(record.headers)["__rule.exception"].decode()
    assert "no DEK version 1 of subject" in reason, reason
    assert "tampered" not in reason


def test_the_first_write_creates_the_keys(spark: Any, tmp_path: Path) -> None:
    """The writer's side is unchanged: its first WRITE registers the KEK and DEK version 1."""
    registry = _registry(tmp_path)
    contract = DataContract(registry, SUBJECT, rule_config={"secret": "s"})
    contract.explain("WRITE")
    frames = contract.serialize(spark.createDataFrame([("Ada", "123")], "name string, ssn string"))
    assert frames.count() == 1
    assert registry.get_dek("kek1", SUBJECT, "AES256_GCM", 1).version == 1
    assert json.loads(json.dumps(registry.get_kek("kek1").name)) == "kek1"
