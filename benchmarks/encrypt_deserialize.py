"""Benchmark: DataContract.deserialize with an ENCRYPT READ rule (three encrypted string fields)
vs the same deserialize without encryption, a Python decrypt loop and the reference deserializer.

Run: `.venv/bin/python benchmarks/encrypt_deserialize.py [rows] [reference_rows]` (defaults
300,000 and 10,000; about 5 minutes on 2 cores).

An 8-field customer record (id, name, email, ssn, card, country, amount, created) whose `email`,
`ssn` and `card` are tagged PII, in Confluent frames:
(a) `deserialize` of the plain frames, the schema without rules (the baseline);
(b) `deserialize` of the same records written by `serialize` with the ENCRYPT rule (WRITEREAD,
    local-kms, AES256_GCM), so its READ decrypts the three fields (inside the decode pass, which
    runs a plan's leading Python rules);
(e) `deserialize` of the plain frames with a READ TRANSFORM that returns each record as it is,
    run in Python like ENCRYPT (a batch step): the cost of a Python rule alone;
(a') and (b') the same as (a) and (b) on the spark-avro path (`SPARK_CONTRACTS_AVRO_PATH=jvm`),
    where `from_avro` decodes and ENCRYPT runs in a Python pass after it;
(c) the floor for decrypting in Python: fastavro plus `cryptography`'s AES-GCM on the three
    fields per record, in a plain loop on one core;
(d) confluent-kafka's AvroDeserializer with its FieldEncryptionExecutor and LocalKmsDriver on a
    mock registry holding the same KEK and wrapped DEK, per record on one core, and the same
    deserializer without rules on the plain frames;
(f) `serialize` of the records (typed columns read from Parquet), the schema without rules, and
(g) the same with an ENCRYPT_PAYLOAD encoding rule (WRITEREAD, local-kms, AES256_GCM) sealing
    each whole body: what payload encryption costs a write; both on the fastavro path (the
    default), then (f') and (g') on the spark-avro path (SPARK_CONTRACTS_AVRO_PATH=jvm).
The session has spark-avro on its classpath; every way but (a'), (b'), (f') and (g') runs the
fastavro path.
Spark runs `local[2]` into the `noop` sink; the loops run on the driver, on one core. Every way
is timed best of three after a warm-up. The goals: (b) at least 0.5x (a), and (b) at least 50x
the reference with encryption (d).
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
import sys
import tempfile
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _measure import best, kafka_topic, noop
from _session import session
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from contracts import DataContract, LocalRegistry, Schema
from contracts.engine.jvm_avro import PATH_ENV
from contracts.formats.wire import encode_frame
from executors.protocol import BatchStep, Outcome, RuleContext

PLAIN = "plain-value"
ENCRYPTED = "customers-value"
UNCHANGED = "unchanged-value"
SEALED = "sealed-value"
SECRET = "benchmark-secret"
KEK = "customers-kek"
ALGORITHM = "AES256_GCM"
PII = ("email", "ssn", "card")
PII_TAG = {"confluent:tags": ["PII"]}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": "string", **PII_TAG},
        {"name": "ssn", "type": "string", **PII_TAG},
        {"name": "card", "type": "string", **PII_TAG},
        {"name": "country", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "created", "type": "long"},
    ],
}
ENCRYPT_RULE = {
    "name": "encryptPII",
    "kind": "TRANSFORM",
    "type": "ENCRYPT",
    "mode": "WRITEREAD",
    "tags": ["PII"],
    "params": {
        "encrypt.kek.name": KEK,
        "encrypt.kms.type": "local-kms",
        "encrypt.kms.key.id": "customers-key",
        "encrypt.dek.algorithm": ALGORITHM,
    },
}

UNCHANGED_RULE = {"name": "unchanged", "kind": "TRANSFORM", "type": "UNCHANGED", "mode": "READ"}
PAYLOAD_RULE = {**ENCRYPT_RULE, "name": "encryptPayload", "type": "ENCRYPT_PAYLOAD", "tags": []}


class Unchanged:
    """Rule type UNCHANGED: a batch step returning each record as it is (the Python pass alone)."""

    type = "UNCHANGED"

    def compile(self, ctx: RuleContext) -> BatchStep:
        return BatchStep(_unchanged_evaluator)


def _unchanged_evaluator() -> Callable[[list[Any]], list[Outcome]]:
    return lambda records: [Outcome(True, record) for record in records]


def payload(rule: dict[str, Any] | None = None, rules: str = "domainRules") -> dict[str, Any]:
    out: dict[str, Any] = {"schemaType": "AVRO", "schema": json.dumps(CUSTOMER)}
    if rule is not None:
        out["ruleSet"] = {rules: [rule]}
    return out


def records(rows: int) -> list[dict[str, Any]]:
    """Realistic customers: names, emails, 9-digit ssn, 16-digit card numbers, countries, amounts."""
    rng = random.Random(7)
    countries = ["US", "DE", "FR", "GB", "JP", "BR", "IN", "CA"]
    start = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    return [
        {
            "id": i,
            "name": f"customer {rng.randrange(1_000_000):06d}",
            "email": f"user.{i}@mail.example.com",
            "ssn": f"{rng.randrange(10**9):09d}",
            "card": f"{rng.randrange(10**16):016d}",
            "country": rng.choice(countries),
            "amount": round(rng.uniform(0, 500), 2),
            "created": start + rng.randrange(300 * 86_400_000),
        }
        for i in range(rows)
    ]


def plain_frames(rows: list[dict[str, Any]], schema_id: int) -> list[bytes]:
    parsed = parse_schema(CUSTOMER)
    out = []
    for row in rows:
        buffer = io.BytesIO()
        schemaless_writer(buffer, parsed, row)
        out.append(encode_frame(schema_id, buffer.getvalue()))
    return out


def typed_records(spark: Any, writer: DataContract, rows: list[dict[str, Any]], path: str) -> Any:
    """The records as typed columns, written once to Parquet and read back."""
    import pyarrow as pa

    columns = {f["name"]: [row[f["name"]] for row in rows] for f in CUSTOMER["fields"]}
    spark.createDataFrame(pa.table(columns), writer.spark_schema).write.parquet(path)
    return spark.read.parquet(path)


def encrypted_frames(spark: Any, writer: DataContract, df: Any, path: str) -> list[bytes]:
    """The records framed by `serialize` with the ENCRYPT rule's WRITE (their PII encrypted)."""
    writer.serialize(df).select("value").write.parquet(path)
    return [bytes(row.value) for row in spark.read.parquet(path).collect()]


