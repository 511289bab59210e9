"""Benchmark: `write()` with a native CEL condition whose failures go to a DLQ topic, against the
hand-written job writing the valid rows and the rejected rows.

Run: `.venv/bin/python benchmarks/dlq_write.py [rows] [percents]` (defaults 400,000 and 1,10,100).

For each share of rejected rows (`percents`, comma-separated; 100 is a DLQ storm, every row
rejected): (a) `DataContract.write(df)` with the rule `size(message.ssn) == 9` (onFailure DLQ),
its valid rows into Spark's `noop` sink and its rejected rows into a `LocalTopicSink` in the same
job, and (b) the hand-written two-output job: the valid rows (`char_length(ssn) = 9`) into `noop`,
then the rejected rows as JSON text (`to_json`) into a text directory. The source is Parquet,
`local[2]`; the two ways take turns within each round, best of three after a warm-up. Each
rejected row's DLQ record is checked once, so the two ways do the same work.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _session import session

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema

SUBJECT = "users-value"
EXPR = "size(message.ssn) == 9"
SCHEMA = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ssn", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "email", "type": "string"},
    ],
}


def users(spark: Any, rows: int, percent: int, path: str) -> Any:
    """Users on Parquet, `percent` of them with an 8-digit ssn (the rule rejects those)."""
    from pyspark.sql import functions as F

    ids = F.col("id")
    bad = (ids % 100) < percent
    spark.range(rows, numPartitions=2).select(
        ids,
        F.lpad((ids * 7919 % 1_000_000_000).cast("string"), F.when(bad, 8).otherwise(9), "0").alias("ssn"),
        ((ids % 90) + 1).cast("int").alias("age"),
        F.concat(F.lit("user."), ids.cast("string"), F.lit("@mail.example.com")).alias("email"),
    ).write.mode("overwrite").parquet(path)
    return spark.read.parquet(path)


def contract(sink: Any, topic: str = "bad") -> DataContract:
    """A contract whose one WRITE rule is EXPR, rejected rows to `topic`, on `sink`."""
    rule = {
        "name": "ssnLength",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": EXPR,
        "onFailure": "DLQ",
        "params": {"dlq.topic": topic},
    }
    registry = LocalRegistry()
    payload = {"schema": json.dumps(SCHEMA), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return DataContract(registry, SUBJECT, dlq_sink=sink)


def taking_turns(ways: dict[str, Callable[[], Any]], rounds: int = 3) -> dict[str, float]:
    """Seconds of each way, the fastest of `rounds` after a warm-up; the ways take turns in a round."""
    for run in ways.values():
        run()
    seconds = dict.fromkeys(ways, float("inf"))
    for _ in range(rounds):
        for label, run in ways.items():
            start = time.perf_counter()
            run()
            seconds[label] = min(seconds[label], time.perf_counter() - start)
    return seconds


def measure(spark: Any, rows: int, percent: int, work: str) -> dict[str, float]:
    """Seconds of (a) `write` + DLQ and (b) the hand-written two-output job, at `percent` rejects."""
    from pyspark.sql import functions as F

    df = users(spark, rows, percent, os.path.join(work, f"users-{percent}"))
    root = os.path.join(work, f"dlq-{percent}")
    sink = LocalTopicSink(root)
    users_contract = contract(sink)
    text = os.path.join(work, f"hand-{percent}")
    valid = F.char_length("ssn") == 9

    def by_contract() -> None:
        users_contract.write(df, run_id="bench").write.format("noop").mode("overwrite").save()

    def by_hand() -> None:
        df.filter(valid).write.format("noop").mode("overwrite").save()
        rejected = df.filter(~valid).select(F.to_json(F.struct(*df.columns)).alias("value"))
        rejected.write.mode("overwrite").text(text)

    by_contract()
    expected = rows * percent // 100
    assert sink.count("bad") == expected, (sink.count("bad"), expected)
    seconds = taking_turns({"contract": by_contract, "hand": by_hand})
    shutil.rmtree(root, ignore_errors=True)
    return seconds


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    percents = [int(p) for p in (sys.argv[2] if len(sys.argv) > 2 else "1,10,100").split(",")]
    spark = session("dlq-write-benchmark")
    work = tempfile.mkdtemp(prefix="dlq-write-bench-")
    print(f"{'rejected':>8} {'write + DLQ':>14} {'hand-written':>14} {'ratio':>7}")
    for percent in percents:
        seconds = measure(spark, rows, percent, work)
        ratio = seconds["hand"] / seconds["contract"]
        contract_s, hand_s = seconds["contract"], seconds["hand"]
        print(f"{percent:>7}% {contract_s:>12.2f} s {hand_s:>12.2f} s {ratio:>6.2f}x", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
