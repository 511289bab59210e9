"""Payments under JSON Schema contracts, keys and values each with its own, on the embedded defaults.

Run with `make demo-json`. The contracts live in examples/json_registry: `payments-value`, a JSON
Schema whose `customer` is the `customer` subject's schema (a reference), with a CEL condition
sending non-positive amounts to a dead-letter topic, a JSONata transform trimming notes, and a
CEL_FIELD READ transform masking the fields tagged PII; and `payments-key`, whose CEL condition
checks the key's format.

1. `serialize(key=…)` runs the key's WRITE rules, then the value's, and frames both in Confluent's
   wire format (the "topic" is Parquet here; with Kafka it would be `df.write.format("kafka")`).
2. `deserialize(key=…)` reads the topic back: the key as a struct column, the value's PII masked.
The DLQ topics land in examples/out/json/dlq-topics, a local directory per topic.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, SubjectNameStrategy, metrics_of
from contracts.cli.session import PANDAS_WARNING, spark_output_discarded

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "json"
TOPIC = "payments"


def spark_session() -> SparkSession:
    """A local session whose start-up lines and logs stay out of the example's output."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", PANDAS_WARNING, FutureWarning)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("payments-json")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    with spark_output_discarded():
        return builder.getOrCreate()


def generated_payments(spark: SparkSession, value: DataContract, key: DataContract, n: int) -> DataFrame:
    """Payments with a few deliberate problems: every 7th amount is not positive, every 9th key
    is malformed, and notes come with stray spaces."""
    rows = []
    for i in range(n):
        payment_id = f"p-{i:05d}"
        customer = (f"customer {i}", f"customer{i}@example.com", ("gold", "basic")[i % 2])
        amount = -1.0 * i if i % 7 == 3 else round(5 + (i * 13) % 200 + 0.5, 2)
        note = f"  invoice {i}  " if i % 3 == 0 else None
        key_id = f"P{i}" if i % 9 == 4 else payment_id
        rows.append((payment_id, customer, amount, ("EUR", "USD", "GBP")[i % 3], note, (key_id,)))
    schema = StructType([*value.spark_schema.fields, StructField("key", key.spark_schema)])
    return spark.createDataFrame(rows, schema)


def run(spark: SparkSession, out: Path, n: int = 60) -> dict[str, int]:
    """Write the payments to the topic and read them back; the counts of each outcome."""
    registry = LocalRegistry(HERE / "json_registry")
    sink = LocalTopicSink(out / "dlq-topics")
    value = DataContract(registry, SubjectNameStrategy.TOPIC_NAME.subject(TOPIC), dlq_sink=sink)
    key = DataContract(registry, SubjectNameStrategy.TOPIC_NAME.subject(TOPIC, is_key=True), dlq_sink=sink)
    print(value.explain("WRITE"), value.explain("READ"), key.explain("WRITE"), sep="\n")

    framed = value.serialize(generated_payments(spark, value, key, n), key=key, run_id="write")
    framed.write.mode("overwrite").parquet(str(out / "topic"))
    read = value.deserialize(spark.read.parquet(str(out / "topic")), key=key, run_id="read")
    read.cache()
    valid = read.count()
    read.select("key.paymentId", "customer", "amount", "currency", "note").orderBy("paymentId").show(
        5, truncate=False
    )
    value_counts, key_counts = metrics_of(read), metrics_of(read, key=True)
    if value_counts is not None and key_counts is not None:
        print(f"READ rule outcomes of the values ({value.subject}):")
        value_counts.show()
        print(f"READ rule outcomes of the keys ({key.subject}):")
        key_counts.show()
    counts = {"valid": valid, **{topic: sink.count(topic) for topic in sink.topics()}}
    for name, count in counts.items():
        print(f"{name:<20} {count:>4}")
    return counts


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    spark = spark_session()
    try:
        run(spark, OUT)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
