"""`make bench`: every benchmark of this directory at a size that fits in about ten minutes on two
idle cores, printed as one table of ratios, each against its baseline measured in the same run.

Run: `.venv/bin/python benchmarks/bench.py [scale]` (`make bench`; `scale` multiplies every row
count, 1.0 by default; `make jars` fetches spark-avro, spark-sql-kafka and the Kafka broker).

Each case sets up its data once, then its ways take turns within each round (best of `ROUNDS`
after a warm-up), so a busy neighbour slows them alike. A ratio above 1 means the contract side is
faster than its baseline. The scripts beside this one measure each case at full size, with more
ways; RESULTS.md keeps their history and, at its top, this table from the latest run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cel_condition
import cel_field_transform
import deserialize
import dlq_kafka
import dlq_write
import encrypt_deserialize
import json_deserialize
import jsonata_migration
import protobuf_deserialize
from _measure import kafka_topic
from _session import session

from contracts import DataContract, LocalRegistry, Schema
from contracts.engine import jvm_avro, jvm_json
from contracts.formats.wire import encode_frame, encode_prefix
from tools.kafka_broker import KafkaBroker

ROUNDS = 3


@dataclass(frozen=True)
class Ratio:
    """One line of the table: `what` runs `ratio` times as fast as `baseline` (rows per second,
    per core where a side has one core), against `goal` (empty: no goal, shown for the record)."""

    what: str
    ratio: float
    baseline: str
    goal: str = ""


def turns(ways: dict[str, Callable[[], Any]], rounds: int = ROUNDS) -> dict[str, float]:
    """Seconds of each way, the fastest of `rounds` after one warm-up; the ways take turns."""
    for run in ways.values():
        run()
    seconds = dict.fromkeys(ways, float("inf"))
    for _ in range(rounds):
        for label, run in ways.items():
            start = time.perf_counter()
            run()
            seconds[label] = min(seconds[label], time.perf_counter() - start)
    return seconds


def noop(df: Any) -> Callable[[], None]:
    return lambda: df.write.format("noop").mode("overwrite").save()


def rows(n: int, scale: float) -> int:
    return max(1_000, int(n * scale))


def cel(spark: Any, work: str, scale: float) -> list[Ratio]:
    """One native CEL condition (cel_condition.py), and `write()` with it and its default counts."""
    from pyspark.sql import functions as F

    from contracts.formats.avro import parse_schema, struct_type
    from contracts.model import RuleKind
    from executors.cel.compiler.expressions import compile_rule

    n = rows(2_000_000, scale)
    path = os.path.join(work, "cel")
    cel_condition.generate(spark, n, path)
    df = spark.read.parquet(path)
    record_type = struct_type(parse_schema(cel_condition.SCHEMA))
    record = F.struct(*[F.col(name) for name in df.columns])
    compiled = compile_rule(cel_condition.EXPR, RuleKind.CONDITION, record_type)(record).passed
    hand = (F.char_length("ssn") == 9) & (F.col("age") > 0) & F.col("email").rlike(cel_condition.HAND_EMAIL)
    registry = LocalRegistry()
    rule = {"name": "valid", "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": cel_condition.EXPR}
    schema = {
        "schema": json.dumps(cel_condition.SCHEMA),
        "ruleSet": {"domainRules": [{**rule, "onFailure": "NONE"}]},
    }
    registry.register_schema("users-value", Schema.from_dict(schema))
    contract = DataContract(registry, "users-value")
    seconds = turns(
        {
            "hand": lambda: df.where(hand).count(),
            "native": lambda: df.where(compiled).count(),
            "write": noop(contract.write(df)),
            "hand filter": noop(df.where(hand)),
        }
    )
    return [
        Ratio(
            "CEL condition compiled to Columns",
            seconds["hand"] / seconds["native"],
            "hand-written filter",
            ">= 0.95x",
        ),
        Ratio(
            "write() + that rule (onFailure NONE), counts",
            seconds["hand filter"] / seconds["write"],
            "hand-written filter",
            ">= 0.95x",
        ),
    ]


def cel_field(spark: Any, work: str, scale: float) -> list[Ratio]:
    """A CEL_FIELD transform over ten strings through `write()` (cel_field_transform.py)."""
    n = rows(1_000_000, scale)
    source = cel_field_transform.source(spark, n)
    seconds = turns(
        {
            "write": noop(cel_field_transform.contract().write(source)),
            "hand": noop(cel_field_transform.by_hand(source)),
        }
    )
    return [
        Ratio(
            "CEL_FIELD transform, write()",
            seconds["hand"] / seconds["write"],
            "hand-written concat",
            ">= 0.8x",
        )
    ]


def jsonata(spark: Any, work: str, scale: float) -> list[Ratio]:
    """A JSONata rename as a compiled migration in `read()` (jsonata_migration.py)."""
    from pyspark.sql import functions as F

    n = rows(1_000_000, scale)
    path = os.path.join(work, "jsonata")
    jsonata_migration.generate(spark, n, path)
    v1 = spark.read.parquet(path)
    reader = DataContract(jsonata_migration.registry(), "people-value", version=2)
    seconds = turns(
        {
            "read": noop(reader.read(v1, writer_version=1)),
            "hand": noop(v1.withColumnRenamed("ssn", "socialSecurityNumber").select(F.col("*"))),
        }
    )
    return [
        Ratio(
            "JSONata migration, read(writer_version=1)",
            seconds["hand"] / seconds["read"],
            "withColumnRenamed",
        )
    ]


def dlq(spark: Any, work: str, scale: float) -> list[Ratio]:
    """`write()` + DLQ at 1 %, 10 % and 100 % rejects (dlq_write.py)."""
    out = []
    goals = {1: "", 10: ">= 0.5x", 100: ">= 0.3x"}
    for percent in (1, 10, 100):
        seconds = dlq_write.measure(spark, rows(400_000, scale), percent, work)
        out.append(
            Ratio(
                f"write() + DLQ, {percent} % rejected, LocalTopicSink",
                seconds["hand"] / seconds["contract"],
                "hand-written two-output job",
                goals[percent],
            )
        )
    return out


def kafka(spark: Any, work: str, scale: float) -> list[Ratio]:
    """`write()` + DLQ to a real broker with a KafkaTopicSink (dlq_kafka.py)."""
    out = []
    with KafkaBroker(Path(work) / "broker") as broker:
        for percent in (10, 100):
            seconds = dlq_kafka.measure(spark, broker.bootstrap_servers, rows(200_000, scale), percent, work)
            out.append(
                Ratio(
                    f"write() + DLQ, {percent} % rejected, KafkaTopicSink",
                    seconds["hand"] / seconds["contract"],
                    "valid rows + Spark's Kafka writer",
                    ">= 0.5x" if percent == 10 else "",
                )
            )
    return out


def on_path(variable: str, path: str, build: Callable[[], Any]) -> Any:
    """What `build` makes with `variable` (a decode path) set to `path`: read when a call plans."""
    before = os.environ.get(variable)
    os.environ[variable] = path
    try:
        return build()
    finally:
        if before is None:
            del os.environ[variable]
        else:
            os.environ[variable] = before


def avro(spark: Any, work: str, scale: float) -> list[Ratio]:
    """Avro on both decode paths (jvm_avro.py) and against the reference client (deserialize.py)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    n = rows(300_000, scale)
    registry = LocalRegistry()
    rules = {
        "domainRules": [
            {
                "name": f"valid{mode}",
                "kind": "CONDITION",
                "type": "CEL",
                "mode": mode,
                "expr": deserialize.READ_EXPR,
            }
            for mode in ("READ", "WRITE")
        ]
    }
    schema_id = registry.register_schema(
        "orders-value", Schema.from_dict(deserialize.payload(deserialize.V1, {}, rules))
    )
    data = deserialize.records(n)
    frames = [encode_frame(schema_id, body) for body in deserialize.bodies(data, deserialize.V1)]
    topic = kafka_topic(spark, frames, os.path.join(work, "avro-topic"), "orders")
    contract = DataContract(registry, "orders-value")
    spark.createDataFrame(data, contract.spark_schema).write.parquet(os.path.join(work, "avro-records"))
    records = spark.read.parquet(os.path.join(work, "avro-records"))
    avro_json = json.dumps(deserialize.V1)
    path = jvm_avro.PATH_ENV
    fields = [F.col(f"`{name}`") for name in contract.spark_schema.fieldNames()]
    seconds = turns(
        {
            "from_avro": noop(
                topic.select(from_avro(F.substring("value", 6, 2**31 - 1), avro_json).alias("r"))
            ),
            "jvm read": noop(on_path(path, "jvm", lambda: contract.deserialize(topic))),
            "python read": noop(on_path(path, "python", lambda: contract.deserialize(topic))),
            "to_avro": noop(
                records.select(
                    F.concat(F.lit(encode_prefix(schema_id)), to_avro(F.struct(*fields), avro_json))
                )
            ),
            "jvm write": noop(on_path(path, "jvm", lambda: contract.serialize(records))),
            "python write": noop(on_path(path, "python", lambda: contract.serialize(records))),
        }
    )
    reference_rows = rows(10_000, scale)
    checked = deserialize.reference("checked-value", [schema_id], frames[:reference_rows], True)
    theirs = turns({"reference": checked}, rounds=1)["reference"]
    per_core = (n / seconds["jvm read"] / 2) / (reference_rows / theirs)
    per_core_python = (n / seconds["python read"] / 2) / (reference_rows / theirs)
    return [
        Ratio(
            "deserialize + READ CEL, spark-avro path",
            seconds["from_avro"] / seconds["jvm read"],
            "from_avro alone",
            ">= 0.7x",
        ),
        Ratio(
            "deserialize + READ CEL, fastavro path",
            seconds["from_avro"] / seconds["python read"],
            "from_avro alone",
        ),
        Ratio(
            "serialize + WRITE CEL, spark-avro path",
            seconds["to_avro"] / seconds["jvm write"],
            "to_avro alone",
            ">= 0.7x",
        ),
        Ratio(
            "serialize + WRITE CEL, fastavro path",
            seconds["to_avro"] / seconds["python write"],
            "to_avro alone",
        ),
        Ratio(
            "deserialize + READ CEL, spark-avro path, per core", per_core, "AvroDeserializer + rule, 1 core"
        ),
        Ratio(
            "deserialize + READ CEL, fastavro path, per core",
            per_core_python,
            "AvroDeserializer + rule, 1 core",
        ),
    ]


