"""remap_schema_ids: frames moved between registries whose ids collide (issue 6 §5, docs/semantics.md §8)."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from pyspark import cloudpickle
from registry_server import running_registry

from contracts import DataContract, LocalRegistry, Schema, SchemaRegistryClient, remap_schema_ids
from contracts.errors import SerializationError
from contracts.formats.wire import SubjectNameStrategy, decode_frame, encode_frame
from contracts.model import RegisteredSchema, SchemaReference
from contracts.remap import _Remapper

# The counting registry below runs on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROWS = "key binary, value binary, topic string, partition int, offset long, note string"


def _record(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "com.acme", "fields": fields}


ORDER_V1 = _record("Order", [{"name": "id", "type": "long"}, {"name": "total", "type": "double"}])
ORDER_V2 = _record("Order", [*ORDER_V1["fields"], {"name": "currency", "type": "string", "default": "EUR"}])
ORDER_KEY = _record("OrderKey", [{"name": "id", "type": "long"}])
PAYMENT = _record("Payment", [{"name": "amount", "type": "string"}])
REFUND = _record("Refund", [{"name": "reason", "type": "string"}])
ADDRESS = _record("Address", [{"name": "city", "type": "string"}])
CUSTOMER = _record(
    "Customer", [{"name": "name", "type": "string"}, {"name": "home", "type": "com.acme.Address"}]
)

V2_METADATA = {"properties": {"application.major.version": "1", "owner": "team-a"}}
V2_RULES = {
    "domainRules": [
        {"name": "positive", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "message.total > 0"}
    ]
}

RECORDS = {
    1: {"id": 7, "total": 9.5},
    2: {"id": 8, "total": 12.0, "currency": "USD"},
    3: {"id": 7},
}


class CountingRegistry(LocalRegistry):
    """A LocalRegistry directory that appends one line per call to a log file, whichever process
    calls: the count of registrations and lookups across every Spark worker."""

    def __init__(self, path: Path, log: Path) -> None:
        super().__init__(path, create=True)
        self.log = log

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "log": self.log}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.log = state["log"]

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        self._note("register", subject)
        return super().register_schema(subject, schema, normalize)

    def get_schema(self, schema_id: int) -> Schema:
        self._note("get_schema", str(schema_id))
        return super().get_schema(schema_id)

    def calls(self, kind: str) -> list[tuple[int, str]]:
        """(process id, argument) of every call of this kind so far."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [(int(pid), arg) for pid, k, arg in (line.split(" ", 2) for line in lines) if k == kind]

    def _note(self, kind: str, arg: str) -> None:
        with open(self.log, "a") as handle:
            handle.write(f"{os.getpid()} {kind} {arg}\n")


def _schema(avro: dict[str, Any], **payload: Any) -> Schema:
    return Schema.from_dict({"schema": json.dumps(avro), **payload})


@pytest.fixture
def source(tmp_path: Path) -> CountingRegistry:
    """Ids 1, 2: orders-value versions 1 and 2 (with metadata and rules); id 3: orders-key."""
    registry = CountingRegistry(tmp_path / "source", tmp_path / "source.log")
    assert registry.register_schema("orders-value", _schema(ORDER_V1)) == 1
    assert (
        registry.register_schema("orders-value", _schema(ORDER_V2, metadata=V2_METADATA, ruleSet=V2_RULES))
        == 2
    )
    assert registry.register_schema("orders-key", _schema(ORDER_KEY)) == 3
    registry.log.unlink()
    return registry


@pytest.fixture
def destination(tmp_path: Path) -> CountingRegistry:
    """Ids 1 and 2 taken by other schemas: the source's ids mean something else here."""
    registry = CountingRegistry(tmp_path / "destination", tmp_path / "destination.log")
    assert registry.register_schema("payments-value", _schema(PAYMENT)) == 1
    assert registry.register_schema("refunds-value", _schema(REFUND)) == 2
    registry.log.unlink()
    return registry


def frame(registry: LocalRegistry, schema_id: int, record: dict[str, Any]) -> bytes:
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(json.loads(registry.get_schema(schema_id).schema_str)), record)
    return encode_frame(schema_id, body.getvalue())


