"""End to end on a real Kafka broker, both directions.

In: confluent-kafka-python's AvroSerializer (the contract's WRITE rules, its own DLQ action)
produces payments of two majors to a topic of three partitions, plus a few undecodable records;
Spark reads the topic with its Kafka source, batch and streaming, `deserialize`s it for a major-2
reader (migrations, READ rules) and routes rejects through `KafkaTopicSink` to real DLQ topics.
Out: `serialize` → Spark's Kafka sink → the reference AvroDeserializer reads every record back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_io import check_accounting, consume, create_topic, fresh_topic, read_with_reference
from payments import (
    UNDECODABLE,
    Topics,
    as_major_2_reader_sees_it,
    expected_outcome,
    payments,
    register_payments,
)
from pipeline import (
    ParquetPerBatch,
    Scenario,
    check_valid_rows,
    deserialize_options,
    kafka_source,
    major_2_reader,
)
from query_start import start
from registry_server import running_registry

from actions.dlq.kafka_topic import KafkaTopicSink
from contracts import DataContract, LocalRegistry
from tools.kafka_broker import KafkaBroker


def test_a_batch_read_of_the_topic_accounts_for_every_record(
    spark: Any, kafka_broker: KafkaBroker, scenario: Scenario
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = kafka_source(spark, bootstrap, scenario.topics.source)
    valid = major_2_reader(scenario, bootstrap).deserialize(source, **deserialize_options(scenario.topics))
    rows = valid.collect()
    assert {row["partition"] for row in rows} == {0, 1, 2}
    valid_ids = check_valid_rows(rows, scenario)
    check_accounting(bootstrap, scenario.topics, scenario.records, scenario.produced, valid_ids)


def test_a_streaming_query_over_several_micro_batches_accounts_for_every_record(
    spark: Any, kafka_broker: KafkaBroker, scenario: Scenario, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = kafka_source(spark, bootstrap, scenario.topics.source, streaming=True, maxOffsetsPerTrigger=100)
    writer = major_2_reader(scenario, bootstrap).foreach_batch(
        ParquetPerBatch(str(tmp_path / "valid")),
        name="payments-major-2",
        apply="deserialize",
        **deserialize_options(scenario.topics),
    )
    query = start(
        source.writeStream.foreachBatch(writer)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )
    query.awaitTermination(300)
    assert query.exception() is None
    batches = [p for p in query.recentProgress if p.numInputRows > 0]
    assert len(batches) >= 3
    assert sum(p.numInputRows for p in batches) == len(scenario.produced.written) + len(UNDECODABLE)
    rows = spark.read.parquet(str(tmp_path / "valid")).collect()
    assert len({row["batch"] for row in rows}) >= 3
    valid_ids = check_valid_rows(rows, scenario)
    check_accounting(bootstrap, scenario.topics, scenario.records, scenario.produced, valid_ids)


@pytest.fixture
def served_registry(tmp_path: Path) -> Iterator[tuple[LocalRegistry, str, Topics]]:
    topics = Topics(fresh_topic("payments-out"))
    registry = LocalRegistry(tmp_path / "registry", create=True)
    register_payments(registry, topics)
    with running_registry(registry) as server:
        yield registry, server.url, topics


def test_serialized_rows_written_by_the_kafka_sink_read_back_with_the_reference_deserializer(
    spark: Any, kafka_broker: KafkaBroker, served_registry: tuple[LocalRegistry, str, Topics]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    registry, url, topics = served_registry
    create_topic(bootstrap, topics.source)
    # Major-2 payments the reference's READ rules accept, plus those our WRITE rule rejects.
    records = [
        r
        for r in payments(0, 160)
        if r.major == 2 and expected_outcome(r, topics) in (None, topics.write_dlq)
    ]
    rows = [
        (
            r.id,
            r.value["contact"],
            r.value["amount"],
            r.value["currency"],
            r.value["channel"],
            r.key,
            r.headers,
        )
        for r in records
    ]
    df = spark.createDataFrame(
        rows,
        "id long, contact string, amount double, currency string, channel string, key binary,"
        " headers array<struct<key: string, value: binary>>",
    )
    writer = DataContract(
        registry, topics.subject, version=2, dlq_sink=KafkaTopicSink({"bootstrap.servers": bootstrap})
    )
    (
        writer.serialize(df)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topics.source)
        .save()
    )

    messages = consume(bootstrap, topics.source)
    accepted = [r for r in records if expected_outcome(r, topics) is None]
    assert len(messages) == len(accepted)
    read = read_with_reference(bootstrap, url, topics.source, [m.value() for m in messages])
    assert sorted(read, key=lambda v: v["id"]) == [as_major_2_reader_sees_it(r) for r in accepted]
    for message, value in zip(messages, read, strict=True):
        assert message.key() == f"k{value['id']}".encode()
        assert message.headers() == [("trace", f"t{value['id']}".encode())]
    refused = consume(bootstrap, topics.write_dlq)
    rejected = {r.id: r for r in records if expected_outcome(r, topics) == topics.write_dlq}
    assert sorted(json.loads(m.value())["id"] for m in refused) == sorted(rejected)
    for message in refused:
        value = json.loads(message.value())
        payment = rejected[value["id"]]
        assert value == payment.value  # as it arrived, before the WRITE transform (as the reference)
        assert message.key() == payment.key
        assert dict(message.headers())["__rule.name"] == b"positiveAmount"