def json_schema(spark: Any, work: str, scale: float) -> list[Ratio]:
    """JSON Schema frames on the from_json path (json_deserialize.py)."""
    from pyspark.sql import functions as F

    n = rows(300_000, scale)
    data = json_deserialize.frames(n)
    path = os.path.join(work, "json-frames")
    spark.createDataFrame([(frame,) for frame in data], "value binary").write.parquet(path)
    framed = spark.read.parquet(path)
    registry = LocalRegistry()
    rule = {**json_deserialize.READ_RULE, "onFailure": "NONE"}
    registry.register_schema(
        json_deserialize.SUBJECT,
        Schema.from_dict({**json_deserialize.payload(), "ruleSet": {"domainRules": [rule]}}),
    )
    contract = DataContract(registry, json_deserialize.SUBJECT)
    body = F.expr("cast(substring(value, 6) as string)")
    seconds = turns(
        {
            "from_json": noop(framed.select(F.from_json(body, contract.spark_schema).alias("order"))),
            "jvm": noop(on_path(jvm_json.PATH_ENV, "jvm", lambda: contract.deserialize(framed))),
        }
    )
    return [
        Ratio(
            "deserialize JSON Schema + READ CEL, from_json path",
            seconds["from_json"] / seconds["jvm"],
            "from_json alone",
            ">= 0.6x",
        )
    ]


