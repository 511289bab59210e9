"""Talking to the test broker outside Spark: topics, the reference producer and a reading consumer.

The producer side is confluent-kafka-python's own AvroSerializer, with the contract's rules run by
its CEL, CEL_FIELD and JSONata executors and its own DlqAction producing to the real DLQ topics.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.serde import set_original_key
from confluent_kafka.schema_registry.rule_registry import RuleRegistry
from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor
from confluent_kafka.schema_registry.rules.dlq.dlq_action import DlqAction
from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from payments import MAJOR, UNDECODABLE, Payment, Topics, expected_outcome

PARTITIONS = 3


def fresh_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark: how many records the topic holds, per partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions
        }
    finally:
        consumer.close()


def consume(bootstrap: str, topic: str) -> list[Any]:
    """Every record of `topic` up to its high watermarks, by partition and offset."""
    wanted = {p: end for p, end in end_offsets(bootstrap, topic).items() if end > 0}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted])
        messages: list[Any] = []
        deadline = time.monotonic() + 60
        while wanted and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            messages.append(message)
            if message.offset() + 1 >= wanted.get(message.partition(), 0):
                wanted.pop(message.partition(), None)
        assert not wanted, f"partitions {sorted(wanted)} of {topic} not read to their end"
        return sorted(messages, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def reference_rules(bootstrap: str) -> RuleRegistry:
    """The reference client's executors, and its DLQ action producing to the test broker."""
    rules = RuleRegistry()
    for executor in (CelExecutor(), CelFieldExecutor(), JsonataExecutor()):
        rules.register_executor(executor)
    rules.register_action(DlqAction({"bootstrap.servers": bootstrap, "dlq.auto.flush": "true"}))
    return rules


@dataclass
class Produced:
    """What the reference producer did: the framed value of each record it wrote, by id, and the
    ids its rules refused (sent by its DlqAction to the WRITE DLQ topic)."""

    written: dict[int, bytes] = field(default_factory=dict)
    refused: list[int] = field(default_factory=list)


def produce_with_reference(
    bootstrap: str, registry_url: str, topics: Topics, records: Iterable[Payment]
) -> Produced:
    """Serialize each record with the reference AvroSerializer of its major (latest version with
    that major's metadata, WRITE rules run) and produce it with its key and headers."""
    client = SchemaRegistryClient({"url": registry_url})
    rules = reference_rules(bootstrap)
    serializers = {
        major: AvroSerializer(
            client,
            None,
            conf={"auto.register.schemas": False, "use.latest.with.metadata": {MAJOR: str(major)}},
            rule_registry=rules,
        )
        for major in (1, 2)
    }
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    produced = Produced()
    for record in records:
        set_original_key(record.key)  # as a key serializer of the same client would leave it
        context = SerializationContext(topics.source, MessageField.VALUE, record.headers)
        try:
            value = serializers[record.major](record.value, context)
        except SerializationError:
            produced.refused.append(record.id)
            continue
        assert value is not None
        producer.produce(topics.source, key=record.key, value=value, headers=record.headers)
        produced.written[record.id] = value
    assert producer.flush(60) == 0
    return produced


def produce_raw(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(60) == 0


def read_with_reference(bootstrap: str, registry_url: str, topic: str, values: Iterable[bytes]) -> list[Any]:
    """Each framed value as the reference AvroDeserializer reads it (the writer's version, its
    READ rules run)."""
    client = SchemaRegistryClient({"url": registry_url})
    deserializer = AvroDeserializer(client, rule_registry=reference_rules(bootstrap))
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserializer(value, context) for value in values]


RULE_HEADERS = ("__rule.name", "__rule.mode", "__rule.subject", "__rule.topic", "__rule.exception")


def header_dict(message: Any) -> dict[str, bytes | None]:
    return dict(message.headers() or ())


def check_read_dlq_record(message: Any, topics: Topics, produced: Produced, rule: str) -> int:
    """A READ-side DLQ record: the source record's key, value and headers as they arrived, then
    the rule's headers. Returns the payment id its key names."""
    payment_id = int(message.key().decode().removeprefix("k"))
    assert message.value() == produced.written[payment_id]
    headers = message.headers()
    assert headers[0] == ("trace", f"t{payment_id}".encode())
    assert [name for name, _ in headers[1:]] == list(RULE_HEADERS)
    rule_headers = dict(headers[1:])
    assert rule_headers["__rule.name"] == rule.encode()
    assert rule_headers["__rule.mode"] == b"READ"
    assert rule_headers["__rule.subject"] == topics.subject.encode()
    assert rule_headers["__rule.topic"] == topics.source.encode()
    return payment_id


def check_accounting(
    bootstrap: str,
    topics: Topics,
    records: Sequence[Payment],
    produced: Produced,
    valid_ids: Sequence[int],
    *,
    replayed: bool = False,
) -> None:
    """Every record is in exactly one place: refused by the producer (its WRITE DLQ topic), in the
    reader's output (`valid_ids`), or in one of the reader's DLQ topics, each as the contract says;
    and the source topic holds what the producer wrote plus the undecodable records.

    `replayed`: part of the input was processed twice (a rerun after a failure); the output must
    still hold each valid record once, but the Kafka DLQ topics, written at least once, may repeat
    records, so they are compared as sets.
    """
    expected: dict[str | None, set[int]] = {}
    for record in records:
        expected.setdefault(expected_outcome(record, topics), set()).add(record.id)
    rows_in = sum(end_offsets(bootstrap, topics.source).values())
    assert rows_in == len(produced.written) + len(UNDECODABLE)

    refused = consume(bootstrap, topics.write_dlq)
    assert sorted(produced.refused) == sorted(expected[topics.write_dlq])
    assert sorted(json.loads(m.value())["id"] for m in refused) == sorted(expected[topics.write_dlq])
    for message in refused:
        value = json.loads(message.value())
        assert message.key() == f"k{value['id']}".encode() and value["amount"] <= 0
        assert header_dict(message)["__rule.name"] == b"positiveAmount"
        assert header_dict(message)["__rule.mode"] == b"WRITE"

    dlq_ids = {
        topic: [check_read_dlq_record(m, topics, produced, rule) for m in consume(bootstrap, topic)]
        for topic, rule in ((topics.read_dlq, "smallAmount"), (topics.bad_currency, "knownCurrency"))
    }
    undecodable_messages = consume(bootstrap, topics.undecodable)
    assert all(header_dict(m)["__rule.exception"] for m in undecodable_messages)
    undecodable = [(m.key(), m.value()) for m in undecodable_messages]

    assert sorted(valid_ids) == sorted(expected[None])  # each valid record exactly once
    if replayed:
        for topic, ids in dlq_ids.items():
            assert set(ids) == expected[topic], topic
        assert set(undecodable) == set(UNDECODABLE)
        return
    for topic, ids in dlq_ids.items():
        assert sorted(ids) == sorted(expected[topic]), topic
    assert sorted(undecodable) == sorted(UNDECODABLE)
    assert rows_in == len(valid_ids) + sum(map(len, dlq_ids.values())) + len(undecodable)
