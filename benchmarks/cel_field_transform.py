"""Benchmark: a CEL_FIELD transform over 10 string fields, through a contract vs written by hand.

Run: `.venv/bin/python benchmarks/cel_field_transform.py [rows]` (default 5,000,000, local[2]).
Both sides read the same generated rows and write to Spark's `noop` sink, so the difference is
the rule's cost: `DataContract.write` with the CEL_FIELD rule registered (record packing, outcome
and status included), with its per-rule metrics and without (`collect_metrics=False`), against
`concat(field, '-x')` per field.
"""

from __future__ import annotations

import json
import os
import sys
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _session import session

from contracts import DataContract, LocalRegistry, Schema

FIELDS = [f"s{i}" for i in range(10)]
EXPR = "typeName == 'STRING' ; value + '-x'"
SCHEMA = {"type": "record", "name": "Row", "fields": [{"name": name, "type": "string"} for name in FIELDS]}
SUBJECT = "rows-value"


def source(spark: SparkSession, rows: int) -> DataFrame:
    """`rows` rows of 10 distinct short strings."""
    ids = spark.range(rows)
    return ids.select(
        *[F.concat(F.lit(f"v{i}-"), F.col("id").cast("string")).alias(n) for i, n in enumerate(FIELDS)]
    )


def contract(collect_metrics: bool = True) -> DataContract:
    """A contract whose one WRITE rule is the benchmark's CEL_FIELD transform, in a local registry."""
    registry = LocalRegistry()
    rule = {"name": "suffix", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "WRITE", "expr": EXPR}
    payload = {"schema": json.dumps(SCHEMA), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    written = DataContract(registry, SUBJECT, collect_metrics=collect_metrics)
    print(written.explain())
    return written


def by_hand(df: DataFrame) -> DataFrame:
    return df.select(*[F.concat(F.col(name), F.lit("-x")).alias(name) for name in FIELDS])


def timed(df: DataFrame) -> float:
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    spark = session("cel-field-benchmark")
    sides = {
        "DataContract.write": contract().write(source(spark, rows)),
        "DataContract.write, no metrics": contract(collect_metrics=False).write(source(spark, rows)),
        "hand-written": by_hand(source(spark, rows)),
    }
    for df in sides.values():
        timed(df.limit(1000))  # warm-up: codegen and JIT
    results: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(5):  # the sides take turns, so a busy neighbour slows them alike
        for name, df in sides.items():
            results[name].append(timed(df))
    best = {name: min(times) for name, times in results.items()}
    for name, seconds in best.items():
        ratio = best["hand-written"] / seconds
        print(f"{name}: {seconds:.2f} s, {rows / seconds:,.0f} rows/s, {ratio:.2f}x hand-written (best of 5)")
    spark.stop()


if __name__ == "__main__":
    main()
