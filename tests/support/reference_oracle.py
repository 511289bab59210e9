"""The reference oracle: confluent-kafka 2.16.1's Avro serdes run a contract on records, one outcome each.

The reference (docs/semantics.md intro) is used only as an oracle: its AvroSerializer/AvroDeserializer on
a mock registry, with its CEL, CEL_FIELD and JSONATA executors and its DlqAction (writing to a
capturing producer) registered on a dedicated `RuleRegistry`. None of it is part of the project.

Per record the outcome is one of

- ``("record", record)``: the record as written (WRITE, read back from the serialized bytes) or as
  read (READ);
- ``("error", rule, message)``: the serde raised; `rule` names the rule whose action raised (None
  when no rule did) and `message` is the cause's text;
- ``("dlq", rule, topic, key, value, headers)``: the DLQ action sent the record to `topic` (and the
  serde raised, as DLQ always does).
"""

from __future__ import annotations

import copy
import io
import json
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import fastavro

Headers = tuple[tuple[str, bytes | None], ...]
RecordOutcome = tuple[Literal["record"], dict[str, Any]]
ErrorOutcome = tuple[Literal["error"], str | None, str]
DlqOutcome = tuple[Literal["dlq"], str, str, bytes | None, bytes | None, Headers]
Outcome = RecordOutcome | ErrorOutcome | DlqOutcome

PLAIN_VERSION_ID = 1
"""On READ the records are written with a first version without rules, whose schema id is 1."""


@dataclass(frozen=True)
class Contract:
    """A subject's registered contract: Avro schema, metadata and domain rules (registry JSON)."""

    schema: Mapping[str, Any]
    domain_rules: Sequence[Mapping[str, Any]] = ()
    metadata: Mapping[str, Any] | None = None

    @property
    def schema_text(self) -> str:
        return json.dumps(self.schema)

    def payload(self) -> dict[str, Any]:
        """The registry's register payload for this contract."""
        payload: dict[str, Any] = {
            "schemaType": "AVRO",
            "schema": self.schema_text,
            "ruleSet": {"domainRules": [dict(rule) for rule in self.domain_rules]},
        }
        if self.metadata is not None:
            payload["metadata"] = dict(self.metadata)
        return payload

    def plain_payload(self) -> dict[str, Any]:
        """The same schema without metadata or rules: the version READ records are written with."""
        return {"schemaType": "AVRO", "schema": self.schema_text}

    def parsed(self) -> Any:
        return fastavro.parse_schema(json.loads(self.schema_text))


@dataclass(frozen=True)
class SourceRecord:
    """A record as it arrives: its value (an Avro-shaped dict), Kafka key and headers."""

    value: Mapping[str, Any]
    key: bytes | None = None
    headers: Headers = field(default_factory=tuple)


@dataclass
class CapturingProducer:
    """Stands in for the DLQ action's Kafka producer: keeps what it is asked to send."""

    sent: list[tuple[str, bytes | None, bytes | None, Headers]] = field(default_factory=list)

    def produce(
        self,
        topic: str,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        on_delivery: Any = None,
    ) -> None:
        self.sent.append((topic, key, value, tuple(headers or ())))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        return 0


def reference_outcomes(
    contract: Contract, mode: str, records: Sequence[SourceRecord], subject: str, topic: str
) -> list[Outcome]:
    """Run `contract`'s `mode` (WRITE or READ) rules on each record with the reference serdes."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient.new_client({"url": "mock://x"})
    producer = CapturingProducer()
    rules = rule_registry(producer)
    if mode == "WRITE":
        client.register_schema(subject, Schema.from_dict(contract.payload()))
        run = _writer(client, rules, contract, subject, topic)
    elif mode == "READ":
        plain = Schema.from_dict(contract.plain_payload())
        assert client.register_schema(subject, plain) == PLAIN_VERSION_ID
        client.register_schema(subject, Schema.from_dict(contract.payload()))
        run = _reader(client, rules, plain, subject, topic)
    else:
        raise ValueError(f"mode must be WRITE or READ, not {mode!r}")
    outcomes: list[Outcome] = []
    for record in records:
        producer.sent.clear()
        outcomes.append(_outcome(run, record, producer))
    return outcomes


def written_by_reference(
    contract: Contract, records: Sequence[SourceRecord], subject: str, topic: str
) -> list[bytes]:
    """The records as the reference serializer writes them with the contract's rule-less first
    version (schema id 1): the input of READ on both sides."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient.new_client({"url": "mock://x"})
    plain = Schema.from_dict(contract.plain_payload())
    assert client.register_schema(subject, plain) == PLAIN_VERSION_ID
    write = _plain_writer(client, plain, topic)
    return [write(record) for record in records]


