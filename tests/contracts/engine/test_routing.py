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


def _ids_contract(tmp_path: Path, subject: str = "ids-value") -> tuple[DataContract, LocalTopicSink]:
    """A contract whose one WRITE rule sends every odd id to the DLQ topic `odd`."""
    schema = {"type": "record", "name": "Id", "fields": [{"name": "id", "type": "long"}]}
    rule = {
        "name": "even",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.id % 2 == 0",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "odd"},
    }
    registry = LocalRegistry()
    payload = {"schema": json.dumps(schema), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema(subject, Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    return DataContract(registry, subject, dlq_sink=sink), sink


@pytest.mark.parametrize("partitions", [1, 2])
def test_one_task_computing_several_input_partitions_keeps_every_dlq_record(
    spark: Any, tmp_path: Path, partitions: int
) -> None:
    """`coalesce` after `write` runs the routing pass of several input partitions in one task: each
    keeps its own DLQ output (one writer per input partition, not per task)."""
    contract, sink = _ids_contract(tmp_path)
    df = spark.range(0, 200, 1, 8)
    assert contract.write(df).coalesce(partitions).count() == 100
    odd = sorted(int(json.loads(record.value)["id"]) for record in sink.read("odd"))
    assert odd == list(range(1, 200, 2))


def test_a_coalesced_rerun_with_the_same_run_id_replaces_its_dlq_output(spark: Any, tmp_path: Path) -> None:
    contract, sink = _ids_contract(tmp_path)
    df = spark.range(0, 40, 1, 4)
    for _ in range(2):
        assert contract.write(df, run_id="nightly").coalesce(1).count() == 20
    assert len(sink.read("odd")) == 20
