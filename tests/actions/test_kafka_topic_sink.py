"""KafkaTopicSink against librdkafka's mock cluster: exact records, the DLQ of a contract, and failures."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actions.dlq.kafka_topic import KafkaTopicSink
from actions.dlq.sink import DlqError, DlqRecord, DlqSink
from contracts import DataContract, LocalRegistry, Schema

confluent_kafka = pytest.importorskip("confluent_kafka")

UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1: every connection is refused at once
SUBJECT = "users-value"
USER = {
    "type": "record",
    "name": "User",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "age", "type": "int"},
    ],
}


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    """A one-broker Kafka mock cluster, alive as long as the client that started it; other
    processes (the Spark workers) reach it on 127.0.0.1."""
    host = confluent_kafka.Producer({"test.mock.num.brokers": 1})
    broker = next(iter(host.list_topics(timeout=10).brokers.values()))
    yield f"{broker.host}:{broker.port}"
    del host


def fresh_topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def consume(bootstrap: str, topic: str) -> list[Any]:
    """Every message of `topic`, partition by partition in offset order (read up to the high watermarks)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {
            p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        wanted = {p: end for p, end in ends.items() if end > 0}
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in wanted]
        )
        messages: list[Any] = []
        deadline = time.monotonic() + 20
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


def as_record(message: Any) -> DlqRecord:
    return DlqRecord(
        topic=message.topic(),
        key=message.key(),
        value=message.value(),
        headers=tuple(message.headers() or ()),
        timestamp_ms=message.timestamp()[1],
    )


def record(topic: str, n: int, **fields: Any) -> DlqRecord:
    return DlqRecord(
        topic=topic,
        key=fields.get("key", f"k{n}".encode()),
        value=fields.get("value", f"v{n}".encode()),
        headers=fields.get("headers", (("__rule.name", b"positiveAge"), ("n", str(n).encode()))),
        timestamp_ms=1_700_000_000_000 + n,
    )


def test_records_arrive_exactly_with_every_header_in_order(bootstrap: str) -> None:
    topic = fresh_topic("bad-users")
    records = [
        record(topic, 0, key=None, value=None, headers=()),
        record(topic, 1, key=b"\x00\xff", value=bytes(range(256))),
        record(topic, 2, headers=(("naïve-名前", b"\x00"), ("dup", b"1"), ("dup", b"2"), ("dup", None))),
        record(topic, 3, key=b"", value=b"", headers=(("empty", b""),)),
        *(record(topic, n, key=b"same") for n in range(4, 20)),
    ]
    with KafkaTopicSink({"bootstrap.servers": bootstrap}).open("run-00000") as writer:
        for r in records:
            writer.write(r)
    arrived = consume(bootstrap, topic)
    assert sorted(map(as_record, arrived), key=records.index) == records
    for partition in {m.partition() for m in arrived}:
        in_partition = [records.index(as_record(m)) for m in arrived if m.partition() == partition]
        assert in_partition == sorted(in_partition)  # Kafka keeps the produce order per partition
    assert len({m.partition() for m in arrived if m.key() == b"same"}) == 1


def test_a_writer_produces_to_several_topics(bootstrap: str) -> None:
    first, second = fresh_topic("first"), fresh_topic("second")
    with KafkaTopicSink({"bootstrap.servers": bootstrap}).open("run-00001") as writer:
        writer.write(record(first, 0))
        writer.write(record(second, 1))
        writer.write(record(first, 2))
    assert [as_record(m) for m in consume(bootstrap, first)] in (
        [record(first, 0), record(first, 2)],
        [record(first, 2), record(first, 0)],  # null-free distinct keys may land on two partitions
    )
    assert [as_record(m) for m in consume(bootstrap, second)] == [record(second, 1)]