def decode(contract: Contract, framed: bytes) -> dict[str, Any]:
    """The record in Confluent-framed bytes, read with the contract's schema."""
    return fastavro.schemaless_reader(io.BytesIO(framed[5:]), contract.parsed())


def rule_registry(producer: CapturingProducer) -> Any:
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor
    from confluent_kafka.schema_registry.rules.dlq.dlq_action import DlqAction
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor

    registry = RuleRegistry()
    for executor in (CelExecutor(), CelFieldExecutor(), JsonataExecutor()):
        registry.register_executor(executor)
    registry.register_action(DlqAction({"producer": producer}))
    return registry


def _writer(client: Any, rule_registry: Any, contract: Contract, subject: str, topic: str) -> Any:
    """record → ("record", written record), running WRITE rules of the subject's latest version."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.common.serde import set_original_key
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(
        client,
        None,
        conf={"auto.register.schemas": False, "use.latest.version": True},
        rule_registry=rule_registry,
    )

    def run(record: SourceRecord) -> RecordOutcome:
        # A key serializer of this client would have left the key for the value's DLQ record.
        set_original_key(record.key)
        ctx = SerializationContext(topic, MessageField.VALUE, list(record.headers))
        written = serializer(_in_schema_order(contract, record.value), ctx)
        assert written is not None
        return ("record", decode(contract, written))

    return run


def _reader(client: Any, rule_registry: Any, plain: Any, subject: str, topic: str) -> Any:
    """record → ("record", read record): written with the rule-less version, read with the latest."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.common.serde import set_original_key
    from confluent_kafka.serialization import MessageField, SerializationContext

    write = _plain_writer(client, plain, topic)
    deserializer = AvroDeserializer(client, conf={"use.latest.version": True}, rule_registry=rule_registry)

    def run(record: SourceRecord) -> RecordOutcome:
        data = write(record)
        ctx = SerializationContext(topic, MessageField.VALUE, list(record.headers))
        # A key deserializer of this client would have left the raw key bytes for the DLQ record.
        set_original_key(record.key)
        read = deserializer(data, ctx)
        assert isinstance(read, dict)
        return ("record", read)

    return run


def _plain_writer(client: Any, plain: Any, topic: str) -> Any:
    """record → its bytes, written by the reference serializer with the registered rule-less version."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(client, plain, conf={"auto.register.schemas": False})

    def write(record: SourceRecord) -> bytes:
        data = serializer(copy.deepcopy(dict(record.value)), SerializationContext(topic, MessageField.VALUE))
        assert data is not None
        return data

    return write


def _outcome(run: Any, record: SourceRecord, producer: CapturingProducer) -> Outcome:
    try:
        return run(record)
    except Exception as error:  # the reference raises SerializationError, RuleError, ValueError, …
        if producer.sent:
            (topic, key, value, headers) = producer.sent[-1]
            return ("dlq", _header(headers, "__rule.name"), topic, key, value, headers)
        cause = error.__cause__ if error.__cause__ is not None else error
        return ("error", _failed_rule(error.__traceback__), str(cause))


def _header(headers: Headers, name: str) -> str:
    value = dict(headers)[name]
    assert value is not None
    return value.decode("utf-8")


def _failed_rule(traceback: types.TracebackType | None) -> str | None:
    """The rule whose action raised: the `rule` of the serde's `_run_action` frame, if any."""
    rule = None
    while traceback is not None:
        frame = traceback.tb_frame
        if frame.f_code.co_name == "_run_action" and "rule" in frame.f_locals:
            rule = frame.f_locals["rule"].name
        traceback = traceback.tb_next
    return rule


