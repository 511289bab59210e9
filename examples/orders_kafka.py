"""The orders pipeline on Kafka: producers through Spark's Kafka sink, a streaming reader, DLQ topics.

`make demo-kafka` starts a single-node Kafka broker (tools/kafka_broker.py), runs this script
against it and stops the broker. The contract is the one examples/orders_pipeline.py uses
(examples/registry, or a Schema Registry at SCHEMA_REGISTRY_URL that holds it:
`spark-contracts push examples/registry --registry $SCHEMA_REGISTRY_URL`).

1. Three producers (contract versions 1, 2 and 3) `serialize` their orders and write them to the
   `orders` topic (three partitions) with Spark's Kafka sink; the records their WRITE rules reject
   go to the Kafka dead-letter topics the contract names. A misconfigured producer also writes a
   few plain-JSON records.
2. A reader pinned to major 2 runs a Structured Streaming query over the topic, a few hundred
   records per micro-batch: `foreach_batch` `deserialize`s each micro-batch (migrating major-1
   records, masking PII, sending undecodable records to `orders-undecodable`) and writes its valid
   orders to Parquet by batch id.
3. It prints each micro-batch's counts and every dead-letter topic with its first record.

Spark needs its Kafka connector: `make demo-kafka` passes the jars `make jars` fetched; elsewhere
run with `spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<your Spark version>`.

Environment: KAFKA_BOOTSTRAP_SERVERS; KAFKA_API_KEY / KAFKA_API_SECRET for SASL/PLAIN over TLS
(Confluent Cloud); SCHEMA_REGISTRY_URL (with SCHEMA_REGISTRY_KEY / SCHEMA_REGISTRY_SECRET) instead
of examples/registry; OUTPUT_PATH (default examples/out/kafka).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from orders_pipeline import PRODUCERS, SUBJECT, generated_orders
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from actions.dlq.kafka_topic import KafkaTopicSink
from contracts import DataContract, LocalRegistry, SchemaRegistryClient, metrics_of
from contracts.cli.session import PANDAS_WARNING, spark_output_discarded
from contracts.registry import Registry

HERE = Path(__file__).resolve().parent
TOPIC = "orders"
PARTITIONS = 3
UNDECODABLE_TOPIC = "orders-undecodable"
RECORDS_PER_MICRO_BATCH = 400
MISCONFIGURED = [(f"legacy-{n}".encode(), json.dumps({"orderId": f"legacy-{n}"}).encode()) for n in range(3)]
"""Plain-JSON records a producer without the serializer wrote: the reader cannot decode them."""


def kafka_client_config() -> dict[str, str]:
    """librdkafka settings for the cluster: plaintext, or SASL/PLAIN over TLS given an API key."""
    config = {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]}
    if os.environ.get("KAFKA_API_KEY"):
        config |= {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": os.environ["KAFKA_API_KEY"],
            "sasl.password": os.environ["KAFKA_API_SECRET"],
        }
    return config


def spark_kafka_options(config: dict[str, str]) -> dict[str, str]:
    """The same connection as options of Spark's Kafka source and sink (Java client names)."""
    options = {"kafka.bootstrap.servers": config["bootstrap.servers"]}
    if "sasl.username" in config:
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required"
            f' username="{config["sasl.username"]}" password="{config["sasl.password"]}";'
        )
        options |= {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": jaas,
        }
    return options


def contract_registry() -> Registry:
    if os.environ.get("SCHEMA_REGISTRY_URL"):
        return SchemaRegistryClient(
            os.environ["SCHEMA_REGISTRY_URL"],
            basic_auth=(os.environ["SCHEMA_REGISTRY_KEY"], os.environ["SCHEMA_REGISTRY_SECRET"]),
        )
    return LocalRegistry(HERE / "registry")


@dataclass(frozen=True)
class ParquetByBatch:
    """The valid orders of each micro-batch, idempotently: a micro-batch Spark replays after a
    restart overwrites its own output. Then its per-rule counts, read from the valid rows the
    contract handed over (`metrics_of`), as JSON under `counts` (this runs where Spark runs the
    batch function, a server-side process on Spark Connect, so it writes them down)."""

    root: str
    counts: str

    def __call__(self, valid: DataFrame, batch_id: int) -> None:
        valid.write.mode("overwrite").parquet(f"{self.root}/batch={batch_id}")
        metrics = metrics_of(valid)
        by_rule = {name: [c.passed, c.failed] for name, c in (metrics.get() if metrics else {}).items()}
        Path(self.counts).mkdir(parents=True, exist_ok=True)
        Path(self.counts, f"{batch_id}.json").write_text(json.dumps(by_rule))


@dataclass
class Summary:
    """What a run did: records offered, micro-batches (id, input rows), valid orders, DLQ topics."""

    offered: int = 0
    micro_batches: list[tuple[int, int]] = field(default_factory=list)
    rule_counts: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    """Per micro-batch id: per READ rule, [passed, failed]."""
    valid: int = 0
    dead_letters: dict[str, list[Any]] = field(default_factory=dict)


