"""ENCRYPT_PAYLOAD encoding rules on DataFrames: parity with confluent-kafka 2.16.1's
EncryptionExecutor (tests/support/encrypt_oracle.py) both ways, for Avro and JSON Schema contracts; the
wire prefix and schema id header in clear; failures to decrypt or encrypt routed by the rule's
onFailure or the decode policy; no key material in plans, reprs, errors or DLQ records.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import KMS_PARAMS, SECRET, SUBJECT, ReferenceEncryption, encrypt_rule

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.wire import encode_frame
from contracts.model import RuleMode
from executors.encrypt.cryptor import cryptor, parse_key
from executors.encrypt.localkms import LocalKmsDriver

KMS_KEY = KMS_PARAMS["encrypt.kms.key.id"]
AVRO = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string"},
        {"name": "card", "type": "bytes"},
        {"name": "age", "type": "int"},
    ],
}
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "ssn": {"type": "string"},
        "age": {"type": "integer"},
    },
    "required": ["name", "ssn", "age"],
}
RECORDS = [
    {"name": "Ada", "ssn": "123-45-6789", "card": b"\x00\x01\xfe\xff", "age": 36},
    {"name": "Bob", "ssn": "", "card": b"", "age": 7},
    {"name": "Çé", "ssn": "ünïcödé ✓", "card": bytes(range(64)), "age": -1},
]
JSON_RECORDS = [{key: value for key, value in record.items() if key != "card"} for record in RECORDS]
ALGORITHMS = ["AES256_GCM", "AES128_GCM", "AES256_SIV"]
RULE = "encryptPayload"


def _payload(
    schema_type: str = "AVRO", algorithm: str = "AES256_GCM", on_failure: str | None = None, **extra: str
) -> dict[str, Any]:
    """A registry payload with one ENCRYPT_PAYLOAD encoding rule."""
    params = {**KMS_PARAMS, "dlq.topic": "people-dlq", **extra}
    failure = {"onFailure": on_failure} if on_failure is not None else {}
    rule = encrypt_rule(algorithm, params, payload=True, name=RULE, **failure)
    schema = AVRO if schema_type == "AVRO" else JSON_SCHEMA
    return {"schemaType": schema_type, "schema": json.dumps(schema), "ruleSet": {"encodingRules": [rule]}}


@pytest.fixture(autouse=True)
def _dlq_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A contract without a sink writes to ./dlq-topics: here, a temporary directory."""
    monkeypatch.chdir(tmp_path)


def _contract(payload: dict[str, Any], registry: LocalRegistry, **kwargs: Any) -> DataContract:
    if not registry.get_subjects():
        assert registry.register_schema(SUBJECT, Schema.from_dict(payload)) == 1
    kwargs.setdefault("rule_config", {"secret": SECRET})
    return DataContract(registry, SUBJECT, **kwargs)


def _frames(spark: Any, values: list[bytes]) -> Any:
    return spark.createDataFrame([(i, v) for i, v in enumerate(values)], "row int, value binary")


def _records(spark: Any, contract: DataContract, records: list[dict[str, Any]] = RECORDS) -> Any:
    from pyspark.sql.types import IntegerType, StructField, StructType

    schema = StructType([StructField("row", IntegerType()), *contract.spark_schema.fields])
    rows = [(i, *(record[f.name] for f in contract.spark_schema.fields)) for i, record in enumerate(records)]
    return spark.createDataFrame(rows, schema)


def _plain(row: Any) -> dict[str, Any]:
    record = row.asDict(recursive=True)
    record.pop("row")
    if "card" in record:
        record["card"] = bytes(record["card"])
    return record


