"""Benchmark: a JSONata rename compiled to Spark Columns vs jsonata-python per record vs hand-written Spark.

Run: `.venv/bin/python benchmarks/jsonata_migration.py [rows] [python_rows]` (defaults 1,000,000 and
40,000; `local[2]`, `noop` sink, each way best of three after a warm-up, every ratio against the
hand-written Spark of the same run).

The rule moves `ssn` into `socialSecurityNumber`:
`$merge([$sift($, function($v, $k) {$k != 'ssn'}), {'socialSecurityNumber': $.'ssn'}])`.

- As a WRITE domain TRANSFORM on a record holding both (nullable) fields, through
  `DataContract.apply(df).valid` and `DataContract.write(df)`: compiled natively (what the JSONata
  executor picks), and forced through jsonata-python per record by an executor override that
  keeps only the rule's batch step. Hand-written: `socialSecurityNumber = ssn, ssn = null`.
- As an UPGRADE migration from version 1 (`ssn`) to version 2 (`socialSecurityNumber`) through
  `DataContract.read(df, writer_version=1)`: compiled (the native migration `read` picks) and
  forced through jsonata-python per record by the same override (a Python pass). Hand-written:
  `withColumnRenamed('ssn', 'socialSecurityNumber')`; `read(df)` of version 2 rows (no migration)
  shows what the rest of `read` costs.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _session import session
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from contracts import DataContract, LocalRegistry, Schema
from executors import NativeStep, RuleContext, Step
from executors.jsonata.executor import JsonataExecutor

MAJOR = "application.major.version"
RENAME = "$merge([$sift($, function($v, $k) {$k != 'ssn'}), {'socialSecurityNumber': $.'ssn'}])"
COMMON = [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "email", "type": "string"},
    {"name": "age", "type": "int"},
    {"name": "country", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "created", "type": "long"},
]
OPTIONAL = {"type": ["null", "string"], "default": None}
# The domain rule's record: both fields, so the rule's result (no `ssn`) still fits it.
BOTH = [*COMMON[:3], {"name": "ssn", **OPTIONAL}, {"name": "socialSecurityNumber", **OPTIONAL}, *COMMON[3:]]
V1 = [*COMMON[:3], {"name": "ssn", "type": "string"}, *COMMON[3:]]
V2 = [*COMMON[:3], {"name": "socialSecurityNumber", "type": "string"}, *COMMON[3:]]
DOMAIN_RULE = {"name": "moveSsn", "kind": "TRANSFORM", "type": "JSONATA", "mode": "WRITE", "expr": RENAME}
UPGRADE_RULE = {
    "name": "renameSsn",
    "kind": "TRANSFORM",
    "type": "JSONATA",
    "mode": "UPGRADE",
    "expr": RENAME,
}


def record(fields: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "record", "name": "User", "namespace": "com.acme", "fields": fields})


class PythonOnlyJsonata:
    """The JSONata executor with its native form dropped: the rule runs in jsonata-python per record."""

    type = "JSONATA"

    def compile(self, ctx: RuleContext) -> Step:
        step = JsonataExecutor().compile(ctx)
        if isinstance(step, NativeStep):
            assert step.batch is not None
            return step.batch
        return step


def registry() -> LocalRegistry:
    registry = LocalRegistry()
    registry.register_schema(
        "users-value", Schema.from_dict({"schema": record(BOTH), "ruleSet": {"domainRules": [DOMAIN_RULE]}})
    )
    registry.set_config("people-value", compatibilityGroup=MAJOR)
    for fields, major, rules in ((V1, "1", []), (V2, "2", [UPGRADE_RULE])):
        payload = {
            "schema": record(fields),
            "metadata": {"properties": {MAJOR: major}},
            "ruleSet": {"migrationRules": rules},
        }
        registry.register_schema("people-value", Schema.from_dict(payload))
    return registry


def generate(spark: SparkSession, rows: int, path: str) -> None:
    """Version 1 users (with `ssn`), written once to Parquet."""
    ids = F.col("id")
    spark.range(rows, numPartitions=2).select(
        ids,
        F.concat(F.lit("customer "), (ids * 7919 % 1_000_000).cast("string")).alias("name"),
        F.concat(F.lit("user."), ids.cast("string"), F.lit("@mail.example.com")).alias("email"),
        F.lpad((ids * 104_729 % 1_000_000_000).cast("string"), 9, "0").alias("ssn"),
        (18 + ids % 72).cast("int").alias("age"),
        F.element_at(
            F.array(*[F.lit(c) for c in ("US", "DE", "FR", "GB", "JP")]), (ids % 5 + 1).cast("int")
        ).alias("country"),
        ((ids * 37 % 50_000) / 100).alias("amount"),
        (F.lit(1_767_225_600_000) + ids * 1000).alias("created"),
    ).write.mode("overwrite").parquet(path)


def with_both(v1: DataFrame) -> DataFrame:
    """The domain rule's input: version 1 rows plus a null `socialSecurityNumber`, in schema order."""
    names = [f["name"] for f in BOTH]
    return v1.withColumn("socialSecurityNumber", F.lit(None).cast("string")).select(*names)


