"""ENCRYPT never shows a key, and a field it cannot decrypt is a rule failure naming the field.

No KEK secret or plaintext DEK in the Spark plan (`explain(True)` text), in repr() or str() of
the contract, its plans, steps and executor, in an exception, or in DLQ records; a wrong KEK or
a tampered ciphertext sends the record to the rule's DLQ (or fails the job on ERROR) with a
reason naming the field, and leaves the ciphertext in the DLQ record, never plaintext.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import KMS_PARAMS, SUBJECT, contract_payload

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from executors.encrypt.cryptor import parse_key
from executors.encrypt.localkms import LocalKmsDriver

SECRET = "s3cret-kek-passphrase"
SCHEMA = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "card", "type": "bytes", "confluent:tags": ["PII"]},
    ],
}
PLAINTEXT = "999-88-7777"


def _payload(on_failure: str = "DLQ") -> dict[str, Any]:
    payload = contract_payload(SCHEMA, {**KMS_PARAMS, "dlq.topic": "people-dlq"})
    payload["ruleSet"]["domainRules"][0]["onFailure"] = on_failure
    return payload


def _secrets(registry: LocalRegistry) -> list[bytes]:
    """Every form of key material to look for: the secret, and the DEK raw and as base64 and hex."""
    dek = registry.get_dek("kek1", SUBJECT, "AES256_GCM", 1)
    assert dek.encrypted_key_material is not None
    aead = LocalKmsDriver().new_aead({"secret": SECRET}, "key1")
    material = aead.decrypt(base64.b64decode(dek.encrypted_key_material), b"")
    key = parse_key("AES256_GCM", material)
    forms = [SECRET.encode(), key, base64.b64encode(key), key.hex().encode(), base64.b64encode(material)]
    return [*forms, material]


def _assert_clean(text: str | bytes, secrets: list[bytes]) -> None:
    data = text.encode() if isinstance(text, str) else text
    for secret in secrets:
        assert secret not in data


def _explained(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    return out.getvalue()


@pytest.fixture
def written(spark: Any, tmp_path: Path) -> tuple[LocalRegistry, DataContract, list[bytes]]:
    """A directory registry, the contract on it, and three records it encrypted."""
    registry = LocalRegistry(tmp_path / "registry", create=True)
    registry.register_schema(SUBJECT, Schema.from_dict(_payload()))
    contract = DataContract(
        registry, SUBJECT, rule_config={"secret": SECRET}, dlq_sink=LocalTopicSink(tmp_path / "dlq")
    )
    df = spark.createDataFrame(
        [(f"p{i}", PLAINTEXT, bytes([i, 1, 2])) for i in range(3)], "name string, ssn string, card binary"
    )
    frames = [bytes(row["value"]) for row in contract.serialize(df).collect()]
    return registry, contract, frames


def test_no_key_material_in_plans_reprs_or_files(spark: Any, tmp_path: Path, written: Any) -> None:
    registry, contract, frames = written
    secrets = _secrets(registry)
    assert all(PLAINTEXT.encode() not in frame for frame in frames)
    kafka = spark.createDataFrame([(frame,) for frame in frames], "value binary")
    decoded = contract.deserialize(kafka, key_col=None)
    assert {row["ssn"] for row in decoded.collect()} == {PLAINTEXT}
    for df in (decoded, contract.serialize(decoded.select("name", "ssn", "card"))):
        _assert_clean(_explained(df), secrets)
    for shown in (
        repr(contract),
        repr(contract._compiler),
        str(contract.plan("WRITE")),
        repr(contract.plan("WRITE")),
        str(contract.plan("READ")),
        repr(contract.plan("READ")),
        *(repr(rule) for mode in ("WRITE", "READ") for rule in contract.plan(mode).rules),
    ):
        assert shown
        _assert_clean(shown, secrets)
    for path in (tmp_path / "registry").rglob("*"):
        if path.is_file():
            _assert_clean(path.read_bytes(), secrets)


def test_a_wrong_kek_is_a_rule_failure_naming_the_field(spark: Any, tmp_path: Path, written: Any) -> None:
    registry, _, frames = written
    secrets = _secrets(registry)
    sink = LocalTopicSink(tmp_path / "dlq-wrong")
    reader = DataContract(registry, SUBJECT, rule_config={"secret": "not-the-secret"}, dlq_sink=sink)
    kafka = spark.createDataFrame([(frame,) for frame in frames], "value binary")
    assert reader.deserialize(kafka, key_col=None).count() == 0
    records = sink.read("people-dlq")
    assert len(records) == 3
    for record in records:
        text = repr(record.headers).encode()
        assert b"Person.ssn" in text or b"Person.card" in text, text
        assert b"could not unwrap a DEK" in text and b"InvalidTag (wrong KMS secret or KEK?)" in text
        _assert_clean(repr(record).encode(), secrets)
        assert PLAINTEXT.encode() not in repr(record).encode()


def test_a_tampered_ciphertext_is_a_rule_failure_naming_the_field(
    spark: Any, tmp_path: Path, written: Any
) -> None:
    registry, contract, frames = written
    secrets = _secrets(registry)
    tampered = bytearray(frames[0])
    tampered[-3] ^= 0x01  # inside the last field's ciphertext: the bytes field `card`
    kafka = spark.createDataFrame([(bytes(tampered),), (frames[1],)], "value binary")
    rows = contract.deserialize(kafka, key_col=None).collect()
    assert [row["name"] for row in rows] == ["p1"]
    (record,) = LocalTopicSink(tmp_path / "dlq").read("people-dlq")
    text = repr(record.headers)
    assert "Person.card" in text and "wrong key or tampered ciphertext" in text
    assert record.value == bytes(tampered)
    _assert_clean(repr(record), secrets)


def test_on_error_the_job_fails_naming_the_field_without_key_material(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_payload("ERROR")))
    writer = DataContract(registry, SUBJECT, rule_config={"secret": SECRET})
    df = spark.createDataFrame([("a", PLAINTEXT, b"\x01")], "name string, ssn string, card binary")
    frames = [bytes(row["value"]) for row in writer.serialize(df).collect()]
    secrets = _secrets(registry)
    reader = DataContract(registry, SUBJECT, rule_config={"secret": "wrong"})
    kafka = spark.createDataFrame([(frames[0],)], "value binary")
    with pytest.raises(Exception) as caught:
        reader.deserialize(kafka, key_col=None).collect()
    message = str(caught.value)
    assert "encryptPII" in message and "Person.ssn" in message
    _assert_clean(message, secrets)


def _with_read_check(on: str) -> dict[str, Any]:
    """ENCRYPT on the PII fields and a CEL condition rejecting the record named p1 (DLQ). In
    `on` mode the condition runs after ENCRYPT: after decryption on READ (the list runs
    reversed), after encryption on WRITE."""
    payload = _payload()
    condition = {
        "name": "notP1",
        "kind": "CONDITION",
        "mode": on,
        "type": "CEL",
        "expr": "message.name != 'p1'",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "checked-dlq"},
    }
    rules = payload["ruleSet"]["domainRules"]
    rules[:] = [condition, *rules] if on == "READ" else [*rules, condition]
    return payload


def test_a_read_rule_after_decryption_sends_the_ciphertext_as_it_arrived(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_with_read_check("READ")))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, dlq_sink=sink)
    df = spark.createDataFrame(
        [(f"p{i}", f"p{i}", PLAINTEXT, bytes([i, 1, 2])) for i in range(3)],
        "id string, name string, ssn string, card binary",
    )
    frames = {row["id"]: bytes(row["value"]) for row in contract.serialize(df).collect()}
    kafka = spark.createDataFrame([(frame,) for frame in frames.values()], "value binary")
    assert sorted(row["name"] for row in contract.deserialize(kafka, key_col=None).collect()) == ["p0", "p2"]
    (framed,) = sink.read("checked-dlq")
    assert framed.value == frames["p1"]
    # A DataFrame decoded elsewhere, fields still encrypted: the DLQ value is the record as it came.
    ciphertext = _encrypted_rows(spark, registry)
    read_sink = LocalTopicSink(tmp_path / "dlq-read")
    reader = DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, dlq_sink=read_sink)
    assert reader.read(ciphertext).count() == 2
    (record,) = read_sink.read("checked-dlq")
    value = json.loads(record.value or b"")
    arrived = ciphertext.filter("name = 'p1'").first()
    assert value["ssn"] == arrived["ssn"] and value["card"] == bytes(arrived["card"]).decode("latin-1")
    assert PLAINTEXT not in (record.value or b"").decode()
    _assert_clean(repr(record), _secrets(registry))


def _encrypted_rows(spark: Any, registry: LocalRegistry) -> Any:
    """The three records with their PII fields encrypted, as columns (an ENCRYPT WRITE-only contract)."""
    from pyspark.sql import functions as F

    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET})
    df = spark.createDataFrame(
        [(f"p{i}", PLAINTEXT, bytes([i, 1, 2])) for i in range(3)], "name string, ssn string, card binary"
    )
    framed = contract.serialize(df)
    plain = DataContract(_fieldless(registry), SUBJECT)
    decoded = plain.deserialize(framed, key_col=None).select(F.col("name"), F.col("ssn"), F.col("card"))
    return spark.createDataFrame(decoded.collect(), decoded.schema)  # fixed: nonces are random


def _fieldless(registry: LocalRegistry) -> LocalRegistry:
    """A registry with the subject's schema and no rules: reads frames without decrypting."""
    bare = LocalRegistry()
    schema = registry.get_version(SUBJECT, 1).schema
    bare.register_schema(SUBJECT, Schema.from_dict({"schemaType": "AVRO", "schema": schema.schema_str}))
    return bare


