"""Benchmark: Confluent wire-format records decoded by DataContract.deserialize vs Python decode loops.

Run: `.venv/bin/python benchmarks/deserialize.py [rows] [reference_rows]` (defaults 300,000 and 20,000).

The same framed Avro bodies (an 8-field order record) are decoded
(a) by `DataContract(...).deserialize(df)` with no rules, (b) with one READ CEL condition (native),
(c) by fastavro's `schemaless_reader` in a plain Python loop (one core: the floor for decoding in
Python), (c') by the same loop inside one `mapInArrow` pass writing the record as an Arrow struct
(what any Python decode in Spark pays), (d) by confluent-kafka's `AvroDeserializer` per record on a
mock registry, without and with the same READ rule, and (e) by `deserialize` over records of two
writer versions, half of them upgraded by a JSONata rename migration (and the reference on them).
Spark runs `local[2]` into the `noop` sink; the loops run on the driver, on one core. Every way is
timed best of three after a warm-up, and every ratio is against the fastavro loop of the same run.
"""

from __future__ import annotations

import io
import json
import os
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _measure import best, kafka_topic, noop
from _session import session
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.wire import encode_frame

MAJOR = "application.major.version"
READ_EXPR = "size(message.ssn) == 9 && message.amount >= 0.0"
RENAME = "$merge([$sift($, function($v, $k) {$k != 'ssn'}), {'socialSecurityNumber': $.'ssn'}])"


def order(ssn_field: str) -> dict[str, Any]:
    fields = [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "email", "type": "string"},
        {"name": ssn_field, "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "country", "type": "string"},
        {"name": "amount", "type": "double"},
        # epoch millis as a plain long: a timestamp logical type reaches JSONata as a datetime, which
        # jsonata-python (and so the reference) refuses, failing every JSONata rule (docs/semantics.md §5).
        {"name": "created", "type": "long"},
    ]
    return {"type": "record", "name": "Order", "namespace": "com.acme", "fields": fields}


V1 = order("ssn")
V2 = order("socialSecurityNumber")
READ_RULE = {"name": "validOrder", "kind": "CONDITION", "type": "CEL", "mode": "READ", "expr": READ_EXPR}
UPGRADE_RULE = {
    "name": "renameSsn",
    "kind": "TRANSFORM",
    "type": "JSONATA",
    "mode": "UPGRADE",
    "expr": RENAME,
}
# subject → registered versions: (schema, metadata properties, ruleSet)
SUBJECTS: dict[str, list[tuple[dict[str, Any], dict[str, str], dict[str, Any]]]] = {
    "plain-value": [(V1, {}, {})],
    "checked-value": [(V1, {}, {"domainRules": [READ_RULE]})],
    "migrated-value": [(V1, {MAJOR: "1"}, {}), (V2, {MAJOR: "2"}, {"migrationRules": [UPGRADE_RULE]})],
}


def payload(schema: dict[str, Any], properties: dict[str, str], rule_set: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"schemaType": "AVRO", "schema": json.dumps(schema)}
    if properties:
        out["metadata"] = {"properties": properties}
    if rule_set:
        out["ruleSet"] = rule_set
    return out


def records(rows: int) -> list[dict[str, Any]]:
    """Realistic orders (ids, names, emails, 9-digit ssn, ages, countries, amounts, timestamps)."""
    rng = random.Random(7)
    countries = ["US", "DE", "FR", "GB", "JP", "BR", "IN", "CA"]
    start = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    return [
        {
            "id": i,
            "customer": f"customer {rng.randrange(1_000_000):06d}",
            "email": f"user.{i}@mail.example.com",
            "ssn": f"{rng.randrange(10**9):09d}",
            "age": rng.randrange(18, 90),
            "country": rng.choice(countries),
            "amount": round(rng.uniform(0, 500), 2),
            "created": start + rng.randrange(300 * 86_400_000),
        }
        for i in range(rows)
    ]


def bodies(rows: list[dict[str, Any]], schema: dict[str, Any], rename: bool = False) -> list[bytes]:
    parsed = parse_schema(schema)
    out = []
    for row in rows:
        if rename:
            row = {("socialSecurityNumber" if k == "ssn" else k): v for k, v in row.items()}
        buffer = io.BytesIO()
        schemaless_writer(buffer, parsed, row)
        out.append(buffer.getvalue())
    return out


def fastavro_loop(frames: list[bytes], schema: dict[str, Any]) -> Callable[[], list[Any]]:
    parsed = parse_schema(schema)

    def run() -> list[Any]:
        return [schemaless_reader(io.BytesIO(frame[5:]), parsed, None) for frame in frames]

    return run


def fastavro_in_spark(df: Any, schema: dict[str, Any], spark_type: Any) -> Any:
    """One mapInArrow pass: fastavro per record, the records as one Arrow struct column."""
    from pyspark.sql.types import StructField, StructType

    from contracts.formats import avro

    output = StructType([*df.schema.fields, StructField("record", spark_type, True)])
    output_json = output.json()

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        arrow = avro.arrow_schema(StructType.fromJson(json.loads(output_json)))
        parsed = parse_schema(schema)
        for batch in batches:
            decoded = [
                schemaless_reader(io.BytesIO(v[5:]), parsed, None) for v in batch.column("value").to_pylist()
            ]
            record = pa.array(decoded, type=arrow.field("record").type)
            yield pa.RecordBatch.from_arrays([*batch.columns, record], schema=arrow)

    return df.mapInArrow(decode, output)


