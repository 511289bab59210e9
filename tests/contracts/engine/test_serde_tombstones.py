"""Kafka tombstones (a null `value` on a compacted topic) and keys through `deserialize`."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, metrics_of
from contracts.errors import ContractError
from contracts.formats.wire import encode_frame

# The executor defined here runs on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "users-value"
MAJOR = "application.major.version"
KAFKA = "key binary, value binary, topic string, partition int, offset long"


def _record(fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": "User", "namespace": "com.acme", "fields": fields}


def _rename(name: str, old: str, new: str, mode: str) -> dict[str, Any]:
    expr = f"$merge([$sift($, function($v, $k) {{$k != '{old}'}}), {{'{new}': $.'{old}'}}])"
    return {"name": name, "kind": "TRANSFORM", "type": "JSONATA", "mode": mode, "expr": expr}


V1 = _record([{"name": "name", "type": "string"}, {"name": "ssn", "type": "string"}])
V2 = _record([{"name": "name", "type": "string"}, {"name": "socialSecurityNumber", "type": "string"}])


class NonEmptyName:
    """A Confluent-style per-record condition (so it runs in the Python pass) that cannot take a
    record without a name."""

    type = "NONEMPTY"

    def transform(self, ctx: Any, message: dict[str, Any]) -> bool:
        return len(message["name"]) > 0


READ_RULES = [
    # Both fail, with ERROR, on a record whose fields are null: a tombstone must not reach them.
    {"name": "named", "kind": "CONDITION", "type": "CEL", "mode": "READ", "expr": "size(message.name) > 0"},
    {"name": "nonEmpty", "kind": "CONDITION", "type": "NONEMPTY", "mode": "READ"},
]


@pytest.fixture
def registry() -> LocalRegistry:
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibilityGroup=MAJOR)
    upgrade = _rename("ssnUp", "ssn", "socialSecurityNumber", "UPGRADE")
    for schema, major, rule_set in [
        (V1, "1", {}),
        (V2, "2", {"migrationRules": [upgrade], "domainRules": READ_RULES}),
    ]:
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {MAJOR: major}},
            "ruleSet": rule_set,
        }
        registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return registry


@pytest.fixture
def sink(tmp_path: Path) -> LocalTopicSink:
    return LocalTopicSink(tmp_path / "dlq")


def frame(registry: LocalRegistry, version: int, record: dict[str, Any]) -> bytes:
    registered = registry.get_version(SUBJECT, version)
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(json.loads(registered.schema.schema_str)), record)
    return encode_frame(registered.schema_id, body.getvalue())


def topic(spark: Any, registry: LocalRegistry) -> Any:
    """Offsets 0 and 2 are records of versions 1 and 2, offsets 1 and 3 tombstones of their keys."""
    rows = [
        (b"ann", frame(registry, 1, {"name": "ann", "ssn": "111"}), "users", 0, 0),
        (b"ann", None, "users", 0, 1),
        (b"bob", frame(registry, 2, {"name": "bob", "socialSecurityNumber": "222"}), "users", 0, 2),
        (b"bob", None, "users", 0, 3),
    ]
    return spark.createDataFrame(rows, KAFKA)


def test_tombstones_pass_through_as_rows_without_a_record_and_skip_migrations_and_rules(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    reader = DataContract(registry, SUBJECT, dlq_sink=sink, executors=[NonEmptyName()])
    # Version 1's records are upgraded by Spark expressions, not in the decode pass.
    assert reader._compiler.writers()[registry.get_version(SUBJECT, 1).schema_id].native is not None
    decoded = reader.deserialize(topic(spark, registry))
    assert decoded.columns == ["name", "socialSecurityNumber", "key", "topic", "partition", "offset"]
    # A tombstone's record fields are null, so the output allows null even where the schema does not.
    assert all(field.nullable for field in decoded.schema.fields[:2])
    rows = sorted((tuple(row) for row in decoded.collect()), key=lambda row: row[5])
    assert [row[:3] for row in rows] == [
        ("ann", "111", b"ann"),
        (None, None, b"ann"),
        ("bob", "222", b"bob"),
        (None, None, b"bob"),
    ]
    assert sink.topics() == []
    # Tombstones are not evaluated, so no rule counts them.
    metrics = metrics_of(decoded)
    assert metrics is not None
    counts = metrics.get()
    assert {name: (c.passed, c.failed) for name, c in counts.items()} == {"named": (2, 0), "nonEmpty": (2, 0)}


def test_tombstones_can_be_dropped(spark: Any, registry: LocalRegistry, sink: LocalTopicSink) -> None:
    reader = DataContract(registry, SUBJECT, dlq_sink=sink, executors=[NonEmptyName()])
    decoded = reader.deserialize(topic(spark, registry), tombstones="drop")
    assert sorted(row["offset"] for row in decoded.collect()) == [0, 2]
    with pytest.raises(ValueError, match="keep or drop"):
        reader.deserialize(topic(spark, registry), tombstones="skip")


@pytest.mark.parametrize("rules", [[], READ_RULES[1:]], ids=["no rule", "python rule"])
def test_a_tombstone_of_a_single_version_passes_through(
    spark: Any, sink: LocalTopicSink, rules: list[dict[str, Any]]
) -> None:
    """Without any rule (no pass after decoding) and with a rule in Python, whose pass reads the
    tombstone's null record next to the others (a date field has a converter that needs a value)."""
    day = {"name": "day", "type": {"type": "int", "logicalType": "date"}}
    schema = _record([{"name": "name", "type": "string"}, day])
    registry = LocalRegistry()
    payload = {"schema": json.dumps(schema), "ruleSet": {"domainRules": rules}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    rows = [
        (b"k", frame(registry, 1, {"name": "ann", "day": 19000}), "users", 0, 0),
        (b"k", None, "users", 0, 1),
    ]
    contract = DataContract(registry, SUBJECT, dlq_sink=sink, executors=[NonEmptyName()])
    decoded = contract.deserialize(spark.createDataFrame(rows, KAFKA))
    got = sorted((row["offset"], row["name"], str(row["day"])) for row in decoded.collect())
    assert got == [(0, "ann", "2022-01-08"), (1, None, "None")]


def test_dlq_records_of_deserialize_carry_the_key_column_by_default(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    rows = [(b"k1", b"\x01not-confluent", "users", 0, 0)]
    reader = DataContract(registry, SUBJECT, dlq_sink=sink, executors=[NonEmptyName()])
    decoded = reader.deserialize(
        spark.createDataFrame(rows, KAFKA), on_decode_error="DLQ", decode_dlq_topic="bad"
    )
    assert decoded.count() == 0
    (record,) = sink.read("bad")
    assert (record.key, record.value) == (b"k1", b"\x01not-confluent")


def test_keys_are_left_out_of_dlq_records_on_request(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    rows = [(b"k1", b"\x01not-confluent", "users", 0, 0)]
    reader = DataContract(registry, SUBJECT, dlq_sink=sink, executors=[NonEmptyName()])
    df = spark.createDataFrame(rows, KAFKA)
    assert reader.deserialize(df, key_col=None, on_decode_error="DLQ", decode_dlq_topic="bad").count() == 0
    (record,) = sink.read("bad")
    assert record.key is None
    with pytest.raises(ContractError, match="no column 'k'"):
        reader.deserialize(df, key_col="k")
