"""Replay and DLQ read-back on the formats after Avro: the same contract as JSON Schema and
Protobuf, its WRITE-side DLQ records (the record as JSON) read back into records and replayed,
and its read-side ones (frames) replayed through `deserialize` (docs/semantics.md §7.7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts import DataContract, LocalRegistry, LocalTopicSink, Schema

pytestmark = pytest.mark.spark

SUBJECT = "items-value"
JSON_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["id", "name", "amount"],
}
PROTO = 'syntax = "proto3"; package shop; message Item { int64 id = 1; string name = 2; double amount = 3; }'
SCHEMAS = {"JSON": json.dumps(JSON_SCHEMA), "PROTOBUF": PROTO}
ROWS = [(1, "a", 1.0), (2, "b", -1.0), (3, "c", -20.0)]


def _rule(name: str, expr: str, mode: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "CONDITION",
        "type": "CEL",
        "mode": mode,
        "expr": expr,
        "onFailure": "DLQ",
        "params": {"dlq.topic": f"items-{mode.lower()}-dlq"},
    }


def _contract(schema_type: str, mode: str, tmp_path: Path) -> tuple[DataContract, LocalTopicSink]:
    """Two rules: `positive` first (READ runs them in reverse, so it is declared last there); a
    record replayed past it is judged by `small` alone."""
    rules = [_rule("positive", "message.amount > 0.0", mode), _rule("small", "message.amount > -10.0", mode)]
    if mode == "READ":
        rules.reverse()
    payload = {"schemaType": schema_type, "schema": SCHEMAS[schema_type], "ruleSet": {"domainRules": rules}}
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    return DataContract(registry, SUBJECT, dlq_sink=sink), sink


def _items(spark: Any, contract: DataContract) -> Any:
    df = spark.createDataFrame(ROWS, contract.spark_schema)
    return df.selectExpr("*", "cast(id as string) as key", "'items' as topic")


# Avro's, with every Avro type read back: tests/contracts/api/test_replay.py, tests/actions/test_dlq_frame.py.
@pytest.mark.parametrize("schema_type", ["JSON", "PROTOBUF"])
def test_write_side_dlq_records_read_back_and_replay_on_every_format(
    schema_type: str, spark: Any, tmp_path: Path
) -> None:
    contract, sink = _contract(schema_type, "WRITE", tmp_path)
    assert [row.id for row in contract.write(_items(spark, contract)).collect()] == [1]

    dlq = sink.read_df(spark, "items-write-dlq", contract)
    assert sorted((row.record.id, row.record.name, row.record.amount, row.rule) for row in dlq.collect()) == [
        (2, "b", -1.0, "positive"),
        (3, "c", -20.0, "positive"),
    ]
    replayed = contract.replay("items-write-dlq", run_id="fix", spark=spark)
    # Past `positive`, 2 passes `small` and 3 fails it again.
    assert [(row.id, row.name, row.amount, row.key, row.topic) for row in replayed.collect()] == [
        (2, "b", -1.0, b"2", "items")
    ]
    again = sink.read_df(spark, "items-write-dlq", contract).filter("writer like 'fix-%'").collect()
    assert [(row.record.id, row.rule) for row in again] == [(3, "small")]


# Avro's: tests/contracts/api/test_replay.py. One pass: frames replay through deserialize as any frames.
@pytest.mark.one_pass
@pytest.mark.parametrize("schema_type", ["JSON", "PROTOBUF"])
def test_read_side_dlq_records_replay_through_deserialize_on_every_format(
    schema_type: str, spark: Any, tmp_path: Path
) -> None:
    contract, sink = _contract(schema_type, "READ", tmp_path)
    frames = contract.serialize(_items(spark, contract))
    assert [row.id for row in contract.deserialize(frames).collect()] == [1]

    dlq = sink.read_df(spark, "items-read-dlq", contract)
    assert sorted((row.key, row.rule) for row in dlq.collect()) == [(b"2", "positive"), (b"3", "positive")]
    assert {row.record for row in dlq.collect()} == {None}  # a frame holds no JSON record

    replayed = contract.replay("items-read-dlq", apply="deserialize", run_id="fix", spark=spark)
    assert [(row.id, row.key, row.topic) for row in replayed.collect()] == [(2, b"2", "items")]
    (again,) = sink.read_df(spark, "items-read-dlq").filter("writer like 'fix-%'").collect()
    assert (again.key, again.rule, again.mode) == (b"3", "small", "READ")