def _serialized(contract: DataContract, df: Any, **kwargs: Any) -> list[bytes]:
    return [bytes(row["value"]) for row in contract.serialize(df, **kwargs).orderBy("row").collect()]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_payloads_the_reference_encrypts_decrypt_here(spark: Any, algorithm: str) -> None:
    payload = _payload(algorithm=algorithm)
    reference = ReferenceEncryption(payload, SECRET, whole_payload=True)
    framed = [reference.serialize(record) for record in RECORDS]
    registry = LocalRegistry()
    reference.export_keys(registry)
    contract = _contract(payload, registry)
    rows = contract.deserialize(_frames(spark, framed), key_col=None).orderBy("row").collect()
    assert [_plain(row) for row in rows] == RECORDS


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_payloads_encrypted_here_decrypt_in_the_reference(spark: Any, algorithm: str) -> None:
    payload = _payload(algorithm=algorithm)
    registry = LocalRegistry()
    contract = _contract(payload, registry)
    encrypted = _serialized(contract, _records(spark, contract))
    assert all(b"123-45-6789" not in frame and b"Ada" not in frame for frame in encrypted)
    reference = ReferenceEncryption(payload, SECRET, whole_payload=True)
    reference.import_keys(registry, "kek1", algorithm, range(1, 2))
    assert [reference.deserialize(frame) for frame in encrypted] == RECORDS


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON"])
def test_aes256_siv_payloads_are_byte_identical_to_the_reference(spark: Any, schema_type: str) -> None:
    payload = _payload(schema_type, "AES256_SIV")
    records = RECORDS if schema_type == "AVRO" else JSON_RECORDS
    reference = ReferenceEncryption(payload, SECRET, whole_payload=True)
    theirs = [reference.serialize(record) for record in records]
    registry = LocalRegistry()
    reference.export_keys(registry)
    contract = _contract(payload, registry)
    assert _serialized(contract, _records(spark, contract, records)) == theirs


def test_json_schema_payloads_round_trip_both_ways(spark: Any) -> None:
    payload = _payload("JSON")
    reference = ReferenceEncryption(payload, SECRET, whole_payload=True)
    theirs = [reference.serialize(record) for record in JSON_RECORDS]
    registry = LocalRegistry()
    reference.export_keys(registry)
    contract = _contract(payload, registry)
    ours = _serialized(contract, _records(spark, contract, JSON_RECORDS))
    assert all(b"123-45-6789" not in frame for frame in ours)
    assert [reference.deserialize(frame) for frame in ours] == JSON_RECORDS
    rows = contract.deserialize(_frames(spark, theirs + ours), key_col=None).orderBy("row").collect()
    assert [_plain(row) for row in rows] == JSON_RECORDS + JSON_RECORDS


def _dek(registry: LocalRegistry, algorithm: str = "AES256_GCM", version: int = 1) -> bytes:
    """The subject's unwrapped DEK (Tink key material)."""
    dek = registry.get_dek("kek1", SUBJECT, algorithm, version)
    assert dek.encrypted_key_material is not None
    aead = LocalKmsDriver().new_aead({"secret": SECRET}, KMS_KEY)
    return aead.decrypt(base64.b64decode(dek.encrypted_key_material), b"")


def test_the_wire_prefix_and_schema_id_header_stay_in_clear(spark: Any) -> None:
    """Only the body is encrypted: a V0 frame keeps its 5-byte prefix, and with a schema id
    header the header names the schema and the value is the encrypted body alone."""
    registry = LocalRegistry()
    contract = _contract(_payload(), registry)
    df = _records(spark, contract)
    bodies = [contract.target.format.encode(record, contract.parsed) for record in RECORDS]
    frames = _serialized(contract, df)  # the first write creates the DEK (§11.2)
    decrypting = cryptor("AES256_GCM", _dek(registry))
    for frame, body in zip(frames, bodies, strict=True):
        assert frame[:5] == encode_frame(1, b"")
        assert decrypting.decrypt(frame[5:]) == body
    headed = contract.serialize(df, schema_id_serializer="header").orderBy("row").collect()
    for row, body in zip(headed, bodies, strict=True):
        ((key, value),) = [(h["key"], bytes(h["value"])) for h in row["headers"]]
        assert key == "__value_schema_id" and value[0] == 1
        assert decrypting.decrypt(bytes(row["value"])) == body
    read_back = contract.deserialize(spark.createDataFrame(headed), key_col=None).drop("headers")
    assert [_plain(row) for row in read_back.orderBy("row").collect()] == RECORDS


