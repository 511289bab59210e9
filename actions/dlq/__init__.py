"""Dead-letter delivery: the record and headers a DLQ action sends, the sink protocol and the two
sinks that ship with the project, a local topic directory and a Kafka topic (docs/semantics.md §7)."""

from __future__ import annotations

from actions.dlq.kafka_topic import KafkaTopicSink
from actions.dlq.local_topic import LocalTopicSink
from actions.dlq.sink import DlqError, DlqRecord, DlqSink, DlqWriter, RunScopedSink

__all__ = [
    "DlqError",
    "DlqRecord",
    "DlqSink",
    "DlqWriter",
    "KafkaTopicSink",
    "LocalTopicSink",
    "RunScopedSink",
]
