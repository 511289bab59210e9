"""ENCRYPT parity with confluent-kafka 2.16.1 (tests/support/encrypt_oracle.py), both ways, on DataFrames.

Records the reference encrypts decrypt here (`deserialize` with the rule's READ) to the same
values; records encrypted here (`serialize` with its WRITE) decrypt there; AES256_SIV, being
deterministic, gives byte-identical frames; with `encrypt.dek.expiry.days` the DEK version
prefix and rotation agree. Mixed encrypted and plain fields, nulls, arrays and maps included.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import KMS_PARAMS, SECRET, SUBJECT, ReferenceEncryption, contract_payload

from contracts import DataContract, LocalRegistry, Schema

SCHEMA = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "card", "type": "bytes", "confluent:tags": ["PII"]},
        {"name": "email", "type": ["null", "string"], "default": None, "confluent:tags": ["PII"]},
        {"name": "age", "type": "int"},
        {"name": "aliases", "type": {"type": "array", "items": "string"}, "confluent:tags": ["PII"]},
        {"name": "notes", "type": {"type": "map", "values": "string"}},
    ],
}
RECORDS = [
    {
        "name": "Ada",
        "ssn": "123-45-6789",
        "card": b"\x00\x01\xfe\xff",
        "email": "ada@example.org",
        "age": 36,
        "aliases": ["Countess", "A.L."],
        "notes": {"k": "v"},
    },
    {"name": "Bob", "ssn": "", "card": b"", "email": None, "age": 7, "aliases": [], "notes": {}},
    {
        "name": "Çé",
        "ssn": "ünïcödé ✓",
        "card": bytes(range(64)),
        "email": "",
        "age": -1,
        "aliases": ["x"],
        "notes": {"a": ""},
    },
]
ALGORITHMS = ["AES256_GCM", "AES128_GCM", "AES256_SIV"]


def _params(algorithm: str, **extra: str) -> dict[str, str]:
    return {**KMS_PARAMS, "encrypt.dek.algorithm": algorithm, **extra}


def _contract(payload: dict[str, Any], registry: LocalRegistry, **kwargs: Any) -> DataContract:
    assert registry.register_schema(SUBJECT, Schema.from_dict(payload)) == 1
    return DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, **kwargs)


def _frames(spark: Any, values: list[bytes]) -> Any:
    return spark.createDataFrame([(i, v) for i, v in enumerate(values)], "row int, value binary")


def _records(spark: Any, contract: DataContract) -> Any:
    from pyspark.sql.types import IntegerType, StructField, StructType

    schema = StructType([StructField("row", IntegerType()), *contract.spark_schema.fields])
    rows = [(i, *record.values()) for i, record in enumerate(RECORDS)]
    return spark.createDataFrame(rows, schema)


def _plain(row: Any) -> dict[str, Any]:
    record = row.asDict(recursive=True)
    record.pop("row")
    record["card"] = bytes(record["card"])
    return record


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_records_the_reference_encrypts_decrypt_here(spark: Any, algorithm: str) -> None:
    payload = contract_payload(SCHEMA, _params(algorithm))
    reference = ReferenceEncryption(payload, SECRET)
    framed = [reference.serialize(record) for record in RECORDS]
    registry = LocalRegistry()
    reference.export_keys(registry)
    contract = _contract(payload, registry)
    rows = contract.deserialize(_frames(spark, framed), key_col=None).orderBy("row").collect()
    assert [_plain(row) for row in rows] == RECORDS


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_records_encrypted_here_decrypt_in_the_reference(spark: Any, algorithm: str) -> None:
    payload = contract_payload(SCHEMA, _params(algorithm))
    registry = LocalRegistry()
    contract = _contract(payload, registry)
    frames = contract.serialize(_records(spark, contract)).orderBy("row").collect()
    encrypted = [bytes(row["value"]) for row in frames]
    assert all(b"123-45-6789" not in frame and b"Countess" not in frame for frame in encrypted)
    reference = ReferenceEncryption(payload, SECRET)
    reference.import_keys(registry, "kek1", algorithm, range(1, 2))
    assert [reference.deserialize(frame) for frame in encrypted] == RECORDS


def test_aes256_siv_frames_are_byte_identical_to_the_reference(spark: Any) -> None:
    payload = contract_payload(SCHEMA, _params("AES256_SIV"))
    reference = ReferenceEncryption(payload, SECRET)
    theirs = [reference.serialize(record) for record in RECORDS]
    registry = LocalRegistry()
    reference.export_keys(registry)
    contract = _contract(payload, registry)
    ours = [
        bytes(row["value"]) for row in contract.serialize(_records(spark, contract)).orderBy("row").collect()
    ]
    assert ours == theirs


def test_rotated_deks_carry_their_version_both_ways(spark: Any) -> None:
    """With encrypt.dek.expiry.days, an expired DEK makes the next WRITE create version 2: our
    frames (version 2) and the reference's (version 1) both read back on either side."""
    payload = contract_payload(SCHEMA, _params("AES256_GCM", **{"encrypt.dek.expiry.days": "1"}))
    reference = ReferenceEncryption(payload, SECRET)
    theirs = [reference.serialize(record) for record in RECORDS]
    registry = LocalRegistry()
    reference.export_keys(registry)
    assert registry.get_dek("kek1", SUBJECT, "AES256_GCM", -1).version == 1
    two_days_later = registry.get_dek("kek1", SUBJECT, "AES256_GCM", 1).ts + 2 * 86_400_000
    from executors.encrypt import EncryptExecutor

    contract = _contract(payload, registry, executors=[EncryptExecutor(clock=lambda: two_days_later)])
    ours = [
        bytes(row["value"]) for row in contract.serialize(_records(spark, contract)).orderBy("row").collect()
    ]
    assert registry.get_dek("kek1", SUBJECT, "AES256_GCM", -1).version == 2  # made by the first write
    reader = ReferenceEncryption(payload, SECRET)
    reader.import_keys(registry, "kek1", "AES256_GCM", range(1, 3))
    assert [reader.deserialize(frame) for frame in ours + theirs] == RECORDS + RECORDS
    rows = contract.deserialize(_frames(spark, ours + theirs), key_col=None).orderBy("row").collect()
    assert [_plain(row) for row in rows] == RECORDS + RECORDS