def _with_keys(payload: dict[str, Any], registry: LocalRegistry) -> LocalRegistry:
    """A registry holding `payload` as the subject's version 1 and `registry`'s KEK and DEK."""
    copied = LocalRegistry()
    assert copied.register_schema(SUBJECT, Schema.from_dict(payload)) == 1
    kek = registry.get_kek("kek1")
    copied.register_kek(kek.name, kek.kms_type, kek.kms_key_id, kek.shared)
    dek = registry.get_dek("kek1", SUBJECT, "AES256_GCM", 1)
    copied.register_dek("kek1", SUBJECT, dek.encrypted_key_material, "AES256_GCM", 1)
    return copied


def test_rotated_payload_deks_carry_their_version_both_ways(spark: Any) -> None:
    payload = _payload(**{"encrypt.dek.expiry.days": "1"})
    reference = ReferenceEncryption(payload, SECRET, whole_payload=True)
    theirs = [reference.serialize(record) for record in RECORDS]
    registry = LocalRegistry()
    reference.export_keys(registry)
    two_days_later = registry.get_dek("kek1", SUBJECT, "AES256_GCM", 1).ts + 2 * 86_400_000
    from executors.encrypt import EncryptPayloadExecutor

    executor = EncryptPayloadExecutor(clock=lambda: two_days_later)
    contract = _contract(payload, registry, executors=[executor])
    ours = _serialized(contract, _records(spark, contract))
    assert registry.get_dek("kek1", SUBJECT, "AES256_GCM", -1).version == 2  # made by the first write
    assert all(frame[5:10] == b"\x00\x00\x00\x00\x02" for frame in ours)
    reader = ReferenceEncryption(payload, SECRET, whole_payload=True)
    reader.import_keys(registry, "kek1", "AES256_GCM", range(1, 3))
    assert [reader.deserialize(frame) for frame in ours + theirs] == RECORDS + RECORDS
    rows = contract.deserialize(_frames(spark, ours + theirs), key_col=None).orderBy("row").collect()
    assert [_plain(row) for row in rows] == RECORDS + RECORDS


@pytest.fixture
def written(spark: Any) -> tuple[LocalRegistry, list[bytes]]:
    """A registry whose contract encrypted the three records, and their frames."""
    registry = LocalRegistry()
    contract = _contract(_payload(on_failure="DLQ"), registry)
    return registry, _serialized(contract, _records(spark, contract))


def _secrets(registry: LocalRegistry) -> list[bytes]:
    material = _dek(registry)
    key = parse_key("AES256_GCM", material)
    return [
        SECRET.encode(),
        material,
        key,
        base64.b64encode(key),
        key.hex().encode(),
        base64.b64encode(material),
    ]


def _assert_clean(text: str | bytes, secrets: list[bytes]) -> None:
    data = text.encode() if isinstance(text, str) else text
    for secret in secrets:
        assert secret not in data


def test_a_wrong_kek_sends_the_frame_as_it_arrived_to_the_rules_dlq(
    spark: Any, tmp_path: Path, written: Any
) -> None:
    registry, frames = written
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = _contract({}, registry, rule_config={"secret": "not-the-secret"}, dlq_sink=sink)
    df = spark.createDataFrame([(b"k%d" % i, f) for i, f in enumerate(frames)], "key binary, value binary")
    assert reader.deserialize(df).count() == 0
    records = sorted(sink.read("people-dlq"), key=lambda r: r.key or b"")
    assert [r.value for r in records] == frames
    assert [r.key for r in records] == [b"k0", b"k1", b"k2"]
    secrets = _secrets(registry)
    for record in records:
        headers = dict(record.headers)
        assert headers["__rule.name"] == RULE.encode() and headers["__rule.mode"] == b"READ"
        assert b"ENCRYPT_PAYLOAD cannot decrypt the payload" in (headers["__rule.exception"] or b"")
        assert b"could not unwrap a DEK" in (headers["__rule.exception"] or b"")
        _assert_clean(repr(record), secrets)


def test_a_tampered_payload_is_a_rule_failure(spark: Any, tmp_path: Path, written: Any) -> None:
    registry, frames = written
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = _contract({}, registry, dlq_sink=sink)
    tampered = bytearray(frames[0])
    tampered[-1] ^= 0x01
    rows = reader.deserialize(_frames(spark, [bytes(tampered), frames[1]]), key_col=None).collect()
    assert [row["name"] for row in rows] == ["Bob"]
    (record,) = sink.read("people-dlq")
    assert record.value == bytes(tampered)
    assert b"wrong key or tampered ciphertext" in (dict(record.headers)["__rule.exception"] or b"")


