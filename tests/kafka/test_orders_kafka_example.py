"""examples/orders_kafka.py runs for real on the test broker, as `make demo-kafka` runs it."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from contracts import LocalRegistry
from tools.kafka_broker import KafkaBroker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.one_pass  # the end-to-end streaming test runs on Spark Connect
def test_the_kafka_example_streams_every_order_to_the_reader_or_a_dead_letter_topic(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))  # as `python examples/orders_kafka.py` finds its imports
    example = importlib.import_module("orders_kafka")
    cloudpickle.register_pickle_by_value(example)  # its foreachBatch writer, for Spark Connect
    config = {"bootstrap.servers": kafka_broker.bootstrap_servers}

    summary = example.run(spark, LocalRegistry(EXAMPLES / "registry"), config, tmp_path)

    # orders_pipeline.generated_orders: every 50th amount (from 7) is negative, every 70th e-mail
    # (from 11) malformed; positiveAmount runs first, so an order with both goes to orders-dlq.
    orders = range(sum(count for _, _, count in example.PRODUCERS))
    negative = [i for i in orders if i % 50 == 7]
    bad_email = [i for i in orders if i % 70 == 11 and i % 50 != 7]
    written = len(orders) - len(negative) - len(bad_email)
    assert summary.offered == len(orders) + len(example.MISCONFIGURED)
    assert len(summary.micro_batches) == 3  # 400 records per micro-batch at most
    assert sum(rows for _, rows in summary.micro_batches) == written + len(example.MISCONFIGURED)
    assert summary.valid == written
    letters = summary.dead_letters
    assert sorted(letters) == ["orders-bad-email", "orders-dlq", "orders-undecodable"]
    assert sorted(m.key() for m in letters["orders-dlq"]) == sorted(f"o-{i:05d}".encode() for i in negative)
    assert sorted(m.key() for m in letters["orders-bad-email"]) == sorted(
        f"o-{i:05d}".encode() for i in bad_email
    )
    assert sorted((m.key(), m.value()) for m in letters["orders-undecodable"]) == sorted(
        example.MISCONFIGURED
    )
    for topic, rule in (("orders-dlq", b"positiveAmount"), ("orders-bad-email", b"validEmail")):
        for message in letters[topic]:
            headers = dict(message.headers())
            assert (headers["__rule.name"], headers["__rule.mode"], headers["__rule.topic"]) == (
                rule,
                b"WRITE",
                b"orders",
            )