def orders(spark: Any, source: LocalRegistry, copies: int = 1, partitions: int = 2) -> Any:
    """Kafka-shaped rows: framed keys (id 3) and values (ids 1 and 2), a tombstone, a null key."""
    rows = []
    for n in range(copies):
        rows += [
            (frame(source, 3, RECORDS[3]), frame(source, 1, RECORDS[1]), "orders", 0, 4 * n, "a"),
            (frame(source, 3, RECORDS[3]), frame(source, 2, RECORDS[2]), "orders", 1, 4 * n + 1, "b"),
            (None, frame(source, 2, RECORDS[2]), "orders", 1, 4 * n + 2, None),
            (frame(source, 3, RECORDS[3]), None, "orders", 0, 4 * n + 3, "tombstone"),
        ]
    return spark.createDataFrame(rows, ROWS).repartition(partitions)


def test_frames_point_at_the_destination_with_bodies_untouched(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    df = orders(spark, source)
    remapped = remap_schema_ids(df, source, destination)
    assert remapped.schema == df.schema
    before = sorted(df.collect(), key=lambda row: row.offset)
    after = sorted(remapped.collect(), key=lambda row: row.offset)

    new_ids = {
        source_id: destination.lookup_schema(subject, source.get_schema(source_id)).schema_id
        for source_id, subject in ((1, "orders-value"), (2, "orders-value"), (3, "orders-key"))
    }
    assert sorted(new_ids.values()) == [3, 4, 5]  # after the destination's own 1 and 2
    assert len(after) == len(before) == 4
    for old, new in zip(before, after, strict=True):
        assert (new.topic, new.partition, new.offset, new.note) == (
            old.topic,
            old.partition,
            old.offset,
            old.note,
        )
        for column in ("key", "value"):
            if old[column] is None:
                assert new[column] is None
                continue
            old_id, old_body = decode_frame(old[column])
            new_id, new_body = decode_frame(new[column])
            assert new_id == new_ids[old_id]
            assert new_body == old_body
            schema = parse_schema(json.loads(destination.get_schema(new_id).schema_str))
            assert schemaless_reader(io.BytesIO(new_body), schema, None) == schemaless_reader(
                io.BytesIO(old_body), schema, None
            )


def version_of(registry: Any, schema: dict[str, Any]) -> int:
    """The destination version holding `schema`: versions follow the order in which the tasks met
    the source ids, which differs from run to run."""
    (version,) = [
        v
        for v in registry.get_versions("orders-value")
        if json.loads(registry.get_version("orders-value", v).schema.schema_str) == schema
    ]
    return version


def test_the_destination_deserializes_every_key_and_value_to_the_original_records(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    remapped = remap_schema_ids(orders(spark, source), source, destination)
    remapped.collect()  # lazy: the destination holds the schemas once the remap has run

    values = DataContract(destination, "orders-value", version=version_of(destination, ORDER_V2)).deserialize(
        remapped.where("value IS NOT NULL").drop("key")
    )
    got = sorted((row.offset, row.id, row.total, row.currency) for row in values.collect())
    # Version 1's record read as version 2 takes the new field's default.
    assert got == [(0, 7, 9.5, "EUR"), (1, 8, 12.0, "USD"), (2, 8, 12.0, "USD")]

    keys = DataContract(destination, "orders-key").deserialize(
        remapped.where("key IS NOT NULL").drop("value").withColumnRenamed("key", "value")
    )
    assert sorted((row.offset, row.id) for row in keys.collect()) == [(0, 7), (1, 7), (3, 7)]


def test_schema_metadata_and_rules_are_registered_as_in_the_source(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    # One partition, so one batch holds every id and the source's version order is kept.
    remap_schema_ids(orders(spark, source, partitions=1), source, destination).collect()
    first, second = (destination.get_version("orders-value", v).schema for v in (1, 2))
    assert (first.schema_str, second.schema_str) == (
        source.get_schema(1).schema_str,
        source.get_schema(2).schema_str,
    )
    assert first.metadata is None and first.rule_set is None
    copied, original = second, source.get_schema(2)
    assert copied.metadata == original.metadata
    assert copied.rule_set == original.rule_set
    assert copied.rule_set is not None and copied.rule_set.domain_rules[0].name == "positive"
    # The ids the destination had before still mean what they meant.
    assert json.loads(destination.get_schema(1).schema_str)["name"] == "Payment"
    assert json.loads(destination.get_schema(2).schema_str)["name"] == "Refund"


def test_each_distinct_id_is_registered_once_across_tasks_and_fetched_once_per_worker(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    remap_schema_ids(orders(spark, source, copies=50, partitions=4), source, destination).collect()
    registered = sorted(subject for _, subject in destination.calls("register"))
    assert registered == ["orders-key", "orders-value", "orders-value"]
    fetched = [call for call in source.calls("get_schema") if call[0] != os.getpid()]  # not the test's frames
    assert {int(schema_id) for _, schema_id in fetched} == {1, 2, 3}
    assert len(fetched) == len(set(fetched)), "a worker fetched the same source id twice"


def test_remapping_again_reuses_the_registered_schemas(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    df = orders(spark, source)
    first = sorted(remap_schema_ids(df, source, destination).collect(), key=lambda row: row.offset)
    second = sorted(remap_schema_ids(df, source, destination).collect(), key=lambda row: row.offset)
    assert first == second
    assert len(destination.calls("register")) == 3
    assert destination.get_versions("orders-value") == [1, 2]
    assert destination.get_versions("orders-key") == [1]


class RendezvousRegistry(LocalRegistry):
    """A LocalRegistry directory whose first lookup in each process waits (up to 3 s) until two
    processes have arrived, so two Spark tasks then register at the same moment."""

    def __init__(self, path: Path, arrivals: Path) -> None:
        super().__init__(path, create=True)
        self.arrivals = arrivals

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "arrivals": self.arrivals}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.arrivals = state["arrivals"]

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        mine = self.arrivals / str(os.getpid())
        if not mine.exists():
            mine.touch()
            deadline = time.monotonic() + 3
            while len(list(self.arrivals.iterdir())) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().lookup_schema(subject, schema)


def test_two_tasks_registering_different_schemas_at_once_get_distinct_ids(
    spark: Any, source: CountingRegistry, tmp_path: Path
) -> None:
    # LocalRegistry locks only threads: two processes registering at once in one directory hand
    # both schemas the same id (or write one version file twice), so remap holds a file lock.
    arrivals = tmp_path / "arrivals"
    arrivals.mkdir()
    target = RendezvousRegistry(tmp_path / "target", arrivals)
    rows = [(None, frame(source, 1 + p, RECORDS[1 + p]), "orders", p, 0, None) for p in range(2)]
    df = spark.createDataFrame(rows, ROWS).repartitionByRange(2, "partition")
    remapped = remap_schema_ids(df, source, target, key_col=None).collect()

    assert len(list(arrivals.iterdir())) == 2, "the two tasks did not run in two processes"
    fresh = LocalRegistry(tmp_path / "target")  # reads the files anew: a duplicate id fails here
    new_ids = {decode_frame(row.value)[0]: 1 + row.partition for row in remapped}
    assert len(new_ids) == 2
    for new_id, source_id in new_ids.items():
        assert fresh.get_schema(new_id).schema_str == source.get_schema(source_id).schema_str
    assert fresh.get_versions("orders-value") == [1, 2]


@pytest.mark.parametrize(
    ("strategy", "topic", "value_subject", "key_subject"),
    [
        (SubjectNameStrategy.RECORD_NAME, None, "com.acme.Order", "com.acme.OrderKey"),
        (
            "TopicRecordNameStrategy",
            "dc2.orders",
            "dc2.orders-com.acme.Order",
            "dc2.orders-com.acme.OrderKey",
        ),
        (SubjectNameStrategy.TOPIC_NAME, "dc2.orders", "dc2.orders-value", "dc2.orders-key"),
        (
            lambda topic, is_key, schema: f"mirror.{topic}.{'k' if is_key else 'v'}",
            None,
            "mirror.orders.v",
            "mirror.orders.k",
        ),
    ],
)
def test_the_subject_strategy_names_the_destination_subjects(
    spark: Any,
    source: CountingRegistry,
    destination: CountingRegistry,
    strategy: Any,
    topic: str | None,
    value_subject: str,
    key_subject: str,
) -> None:
    remapped = remap_schema_ids(
        orders(spark, source), source, destination, topic=topic, subject_strategy=strategy
    )
    remapped.collect()
    assert sorted(destination.get_subjects()) == sorted(
        ["payments-value", "refunds-value", value_subject, key_subject]
    )
    assert destination.get_versions(value_subject) == [1, 2]
    values = DataContract(destination, value_subject).deserialize(
        remapped.where("value IS NOT NULL").drop("key")
    )
    assert sorted(row.id for row in values.collect()) == [7, 8, 8]


def test_references_are_registered_first_and_point_at_their_destination_versions(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    source.register_schema("address", _schema(ADDRESS))
    reference = SchemaReference("com.acme.Address", "address", 1)
    customer_id = source.register_schema(
        "customers-value", Schema(json.dumps(CUSTOMER), references=(reference,))
    )
    # In the destination, subject "address" already has a version 1 that is another schema.
    destination.set_config("address", compatibility="NONE")
    destination.register_schema("address", _schema(_record("Address", [{"name": "zip", "type": "int"}])))

    record = {"name": "ann", "home": {"city": "Lyon"}}
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(CUSTOMER, named_schemas=_named(ADDRESS)), record)
    df = spark.createDataFrame(
        [(None, encode_frame(customer_id, body.getvalue()), "customers", 0, 0, None)], ROWS
    )
    remapped = remap_schema_ids(df, source, destination)
    (row,) = remapped.collect()

    assert destination.get_versions("address") == [1, 2]
    copied = destination.get_latest_version("customers-value")
    assert copied.schema_id == decode_frame(row.value)[0]
    assert copied.schema.references == (SchemaReference("com.acme.Address", "address", 2),)
    (decoded,) = DataContract(destination, "customers-value").deserialize(remapped).collect()
    assert (decoded.name, decoded.home.city) == ("ann", "Lyon")


def _named(*schemas: dict[str, Any]) -> dict[str, Any]:
    named: dict[str, Any] = {}
    for schema in schemas:
        parse_schema(schema, named_schemas=named)
    return named


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"\x02\x00\x00\x00\x01abc", "unknown magic byte 2"),
        (b"\x01\x00\x00\x00\x01abc", "shorter than the 17-byte Confluent header of magic byte 1"),
        (b"\x01" + bytes(16) + b"\x02", "names its schema by GUID (magic byte 1): remap_schema_ids rewrites"),
        (b"\x00\x00\x00", "shorter than the 5-byte"),
        (b"\x00\x00\x00\x03\xe7\x02", "unknown schema id 999"),
    ],
)
def test_a_frame_that_cannot_be_remapped_fails_the_job_naming_its_offset(
    spark: Any, source: CountingRegistry, destination: CountingRegistry, bad: bytes, message: str
) -> None:
    good = frame(source, 1, RECORDS[1])
    df = spark.createDataFrame(
        [(None, good, "orders", 3, 16, None), (frame(source, 3, RECORDS[3]), bad, "orders", 3, 17, None)],
        ROWS,
    ).coalesce(1)
    with pytest.raises(Exception, match="partition 3, offset 17") as caught:
        remap_schema_ids(df, source, destination).collect()
    text = str(caught.value)
    assert "SerializationError" in text
    assert "cannot remap the value at topic orders" in text
    assert message in text


def test_a_corrupt_key_is_named_as_the_key(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    df = spark.createDataFrame([(b"plain-key", frame(source, 1, RECORDS[1]), "orders", 0, 5, None)], ROWS)
    with pytest.raises(Exception, match="cannot remap the key at topic orders, partition 0, offset 5"):
        remap_schema_ids(df, source, destination).collect()
    remapped = remap_schema_ids(df, source, destination, key_col=None).collect()
    assert remapped[0].key == b"plain-key"


def test_a_schema_the_destination_refuses_fails_the_job_naming_id_and_subject(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    # Under BACKWARD compatibility an Order cannot follow a Payment in one subject (409).
    destination.register_schema("orders-value", _schema(PAYMENT))
    df = spark.createDataFrame([(None, frame(source, 1, RECORDS[1]), "orders", 0, 0, None)], ROWS)
    with pytest.raises(
        Exception, match="cannot register source schema id 1 under destination subject 'orders-value'"
    ):
        remap_schema_ids(df, source, destination).collect()
    assert destination.get_versions("orders-value") == [1]


def test_arguments_are_checked_before_spark_runs(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    df = spark.createDataFrame([(b"k", "v", 0)], "key binary, value string, offset long")
    with pytest.raises(ValueError, match="column 'value' must be binary"):
        remap_schema_ids(df, source, destination, topic="t")
    with pytest.raises(ValueError, match="column 'payload' is not in the DataFrame"):
        remap_schema_ids(df, source, destination, topic="t", value_col="payload")
    with pytest.raises(ValueError, match="TopicNameStrategy needs a topic"):
        remap_schema_ids(df, source, destination, value_col=None)
    with pytest.raises(ValueError, match="in-memory"):
        remap_schema_ids(df, source, LocalRegistry(), topic="t", value_col=None)
    with pytest.raises(ValueError, match="key_col and value_col are both 'key'"):
        remap_schema_ids(df, source, destination, topic="t", value_col="key")
    with pytest.raises(ValueError, match="unknown subject name strategy 'TopicStrategy'"):
        remap_schema_ids(df, source, destination, topic="t", value_col=None, subject_strategy="TopicStrategy")


def test_remapping_through_the_http_client(
    spark: Any, source: CountingRegistry, destination: CountingRegistry
) -> None:
    with running_registry(destination) as server:
        client = SchemaRegistryClient(server.url)
        remapped = remap_schema_ids(orders(spark, source, copies=20, partitions=3), source, client)
        remapped.collect()
        values = DataContract(client, "orders-value", version=version_of(client, ORDER_V2)).deserialize(
            remapped.where("value IS NOT NULL").drop("key")
        )
        assert sorted({(row.id, row.total, row.currency) for row in values.collect()}) == [
            (7, 9.5, "EUR"),
            (8, 12.0, "USD"),
        ]
        key_ids = {decode_frame(row.key)[0] for row in remapped.collect() if row.key is not None}
        # 60 values and 60 keys: requests do not grow with rows. Two workers may each miss a
        # lookup and register the same schema at once; the registry answers both with one id.
        assert 2 <= server.count("POST", "/subjects/orders-value/versions") <= 2 * 2
        assert 1 <= server.count("POST", "/subjects/orders-key/versions") <= 2
    assert destination.get_versions("orders-value") == [1, 2]
    assert key_ids == {destination.get_latest_version("orders-key").schema_id}


def test_the_pass_reads_sliced_and_large_binary_columns() -> None:
    source = LocalRegistry()
    source.register_schema("t-value", _schema(ORDER_V1))
    remapper = _Remapper(
        source, _Fixed(41), SubjectNameStrategy.TOPIC_NAME, "t", None, (("value", False),), "x"
    )
    frames = [b"\x00\x00\x00\x00\x01a", None, b"\x00\x00\x00\x00\x01bcd", b"\x00\x00\x00\x00\x01"]
    for kind in (pa.binary(), pa.large_binary()):
        batch = pa.RecordBatch.from_pydict({"value": pa.array(frames, type=kind)}).slice(1)
        (out,) = remapper(iter([batch]))
        assert out.schema == batch.schema
        assert out.column("value").to_pylist() == [None, b"\x00\x00\x00\x00\x29bcd", b"\x00\x00\x00\x00\x29"]
        assert batch.column("value").to_pylist() == frames[1:]  # the input is left alone


class _Fixed(LocalRegistry):
    """A destination that holds every schema at one id, for the pass alone (no Spark)."""

    def __init__(self, schema_id: int) -> None:
        super().__init__()
        self.schema_id = schema_id

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        return RegisteredSchema(self.schema_id, schema, subject, 1)


def test_a_serialization_error_is_what_the_pass_raises() -> None:
    source = LocalRegistry()
    remapper = _Remapper(
        source, _Fixed(1), SubjectNameStrategy.TOPIC_NAME, "t", None, (("value", False),), "y"
    )
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"\x00\x00\x00\x00\x07x"]), "offset": [9]})
    with pytest.raises(SerializationError, match="cannot remap the value at offset 9: unknown schema id 7"):
        list(remapper(iter([batch])))


