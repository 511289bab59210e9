"""Benchmark: a CEL_FIELD transform over 10 string fields, native plan vs the same written by hand.

Run: `.venv/bin/python benchmarks/cel_field_transform.py [rows]` (default 5,000,000, local[2]).
Both sides read the same generated rows and write to Spark's `noop` sink, so the difference is
the rule's cost: the planned CEL_FIELD step (record packing, outcome and status columns
included) against `concat(field, '-x')` per field. A third side runs the same native step with
the record struct built and unpacked inside one projection (no packed column), to show what the
packing costs: Catalyst then reduces the step to the hand-written expressions.
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
from executors._protocol import NativeStep, RuleContext, Step
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


def compiled() -> tuple[RuleContext, Step]:
    """The benchmark's rule, compiled by the CEL_FIELD executor."""
    parsed = avro.parse_schema(json.dumps(SCHEMA))
    spark_type = avro.struct_type(parsed)
    rule = Rule("suffix", RuleKind.TRANSFORM, RuleMode.WRITE, "CEL_FIELD", EXPR)
    ctx = RuleContext(rule, "rows-value", 1, RuleMode.WRITE, parsed, spark_type)
    return ctx, CelFieldExecutor().compile(ctx)


def with_contract(df: DataFrame) -> DataFrame:
    """The record after the CEL_FIELD rule, planned as the engine plans it."""
    ctx, step = compiled()
    spark_type = ctx.spark_type

    def resolve(name: Any, _: Any) -> ActionPlan:
        return ActionPlan(name or "NONE", Effect.CONTINUE if name != "ERROR" else Effect.FAIL)

    plan = build_plan("rows-value", 1, RuleMode.WRITE, spark_type, [(ctx, step)], resolve)
    print(plan.explain())
    staged = plan.stage(df)
    return staged.where(F.col(STATUS).isNull()).select(f"{RECORD}.*")


def step_unpacked(df: DataFrame) -> DataFrame:
    """The native step alone, its record built from and unpacked into columns in one projection."""
    _, step = compiled()
    assert isinstance(step, NativeStep)
    record = step.build(F.struct(*[F.col(name) for name in FIELDS])).record
    assert record is not None
    return df.select(*[record.getField(name).alias(name) for name in FIELDS])


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
    sides = {
        "CEL_FIELD (native plan)": with_contract(source(spark, rows)),
        "native step, unpacked in one projection": step_unpacked(source(spark, rows)),
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
