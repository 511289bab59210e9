"""Benchmark: JSON Schema records in Confluent frames decoded by DataContract.deserialize with one
READ CEL rule, vs Spark's `from_json` alone, a Python decode-and-validate loop, and the reference.

Run: `.venv/bin/python benchmarks/json_deserialize.py [rows] [reference_rows]` (defaults 300,000
and 20,000).

The same frames (an 8-property order object, validated against its JSON Schema) are decoded
(a) by Spark's `from_json` on the body with the contract's Spark type, no validation and no rule
(the native ceiling), (b) by `deserialize` with the READ rule `size(message.ssn) == 9 &&
message.amount >= 0.0` (native CEL) on the JVM path (SPARK_CONTRACTS_JSON_PATH=jvm, as the default `auto`:
`from_json`, the schema's keywords as Spark expressions, docs/semantics.md §8.11), (b'') the same
on frames in `json.dumps`'s default layout (", " and ": ", as Python producers write) and (b') on
the Python path (a Python decode-and-validate pass), (c) by `json.loads`
and `jsonschema` validation in a plain Python loop on one core (the floor for validating in
Python), and (d) by confluent-kafka's `JSONDeserializer` per record on a mock registry with the
same rule, on one core. Spark runs `local[2]` into the `noop` sink; every way is timed best of
three after a warm-up, and every ratio is against (a) and (c) of the same run.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _measure import best, noop
from _session import session

from contracts import DataContract, LocalRegistry, Schema
from contracts.engine import jvm_json
from contracts.formats.wire import encode_frame

SUBJECT = "orders-value"
ORDER: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string", "minLength": 1},
        "email": {"type": "string"},
        "ssn": {"type": "string", "pattern": "^[0-9]+$"},
        "age": {"type": "integer", "minimum": 0},
        "country": {"enum": ["NO", "SE", "DK", "FI"]},
        "amount": {"type": "number"},
        "created": {"type": "integer"},
    },
    "required": ["id", "customer", "email", "ssn", "age", "country", "amount", "created"],
}
READ_RULE = {
    "name": "validOrder",
    "kind": "CONDITION",
    "type": "CEL",
    "mode": "READ",
    "expr": "size(message.ssn) == 9 && message.amount >= 0.0",
}


def payload() -> dict[str, Any]:
    return {"schemaType": "JSON", "schema": json.dumps(ORDER), "ruleSet": {"domainRules": [READ_RULE]}}


def frames(count: int, separators: tuple[str, str] = (",", ":")) -> list[bytes]:
    """`count` framed orders (schema id 1); a tenth have a short ssn, which the rule rejects."""
    rng = random.Random(7)
    out = []
    for i in range(count):
        digits = 8 if i % 10 == 0 else 9
        record = {
            "id": i,
            "customer": f"customer-{i}",
            "email": f"c{i}@example.com",
            "ssn": "".join(rng.choice("0123456789") for _ in range(digits)),
            "age": rng.randint(18, 90),
            "country": rng.choice(["NO", "SE", "DK", "FI"]),
            "amount": round(rng.uniform(0, 1000), 2),
            "created": 1_700_000_000_000 + i,
        }
        out.append(encode_frame(1, json.dumps(record, separators=separators).encode()))
    return out


def python_loop(data: list[bytes]) -> Callable[[], int]:
    from jsonschema.validators import validator_for

    validator = validator_for(ORDER)(ORDER)

    def run() -> int:
        valid = 0
        for frame in data:
            record = json.loads(frame[5:])
            validator.validate(record)
            valid += len(record["ssn"]) == 9
        return valid

    return run


def reference_loop(data: list[bytes]) -> Callable[[], int]:
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient.new_client({"url": "mock://json-benchmark"})
    client.register_schema(SUBJECT, ReferenceSchema.from_dict(payload()))
    rules = RuleRegistry()
    rules.register_executor(CelExecutor())
    deserializer = JSONDeserializer(None, schema_registry_client=client, rule_registry=rules)
    ctx = SerializationContext("orders", MessageField.VALUE)

    def run() -> int:
        valid = 0
        for frame in data:
            try:
                deserializer(frame, ctx)
                valid += 1
            except Exception:  # the rule's ERROR action: a rejected record
                pass
        return valid

    return run


def on_path(contract: DataContract, framed: Any, path: str) -> Any:
    """`deserialize` planned with SPARK_CONTRACTS_JSON_PATH=`path` (read when the call plans)."""
    before = os.environ.get(jvm_json.PATH_ENV)
    os.environ[jvm_json.PATH_ENV] = path
    try:
        return contract.deserialize(framed)
    finally:
        if before is None:
            del os.environ[jvm_json.PATH_ENV]
        else:
            os.environ[jvm_json.PATH_ENV] = before


def main() -> None:
    from pyspark.sql import functions as F

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    reference_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    spark = session("json-deserialize-benchmark")
    data = frames(rows)
    path = os.path.join(tempfile.mkdtemp(prefix="json-bench-"), "frames")
    spark.createDataFrame([(frame,) for frame in data], "value binary").write.parquet(path)
    framed = spark.read.parquet(path).cache()
    framed.count()
    spaced_path = os.path.join(os.path.dirname(path), "spaced")
    spaced_frames = [(frame,) for frame in frames(rows, (", ", ": "))]
    spark.createDataFrame(spaced_frames, "value binary").write.parquet(spaced_path)
    spaced = spark.read.parquet(spaced_path).cache()
    spaced.count()
    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT,
        Schema.from_dict({**payload(), "ruleSet": {"domainRules": [{**READ_RULE, "onFailure": "NONE"}]}}),
    )
    contract = DataContract(registry, SUBJECT)

    body = F.expr("cast(substring(value, 6) as string)")
    ways: dict[str, tuple[int, Callable[[], Any]]] = {
        "from_json alone (native ceiling)": (
            rows,
            noop(framed.select(F.from_json(body, contract.spark_schema).alias("order"))),
        ),
        "deserialize + READ CEL rule, JVM path": (rows, noop(on_path(contract, framed, "jvm"))),
        "deserialize + READ CEL rule, JVM path, spaced": (rows, noop(on_path(contract, spaced, "jvm"))),
        "deserialize + READ CEL rule, Python path": (rows, noop(on_path(contract, framed, "python"))),
        "json.loads + jsonschema loop (1 core)": (rows, python_loop(data)),
        "reference JSONDeserializer + rule (1 core)": (reference_rows, reference_loop(data[:reference_rows])),
    }
    rates = {}
    for label, (count, run) in ways.items():
        took = best(run)
        rates[label] = count / took
        print(f"{label:<44} {count:>9,} rows {took:8.2f} s {count / took:>12,.0f} rows/s")
    baseline = rates["json.loads + jsonschema loop (1 core)"]
    ceiling = rates["from_json alone (native ceiling)"]
    for label, rate in rates.items():
        print(f"  {label:<44} {rate / ceiling:6.2f}x from_json {rate / baseline:6.2f}x the Python loop")
    spark.stop()


if __name__ == "__main__":
    main()