def test_write_side_dlq_records_redact_the_encrypted_fields(spark: Any, tmp_path: Path) -> None:
    """A WRITE rule rejecting a record after ENCRYPT: its DLQ value (the record as it arrived, as
    JSON) holds "<REDACTED>" for each field an ENCRYPT rule tags, as the reference's DLQ action
    writes it, never the plaintext."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_with_read_check("WRITE")))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, dlq_sink=sink)
    df = spark.createDataFrame(
        [(f"p{i}", PLAINTEXT, bytes([i, 1, 2])) for i in range(3)], "name string, ssn string, card binary"
    )
    assert contract.serialize(df).count() == 2
    assert contract.write(df).count() == 2
    records = sink.read("checked-dlq")
    assert len(records) == 2
    for record in records:
        assert json.loads(record.value or b"") == {"name": "p1", "ssn": "<REDACTED>", "card": "<REDACTED>"}
        assert PLAINTEXT.encode() not in repr(record).encode()
    # As the reference's DLQ action, `dlq.redact.rule.types` "" keeps them (a replayable DLQ topic).
    plain_sink = LocalTopicSink(tmp_path / "dlq-plain")
    config = {"secret": SECRET, "dlq.redact.rule.types": ""}
    keeping = DataContract(registry, SUBJECT, rule_config=config, dlq_sink=plain_sink)
    assert keeping.write(df).count() == 2
    (kept,) = plain_sink.read("checked-dlq")
    assert json.loads(kept.value or b"")["ssn"] == PLAINTEXT


@pytest.mark.one_pass
@pytest.mark.parametrize("corrupt", ["keks", "deks"])
def test_a_key_file_that_cannot_be_read_fails_each_record_and_the_contract_loads(
    spark: Any, tmp_path: Path, written: Any, corrupt: str
) -> None:
    """A LocalRegistry directory whose KEK or DEK file is damaged: the contract loads, for readers
    and writers, and the ENCRYPT rule fails each record with the file named (docs/semantics.md §11.2)."""
    registry, _, frames = written
    (path,) = (tmp_path / "registry" / ".dek-registry" / corrupt).rglob("*.json")
    path.write_text('{"truncated": ')
    sink = LocalTopicSink(tmp_path / "dlq-corrupt")
    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, dlq_sink=sink)
    kafka = spark.createDataFrame([(frame,) for frame in frames], "value binary")
    assert contract.deserialize(kafka, key_col=None).count() == 0
    df = spark.createDataFrame([("p9", PLAINTEXT, b"\x09")], "name string, ssn string, card binary")
    assert contract.write(df).count() == 0
    records = sink.read("people-dlq")
    assert len(records) == 4
    for record in records:
        reason = dict(record.headers)["__rule.exception"].decode()
        assert f"cannot read {path}" in reason, reason
    assert {dict(record.headers)["__rule.mode"] for record in records} == {b"READ", b"WRITE"}


def _with_erring_checks(action: str = "DLQ") -> dict[str, Any]:
    """The reference's rule order: CEL checks declared before ENCRYPT, so a WRITE check runs on the
    plaintext before encryption and a READ check (the list reversed) on it after decryption. Each
    check fails with an evaluation error quoting the SSN for one record (p2 on WRITE, p1 on READ)."""
    payload = _payload()

    def check(mode: str, name: str) -> dict[str, Any]:
        return {
            "name": f"ssnIsANumber{mode.title()}",
            "kind": "CONDITION",
            "mode": mode,
            "type": "CEL",
            "expr": f"message.name != '{name}' || int(message.ssn) > 0",
            "onFailure": action,
            "params": {"dlq.topic": "checked-dlq"},
        }

    rules = payload["ruleSet"]["domainRules"]
    rules[:] = [check("WRITE", "p2"), check("READ", "p1"), *rules]
    return payload


@pytest.mark.one_pass
def test_reasons_of_rules_that_saw_plaintext_redact_the_encrypted_values(spark: Any, tmp_path: Path) -> None:
    """A CEL evaluation error quotes the value it could not convert: in a WRITE rule before
    encryption and a READ rule after decryption that is the plaintext SSN, which the DLQ record's
    `__rule.exception` (and `_contract.reason`) holds as "<REDACTED>" (docs/semantics.md §11.4)."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_with_erring_checks()))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, dlq_sink=sink)
    df = spark.createDataFrame(
        [(f"p{i}", PLAINTEXT, bytes([i, 1, 2])) for i in range(3)], "name string, ssn string, card binary"
    )
    frames = [bytes(row["value"]) for row in contract.serialize(df).collect()]
    assert len(frames) == 2
    kafka = spark.createDataFrame([(frame,) for frame in frames], "value binary")
    assert sorted(row["name"] for row in contract.deserialize(kafka, key_col=None).collect()) == ["p0"]
    records = sink.read("checked-dlq")
    assert sorted(dict(r.headers)["__rule.mode"] for r in records) == [b"READ", b"WRITE"]
    for record in records:
        reason = dict(record.headers)["__rule.exception"].decode()
        assert "<REDACTED>" in reason and "int" in reason, reason
        assert PLAINTEXT.encode() not in repr(record).encode()
    (rejected,) = contract.apply(df, mode="WRITE").rejected.collect()
    reason = rejected["_contract"]["reason"]
    assert "<REDACTED>" in reason and PLAINTEXT not in reason


@pytest.mark.one_pass
def test_an_error_action_of_a_rule_that_saw_plaintext_fails_without_it(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_with_erring_checks("ERROR")))
    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET})
    df = spark.createDataFrame([("p2", PLAINTEXT, b"\x01")], "name string, ssn string, card binary")
    with pytest.raises(Exception) as caught:
        contract.serialize(df).collect()
    message = str(caught.value)
    assert "ssnIsANumberWrite" in message and "<REDACTED>" in message
    assert PLAINTEXT not in message
