"""Faults on a real broker: the broker stopped while DLQ records are in flight, a rerun after it is
back, and a streaming query that crashes mid-way and restarts from its checkpoint."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_io import check_accounting, create_topic
from pipeline import (
    ParquetPerBatch,
    Scenario,
    check_valid_rows,
    deserialize_options,
    kafka_source,
    major_2_reader,
)
from pyspark import cloudpickle
from query_start import start

from tools.kafka_broker import KafkaBroker

# The mapInArrow function and foreachBatch writer defined here are pickled to Connect by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

DELIVERY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Slowly:
    """Passes Arrow batches through, pausing before each: the rows, and so their DLQ records,
    reach the broker spread over a few seconds."""

    pause_s: float

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            time.sleep(self.pause_s)
            yield batch


class StopOnFirstDlqRecord(threading.Thread):
    """Watches the reader's DLQ topics and stops the broker once the first record has landed."""

    def __init__(self, broker: KafkaBroker, topics: list[str]) -> None:
        super().__init__(daemon=True)
        self.broker = broker
        self.topics = topics
        self.stopped_at: float | None = None
        self.done = threading.Event()

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.broker.bootstrap_servers, "group.id": "watch"})
        try:
            deadline = time.monotonic() + 300
            while not self.done.is_set() and time.monotonic() < deadline:
                if any(
                    consumer.get_watermark_offsets(TopicPartition(t, 0), timeout=5)[1] for t in self.topics
                ):
                    self.broker.stop()
                    self.stopped_at = time.monotonic()
                    return
                time.sleep(0.05)
        finally:
            consumer.close()


@pytest.fixture
def restarts_the_broker(kafka_broker: KafkaBroker) -> Iterator[KafkaBroker]:
    """The session's broker, serving again after the test whatever the test did to it."""
    yield kafka_broker
    if not kafka_broker.running:
        kafka_broker.start()


@pytest.mark.one_pass  # DLQ delivery runs in the Python workers, whatever the session
def test_the_broker_stopped_while_dlq_records_are_in_flight_fails_the_job_and_a_rerun_loses_nothing(
    spark: Any, restarts_the_broker: KafkaBroker, scenario: Scenario, tmp_path: Path
) -> None:
    broker = restarts_the_broker
    bootstrap = broker.bootstrap_servers
    topics = scenario.topics
    dlq_topics = [topics.read_dlq, topics.bad_currency, topics.undecodable]
    for topic in dlq_topics:
        create_topic(bootstrap, topic, partitions=1)
    # The topic's records as a file source, so the job can still read them with the broker down.
    kafka_source(spark, bootstrap, topics.source).write.parquet(str(tmp_path / "source"))
    frames = spark.read.parquet(str(tmp_path / "source"))
    writer = major_2_reader(scenario, bootstrap, DELIVERY_TIMEOUT_S).foreach_batch(
        ParquetPerBatch(str(tmp_path / "valid")),
        name="payments-rerun",
        apply="deserialize",
        **deserialize_options(topics),
    )

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "8")
    try:
        watcher = StopOnFirstDlqRecord(broker, dlq_topics)
        watcher.start()
        with pytest.raises(Exception, match="DLQ records") as raised:
            writer(frames.mapInArrow(Slowly(0.25), frames.schema), 0)
        failed_at = time.monotonic()
        watcher.done.set()
        watcher.join()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert watcher.stopped_at is not None, "the job ended before any DLQ record reached the broker"
    assert "DlqError" in str(raised.value)
    assert f"bootstrap.servers {bootstrap}" in str(raised.value)
    # Within the delivery timeout of the stop, plus librdkafka's report grace and a loaded machine's slack.
    assert failed_at - watcher.stopped_at < DELIVERY_TIMEOUT_S + 15

    broker.start()
    writer(frames, 0)  # the same run id (name and batch id): the rerun replaces the batch's output
    valid_ids = check_valid_rows(spark.read.parquet(str(tmp_path / "valid")).collect(), scenario)
    check_accounting(bootstrap, topics, scenario.records, scenario.produced, valid_ids, replayed=True)


@dataclass(frozen=True)
class CrashOnceAfterWriting:
    """Writes a micro-batch's valid rows, then, the first time it meets `batch`, fails the query
    before Spark can commit that micro-batch (the marker file remembers across Python workers)."""

    write: ParquetPerBatch
    batch: int
    marker: str

    def __call__(self, valid: Any, batch_id: int) -> None:
        self.write(valid, batch_id)
        if batch_id == self.batch and not Path(self.marker).exists():
            Path(self.marker).touch()
            raise RuntimeError(f"simulated crash after writing micro-batch {batch_id}")


# On Spark Connect, tests/contracts/api/test_streaming.py restarts a foreach_batch query.
@pytest.mark.one_pass
def test_a_streaming_query_restarted_from_its_checkpoint_neither_loses_nor_duplicates_valid_output(
    spark: Any, kafka_broker: KafkaBroker, scenario: Scenario, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    output = ParquetPerBatch(str(tmp_path / "valid"))
    reader = major_2_reader(scenario, bootstrap)
    options = deserialize_options(scenario.topics)

    def run(write: Any) -> Any:
        source = kafka_source(
            spark, bootstrap, scenario.topics.source, streaming=True, maxOffsetsPerTrigger=60
        )
        return start(
            source.writeStream.foreachBatch(
                reader.foreach_batch(write, name="payments-restart", apply="deserialize", **options)
            )
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
        )

    crashing = run(CrashOnceAfterWriting(output, batch=2, marker=str(tmp_path / "crashed")))
    with pytest.raises(Exception, match="simulated crash after writing micro-batch 2"):
        crashing.awaitTermination(300)
    assert [p.batchId for p in crashing.recentProgress] == [0, 1]

    restarted = run(output)
    restarted.awaitTermination(300)
    assert restarted.exception() is None
    replayed = [p.batchId for p in restarted.recentProgress if p.numInputRows > 0]
    assert replayed[0] == 2 and len(replayed) >= 3  # micro-batch 2 again, then the rest

    valid_ids = check_valid_rows(spark.read.parquet(output.root).collect(), scenario)
    check_accounting(
        bootstrap, scenario.topics, scenario.records, scenario.produced, valid_ids, replayed=True
    )
