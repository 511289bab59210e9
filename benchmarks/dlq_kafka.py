"""Benchmark: `write()` + DLQ with a `KafkaTopicSink` on a real broker, against the hand-written job
writing the valid rows and sending the rejected rows with Spark's own Kafka writer.

Run: `.venv/bin/python benchmarks/dlq_kafka.py [rows] [percents]` (defaults 200,000 and 10,100;
`make jars` fetches the broker and spark-sql-kafka).

A single-node broker starts on loopback (tools/kafka_broker.py) for the run. The source and the rule
are benchmarks/dlq_write.py's: (a) `DataContract.write(df)` with a `KafkaTopicSink`, its valid rows
into `noop` and its rejected rows produced to a topic by the routing pass of the same job; (b) the
valid rows into `noop`, then the rejected rows as JSON (`to_json`) through
`df.write.format("kafka")`. Both topics are created beforehand with two partitions; the ways take
turns within each round, best of three after a warm-up.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _session import session
from dlq_write import contract, taking_turns, users

from actions.dlq.kafka_topic import KafkaTopicSink
from tools.kafka_broker import KafkaBroker


def create_topics(bootstrap: str, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 2, 1) for name in names]).values():
        future.result(60)


def measure(spark: Any, bootstrap: str, rows: int, percent: int, work: str) -> dict[str, float]:
    """Seconds of (a) `write` + DLQ to Kafka and (b) the hand-written job, at `percent` rejects."""
    from pyspark.sql import functions as F

    df = users(spark, rows, percent, os.path.join(work, f"users-{percent}"))
    topic, hand_topic = f"bad-{percent}", f"bad-hand-{percent}"
    create_topics(bootstrap, topic, hand_topic)
    sink = KafkaTopicSink({"bootstrap.servers": bootstrap, "linger.ms": 5})
    users_contract = contract(sink, topic)
    valid = F.char_length("ssn") == 9

    def by_contract() -> None:
        users_contract.write(df).write.format("noop").mode("overwrite").save()

    def by_hand() -> None:
        df.filter(valid).write.format("noop").mode("overwrite").save()
        rejected = df.filter(~valid).select(F.to_json(F.struct(*df.columns)).alias("value"))
        rejected.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", hand_topic
        ).save()

    return taking_turns({"contract": by_contract, "hand": by_hand})


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    percents = [int(p) for p in (sys.argv[2] if len(sys.argv) > 2 else "10,100").split(",")]
    work = tempfile.mkdtemp(prefix="dlq-kafka-bench-")
    with KafkaBroker(Path(work) / "broker") as broker:
        spark = session("dlq-kafka-benchmark", connectors=True)
        print(f"{'rejected':>8} {'KafkaTopicSink':>15} {'Spark Kafka writer':>19} {'ratio':>7}")
        for percent in percents:
            seconds = measure(spark, broker.bootstrap_servers, rows, percent, work)
            ratio = seconds["hand"] / seconds["contract"]
            contract_s, hand_s = seconds["contract"], seconds["hand"]
            print(f"{percent:>7}% {contract_s:>13.2f} s {hand_s:>17.2f} s {ratio:>6.2f}x", flush=True)
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