def _in_schema_order(contract: Contract, value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of the record with its fields in schema order, as a DataFrame row has them
    (the WRITE-side DLQ value is the record's JSON, whose key order follows the dict's)."""
    names = [f["name"] for f in contract.schema["fields"]]
    return {name: copy.deepcopy(value[name]) for name in names if name in value}


def mock_client(url: str = "mock://migrations") -> Any:
    """A fresh mock registry whose `get_latest_with_metadata` answers the newest matching version, as
    a real registry does (the mock's own answers any match, in the order of a set hashed by guid)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    client = SchemaRegistryClient.new_client({"url": url})

    def latest_with_metadata(
        subject: str, metadata: Mapping[str, str], deleted: bool = False, fmt: str | None = None
    ) -> Any:
        for version in sorted(client.get_versions(subject), reverse=True):
            registered = client.get_version(subject, version)
            held = registered.schema.metadata
            properties = held.properties.properties if held is not None and held.properties else {}
            if metadata.items() <= properties.items():
                return registered
        raise SchemaRegistryError(404, 40403, "Schema Not Found")

    client.get_latest_with_metadata = latest_with_metadata
    return client


def written_with_version(
    client: Any, subject: str, version: int, records: Sequence[SourceRecord], topic: str
) -> list[bytes]:
    """The records as the reference serializer writes them with one registered version of `subject`."""
    return [_plain_writer(client, client.get_version(subject, version).schema, topic)(r) for r in records]


def written_by_reference_with(
    client: Any, records: Sequence[SourceRecord], topic: str, conf: Mapping[str, Any]
) -> list[tuple[bytes, Headers]]:
    """The records as the reference AvroSerializer with `conf` (e.g. its `schema.id.serializer`)
    writes them with the subject's latest version on `client`: each one's bytes and the headers it
    left (its record's own, then any schema id header the serializer added)."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(
        client, None, conf={"auto.register.schemas": False, "use.latest.version": True, **conf}
    )
    written = []
    for record in records:
        headers = list(record.headers)
        data = serializer(
            copy.deepcopy(dict(record.value)), SerializationContext(topic, MessageField.VALUE, headers)
        )
        assert data is not None
        written.append((data, tuple(headers)))
    return written


def read_by_reference(
    client: Any, frames: Sequence[bytes], records: Sequence[SourceRecord], topic: str, conf: Mapping[str, Any]
) -> list[Outcome]:
    """Each frame read by the reference AvroDeserializer with `conf` (e.g. use.latest.with.metadata)
    on `client`, with its record's key and headers: migrations, READ rules, DLQ; one outcome each."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.common.serde import set_original_key
    from confluent_kafka.serialization import MessageField, SerializationContext

    producer = CapturingProducer()
    deserializer = AvroDeserializer(client, conf=dict(conf), rule_registry=rule_registry(producer))

    def run(framed: tuple[bytes, SourceRecord]) -> RecordOutcome:
        data, record = framed
        ctx = SerializationContext(topic, MessageField.VALUE, list(record.headers))
        # A key deserializer of this client would have left the raw key bytes for the DLQ record.
        set_original_key(record.key)
        read = deserializer(data, ctx)
        assert isinstance(read, dict)
        return ("record", read)

    outcomes: list[Outcome] = []
    for framed in zip(frames, records, strict=True):
        producer.sent.clear()
        outcomes.append(_outcome(run, framed, producer))
    return outcomes


def add_dlq_outcomes(sink: Any, outcomes: dict[int, Outcome], row_header: str) -> None:
    """Our engine's DLQ records (in a LocalTopicSink), as outcomes by the row number each carries
    in `row_header`; a row both kept and in a DLQ fails the test."""
    for topic in sink.topics():
        for dlq in sink.read(topic):
            headers = dict(dlq.headers)
            rule = headers["__rule.name"]
            assert rule is not None
            row_number = int(headers[row_header] or b"")
            assert row_number not in outcomes, f"record {row_number} both kept and in a DLQ"
            outcomes[row_number] = ("dlq", rule.decode(), topic, dlq.key, dlq.value, dlq.headers)
