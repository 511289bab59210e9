"""The Spark side of the broker tests: a source topic the reference producer filled, the major-2
reader with Kafka DLQ topics, Spark's Kafka source, and checks of the reader's output rows."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_io import Produced, create_topic, fresh_topic, produce_raw, produce_with_reference
from payments import (
    MAJOR,
    UNDECODABLE,
    Payment,
    Topics,
    as_major_2_reader_sees_it,
    payments,
    register_payments,
)
from pyspark import cloudpickle
from registry_server import running_registry

from actions.dlq.kafka_topic import KafkaTopicSink
from contracts import DataContract, LocalRegistry

# The foreachBatch writers defined here are pickled to the Connect server by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@dataclass(frozen=True)
class Scenario:
    """A source topic the reference producer filled, with the registry its contract lives in."""

    topics: Topics
    registry: LocalRegistry
    records: list[Payment]
    produced: Produced


def produce_scenario(bootstrap: str, directory: Path, count: int) -> Scenario:
    """A fresh topic of three partitions holding `count` payments as the reference producer wrote
    them (its refusals in its WRITE DLQ topic), then the undecodable records."""
    topics = Topics(fresh_topic("payments"))
    create_topic(bootstrap, topics.source)
    registry = LocalRegistry(directory / "registry", create=True)
    register_payments(registry, topics)
    records = payments(0, count)
    with running_registry(registry) as server:
        produced = produce_with_reference(bootstrap, server.url, topics, records)
    produce_raw(bootstrap, topics.source, UNDECODABLE)
    return Scenario(topics, registry, records, produced)


def major_2_reader(scenario: Scenario, bootstrap: str, delivery_timeout_s: float = 30.0) -> DataContract:
    return DataContract(
        scenario.registry,
        scenario.topics.subject,
        use_latest_with_metadata={MAJOR: "2"},
        dlq_sink=KafkaTopicSink({"bootstrap.servers": bootstrap}, delivery_timeout_s=delivery_timeout_s),
    )


def deserialize_options(topics: Topics) -> dict[str, Any]:
    return {"key_col": "key", "on_decode_error": "DLQ", "decode_dlq_topic": topics.undecodable}


def kafka_source(spark: Any, bootstrap: str, topic: str, *, streaming: bool = False, **options: Any) -> Any:
    """Spark's Kafka source over the whole topic, headers included."""
    reader = spark.readStream if streaming else spark.read
    return (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .options(**options)
        .load()
    )


def check_valid_rows(rows: list[Any], scenario: Scenario) -> list[int]:
    """Each output row is its payment as a major-2 reader sees it, its Kafka columns passed
    through; returns the rows' payment ids."""
    by_id = {record.id: record for record in scenario.records}
    for row in rows:
        payment = by_id[row["id"]]
        assert {name: row[name] for name in ("id", "contact", "amount", "currency", "channel")} == (
            as_major_2_reader_sees_it(payment)
        )
        assert (row["key"], row["topic"]) == (payment.key, scenario.topics.source)
        assert [(h["key"], h["value"]) for h in row["headers"]] == payment.headers
    return [row["id"] for row in rows]


@dataclass(frozen=True)
class ParquetPerBatch:
    """A foreachBatch writer, idempotent per batch id: a replayed micro-batch replaces its output."""

    root: str

    def __call__(self, valid: Any, batch_id: int) -> None:
        valid.write.mode("overwrite").parquet(f"{self.root}/batch={batch_id}")
