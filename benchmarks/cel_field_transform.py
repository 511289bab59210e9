"""Benchmark: a CEL_FIELD transform over 10 string fields, native plan vs the same written by hand.

Run: `.venv/bin/python benchmarks/cel_field_transform.py [rows]` (default 5,000,000, local[2]).
Both sides read the same generated rows and write to Spark's `noop` sink, so the difference is
the rule's cost: the planned CEL_FIELD step (record packing, outcome and status columns
included) against `concat(field, '-x')` per field.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from actions._protocol import ActionPlan, Effect
from contracts import avro
from contracts.model import Rule, RuleKind, RuleMode
from contracts.planner import RECORD, STATUS, build_plan
from executors._protocol import RuleContext
from executors.cel_field import CelFieldExecutor

FIELDS = [f"s{i}" for i in range(10)]
EXPR = "typeName == 'STRING' ; value + '-x'"
SCHEMA = {"type": "record", "name": "Row", "fields": [{"name": name, "type": "string"} for name in FIELDS]}


def source(spark: SparkSession, rows: int) -> DataFrame:
    """`rows` rows of 10 distinct short strings."""
    ids = spark.range(rows)
    return ids.select(
        *[F.concat(F.lit(f"v{i}-"), F.col("id").cast("string")).alias(n) for i, n in enumerate(FIELDS)]
    )


def with_contract(df: DataFrame) -> DataFrame:
    """The record after the CEL_FIELD rule, planned as the engine plans it."""
    parsed = avro.parse_schema(json.dumps(SCHEMA))
    spark_type = avro.struct_type(parsed)
    rule = Rule("suffix", RuleKind.TRANSFORM, RuleMode.WRITE, "CEL_FIELD", EXPR)
    ctx = RuleContext(rule, "rows-value", 1, RuleMode.WRITE, parsed, spark_type)
    step = CelFieldExecutor().compile(ctx)

    def resolve(name: Any, _: Any) -> ActionPlan:
        return ActionPlan(name or "NONE", Effect.CONTINUE if name != "ERROR" else Effect.FAIL)

    plan = build_plan("rows-value", 1, RuleMode.WRITE, spark_type, [(ctx, step)], resolve)
    print(plan.explain())
    staged = plan.stage(df)
    return staged.where(F.col(STATUS).isNull()).select(f"{RECORD}.*")


def by_hand(df: DataFrame) -> DataFrame:
    return df.select(*[F.concat(F.col(name), F.lit("-x")).alias(name) for name in FIELDS])


def timed(df: DataFrame) -> float:
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    contract, hand = with_contract(source(spark, rows)), by_hand(source(spark, rows))
    timed(contract.limit(1000)), timed(hand.limit(1000))  # warm-up: codegen and JIT
    results = {"CEL_FIELD (native plan)": [], "hand-written": []}
    for _ in range(3):
        results["hand-written"].append(timed(hand))
        results["CEL_FIELD (native plan)"].append(timed(contract))
    best = {name: min(times) for name, times in results.items()}
    for name, seconds in best.items():
        print(f"{name}: {seconds:.2f} s, {rows / seconds:,.0f} rows/s (best of 3)")
    ratio = best["hand-written"] / best["CEL_FIELD (native plan)"]
    print(f"ratio CEL_FIELD / hand-written throughput: {ratio:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