def test_idempotence_and_acks_all_are_forced() -> None:
    sink = KafkaTopicSink({"bootstrap.servers": UNREACHABLE, "linger.ms": "5"})
    assert sink.config == {
        "bootstrap.servers": UNREACHABLE,
        "linger.ms": "5",
        "enable.idempotence": "true",
        "acks": "all",
    }
    assert KafkaTopicSink({"bootstrap.servers": UNREACHABLE, "acks": "-1"}).config["acks"] == "all"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"acks": "1"}, "requires acks=all"),
        ({"enable.idempotence": "false"}, "requires enable.idempotence=true"),
        ({"message.timeout.ms": "1000"}, "use delivery_timeout_s"),
        ({"delivery.timeout.ms": "1000"}, "use delivery_timeout_s"),
        ({"transactional.id": "dlq"}, "does not use transactions"),
        ({"delivery.report.only.error": "true"}, "every delivery report"),
    ],
)
def test_settings_that_would_weaken_delivery_are_refused(setting: dict[str, str], message: str) -> None:
    with pytest.raises(DlqError, match=message):
        KafkaTopicSink({"bootstrap.servers": UNREACHABLE, **setting})


def test_a_sink_needs_brokers_and_a_positive_timeout() -> None:
    with pytest.raises(DlqError, match=r"bootstrap\.servers"):
        KafkaTopicSink({"linger.ms": "5"})
    with pytest.raises(DlqError, match="delivery_timeout_s must be positive"):
        KafkaTopicSink({"bootstrap.servers": UNREACHABLE}, delivery_timeout_s=0)


SECRETS = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "dlq-writer",
    "sasl.password": "hunter2-sasl",
    "ssl.key.password": "hunter2-key",
    "sasl.oauthbearer.client.secret": "hunter2-oauth",
}


def test_credentials_never_show_in_repr_but_travel_to_the_tasks() -> None:
    sink = KafkaTopicSink({"bootstrap.servers": UNREACHABLE, **SECRETS})
    assert isinstance(sink, DlqSink)
    assert "hunter2" not in repr(sink)
    assert "'sasl.password': '***'" in repr(sink)
    assert "'sasl.username': 'dlq-writer'" in repr(sink)
    copy = pickle.loads(pickle.dumps(sink))
    assert copy == sink
    assert copy.config["sasl.password"] == "hunter2-sasl"


def test_credentials_never_show_in_errors() -> None:
    # librdkafka quotes an invalid value in its error: here the value is also the SASL password.
    sink = KafkaTopicSink({"bootstrap.servers": UNREACHABLE, **SECRETS, "compression.type": "hunter2-sasl"})
    with pytest.raises(DlqError, match="cannot create a Kafka producer") as raised:
        sink.open("run-00002")
    assert "hunter2" not in str(raised.value)
    assert "***" in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__context__ is not None  # `from None`


@pytest.mark.parametrize(
    "key",
    [
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "SASL.PASSWORD",
        "sasl.pasword",
        "sasl.passwrd",
        "ssl.key.passwd",
        "ssl.keystore.pwd",
        "sasl.secert",
        "client_secrets",
        "oauth.tokn",
        "api.token",
        "ssl.key.pem",
        "ssl_key",
        "sasl.jaas.config",
        "basic.auth.credentials.source",
        "schema.registry.api.key",
    ],
)
def test_every_setting_that_names_a_secret_is_redacted_misspelled_or_not(key: str) -> None:
    assert "hunter2" not in repr(KafkaTopicSink({"bootstrap.servers": UNREACHABLE, key: "hunter2-x"}))
    # librdkafka quotes a bad value: here compression.type carries the secret, and fails first.
    settings = {"bootstrap.servers": UNREACHABLE, "compression.type": "hunter2-x", key: "hunter2-x"}
    with pytest.raises(DlqError, match="cannot create a Kafka producer") as raised:
        KafkaTopicSink(settings).open("run-00009")
    assert "hunter2" not in str(raised.value)


def test_settings_that_are_no_secret_are_shown_and_not_redacted_from_errors() -> None:
    shown = {"sasl.username": "dlq-writer", "ssl.ca.location": "/etc/ca.pem", "linger.ms": "5"}
    assert all(
        f"'{key}': '{value}'" in repr(KafkaTopicSink({"bootstrap.servers": UNREACHABLE, **shown}))
        for key, value in shown.items()
    )
    sink = KafkaTopicSink({"bootstrap.servers": UNREACHABLE, "enable.sasl.oauthbearer.unsecure.jwt": True})
    assert sink.redact("enable.idempotence=true") == "enable.idempotence=true"