def best(df: DataFrame, repeats: int = 3) -> float:
    """Seconds of the fastest of `repeats` runs into the noop sink, after one warm-up."""

    def run() -> None:
        df.write.format("noop").mode("overwrite").save()

    run()
    seconds = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds = min(seconds, time.perf_counter() - start)
    return seconds


def same_rows(left: DataFrame, right: DataFrame) -> bool:
    return left.exceptAll(right).count() == 0 and right.exceptAll(left).count() == 0


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    python_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 40_000
    spark = session("jsonata-migration-benchmark")
    path = os.path.join(tempfile.mkdtemp(prefix="jsonata-bench-"), "users")
    generate(spark, rows, path)
    v1 = spark.read.parquet(path)
    # Every (rows / python_rows)-th row, so the Python sides keep both partitions (both cores) busy.
    v1_small = v1.where(F.col("id") % (rows // python_rows) == 0)
    both, both_small = with_both(v1), with_both(v1_small)
    v2 = v1.withColumnRenamed("ssn", "socialSecurityNumber")
    reg = registry()
    sink_dir = tempfile.mkdtemp(prefix="jsonata-bench-dlq-")
    from actions.dlq.local_topic import LocalTopicSink

    sink = LocalTopicSink(sink_dir)
    native = DataContract(reg, "users-value", dlq_sink=sink)
    python = DataContract(reg, "users-value", executors={"moveSsn": PythonOnlyJsonata()}, dlq_sink=sink)
    reader = DataContract(reg, "people-value", version=2, dlq_sink=sink)
    python_reader = DataContract(
        reg, "people-value", version=2, executors={"renameSsn": PythonOnlyJsonata()}, dlq_sink=sink
    )
    print(native.explain("WRITE"))
    print(python.explain("WRITE"))
    assert "(native)" in native.explain("WRITE") and "(python)" in python.explain("WRITE")

    def hand_domain(df: DataFrame) -> DataFrame:
        return df.withColumn("socialSecurityNumber", F.col("ssn")).withColumn(
            "ssn", F.lit(None).cast("string")
        )

    assert same_rows(native.apply(both_small).valid, python.apply(both_small).valid)
    assert same_rows(native.apply(both_small).valid, hand_domain(both_small))
    renamed_small = v1_small.withColumnRenamed("ssn", "socialSecurityNumber")
    assert same_rows(reader.read(v1_small, writer_version=1), renamed_small)
    assert same_rows(python_reader.read(v1_small, writer_version=1), renamed_small)

    results: dict[str, tuple[int, float]] = {}

    def measure(label: str, n: int, df: DataFrame) -> None:
        seconds = best(df)
        results[label] = (n, seconds)
        print(f"{label:<58} {n:>9,} rows {seconds:7.2f} s {n / seconds:>11,.0f} rows/s", flush=True)

    sides: list[tuple[str, int, DataFrame]] = [
        ("domain: hand-written (ssn -> socialSecurityNumber)", rows, hand_domain(both)),
        ("domain: compiled JSONata, apply().valid", rows, native.apply(both).valid),
        ("domain: compiled JSONata, write()", rows, native.write(both)),
        ("domain: jsonata-python per record, apply().valid", python_rows, python.apply(both_small).valid),
        ("domain: jsonata-python per record, write()", python_rows, python.write(both_small)),
        ("migration: hand-written withColumnRenamed", rows, v2),
        ("migration: read(v2 rows), no migration", rows, reader.read(v2)),
        ("migration: compiled, read(v1 rows, writer_version=1)", rows, reader.read(v1, writer_version=1)),
        (
            "migration: jsonata-python, read(v1 rows, writer_version=1)",
            python_rows,
            python_reader.read(v1_small, writer_version=1),
        ),
    ]
    for label, n, df in sides:
        measure(label, n, df)

    print()
    domain_base = rows / results[sides[0][0]][1]
    migration_base = rows / results[sides[5][0]][1]
    for index, (label, n, _) in enumerate(sides):
        base = domain_base if index < 5 else migration_base
        print(f"{label:<58} {n / results[label][1] / base:7.3f}x hand-written")
    compiled = results[sides[1][0]]
    per_record = results[sides[3][0]]
    speedup = (compiled[0] / compiled[1]) / (per_record[0] / per_record[1])
    print(f"compiled vs jsonata-python (apply().valid): {speedup:.1f}x")
    compiled, per_record = results[sides[7][0]], results[sides[8][0]]
    speedup = (compiled[0] / compiled[1]) / (per_record[0] / per_record[1])
    print(f"compiled vs jsonata-python (migration, read()): {speedup:.1f}x")
    spark.stop()


if __name__ == "__main__":
    main()
