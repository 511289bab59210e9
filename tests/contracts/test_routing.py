"""DLQ records of rejected rows: their values as JSON readers accept them, their keys and headers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.engine.routing import record_value_bytes


def _strict_json(data: bytes) -> Any:
    """JSON as strict readers (RFC 8259) take it: the bare constants NaN and Infinity are refused."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(data, parse_constant=refuse)


def test_non_finite_numbers_in_a_dlq_value_are_written_as_strict_json_strings() -> None:
    record = {"x": math.nan, "y": [math.inf, -math.inf, 1.5], "z": {"k": {"w": math.nan}}, "s": "NaN"}
    assert _strict_json(record_value_bytes(record)) == {
        "x": "NaN",
        "y": ["Infinity", "-Infinity", 1.5],
        "z": {"k": {"w": "NaN"}},
        "s": "NaN",
    }


def test_finite_records_are_written_as_plain_json() -> None:
    record = {"a": 1, "b": 2.5, "c": None, "d": b"\xff", "e": ["x"]}
    assert record_value_bytes(record) == b'{"a": 1, "b": 2.5, "c": null, "d": "\\u00ff", "e": ["x"]}'


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_whole_value_that_is_a_float_stays_its_eight_bytes(value: float) -> None:
    packed = record_value_bytes(value)
    assert packed is not None and len(packed) == 8


def test_a_rejected_row_holding_nan_reaches_its_dlq_topic_as_strict_json(spark: Any, tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "Reading",
        "fields": [{"name": "id", "type": "long"}, {"name": "value", "type": "double"}],
    }
    rule = {
        "name": "finite",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.value < 1000.0",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-readings"},
    }
    registry = LocalRegistry()
    payload = {"schema": json.dumps(schema), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema("readings-value", Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, "readings-value", dlq_sink=sink)
    df = spark.createDataFrame([(1, 1.0), (2, math.nan), (3, math.inf)], "id long, value double")
    assert [row.id for row in contract.write(df).collect()] == [1]
    values = [_strict_json(record.value) for record in sink.read("bad-readings")]
    values.sort(key=lambda value: value["id"])
    assert values == [{"id": 2, "value": "NaN"}, {"id": 3, "value": "Infinity"}]


def test_a_string_key_and_topic_reach_the_dlq_record_as_their_bytes(spark: Any, tmp_path: Path) -> None:
    """Spark's strings may hold bytes that are not UTF-8; a key or topic column is copied as it is."""
    schema = {"type": "record", "name": "Reading", "fields": [{"name": "id", "type": "long"}]}
    rule = {
        "name": "none",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.id < 0",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-readings"},
    }
    registry = LocalRegistry()
    payload = {"schema": json.dumps(schema), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema("readings-value", Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, "readings-value", dlq_sink=sink)
    df = spark.sql("SELECT 1L AS id, CAST(X'C328' AS STRING) AS key, CAST(X'FF' AS STRING) AS topic")
    assert contract.write(df).count() == 0
    (record,) = sink.read("bad-readings")
    assert record.key == b"\xc3("
    assert dict(record.headers)["__rule.topic"] == b"\xff"