def test_an_unreachable_broker_fails_the_commit_within_the_timeout() -> None:
    sink = KafkaTopicSink(
        {"bootstrap.servers": UNREACHABLE, **SECRETS, "security.protocol": "PLAINTEXT"},
        delivery_timeout_s=1.0,
    )
    writer = sink.open("run-00003")
    started = time.monotonic()
    writer.write(record("bad-users", 0))
    writer.write(record("bad-users", 1))
    with pytest.raises(DlqError) as raised:
        writer.commit()
    elapsed = time.monotonic() - started
    assert elapsed < 1.0 + 2.0
    error = raised.value
    assert (error.topic, error.writer_id) == ("bad-users", "run-00003")
    assert "2 of 2 DLQ records failed to reach bad-users" in str(error)
    assert "Message timed out" in str(error)
    assert f"bootstrap.servers {UNREACHABLE}" in str(error)
    assert "hunter2" not in str(error)
    with pytest.raises(DlqError, match="already aborted"):
        writer.write(record("bad-users", 2))


def test_a_failed_delivery_fails_the_next_write_without_waiting_for_commit() -> None:
    writer = KafkaTopicSink({"bootstrap.servers": UNREACHABLE}, delivery_timeout_s=0.2).open("run-00007")
    with pytest.raises(DlqError, match="Message timed out"):
        for n in range(50):  # the first record times out after 0.2 s, reported within about a second
            writer.write(record("bad-users", n))
            time.sleep(0.1)
    writer.abort()


def test_a_record_the_producer_refuses_fails_the_write_naming_its_topic(bootstrap: str) -> None:
    writer = KafkaTopicSink({"bootstrap.servers": bootstrap, "message.max.bytes": "2000"}).open("run-00008")
    with pytest.raises(DlqError, match=r"cannot produce a DLQ record: .*too large") as raised:
        writer.write(record("bad-users", 0, value=bytes(5000)))
    assert (raised.value.topic, raised.value.writer_id) == ("bad-users", "run-00008")
    writer.abort()


class SilentProducer:
    """A producer whose records never get a delivery report, as when a broker stops answering."""

    def __init__(self) -> None:
        self.queued: list[str] = []
        self.purged = False

    def produce(self, topic: str, **_: Any) -> None:
        self.queued.append(topic)

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return len(self.queued)

    def purge(self, **_: Any) -> None:
        self.purged = True

    def close(self) -> None:
        self.queued.clear()


def test_records_still_unacknowledged_at_the_timeout_fail_the_commit() -> None:
    writer = KafkaTopicSink({"bootstrap.servers": UNREACHABLE}, delivery_timeout_s=1.0).open("run-00009")
    writer._producer.close()
    writer._producer = silent = SilentProducer()
    writer.write(record("bad-users", 0))
    writer.write(record("bad-users", 1))
    with pytest.raises(
        DlqError, match=r"2 of 2 DLQ records to bad-users still unacknowledged after 2\.5s"
    ) as raised:
        writer.commit()
    assert (raised.value.topic, raised.value.writer_id) == ("bad-users", "run-00009")
    assert silent.purged


def test_abort_purges_what_was_not_sent_without_waiting() -> None:
    writer = KafkaTopicSink({"bootstrap.servers": UNREACHABLE}, delivery_timeout_s=30).open("run-00004")
    writer.write(record("bad-users", 0))
    started = time.monotonic()
    writer.abort()
    assert time.monotonic() - started < 5
    with pytest.raises(DlqError, match="cannot commit a writer already aborted"):
        writer.commit()


def test_abort_after_commit_keeps_the_records(bootstrap: str) -> None:
    topic = fresh_topic("kept")
    writer = KafkaTopicSink({"bootstrap.servers": bootstrap}).open("run-00005")
    writer.write(record(topic, 0))
    writer.commit()
    writer.abort()
    writer.commit()
    assert [as_record(m) for m in consume(bootstrap, topic)] == [record(topic, 0)]
    with pytest.raises(DlqError, match="already committed"):
        writer.write(record(topic, 1))


