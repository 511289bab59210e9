"""The orders pipeline on the embedded defaults: a contract from JSON files, enforced on a DataFrame.

Run with `make demo`. The contract (examples/registry/orders-value/1.json) defaults an empty
sales channel (CEL transform), rejects non-positive amounts and bad e-mail addresses to
dead-letter topics (DLQ), fails the job on an unknown currency (ERROR) and only counts large
orders (NONE). The DLQ topics land in examples/out/dlq-topics, a local directory per topic.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from actions.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"


def spark_session() -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return (
        SparkSession.builder.master("local[2]")
        .appName("orders-pipeline")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


def generated_orders(spark: SparkSession, n: int = 1000) -> DataFrame:
    """Orders with a few deliberate problems: every 50th amount is negative, every 70th e-mail is
    malformed, every 9th has no channel and every 200th is large."""
    rows = []
    for i in range(n):
        amount = -5.0 if i % 50 == 7 else (7500.0 if i % 200 == 3 else round(10 + (i * 37) % 490 + 0.99, 2))
        email = "not-an-email" if i % 70 == 11 else f"customer{i}@example.com"
        channel = "" if i % 9 == 0 else ("store", "app")[i % 2]
        note = None if i % 4 else f"gift wrap #{i}"
        rows.append((f"o-{i:05d}", email, amount, ("EUR", "USD", "GBP")[i % 3], channel, note))
    return spark.createDataFrame(
        rows,
        "orderId string, customerEmail string, amount double, currency string, channel string, note string",
    )


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    spark = spark_session()
    sink = LocalTopicSink(OUT / "dlq-topics")
    orders = DataContract(LocalRegistry(HERE / "registry"), "orders-value", dlq_sink=sink)

    print(f"Contract: {orders!r}")
    print(orders.explain("WRITE"))

    valid = orders.write(generated_orders(spark))
    valid.write.mode("overwrite").parquet(str(OUT / "orders"))  # one Spark job: rules, DLQ and output

    written = spark.read.parquet(str(OUT / "orders"))
    print(f"\nValid orders written: {written.count()}")
    written.orderBy("orderId").show(5, truncate=False)
    print("Channels after the defaultChannel transform:")
    written.groupBy("channel").count().orderBy("channel").show()

    print("Rule metrics:")
    for name, counts in (orders.metrics.get() if orders.metrics else {}).items():
        print(
            f"  {name:<16} passed {counts.passed:>5}  failed {counts.failed:>4}  actions {counts.by_action}"
        )

    print("\nDead-letter topics:")
    for topic in sink.topics():
        records = sink.read(topic)
        first = records[0]
        headers = {name: value.decode() if value is not None else None for name, value in first.headers}
        print(f"  {topic}: {len(records)} records; first: {json.loads(first.value)}")
        print(f"    headers: {headers}")
    spark.stop()


if __name__ == "__main__":
    main()