def decrypt_loop(frames: list[bytes], registry: LocalRegistry) -> Callable[[], list[Any]]:
    """fastavro, then AES-GCM (`cryptography`) on the three base64 fields, per record: the DEK is
    unwrapped once, as a worker does."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from executors.encrypt.cryptor import parse_key
    from executors.encrypt.localkms import LocalKmsDriver

    kek = registry.get_kek(KEK)
    dek = registry.get_dek(KEK, ENCRYPTED, ALGORITHM, 1)
    wrapped = base64.b64decode(dek.encrypted_key_material or "")
    material = LocalKmsDriver().new_aead({"secret": SECRET}, kek.kms_key_id).decrypt(wrapped, b"")
    cipher = AESGCM(parse_key(ALGORITHM, material))
    parsed = parse_schema(CUSTOMER)

    def run() -> list[Any]:
        out = []
        for frame in frames:
            record = schemaless_reader(io.BytesIO(frame[5:]), parsed, None)
            for name in PII:
                data = base64.b64decode(record[name])
                record[name] = cipher.decrypt(data[:12], data[12:], b"").decode("utf-8")
            out.append(record)
        return out

    return run


def reference(
    frames: list[bytes], registry: LocalRegistry, encrypted: bool
) -> tuple[Callable[[], list[Any]], Any]:
    """confluent-kafka's AvroDeserializer per record on a mock registry holding the contract (with
    the ENCRYPT rule, its FieldEncryptionExecutor and LocalKmsDriver, our KEK and wrapped DEK when
    `encrypted`), the frames re-framed with its schema id; and what it reads from the first."""
    from confluent_kafka.schema_registry import Schema as RefSchema
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.encryption.dek_registry.dek_registry_client import (
        DekAlgorithm,
    )
    from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import FieldEncryptionExecutor
    from confluent_kafka.schema_registry.rules.encryption.localkms.local_driver import LocalKmsDriver
    from confluent_kafka.serialization import MessageField, SerializationContext

    LocalKmsDriver.register()
    subject = ENCRYPTED if encrypted else PLAIN
    client = SchemaRegistryClient.new_client({"url": f"mock://encrypt-benchmark-{subject}"})
    theirs = client.register_schema(
        subject, RefSchema.from_dict(payload(ENCRYPT_RULE if encrypted else None))
    )
    rules = RuleRegistry()
    executor = FieldEncryptionExecutor()
    rules.register_executor(executor)
    deserializer = AvroDeserializer(
        client,
        conf={"use.latest.version": True} if encrypted else {},
        rule_conf={"secret": SECRET},
        rule_registry=rules,
    )
    if encrypted:
        deks = executor.executor.client  # the executor's own (mock) DEK registry, made by configure
        kek = registry.get_kek(KEK)
        deks.register_kek(kek.name, kek.kms_type, kek.kms_key_id, kek.shared)
        dek = registry.get_dek(KEK, ENCRYPTED, ALGORITHM, 1)
        deks.register_dek(KEK, ENCRYPTED, dek.encrypted_key_material, DekAlgorithm(ALGORITHM), 1)
    # The default subject name strategy reads subject `<topic>-value`.
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    data = [encode_frame(theirs, frame[5:]) for frame in frames]

    def run() -> list[Any]:
        return [deserializer(value, ctx) for value in data]

    return run, deserializer(data[0], ctx)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    reference_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    os.environ[PATH_ENV] = "python"
    spark = session("encrypt-deserialize-benchmark", connectors=True)
    registry = LocalRegistry()
    plain_id = registry.register_schema(PLAIN, Schema.from_dict(payload()))
    registry.register_schema(ENCRYPTED, Schema.from_dict(payload(ENCRYPT_RULE)))
    unchanged_id = registry.register_schema(UNCHANGED, Schema.from_dict(payload(UNCHANGED_RULE)))
    plain = DataContract(registry, PLAIN)
    encrypted = DataContract(registry, ENCRYPTED, rule_config={"secret": SECRET})
    unchanged = DataContract(registry, UNCHANGED, executors=[Unchanged()])
    registry.register_schema(SEALED, Schema.from_dict(payload(PAYLOAD_RULE, "encodingRules")))
    sealed = DataContract(registry, SEALED, rule_config={"secret": SECRET})
    print(encrypted.explain("READ"))
    print(sealed.explain("WRITE"))

    data = records(rows)
    work = tempfile.mkdtemp(prefix="encrypt-bench-")
    plain_bytes = plain_frames(data, plain_id)
    typed = typed_records(spark, plain, data, os.path.join(work, "records"))
    secret_bytes = encrypted_frames(spark, encrypted, typed, os.path.join(work, "serialized"))
    plain_df = kafka_topic(spark, plain_bytes, os.path.join(work, "plain"), "customers")
    unchanged_bytes = [encode_frame(unchanged_id, frame[5:]) for frame in plain_bytes]
    unchanged_df = kafka_topic(spark, unchanged_bytes, os.path.join(work, "unchanged"), "customers")
    secret_df = kafka_topic(spark, secret_bytes, os.path.join(work, "encrypted"), "customers")
    expected = {record["id"]: record for record in data}
    middle = rows // 2
    decrypted = encrypted.deserialize(secret_df).where(f"id = {middle}").collect()
    assert decrypted and all(decrypted[0][name] == expected[middle][name] for name in PII), decrypted
    written = schemaless_reader(io.BytesIO(secret_bytes[0][5:]), parse_schema(CUSTOMER), None)
    assert all(written[name] != expected[written["id"]][name] for name in PII), written
    with_encryption, theirs = reference(secret_bytes[:reference_rows], registry, True)
    assert theirs == expected[theirs["id"]], theirs
    without_rules, _ = reference(plain_bytes[:reference_rows], registry, False)
    first = sealed.serialize(typed.where(f"id = {middle}")).collect()[0].value
    opened = sealed.deserialize(kafka_topic(spark, [bytes(first)], os.path.join(work, "sealed"), "c"))
    back = opened.collect()[0]
    assert all(back[f["name"]] == expected[middle][f["name"]] for f in CUSTOMER["fields"]), back
    assert expected[middle]["email"].encode() not in bytes(first), first

    results: list[tuple[str, int, float]] = []

    def measure(label: str, n: int, run: Callable[[], Any]) -> None:
        seconds = best(run)
        results.append((label, n, seconds))
        print(f"{label:<56} {n:>9,} rows {seconds:7.2f} s {n / seconds:>10,.0f} rows/s", flush=True)

    measure("(a) deserialize, no rules, local[2]", rows, noop(plain.deserialize(plain_df)))
    measure(
        "(b) deserialize + ENCRYPT READ (3 fields), local[2]", rows, noop(encrypted.deserialize(secret_df))
    )
    measure(
        "(e) deserialize + a Python READ rule changing nothing",
        rows,
        noop(unchanged.deserialize(unchanged_df)),
    )
    measure("(c) fastavro + AES-GCM loop, 1 core", rows, decrypt_loop(secret_bytes, registry))
    measure("(d) AvroDeserializer + ENCRYPT, 1 core", reference_rows, with_encryption)
    measure("(d') AvroDeserializer, no rules, 1 core", reference_rows, without_rules)
    measure("(f) serialize, no rules, local[2]", rows, noop(plain.serialize(typed)))
    measure("(g) serialize + ENCRYPT_PAYLOAD WRITE, local[2]", rows, noop(sealed.serialize(typed)))
    os.environ[PATH_ENV] = "jvm"  # read when a call is planned
    on_jvm = [
        noop(plain.deserialize(plain_df)),
        noop(encrypted.deserialize(secret_df)),
        noop(plain.serialize(typed)),
        noop(sealed.serialize(typed)),
    ]
    os.environ[PATH_ENV] = "python"
    measure("(a') deserialize, no rules, spark-avro path, local[2]", rows, on_jvm[0])
    measure("(b') deserialize + ENCRYPT READ, spark-avro path, local[2]", rows, on_jvm[1])
    measure("(f') serialize, no rules, spark-avro path, local[2]", rows, on_jvm[2])
    measure("(g') serialize + ENCRYPT_PAYLOAD, spark-avro path, local[2]", rows, on_jvm[3])

    rate = {label[: label.index(")") + 1]: n / seconds for label, n, seconds in results}
    ours, plain_rate, floor, python_pass = rate["(b)"], rate["(a)"], rate["(c)"], rate["(e)"]
    theirs_rate, theirs_plain = rate["(d)"], rate["(d')"]
    print()
    print(f"(b) / (a):  {ours / plain_rate:7.3f}x   goal >= 0.5x")
    print(f"(b) / (d):  {ours / theirs_rate:7.1f}x   goal >= 50x")
    print(f"(b) / (e):  {ours / python_pass:7.3f}x   (decryption against a Python rule doing nothing)")
    print(f"(e) / (a):  {python_pass / plain_rate:7.3f}x   (what a Python rule doing nothing costs)")
    on_spark_avro, plain_spark_avro = rate["(b')"], rate["(a')"]
    print(f"(b') / (a'): {on_spark_avro / plain_spark_avro:6.3f}x   (the spark-avro path)")
    print(f"(b) / (b'): {ours / on_spark_avro:7.3f}x   (ENCRYPT READ: fastavro path against spark-avro's)")
    print(f"(b) / (c):  {ours / floor:7.3f}x   (the Python floor, one core)")
    print(f"(d') / (d): {theirs_plain / theirs_rate:7.1f}x   (what ENCRYPT costs the reference)")
    print(f"(g) / (f):  {rate['(g)'] / rate['(f)']:7.3f}x   (what ENCRYPT_PAYLOAD costs a serialize)")
    sealing = rate["(g')"] / rate["(f')"]
    print(f"(g') / (f'): {sealing:6.3f}x   (the same on the spark-avro path)")
    spark.stop()


if __name__ == "__main__":
    main()