def test_a_bad_topic_name_fails_the_write_naming_it() -> None:
    writer = KafkaTopicSink({"bootstrap.servers": UNREACHABLE}).open("run-00006")
    with pytest.raises(DlqError, match="may contain only") as raised:
        writer.write(record("bad users", 0))
    assert (raised.value.topic, raised.value.writer_id) == ("bad users", "run-00006")
    writer.abort()


def test_the_module_imports_without_confluent_kafka_and_says_how_to_install_it() -> None:
    script = (
        "import sys; sys.modules['confluent_kafka'] = None\n"
        "import actions.dlq.kafka_topic as k\n"
        "try:\n"
        "    k.KafkaTopicSink({'bootstrap.servers': 'x:9092'})\n"
        "except k.DlqError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "pip install 'spark-data-contracts[kafka]'" in done.stdout


# End to end: a contract's DLQ action producing from Spark tasks.


def users_contract(tmp_path: Path, sink: KafkaTopicSink, topic: str) -> DataContract:
    registry = LocalRegistry(tmp_path / "registry", create=True)
    rules = [
        {
            "name": "positiveAge",
            "kind": "CONDITION",
            "type": "CEL",
            "mode": "WRITE",
            "expr": "message.age > 0",
            "onFailure": "DLQ",
            "params": {"dlq.topic": topic},
        }
    ]
    payload = {"schema": json.dumps(USER), "ruleSet": {"domainRules": rules}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return DataContract(registry, SUBJECT, dlq_sink=sink)


def users(spark: Any) -> Any:
    rows = [
        (n, f"user{n}", None if n % 3 else f"u{n}@example.com", n % 4 - 1, f"k{n}".encode(), n)
        for n in range(24)
    ]
    return (
        spark.createDataFrame(rows, "id long, name string, email string, age int, key binary, trace long")
        .selectExpr(
            "id",
            "name",
            "email",
            "age",
            "key",
            "array(named_struct('key', 'trace', 'value', cast(cast(trace as string) as binary)),"
            " named_struct('key', 'nothing', 'value', cast(null as binary))) as headers",
            "'users' as topic",
        )
        .repartition(2)
    )


def test_write_sends_every_rejected_row_to_the_kafka_dlq_topic(
    spark: Any, bootstrap: str, tmp_path: Path
) -> None:
    topic = fresh_topic("bad-users")
    contract = users_contract(tmp_path, KafkaTopicSink({"bootstrap.servers": bootstrap}), topic)
    valid = contract.write(users(spark))
    assert sorted(row["id"] for row in valid.collect()) == [n for n in range(24) if n % 4 > 1]
    rejected = {json.loads(m.value())["id"]: m for m in consume(bootstrap, topic)}
    assert sorted(rejected) == [n for n in range(24) if n % 4 <= 1]
    for n, message in rejected.items():
        assert json.loads(message.value()) == {
            "id": n,
            "name": f"user{n}",
            "email": None if n % 3 else f"u{n}@example.com",
            "age": n % 4 - 1,
        }
        assert message.key() == f"k{n}".encode()
        assert message.headers() == [
            ("trace", str(n).encode()),
            ("nothing", None),
            ("__rule.name", b"positiveAge"),
            ("__rule.mode", b"WRITE"),
            ("__rule.subject", SUBJECT.encode()),
            ("__rule.topic", b"users"),
            ("__rule.exception", b"Rule expr failed: message.age > 0"),
        ]


def test_an_unreachable_dlq_broker_fails_the_job_within_the_timeout(spark: Any, tmp_path: Path) -> None:
    sink = KafkaTopicSink({"bootstrap.servers": UNREACHABLE}, delivery_timeout_s=2.0)
    contract = users_contract(tmp_path, sink, "bad-users")
    started = time.monotonic()
    with pytest.raises(Exception, match="DLQ records failed to reach bad-users") as raised:
        contract.write(users(spark)).collect()
    # Both partitions' tasks wait at most the timeout (plus the grace for the last reports), side by side.
    assert time.monotonic() - started < 2.0 + 15
    assert "DlqError" in str(raised.value)
    assert "Message timed out" in str(raised.value)
    assert f"bootstrap.servers {UNREACHABLE}" in str(raised.value)