def produce(spark: SparkSession, registry: Registry, config: dict[str, str], summary: Summary) -> None:
    """Every producer's orders through `serialize` and Spark's Kafka sink; rejects to the DLQ topics."""
    sink = KafkaTopicSink(config)
    for version, first, count in PRODUCERS:
        writer = DataContract(registry, SUBJECT, version=version, dlq_sink=sink)
        orders = generated_orders(spark, first, count, version).withColumns(
            {"key": F.encode("orderId", "utf-8"), "topic": F.lit(TOPIC)}  # `topic`: DLQ records name it
        )
        framed = writer.serialize(orders).select("key", "value", "topic")
        framed.write.format("kafka").options(**spark_kafka_options(config)).save()
        summary.offered += count
    misconfigured = spark.createDataFrame(MISCONFIGURED, "key binary, value binary")
    misconfigured.write.format("kafka").options(**spark_kafka_options(config)).option("topic", TOPIC).save()
    summary.offered += len(MISCONFIGURED)


def consume_stream(
    spark: SparkSession, registry: Registry, config: dict[str, str], output: Path, summary: Summary
) -> None:
    """A major-2 reader's streaming query over the topic, until everything there is processed."""
    reader = DataContract(
        registry,
        SUBJECT,
        use_latest_with_metadata={"application.major.version": "2"},
        dlq_sink=KafkaTopicSink(config),
    )
    source = (
        spark.readStream.format("kafka")
        .options(**spark_kafka_options(config))
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", RECORDS_PER_MICRO_BATCH)
        .load()
    )
    write_valid = reader.foreach_batch(
        ParquetByBatch(str(output / "valid"), str(output / "counts")),
        name="orders-major-2",
        apply="deserialize",
        key_col="key",
        on_decode_error="DLQ",
        decode_dlq_topic=UNDECODABLE_TOPIC,
    )
    query = (
        source.writeStream.foreachBatch(write_valid)
        .option("checkpointLocation", str(output / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    summary.micro_batches = [(p.batchId, p.numInputRows) for p in query.recentProgress if p.numInputRows]
    for batch_id, _ in summary.micro_batches:
        summary.rule_counts[batch_id] = json.loads((output / "counts" / f"{batch_id}.json").read_text())
    summary.valid = spark.read.parquet(str(output / "valid")).count()


def dead_letters(config: dict[str, str], topics: list[str]) -> dict[str, list[Any]]:
    """Every record of each dead-letter topic that exists, read to its end."""
    consumer = Consumer({**config, "group.id": f"orders-dlq-{uuid.uuid4().hex}"})
    found: dict[str, list[Any]] = {}
    try:
        existing = consumer.list_topics(timeout=30).topics
        for topic in topics:
            if topic not in existing:
                continue
            partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in existing[topic].partitions]
            ends = {p.partition: consumer.get_watermark_offsets(p, timeout=30)[1] for p in partitions}
            consumer.assign(partitions)
            records: list[Any] = []
            while len(records) < sum(ends.values()):
                message = consumer.poll(10)
                if message is None:
                    raise TimeoutError(f"{topic}: no record for 10 s before its end")
                if message.error() is None:
                    records.append(message)
            found[topic] = records
    finally:
        consumer.close()
    return found


def dlq_topics(registry: Registry) -> list[str]:
    """The dead-letter topics the contract's versions name, and the reader's undecodable topic."""
    topics = {UNDECODABLE_TOPIC}
    for version in registry.get_versions(SUBJECT):
        schema = registry.get_version(SUBJECT, version).schema
        if schema.metadata is not None and "dlq.topic" in schema.metadata.properties:
            topics.add(schema.metadata.properties["dlq.topic"])
        for rule in schema.rule_set.domain_rules if schema.rule_set else ():
            if "dlq.topic" in rule.params:
                topics.add(rule.params["dlq.topic"])
    return sorted(topics)


def run(spark: SparkSession, registry: Registry, config: dict[str, str], output: Path) -> Summary:
    """Create the topic, produce, stream it through the major-2 reader; return what happened."""
    admin = AdminClient(config)
    if TOPIC not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
    summary = Summary()
    produce(spark, registry, config, summary)
    consume_stream(spark, registry, config, output, summary)
    summary.dead_letters = dead_letters(config, dlq_topics(registry))
    return summary


def print_summary(summary: Summary) -> None:
    print(f"\nOffered {summary.offered} records to '{TOPIC}'")
    for batch_id, rows in summary.micro_batches:
        print(f"  micro-batch {batch_id}: {rows} records in")
        for rule, (passed, failed) in summary.rule_counts.get(batch_id, {}).items():
            print(f"    {rule:<15} passed {passed:>4} failed {failed:>3}")
    print(f"Valid orders written by the major-2 reader: {summary.valid}")
    print("Dead-letter topics:")
    for topic, records in summary.dead_letters.items():
        first = records[0]
        headers = {k: v.decode() if v is not None else None for k, v in first.headers() or ()}
        print(f"  {topic}: {len(records)} records; first key {first.key()!r}, value {first.value()[:80]!r}")
        print(f"    headers: {headers}")
    rejected = sum(map(len, summary.dead_letters.values()))
    print(
        f"{summary.valid} valid + {rejected} dead letters = {summary.valid + rejected} of {summary.offered}"
    )


def main() -> None:
    output = Path(os.environ.get("OUTPUT_PATH", HERE / "out" / "kafka"))
    shutil.rmtree(output, ignore_errors=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", PANDAS_WARNING, FutureWarning)
    builder = (
        SparkSession.builder.appName("orders-kafka")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
    )
    with spark_output_discarded():  # Spark's start-up lines and logs stay out of the output
        spark = builder.getOrCreate()
    print_summary(run(spark, contract_registry(), kafka_client_config(), output))
    spark.stop()


if __name__ == "__main__":
    main()
