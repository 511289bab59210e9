"""Benchmark: what the per-rule counts cost, on one native CEL condition, against a hand-written filter.

Run: `.venv/bin/python benchmarks/metrics_counts.py [rows] [dlq_rows]` (defaults 3,000,000 and
200,000, local[2]). The rule is `size(message.ssn) == 9 && message.age > 0`, a cheap check, so the
counting shows. Each source — the rows cached in memory, and the same rows read from Parquet — is
measured by a write to Spark's `noop` sink (as a pipeline ends) and by `count()` (which puts an
aggregate above the contract's output) on: the hand-written filter (`where(char_length(ssn) = 9 AND
age > 0)`, the baseline), the same filter followed by a job counting its passes and failures (what
a hand-written pipeline pays for the numbers), and `apply().valid` and `write()` with onFailure
NONE: with the default counts (on demand: nothing added to the query) not asked for and asked for
(`metrics.get()` after the action, its aggregate job included), observed (`collect_metrics="observe"`)
and with `collect_metrics=False`. The DLQ variant (onFailure DLQ, a routing Python pass, about a
tenth of the rows rejected) runs on `dlq_rows` rows against its own hand-written filter on the same
rows. Ways take turns within each round (best of five, after a warm-up); each ratio is to the
baseline measured in the same run. The DLQ variant writes a tenth of its rows as DLQ records in
Python on every run, which dominates its `write()` (three rounds).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _session import session
from cel_condition import generate, taking_turns

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, metrics_of

EXPR = "size(message.ssn) == 9 && message.age > 0"
SCHEMA = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "ssn", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "email", "type": "string"},
    ],
}
SUBJECT = "users-value"


def contract(on_failure: str, dlq_dir: str, collect_metrics: bool | str = True) -> DataContract:
    """A contract whose one WRITE rule is EXPR with `on_failure`, in a local registry."""
    registry = LocalRegistry()
    rule: dict[str, Any] = {
        "name": "checked",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": EXPR,
        "onFailure": on_failure,
    }
    if on_failure == "DLQ":
        rule["params"] = {"dlq.topic": "rejected-users"}
    payload = {"schema": json.dumps(SCHEMA), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    sink = LocalTopicSink(dlq_dir)
    return DataContract(registry, SUBJECT, dlq_sink=sink, collect_metrics=collect_metrics)  # type: ignore[arg-type]


def ways(df: Any, on_failure: str, dlq_dir: str, sink: str) -> dict[str, Callable[[], int]]:
    """The hand-written baseline and the contract's calls with and without counts, each ending in
    `sink`: `count()`, or a write to Spark's `noop` sink, as a pipeline writes its output."""
    from pyspark.sql import functions as F

    def run(frame: Any) -> int:
        if sink == "count":
            return frame.count()
        frame.write.format("noop").mode("overwrite").save()
        return 0

    def asked(frame: Any) -> int:
        run(frame)
        metrics = metrics_of(frame)
        assert metrics is not None
        return len(metrics.get())

    def hand_counted() -> int:
        run(df.where(hand))
        return df.agg(F.count_if(hand), F.count(hand)).collect()[0][0]

    hand = (F.char_length("ssn") == 9) & (F.col("age") > 0)
    counted, bare = contract(on_failure, dlq_dir), contract(on_failure, dlq_dir, collect_metrics=False)
    observed = contract(on_failure, dlq_dir, collect_metrics="observe")
    return {
        "hand-written filter": lambda: run(df.where(hand)),
        "hand-written + count job": hand_counted,
        "apply().valid, counts": lambda: run(counted.apply(df).valid),
        "apply().valid, counts asked": lambda: asked(counted.apply(df).valid),
        "apply().valid, observed": lambda: asked(observed.apply(df).valid),
        "apply().valid, no counts": lambda: run(bare.apply(df).valid),
        "write(), counts": lambda: run(counted.write(df)),
        "write(), counts asked": lambda: asked(counted.write(df)),
        "write(), observed": lambda: asked(observed.write(df)),
        "write(), no counts": lambda: run(bare.write(df)),
    }


def measure(
    label: str, df: Any, rows: int, on_failure: str, dlq_dir: str, rounds: int = 5, sink: str = "count"
) -> None:
    print(f"\n{label} ({rows:,} rows, onFailure {on_failure}, ending in {sink}):")
    rates = taking_turns(ways(df, on_failure, dlq_dir, sink), rows, rounds=rounds)
    baseline = rates["hand-written filter"]
    for way, rate in rates.items():
        print(f"  {way:<30} {rate / baseline:6.2f}x hand-written")


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 3_000_000
    dlq_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    spark = session("metrics-counts-benchmark")
    work = tempfile.mkdtemp(prefix="metrics-bench-")
    path, small = os.path.join(work, "users"), os.path.join(work, "users-dlq")
    generate(spark, rows, path)
    generate(spark, dlq_rows, small)
    parquet, cached = spark.read.parquet(path), spark.read.parquet(path).cache()
    cached.count()
    dlq_dir = os.path.join(work, "dlq")
    for sink in ("noop", "count"):
        measure("cached source", cached, rows, "NONE", dlq_dir, sink=sink)
        measure("Parquet source", parquet, rows, "NONE", dlq_dir, sink=sink)
    small_cached = spark.read.parquet(small).cache()
    small_cached.count()
    measure("cached source, DLQ", small_cached, dlq_rows, "DLQ", dlq_dir, rounds=3)
    measure("Parquet source, DLQ", spark.read.parquet(small), dlq_rows, "DLQ", dlq_dir, rounds=3)
    spark.stop()


if __name__ == "__main__":
    main()
