"""The orders pipeline on the embedded defaults: one topic, three contract versions, two readers.

Run with `make demo`. The contract lives in examples/registry/orders-value as three JSON versions:
1 and 2 (major 1; 2 adds an optional coupon) and 3 (major 2: `customerEmail` renamed `email`,
with JSONata UPGRADE/DOWNGRADE migration rules, and a CEL_FIELD READ transform masking the fields
tagged PII). Every version's WRITE rules default an empty channel (CEL transform), send
non-positive amounts and bad e-mail addresses to dead-letter topics (DLQ), fail the job on an
unknown currency (ERROR) and only count large orders (NONE).

1. A legacy producer writes with version 1, the current one with 2, an early adopter with 3: `serialize` runs
   the WRITE rules and frames the records in Confluent's wire format (the "topic" is Parquet here;
   with Kafka it would be `df.write.format("kafka")`).
2. A reader pinned to major 1 and one pinned to major 2 `deserialize` the same topic: each gets
   every record in its own shape, migrated where the writer's major differs, READ rules applied.
The DLQ topics land in examples/out/dlq-topics, a local directory per topic.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, metrics_of
from contracts.cli.session import PANDAS_WARNING, spark_output_discarded

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SUBJECT = "orders-value"
MAJOR = "application.major.version"


def spark_session() -> SparkSession:
    """A local session whose start-up lines and logs stay out of the example's output."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", PANDAS_WARNING, FutureWarning)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("orders-pipeline")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    with spark_output_discarded():
        return builder.getOrCreate()


def generated_orders(spark: SparkSession, first: int, n: int, version: int) -> DataFrame:
    """Orders in the shape of `version`, with a few deliberate problems: every 50th amount is
    negative, every 70th e-mail is malformed, every 9th has no channel and every 200th is large."""
    rows = []
    for i in range(first, first + n):
        amount = -5.0 if i % 50 == 7 else (7500.0 if i % 200 == 3 else round(10 + (i * 37) % 490 + 0.99, 2))
        email = "not-an-email" if i % 70 == 11 else f"customer{i}@example.com"
        channel = "" if i % 9 == 0 else ("store", "app")[i % 2]
        note = None if i % 4 else f"gift wrap #{i}"
        row = (f"o-{i:05d}", email, amount, ("EUR", "USD", "GBP")[i % 3], channel, note)
        rows.append(row if version == 1 else (*row, f"SPRING{i % 5}" if i % 5 else None))
    email_column = "email" if version == 3 else "customerEmail"
    columns = (
        f"orderId string, {email_column} string, amount double, currency string, channel string, note string"
    )
    return spark.createDataFrame(rows, columns + ("" if version == 1 else ", coupon string"))


PRODUCERS = ((1, 0, 300), (2, 300, 500), (3, 800, 200))
"""(writer version, first order number, orders): a legacy producer, the current one, an early adopter."""


def produce(registry: LocalRegistry, sink: LocalTopicSink, spark: SparkSession) -> DataFrame:
    """Every producer's framed records, as one Kafka-shaped topic (key, value, topic, partition, offset)."""
    framed, writers = [], []
    for version, first, n in PRODUCERS:
        writer = DataContract(registry, SUBJECT, version=version, dlq_sink=sink)
        print(writer.explain("WRITE"), end="\n\n")
        orders = generated_orders(spark, first, n, version).withColumns(
            {"key": F.encode("orderId", "utf-8"), "topic": F.lit("orders")}
        )
        framed.append(writer.serialize(orders))
        writers.append(writer)
    topic = framed[0].unionByName(framed[1]).unionByName(framed[2])
    topic = topic.withColumns({"partition": F.lit(0), "offset": F.monotonically_increasing_id()})
    topic.write.mode("overwrite").parquet(str(OUT / "topics" / "orders"))  # rules, DLQ, framing: one job
    for writer, serialized in zip(writers, framed, strict=True):
        print(f"WRITE rule outcomes, version {writer.version}:")
        metrics = metrics_of(serialized)  # this call's counts (native rules: counted when asked)
        if metrics is not None:
            metrics.show()
    return spark.read.parquet(str(OUT / "topics" / "orders"))


def consume(registry: LocalRegistry, sink: LocalTopicSink, topic: DataFrame, major: int) -> None:
    """A reader pinned to one major version: every record in its shape, READ rules applied."""
    reader = DataContract(registry, SUBJECT, use_latest_with_metadata={MAJOR: str(major)}, dlq_sink=sink)
    print(f"Reader pinned to major {major}: {reader!r}")
    print(reader.explain("READ"))
    records = reader.deserialize(topic, key_col="key")
    path = OUT / f"orders-major-{major}"
    records.write.mode("overwrite").parquet(str(path))  # decode, migrate, READ rules: one job
    written = records.sparkSession.read.parquet(str(path))
    print(f"{written.count()} orders read, columns {written.columns[:7]}; the writers' majors migrated:")
    # One order from each producer: versions 1, 2 and 3 as this reader sees them.
    sample = written.where(F.col("orderId").isin("o-00001", "o-00301", "o-00801")).orderBy("orderId")
    sample.drop("key", "topic", "partition", "offset").show(truncate=False)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    spark = spark_session()
    registry = LocalRegistry(HERE / "registry")
    sink = LocalTopicSink(OUT / "dlq-topics")
    print(f"Subject {SUBJECT!r}: versions {registry.get_versions(SUBJECT)}\n")

    topic = produce(registry, sink, spark)
    produced = sum(n for _, _, n in PRODUCERS)
    rejected = sum(len(sink.read(name)) for name in sink.topics())
    print(f"\nTopic 'orders': {topic.count()} framed records; {rejected} of {produced} went to DLQ topics\n")
    for major in (1, 2):
        consume(registry, sink, topic, major)

    print("Dead-letter topics (WRITE rules send each rejected record as JSON):")
    for name in sink.topics():
        records = sink.read(name)
        first = records[0]
        headers = {key: value.decode() if value is not None else None for key, value in first.headers}
        print(f"  {name}: {len(records)} records; first: {json.loads(first.value or b'null')}")
        print(f"    headers: {headers}")
    spark.stop()


if __name__ == "__main__":
    main()