def reference(subject: str, ours: list[int], frames: list[bytes], rules: bool) -> Callable[[], list[Any]]:
    """confluent-kafka's AvroDeserializer over `frames` (framed with our ids `ours`, one per version,
    re-framed with its mock registry's), per record; with `rules` the latest version reads and its
    rules run."""
    from confluent_kafka.schema_registry import Schema as RefSchema
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient.new_client({"url": f"mock://{subject}"})
    theirs = {
        ours_id: client.register_schema(subject, RefSchema.from_dict(payload(*version)))
        for ours_id, version in zip(ours, SUBJECTS[subject], strict=True)
    }
    rule_registry = RuleRegistry()
    rule_registry.register_executor(CelExecutor())
    rule_registry.register_executor(JsonataExecutor())
    conf = {"use.latest.version": True} if rules else {}
    deserializer = AvroDeserializer(client, conf=conf, rule_registry=rule_registry)
    # The default subject name strategy reads subject `<topic>-value`.
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    data = [encode_frame(theirs[int.from_bytes(f[1:5], "big")], f[5:]) for f in frames]

    def run() -> list[Any]:
        return [deserializer(value, ctx) for value in data]

    return run


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    python_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    spark = session("deserialize-benchmark")
    registry = LocalRegistry()
    registry.set_config("migrated-value", compatibilityGroup=MAJOR)
    ids: dict[str, list[int]] = {}
    for subject, versions in SUBJECTS.items():
        ids[subject] = [registry.register_schema(subject, Schema.from_dict(payload(*v))) for v in versions]
    data = records(rows)
    v1 = bodies(data, V1)
    work = tempfile.mkdtemp(prefix="deserialize-bench-")
    plain_frames = [encode_frame(ids["plain-value"][0], b) for b in v1]
    checked_frames = [encode_frame(ids["checked-value"][0], b) for b in v1]
    # Writer versions alternate record by record, as on a topic whose producers upgrade one by one.
    m1, m2 = ids["migrated-value"]
    migration_rows = 3 * python_rows
    v2 = bodies(data[1:migration_rows:2], V2, rename=True)
    mixed_frames = [
        encode_frame(m1, b) if i % 2 == 0 else encode_frame(m2, v2[i // 2])
        for i, b in enumerate(v1[:migration_rows])
    ]
    plain_df = kafka_topic(spark, plain_frames, os.path.join(work, "plain"), "orders")
    checked_df = kafka_topic(spark, checked_frames, os.path.join(work, "checked"), "orders")
    mixed_df = kafka_topic(spark, mixed_frames, os.path.join(work, "mixed"), "orders")

    plain = DataContract(registry, "plain-value")
    checked = DataContract(registry, "checked-value")
    migrated = DataContract(registry, "migrated-value")
    print(checked.explain("READ"))
    print(migrated.explain("READ"), "(target version 2; version 1 records are upgraded by renameSsn)")
    # Self-checks on one record each (any row count): a checked one, and an even (version 1) one upgraded.
    probe, old = min(12345, rows - 1), min(12344, migration_rows - 1) // 2 * 2
    sample = checked.deserialize(checked_df).where(f"id = {probe}").collect()
    assert sample and sample[0]["ssn"] == data[probe]["ssn"], sample
    upgraded = migrated.deserialize(mixed_df).where(f"id = {old}").collect()
    assert upgraded and upgraded[0]["socialSecurityNumber"] == data[old]["ssn"], upgraded

    results: list[tuple[str, int, float]] = []

    def measure(label: str, n: int, run: Callable[[], Any]) -> None:
        seconds = best(run)
        results.append((label, n, seconds))
        print(f"{label:<56} {n:>9,} rows {seconds:7.2f} s {n / seconds:>10,.0f} rows/s", flush=True)

    reference_rows = rows // 3
    measure("(c) fastavro loop, 1 core", rows, fastavro_loop(plain_frames, V1))
    measure(
        "(c') fastavro in one mapInArrow, local[2]",
        rows,
        noop(fastavro_in_spark(plain_df, V1, plain.spark_schema)),
    )
    measure("(a) deserialize, no rules, local[2]", rows, noop(plain.deserialize(plain_df)))
    measure("(b) deserialize + READ CEL (native), local[2]", rows, noop(checked.deserialize(checked_df)))
    measure(
        "(e) deserialize, half upgraded (JSONata), local[2]",
        migration_rows,
        noop(migrated.deserialize(mixed_df)),
    )
    measure(
        "(d) AvroDeserializer, no rules, 1 core",
        reference_rows,
        reference("plain-value", ids["plain-value"], plain_frames[:reference_rows], False),
    )
    measure(
        "(d) AvroDeserializer + READ CEL, 1 core",
        python_rows // 2,
        reference("checked-value", ids["checked-value"], checked_frames[: python_rows // 2], True),
    )
    measure(
        "(d) AvroDeserializer, half upgraded (JSONata), 1 core",
        python_rows,
        reference("migrated-value", ids["migrated-value"], mixed_frames[:python_rows], True),
    )

    floor = rows / results[0][2]
    print()
    for label, n, seconds in results:
        print(f"{label:<56} {n / seconds / floor:7.3f}x the fastavro loop")
    spark.stop()


if __name__ == "__main__":
    main()
