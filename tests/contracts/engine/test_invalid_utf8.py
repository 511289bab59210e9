"""Strings that are not valid UTF-8 (Spark holds any bytes in a string): a row-level failure, never
a whole job failing without the row or rule named, never a row dropped."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import SerializationError
from contracts.formats.avro import arrow_to_records, parse_schema, read_records

# The executor defined here runs on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "people-value"
PERSON = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
# Row 2's name is the bytes C3 28: a lead byte without its continuation, as CAST(X'C328' AS STRING) gives.
PEOPLE = """
    SELECT * FROM VALUES
        (1L, 'ann', array('a')),
        (2L, CAST(X'C328' AS STRING), array('b')),
        (3L, 'cy', array('c', CAST(X'FF' AS STRING)))
    AS people(id, name, tags)
"""


class NonEmptyName:
    """A Confluent-style per-record condition, so the rule runs in the Python pass."""

    type = "NONEMPTY"

    def transform(self, ctx: Any, message: dict[str, Any]) -> bool:
        return bool(message["name"])


def contract(sink: LocalTopicSink, rule: dict[str, Any], **options: Any) -> DataContract:
    registry = LocalRegistry()
    payload = {"schema": json.dumps(PERSON), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return DataContract(registry, SUBJECT, dlq_sink=sink, **options)


def python_rule(on_failure: str) -> dict[str, Any]:
    return {
        "name": "nonEmpty",
        "kind": "CONDITION",
        "type": "NONEMPTY",
        "mode": "WRITE",
        "onFailure": on_failure,
        "params": {"dlq.topic": "bad-people"},
    }


@pytest.fixture
def sink(tmp_path: Path) -> LocalTopicSink:
    return LocalTopicSink(tmp_path / "dlq")


def test_a_python_rule_fails_a_row_holding_invalid_utf8_and_its_dlq_action_routes_it(
    spark: Any, sink: LocalTopicSink
) -> None:
    people = contract(sink, python_rule("DLQ"), executors=[NonEmptyName()])
    assert "python" in people.explain()
    assert sorted(row.id for row in people.write(spark.sql(PEOPLE)).collect()) == [1]
    records = {json.loads(record.value)["id"]: record for record in sink.read("bad-people")}
    assert sorted(records) == [2, 3]
    reasons = {i: dict(record.headers)["__rule.exception"].decode() for i, record in records.items()}
    assert "field 'name'" in reasons[2] and "not valid UTF-8" in reasons[2]
    assert "field 'tags'" in reasons[3]
    # The JSON value holds each byte that is not UTF-8 as U+FFFD, so every JSON reader takes it.
    assert json.loads(records[2].value) == {"id": 2, "name": "\ufffd(", "tags": ["b"]}


def test_with_error_the_job_fails_naming_the_rule_and_the_field(spark: Any, sink: LocalTopicSink) -> None:
    people = contract(sink, python_rule("ERROR"), executors=[NonEmptyName()])
    with pytest.raises(Exception, match="nonEmpty") as caught:
        people.write(spark.sql(PEOPLE)).collect()
    assert "field 'name'" in str(caught.value) or "field 'tags'" in str(caught.value)


def test_with_none_the_row_goes_on_with_its_bytes_unchanged(spark: Any, sink: LocalTopicSink) -> None:
    people = contract(sink, python_rule("NONE"), executors=[NonEmptyName()])
    written = people.write(spark.sql(PEOPLE)).selectExpr("id", "hex(CAST(name AS BINARY)) AS name")
    assert sorted(tuple(row) for row in written.collect()) == [(1, "616E6E"), (2, "C328"), (3, "6379")]


def test_a_native_rule_routes_such_a_row_with_its_exact_reason(spark: Any, sink: LocalTopicSink) -> None:
    """Spark evaluates the native rule on the bytes; the Python twin that recovers exact reasons
    cannot read the row, which keeps the native reason."""
    rule = {
        "name": "small",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.id < 2",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-people"},
    }
    people = contract(sink, rule)
    assert sorted(row.id for row in people.write(spark.sql(PEOPLE)).collect()) == [1]
    values = sorted((json.loads(record.value) for record in sink.read("bad-people")), key=lambda v: v["id"])
    assert values == [
        {"id": 2, "name": "\ufffd(", "tags": ["b"]},
        {"id": 3, "name": "cy", "tags": ["c", "\ufffd"]},
    ]
    reasons = {dict(record.headers)["__rule.exception"] for record in sink.read("bad-people")}
    assert reasons == {b"Rule expr failed: message.id < 2"}


def test_serialize_fails_naming_the_row_and_the_field(spark: Any, sink: LocalTopicSink) -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema(json.dumps(PERSON)))
    people = DataContract(registry, SUBJECT, dlq_sink=sink)
    df = spark.sql(PEOPLE).where("id = 2").selectExpr("'k2' AS key", "*")
    with pytest.raises(Exception, match="field 'name'") as caught:
        people.serialize(df).collect()
    assert "key k2" in str(caught.value)


def _invalid(*values: bytes | None) -> pa.Array:
    """A string array holding these bytes as they are, as Spark hands them over."""
    offsets, data = [0], b""
    for value in values:
        data += value or b""
        offsets.append(len(data))
    validity = pa.array([v is not None for v in values]).buffers()[1] if None in values else None
    return pa.Array.from_buffers(
        pa.string(), len(values), [validity, pa.array(offsets, pa.int32()).buffers()[1], pa.py_buffer(data)]
    )


def test_read_records_replaces_bytes_that_are_not_utf8_and_names_the_rows() -> None:
    schema = parse_schema(
        json.dumps(
            {
                "type": "record",
                "name": "R",
                "fields": [
                    {"name": "s", "type": ["null", "string"]},
                    {"name": "m", "type": {"type": "map", "values": "string"}},
                ],
            }
        )
    )
    maps = pa.MapArray.from_arrays(
        pa.array([0, 1, 2, 2], pa.int32()), pa.array(["k", "j"]), _invalid(b"v", b"\xe9")
    )
    batch = pa.RecordBatch.from_arrays([_invalid(b"ok", None, b"\xc3("), maps], names=["s", "m"])
    read = read_records(batch, schema)
    assert read.records == [
        {"s": "ok", "m": {"k": "v"}},
        {"s": None, "m": {"j": "\ufffd"}},
        {"s": "\ufffd(", "m": {}},
    ]
    assert sorted(read.unreadable) == [1, 2]
    assert "field 'm'" in read.unreadable[1] and "field 's'" in read.unreadable[2]
    with pytest.raises(SerializationError, match="row 1: field 'm' holds a string that is not valid UTF-8"):
        arrow_to_records(batch, schema)


class CopyNick:
    """A Confluent-style per-record UPGRADE transform, so the migration runs in Python."""

    type = "COPYNICK"

    def transform(self, ctx: Any, message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "nick": message["name"]}


@pytest.mark.parametrize("on_failure", ["DLQ", "NONE"])
def test_a_python_migration_fails_such_a_row(spark: Any, sink: LocalTopicSink, on_failure: str) -> None:
    """DLQ routes the row; with NONE it would go on with bytes a record cannot hold, so the job
    fails naming the row and the field."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema(json.dumps(PERSON)))
    upgrade = {
        "name": "copyNick",
        "kind": "TRANSFORM",
        "type": "COPYNICK",
        "mode": "UPGRADE",
        "onFailure": on_failure,
        "params": {"dlq.topic": "bad-people"},
    }
    v2 = {**PERSON, "fields": [*PERSON["fields"], {"name": "nick", "type": "string", "default": ""}]}
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(v2), "ruleSet": {"migrationRules": [upgrade]}})
    )
    people = DataContract(registry, SUBJECT, dlq_sink=sink, executors=[CopyNick()])
    migrated = people.read(spark.sql(PEOPLE), writer_version=1)
    if on_failure == "NONE":
        with pytest.raises(
            Exception, match="cannot be migrated: field 'name' holds a string that is not valid UTF-8"
        ):
            migrated.collect()
        return
    assert sorted((row.id, row.nick) for row in migrated.collect()) == [(1, "ann")]
    records = {json.loads(record.value)["id"]: record for record in sink.read("bad-people")}
    assert sorted(records) == [2, 3]
    headers = dict(records[2].headers)
    assert headers["__rule.name"] == b"copyNick" and b"field 'name'" in headers["__rule.exception"]