def test_on_error_the_job_fails_naming_the_rule_without_key_material(spark: Any, written: Any) -> None:
    registry, frames = written
    # A rule that names no onFailure takes ERROR.
    reader = DataContract(_with_keys(_payload(), registry), SUBJECT, rule_config={"secret": "wrong"})
    with pytest.raises(Exception) as caught:
        reader.deserialize(_frames(spark, frames), key_col=None).collect()
    message = str(caught.value)
    assert f"Rule '{RULE}' failed in READ" in message and "cannot decrypt the payload" in message
    _assert_clean(message, _secrets(registry))


def test_on_none_a_payload_that_cannot_be_decrypted_is_undecodable(
    spark: Any, tmp_path: Path, written: Any
) -> None:
    """NONE lets the row go on with its payload still encrypted, which no format can read: the
    decode policy takes it (ERROR by default, here DLQ), never a record made of ciphertext."""
    registry, frames = written
    lenient = _with_keys(_payload(on_failure="NONE"), registry)
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = DataContract(lenient, SUBJECT, rule_config={"secret": "wrong"}, dlq_sink=sink)
    out = reader.deserialize(
        _frames(spark, frames), key_col=None, on_decode_error="DLQ", decode_dlq_topic="undecodable"
    )
    assert out.count() == 0
    records = sink.read("undecodable")
    assert sorted(r.value for r in records) == sorted(frames)
    reasons = [dict(r.headers)["__rule.exception"] or b"" for r in records]
    assert all(f"encoding rule '{RULE}' failed".encode() in reason for reason in reasons)
    with pytest.raises(Exception, match="cannot deserialize the record"):
        reader.deserialize(_frames(spark, frames), key_col=None).collect()


def test_a_write_without_the_kms_secret_routes_the_serialized_body(spark: Any, tmp_path: Path) -> None:
    """A DEK that cannot be made fails the rule for each record: DLQ sends the serialized body, as
    the reference does (plaintext: restrict the DLQ topic, or use ERROR); ERROR fails the job."""
    from pyspark.sql import functions as F

    registry = LocalRegistry()
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = _contract(_payload(on_failure="DLQ"), registry, rule_config={}, dlq_sink=sink)
    assert contract.serialize(_records(spark, contract).withColumn("key", F.lit(b"k"))).count() == 0
    records = sink.read("people-dlq")
    bodies = [contract.target.format.encode(record, contract.parsed) for record in RECORDS]
    assert sorted(r.value or b"" for r in records) == sorted(bodies)
    headers = dict(records[0].headers)
    assert headers["__rule.mode"] == b"WRITE" and records[0].key == b"k"
    assert b"ENCRYPT_PAYLOAD cannot get a DEK to encrypt with" in (headers["__rule.exception"] or b"")
    strict = _contract(_payload(), LocalRegistry(), rule_config={})
    with pytest.raises(Exception, match=f"Rule '{RULE}' failed in WRITE"):
        strict.serialize(_records(spark, strict)).collect()


def _explained(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    return out.getvalue()


def test_no_key_material_in_plans_or_reprs(spark: Any, written: Any) -> None:
    registry, frames = written
    contract = _contract({}, registry)
    secrets = _secrets(registry)
    decoded = contract.deserialize(_frames(spark, frames), key_col=None)
    assert decoded.count() == 3
    for df in (decoded, contract.serialize(decoded)):
        _assert_clean(_explained(df), secrets)
    explained = {mode: contract.explain(mode) for mode in ("WRITE", "READ")}
    assert (
        f"1. {RULE} [ENCRYPT_PAYLOAD TRANSFORM, mode WRITE] on success NONE, on failure DLQ"
        in explained["WRITE"]
    )
    assert "before decoding, in deserialize" in explained["READ"]
    encoding = contract._plans.encoding(RuleMode.WRITE)  # the plan serialize ran
    shown = [*explained.values(), repr(contract), repr(contract.planner), repr(encoding)]
    shown += [repr(rule) for rule in encoding.rules]
    for text in shown:
        assert text
        _assert_clean(text, secrets)
