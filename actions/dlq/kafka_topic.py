"""KafkaTopicSink: the DLQ sink that produces dead-letter records to real Kafka topics (docs/semantics.md §7).

The sink is only configuration, pickled to the Spark tasks; each task's writer creates its own
confluent-kafka `Producer` in the executor process (`open`), idempotent with `acks=all`, and its
`commit` returns only once the broker has acknowledged every record, raising `DlqError` otherwise
(docs/semantics.md §9.4: an undelivered DLQ record fails the task, so the job — never a silent drop).

Delivery is at least once: a task attempt that fails after some of its records reached the broker,
or a task Spark re-executes, produces its records again, so DLQ consumers should expect duplicates.
No transactions: they would hide only a failed attempt's records, only from read_committed
consumers, at the price of a transactional id per task (and librdkafka's mock cluster, the broker
the tests run against, does not fence zombie producers, so fencing could not be tested).

confluent-kafka is the optional extra `kafka`; it is imported only when a sink is built or opened,
so this module imports without it.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from actions.dlq.sink import DlqError, DlqRecord, DlqWriter, validate_topic

ConfigValue = str | int | float | bool

_FORCED = {"enable.idempotence": "true", "acks": "all"}
_ACCEPTED = {"enable.idempotence": ("true", "True"), "acks": ("all", "-1")}
# These settings would contradict what the sink promises (one timeout, every record reported,
# no shared transactional id across tasks); the sink's own parameters cover the first.
_REJECTED = {
    "message.timeout.ms": "use delivery_timeout_s",
    "delivery.timeout.ms": "use delivery_timeout_s",
    "transactional.id": "the sink does not use transactions (delivery is at least once)",
    "delivery.report.only.error": "the sink needs every delivery report",
    "on_delivery": "the sink installs its own delivery callback",
    "dr_cb": "the sink installs its own delivery callback",
    "dr_msg_cb": "the sink installs its own delivery callback",
}
# Matched against a setting's name lower-cased with everything but letters and digits dropped
# ("sasl.oauthbearer.client.secret" -> "sasloauthbearerclientsecret"): passwords (and pasword,
# passwd, pwd), secrets (and secert), tokens (and tokn), credentials, private keys, JAAS configs,
# API keys and every sasl.oauthbearer.* setting. Erring towards hiding: a path shown as *** costs less.
_SECRET_SETTING = re.compile(
    r"pa?s+w|pass|pwd|secr|secer|scret|tok|cred|priv|jaas|bearer|keypem|sslkey|apikey"
)
_NOT_LETTERS = re.compile(r"[^a-z0-9]")
# librdkafka checks message timeouts about once a second, so the final reports may come a moment
# after `delivery_timeout_s`; commit waits that much longer before calling records undelivered.
_REPORT_GRACE_S = 1.5
_POLL_INTERVAL_S = 0.005
_INSTALL_HINT = "KafkaTopicSink needs confluent-kafka: pip install 'spark-data-contracts[kafka]'"
REDACTED = "***"


def is_secret(key: str) -> bool:
    """Whether a producer setting holds a credential that must never be shown (passwords, keys,
    tokens), misspelled names included."""
    return _SECRET_SETTING.search(_NOT_LETTERS.sub("", key.lower())) is not None


@dataclass(frozen=True, init=False, repr=False)
class KafkaTopicSink:
    """Produces DLQ records to Kafka; holds the producer configuration, never a producer.

    `config` is passed to confluent-kafka's `Producer` as given (bootstrap.servers, security.protocol,
    SASL/SSL settings, …) with `enable.idempotence=true` and `acks=all` forced. A record not
    acknowledged within `delivery_timeout_s` of being written fails the task with a `DlqError`.
    """

    config: Mapping[str, ConfigValue] = field(hash=False)
    delivery_timeout_s: float
    _secrets: tuple[str, ...] = field(compare=False)

    def __init__(self, config: Mapping[str, ConfigValue], *, delivery_timeout_s: float = 30.0) -> None:
        settings = dict(config)
        # A flag (true/false) is no secret, and redacting it would blank every "true" in an error.
        secrets = tuple(
            str(v)
            for k, v in settings.items()
            if is_secret(k) and str(v).lower() not in ("", "true", "false")
        )
        object.__setattr__(self, "_secrets", secrets)
        if not settings.get("bootstrap.servers") and not settings.get("metadata.broker.list"):
            raise DlqError("KafkaTopicSink needs 'bootstrap.servers' in its producer configuration")
        for key, why in _REJECTED.items():
            if key in settings:
                raise DlqError(f"KafkaTopicSink does not accept {key!r}: {why}")
        for key, accepted in _ACCEPTED.items():
            if key in settings and str(settings[key]) not in accepted:
                raise DlqError(
                    f"KafkaTopicSink requires {key}={_FORCED[key]} (docs/semantics.md §7), "
                    f"got {settings[key]!r}"
                )
        if not delivery_timeout_s > 0:
            raise DlqError(f"delivery_timeout_s must be positive, got {delivery_timeout_s!r}")
        _confluent_kafka()  # fail on the driver, before Spark runs, when the extra is missing
        settings.update(_FORCED)
        object.__setattr__(self, "config", settings)
        object.__setattr__(self, "delivery_timeout_s", float(delivery_timeout_s))

    def __repr__(self) -> str:
        shown = {key: REDACTED if is_secret(key) else value for key, value in self.config.items()}
        return f"KafkaTopicSink({shown!r}, delivery_timeout_s={self.delivery_timeout_s!r})"

    @property
    def bootstrap_servers(self) -> str:
        """The brokers the producers connect to first, for error messages."""
        return str(self.config.get("bootstrap.servers") or self.config.get("metadata.broker.list"))

    def open(self, writer_id: str) -> KafkaTopicWriter:
        """Create this task attempt's producer (in the executor process) and its writer."""
        return KafkaTopicWriter(self, writer_id)

    def redact(self, text: str) -> str:
        """`text` with every credential of the configuration replaced, for error messages."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text


class KafkaTopicWriter(DlqWriter):
    """One task attempt's producer: `write` produces, `commit` waits for every delivery report."""

    def __init__(self, sink: KafkaTopicSink, writer_id: str) -> None:
        self.sink = sink
        self.writer_id = writer_id
        self._failures: list[tuple[str, str]] = []
        self._pending: Counter[str] = Counter()  # records per topic still awaiting their report
        self._broker_error: str | None = None
        self._written = 0
        self._outcome: str | None = None
        self._topics: set[str] = set()  # topics already checked
        self._next_poll = 0.0
        self._kafka = _confluent_kafka()
        settings: dict[str, Any] = {**sink.config, **_FORCED}
        settings["message.timeout.ms"] = max(1, round(sink.delivery_timeout_s * 1000))
        settings["error_cb"] = self._error_callback(settings.get("error_cb"))
        try:
            self._producer: Any = self._kafka.Producer(settings)
        except (self._kafka.KafkaException, ValueError, TypeError) as e:
            # Not chained: librdkafka's text may quote a credential, and Spark prints whole chains.
            raise self._error(f"cannot create a Kafka producer: {e}") from None

    def write(self, record: DlqRecord) -> None:
        """Produce `record` (key, value, headers in order, timestamp) and serve pending delivery reports.

        librdkafka reads a timestamp of 0 as "now"; the router stamps records with the current time.
        """
        if self._outcome is not None:
            raise self._error(f"cannot write to a writer already {self._outcome}")
        if record.topic not in self._topics:
            try:
                self._topics.add(validate_topic(record.topic))
            except DlqError as e:
                raise self._error(e.reason, topic=record.topic) from e
        deadline: float | None = None
        while True:
            try:
                self._producer.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    headers=list(record.headers),
                    timestamp=record.timestamp_ms,
                    on_delivery=self._on_delivery,
                )
                break
            except BufferError:
                # The producer's local queue is full: wait for deliveries to make room.
                now = time.monotonic()
                deadline = now + self.sink.delivery_timeout_s if deadline is None else deadline
                if now >= deadline:
                    raise self._error(
                        f"producer queue still full after {self.sink.delivery_timeout_s:g}s",
                        topic=record.topic,
                    ) from None
                self._producer.poll(0.1)
            except self._kafka.KafkaException as e:
                raise self._error(f"cannot produce a DLQ record: {e}", topic=record.topic) from None
        self._written += 1
        self._pending[record.topic] += 1
        # Delivery reports are served every few milliseconds, not after each record (a DLQ storm
        # writes every row of a task here): a failure still fails a write soon after it is reported.
        now = time.monotonic()
        if now >= self._next_poll:
            self._next_poll = now + _POLL_INTERVAL_S
            self._producer.poll(0)
        if self._failures:
            raise self._failure(undelivered=0)

    def commit(self) -> None:
        """Wait for every delivery report; raise DlqError naming the topic and the Kafka error if a
        record failed or is still unacknowledged after the delivery timeout."""
        if self._outcome == "committed":
            return
        if self._outcome == "aborted":
            raise self._error("cannot commit a writer already aborted")
        undelivered = self._producer.flush(self.sink.delivery_timeout_s + _REPORT_GRACE_S)
        if undelivered or self._failures:
            error = self._failure(undelivered)  # before the purge reports its own errors
            self.abort()
            raise error
        self._outcome = "committed"
        self._close()

    def abort(self) -> None:
        """Purge every record not yet acknowledged; ones already sent may still reach the topic."""
        if self._outcome is not None:
            return
        self._outcome = "aborted"
        self._producer.purge(in_queue=True, in_flight=True, blocking=True)
        self._producer.poll(0)  # serve the purged records' reports
        self._close()

    def _close(self) -> None:
        # Release the producer's threads and sockets now, as Spark reuses the worker process
        # (`close` is newer than the oldest supported confluent-kafka; without it, GC releases them).
        close = getattr(self._producer, "close", None)
        if close is not None:
            close()

    def _on_delivery(self, error: Any, message: Any) -> None:
        topic = message.topic() or "?"
        self._pending[topic] -= 1
        if error is not None:
            self._failures.append((topic, str(error)))

    def _error_callback(self, chained: Callable[[Any], None] | None) -> Callable[[Any], None]:
        def on_error(error: Any) -> None:
            self._broker_error = str(error)
            if chained is not None:
                chained(error)

        return on_error

    def _failure(self, undelivered: int) -> DlqError:
        """The error for records that failed or are still unacknowledged: topics, counts, Kafka's words."""
        failed = len(self._failures)
        parts = []
        if failed:
            topics = sorted({topic for topic, _ in self._failures})
            parts.append(
                f"{failed} of {self._written} DLQ records failed to reach {', '.join(topics)}:"
                f" {self._failures[0][1]}"
            )
        waiting = sorted(topic for topic, count in self._pending.items() if count > 0)
        if undelivered:
            parts.append(
                f"{undelivered} of {self._written} DLQ records to {', '.join(waiting)} still"
                f" unacknowledged after {self.sink.delivery_timeout_s + _REPORT_GRACE_S:g}s"
            )
        if self._broker_error is not None:
            parts.append(f"last broker error: {self._broker_error}")
        parts.append(f"bootstrap.servers {self.sink.bootstrap_servers}")
        topic = self._failures[0][0] if self._failures else (waiting[0] if waiting else None)
        return self._error("; ".join(parts), topic=topic)

    def _error(self, message: str, topic: str | None = None) -> DlqError:
        return DlqError(self.sink.redact(message), topic=topic, writer_id=self.writer_id)


def _confluent_kafka() -> ModuleType:
    """The confluent_kafka module, or a DlqError saying how to install the `kafka` extra."""
    try:
        import confluent_kafka
    except ImportError as e:
        raise DlqError(_INSTALL_HINT) from e
    return confluent_kafka