def _with_headers(values: list[bytes | None], headers: list[Any]) -> pa.RecordBatch:
    """Values and Kafka headers (list<struct<key, value>>), as Spark's Kafka source hands them over."""
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array(values, type=pa.binary()),
            "value": pa.array(values, type=pa.binary()),
            "headers": pa.array(headers, type=pa.list_(header)),
        }
    )


def test_schema_ids_in_headers_are_refused_not_rewritten() -> None:
    """A bare body after a schema id header has no id to rewrite: the row is refused when the
    header is its column's (`__key_schema_id` for keys), not the other column's, and a header
    without a value leaves the prefix in charge."""
    source = LocalRegistry()
    source.register_schema("t-value", _schema(ORDER_V1))
    framed = b"\x00\x00\x00\x00\x01a"
    named = b"\x00\x00\x00\x00\x01"

    def remapped(column: str, headers: list[dict[str, Any]]) -> list[Any]:
        columns = ((column, column == "key"),)
        remapper = _Remapper(source, _Fixed(41), TOPIC_NAME, "t", None, columns, "z", "headers")
        (out,) = remapper(iter([_with_headers([framed], [headers])]))
        return out.column(column).to_pylist()

    for column, own, other in (("value", "__value_schema_id", "__key_schema_id"), ("key", *KEY_VALUE)):
        assert remapped(column, [{"key": other, "value": named}, {"key": own, "value": None}]) == [
            b"\x00\x00\x00\x00\x29a"
        ]
        with pytest.raises(SerializationError, match=f"its schema id is in the {own} header"):
            remapped(column, [{"key": own, "value": named}])


TOPIC_NAME = SubjectNameStrategy.TOPIC_NAME
KEY_VALUE = ("__key_schema_id", "__value_schema_id")