def protobuf(spark: Any, work: str, scale: float) -> list[Ratio]:
    """Protobuf frames against the reference client, per core (protobuf_deserialize.py)."""
    n, reference_rows = rows(200_000, scale), rows(10_000, scale)
    data = protobuf_deserialize.frames(n)
    path = os.path.join(work, "protobuf-frames")
    spark.createDataFrame([(frame,) for frame in data], "value binary").write.parquet(path)
    framed = spark.read.parquet(path)
    registry = LocalRegistry()
    rule = {**protobuf_deserialize.READ_RULE, "onFailure": "NONE"}
    payload = {
        "schemaType": "PROTOBUF",
        "schema": protobuf_deserialize.ORDER,
        "ruleSet": {"domainRules": [rule]},
    }
    registry.register_schema(protobuf_deserialize.SUBJECT, Schema.from_dict(payload))
    contract = DataContract(registry, protobuf_deserialize.SUBJECT)
    seconds = turns({"deserialize": noop(contract.deserialize(framed))})
    theirs = turns({"reference": protobuf_deserialize.reference_loop(data[:reference_rows])}, rounds=1)
    per_core = (n / seconds["deserialize"] / 2) / (reference_rows / theirs["reference"])
    return [
        Ratio("deserialize Protobuf + READ CEL, per core", per_core, "ProtobufDeserializer + rule, 1 core")
    ]


