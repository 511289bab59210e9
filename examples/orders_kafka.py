"""The orders pipeline against a real Schema Registry and Kafka cluster (configuration only).

The same contract as examples/orders_pipeline.py, pushed to a registry first
(`spark-contracts push examples/registry --registry $SCHEMA_REGISTRY_URL`), enforced on a
Structured Streaming job that reads the `orders` topic with Spark's Kafka source, sends rejected
records to Kafka dead-letter topics and writes the valid orders, masked and migrated to major 2,
to a table. It needs the spark-sql-kafka package and a reachable cluster, so it does not run in
this repository's CI; every name it uses is the same one the embedded example runs.

Environment: SCHEMA_REGISTRY_URL, SCHEMA_REGISTRY_KEY / SCHEMA_REGISTRY_SECRET (API key),
KAFKA_BOOTSTRAP_SERVERS, KAFKA_API_KEY / KAFKA_API_SECRET (SASL/PLAIN over TLS), OUTPUT_PATH,
CHECKPOINT_PATH.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession

from actions.kafka_topic import KafkaTopicSink
from contracts import DataContract, SchemaRegistryClient

SUBJECT = "orders-value"


def kafka_security() -> dict[str, str]:
    """SASL/PLAIN over TLS, as Confluent Cloud clusters expect it (librdkafka property names)."""
    return {
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": os.environ["KAFKA_API_KEY"],
        "sasl.password": os.environ["KAFKA_API_SECRET"],
    }


def main() -> None:
    spark = SparkSession.builder.appName("orders-contract").getOrCreate()
    registry = SchemaRegistryClient(
        os.environ["SCHEMA_REGISTRY_URL"],
        basic_auth=(os.environ["SCHEMA_REGISTRY_KEY"], os.environ["SCHEMA_REGISTRY_SECRET"]),
    )
    orders = DataContract(
        registry,
        SUBJECT,
        use_latest_with_metadata={"application.major.version": "2"},
        dlq_sink=KafkaTopicSink(kafka_security()),  # idempotent producer, acks=all, waits for every delivery
    )
    security = kafka_security()
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
        f' username="{security["sasl.username"]}" password="{security["sasl.password"]}";'
    )
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", security["bootstrap.servers"])
        .option("kafka.security.protocol", "SASL_SSL")
        .option("kafka.sasl.mechanism", "PLAIN")
        .option("kafka.sasl.jaas.config", jaas)
        .option("subscribe", "orders")
        .option("includeHeaders", "true")
        .load()
    )
    output = os.environ["OUTPUT_PATH"]

    def write_valid(valid: DataFrame, batch_id: int) -> None:
        # Idempotent per micro-batch: a batch replayed after a restart overwrites its own output.
        valid.write.mode("overwrite").parquet(f"{output}/batch={batch_id}")

    query = (
        source.writeStream.foreachBatch(
            orders.foreach_batch(write_valid, name="orders-major-2", apply="deserialize", key_col="key")
        )
        .option("checkpointLocation", os.environ["CHECKPOINT_PATH"])
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main()
