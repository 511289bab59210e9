"""Benchmark: Protobuf records in Confluent frames decoded by DataContract.deserialize with one
READ CEL rule, vs two single-core Python loops (parse and convert; parse alone) and the reference.

Run: `.venv/bin/python benchmarks/protobuf_deserialize.py [rows] [reference_rows]` (defaults
200,000 and 20,000).

The same frames (an 8-field order message with an enum, schema id 1, message indexes [0]) are
decoded (a) by `deserialize` with the READ rule `size(message.ssn) == 9 && message.amount >= 0.0`
(native CEL: it reads no enum, §1.6), (b) by the format's own decode (message indexes, the
protobuf runtime's `ParseFromString` and the conversion to records) in a plain Python loop on one
core, (b') by `ParseFromString` alone in a plain loop on one core (the "plain `protobuf` parse
loop": no records, nothing a rule could read), and (c) by confluent-kafka's `ProtobufDeserializer`
per record on a mock registry with the same rule, on one core. Spark runs `local[2]` into the
`noop` sink; every way is timed best of three after a warm-up. Every way is compared with (b) and
with (b') of the same run, as a whole and per core (a Spark way's rate halved: it has two).
"""

from __future__ import annotations

import base64
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
from contracts.formats.protobuf import ProtobufFormat
from contracts.formats.wire import encode_frame

SUBJECT = "orders-value"
ORDER = """syntax = "proto3";
package bench;
message Order {
  int64 id = 1;
  string customer = 2;
  string email = 3;
  string ssn = 4;
  int32 age = 5;
  Country country = 6;
  double amount = 7;
  int64 created = 8;
  enum Country { NO = 0; SE = 1; DK = 2; FI = 3; }
}
"""
READ_RULE = {
    "name": "validOrder",
    "kind": "CONDITION",
    "type": "CEL",
    "mode": "READ",
    "expr": "size(message.ssn) == 9 && message.amount >= 0.0",
}
FORMAT = ProtobufFormat()
PARSED = FORMAT.parse(ORDER, ())


def frames(count: int) -> list[bytes]:
    """`count` framed orders; a tenth have a short ssn, which the rule rejects."""
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
            "country": rng.randint(0, 3),
            "amount": round(rng.uniform(0, 1000), 2),
            "created": 1_700_000_000_000 + i,
        }
        out.append(encode_frame(1, FORMAT.encode(record, PARSED)))
    return out


def python_loop(data: list[bytes]) -> Callable[[], int]:
    def run() -> int:
        return sum(len(FORMAT.decode(frame[5:], PARSED, None)["ssn"]) == 9 for frame in data)

    return run


def parse_loop(data: list[bytes]) -> Callable[[], int]:
    from google.protobuf.message_factory import GetMessageClass

    message_type = GetMessageClass(PARSED.message())

    def run() -> int:
        parsed = 0
        for frame in data:
            message_type().ParseFromString(frame[6:])  # past the 5-byte prefix and the index byte 0
            parsed += 1
        return parsed

    return run


def reference_loop(data: list[bytes]) -> Callable[[], int]:
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2
    from google.protobuf.message_factory import GetMessageClass

    main = descriptor_pb2.FileDescriptorSet.FromString(PARSED.descriptor_set).file[-1]
    schema = base64.standard_b64encode(main.SerializeToString()).decode("ascii")
    client = SchemaRegistryClient.new_client({"url": "mock://protobuf-benchmark"})
    rules_json = {"domainRules": [READ_RULE]}
    client.register_schema(
        SUBJECT,
        ReferenceSchema.from_dict({"schemaType": "PROTOBUF", "schema": schema, "ruleSet": rules_json}),
    )
    rules = RuleRegistry()
    rules.register_executor(CelExecutor())
    message_type = GetMessageClass(PARSED.message())
    deserializer = ProtobufDeserializer(
        message_type, {"use.deprecated.format": False}, client, rule_registry=rules
    )
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


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    reference_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    spark = session("protobuf-deserialize-benchmark")
    data = frames(rows)
    path = os.path.join(tempfile.mkdtemp(prefix="protobuf-bench-"), "frames")
    spark.createDataFrame([(frame,) for frame in data], "value binary").write.parquet(path)
    framed = spark.read.parquet(path).cache()
    framed.count()
    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT,
        Schema.from_dict(
            {
                "schemaType": "PROTOBUF",
                "schema": ORDER,
                "ruleSet": {"domainRules": [{**READ_RULE, "onFailure": "NONE"}]},
            }
        ),
    )
    contract = DataContract(registry, SUBJECT)
    ways: dict[str, tuple[int, Callable[[], Any]]] = {
        "deserialize + READ CEL rule": (rows, noop(contract.deserialize(framed))),
        "ParseFromString + records loop (1 core)": (rows, python_loop(data)),
        "ParseFromString alone loop (1 core)": (rows, parse_loop(data)),
        "reference ProtobufDeserializer + rule (1 core)": (
            reference_rows,
            reference_loop(data[:reference_rows]),
        ),
    }
    rates = {}
    for label, (count, run) in ways.items():
        took = best(run)
        rates[label] = count / took
        print(f"{label:<48} {count:>9,} rows {took:8.2f} s {count / took:>12,.0f} rows/s")
    cores = {label: 2 if label.startswith("deserialize") else 1 for label in rates}
    for baseline in ("ParseFromString + records loop (1 core)", "ParseFromString alone loop (1 core)"):
        print(f"against {baseline}:")
        for label, rate in rates.items():
            ratio = rate / rates[baseline]
            print(f"  {label:<48} {ratio:6.2f}x, per core {ratio / cores[label]:6.3f}x")
    spark.stop()


if __name__ == "__main__":
    main()