def encrypt(spark: Any, work: str, scale: float) -> list[Ratio]:
    """ENCRYPT READ against a plain deserialize, fastavro path (encrypt_deserialize.py)."""
    e = encrypt_deserialize
    n = rows(200_000, scale)
    registry = LocalRegistry()
    plain_id = registry.register_schema(e.PLAIN, Schema.from_dict(e.payload()))
    registry.register_schema(e.ENCRYPTED, Schema.from_dict(e.payload(e.ENCRYPT_RULE)))
    plain = DataContract(registry, e.PLAIN)
    encrypted = DataContract(registry, e.ENCRYPTED, rule_config={"secret": e.SECRET})
    data = e.records(n)
    typed = e.typed_records(spark, plain, data, os.path.join(work, "encrypt-records"))
    secret = e.encrypted_frames(spark, encrypted, typed, os.path.join(work, "encrypt-serialized"))
    plain_df = kafka_topic(spark, e.plain_frames(data, plain_id), os.path.join(work, "encrypt-plain"), "c")
    secret_df = kafka_topic(spark, secret, os.path.join(work, "encrypt-secret"), "c")
    seconds = turns(
        {
            "plain": noop(on_path(jvm_avro.PATH_ENV, "python", lambda: plain.deserialize(plain_df))),
            "encrypted": noop(on_path(jvm_avro.PATH_ENV, "python", lambda: encrypted.deserialize(secret_df))),
        }
    )
    return [
        Ratio(
            "deserialize + ENCRYPT READ (3 fields), fastavro path",
            seconds["plain"] / seconds["encrypted"],
            "deserialize, no rules",
            ">= 0.5x",
        )
    ]


CASES: dict[str, Callable[[Any, str, float], list[Ratio]]] = {
    "cel": cel,
    "cel_field": cel_field,
    "jsonata": jsonata,
    "dlq": dlq,
    "kafka": kafka,
    "avro": avro,
    "json": json_schema,
    "protobuf": protobuf,
    "encrypt": encrypt,
}


def main() -> None:
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    chosen = sys.argv[2].split(",") if len(sys.argv) > 2 else list(CASES)
    started = time.perf_counter()
    spark = session("make-bench", connectors=True)
    work = tempfile.mkdtemp(prefix="bench-")
    table: list[Ratio] = []
    for name in chosen:
        case_started = time.perf_counter()
        found = CASES[name](spark, os.path.join(work, name), scale)
        table.extend(found)
        for ratio in found:
            print(f"  {ratio.what}: {ratio.ratio:.2f}x {ratio.baseline}", flush=True)
        print(f"({name}: {time.perf_counter() - case_started:.0f} s)", flush=True)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    took = time.perf_counter() - started
    print(f"scale {scale:g}, {took:.0f} s, load average {load:.1f} at the end")
    print()
    print("| case | ratio | baseline | goal |")
    print("| --- | ---: | --- | --- |")
    for ratio in table:
        print(f"| {ratio.what} | {ratio.ratio:.2f}x | {ratio.baseline} | {ratio.goal} |")


if __name__ == "__main__":
    main()