def test_a_plan_reused_after_its_dek_expires_encrypts_with_a_new_version(spark: Any, tmp_path: Path) -> None:
    """One `serialize` DataFrame run twice, on a registry directory the workers share: between the
    runs its DEK comes to be two days old (its timestamp moved back in the registry's file: a fake
    expiry, nothing sleeps), so the second run's workers make DEK version 2 and use it, as the
    reference does per record; the reference and `deserialize` read both runs' frames."""
    import json

    import fastavro

    from executors.encrypt import EncryptExecutor

    payload = contract_payload(SCHEMA, _params("AES256_GCM", **{"encrypt.dek.expiry.days": "1"}))
    registry = LocalRegistry(tmp_path / "registry", create=True)
    # A DEK is judged at every batch (a 1 ms cache), so the runs need not be 5 minutes apart.
    contract = _contract(payload, registry, executors=[EncryptExecutor(dek_cache_ttl_s=0.001)])
    # No orderBy: a second run would reuse the first one's shuffle output instead of encrypting again.
    framed = contract.serialize(_records(spark, contract))
    parsed = fastavro.parse_schema(SCHEMA)

    def run() -> tuple[list[bytes], set[int]]:
        frames = [bytes(row["value"]) for row in sorted(framed.collect(), key=lambda row: row["row"])]
        ssns = [fastavro.schemaless_reader(io.BytesIO(f[5:]), parsed)["ssn"] for f in frames]
        return frames, {int.from_bytes(base64.b64decode(ssn)[1:5], "big") for ssn in ssns}

    today = run()
    (dek_file,) = (tmp_path / "registry" / ".dek-registry" / "deks").rglob("1.json")
    dek = json.loads(dek_file.read_text())
    dek_file.write_text(json.dumps({**dek, "ts": dek["ts"] - 2 * 86_400_000}))
    tomorrow = run()

    assert (today[1], tomorrow[1]) == ({1}, {2})
    assert registry.get_dek("kek1", SUBJECT, "AES256_GCM", -1).version == 2
    reader = ReferenceEncryption(payload, SECRET)
    reader.import_keys(registry, "kek1", "AES256_GCM", range(1, 3))
    assert [reader.deserialize(frame) for frame in today[0] + tomorrow[0]] == RECORDS + RECORDS
    rows = contract.deserialize(_frames(spark, today[0] + tomorrow[0]), key_col=None).orderBy("row").collect()
    assert [_plain(row) for row in rows] == RECORDS + RECORDS
