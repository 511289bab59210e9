"""Rejected rows routed in a branch of their own: when every rule runs as Spark expressions and the
input reads twice safely, the valid rows never cross to Python; otherwise one pass routes them."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.engine.read_twice import read_once, reads_twice_safely


def _plan(df: Any) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        df.explain()
    return printed.getvalue()


def _contract(tmp_path: Path, subject: str, expr: str, topic: str) -> tuple[DataContract, LocalTopicSink]:
    schema = {"type": "record", "name": "Id", "fields": [{"name": "id", "type": "long"}]}
    rule = {
        "name": f"{topic}Rule",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": expr,
        "onFailure": "DLQ",
        "params": {"dlq.topic": topic},
    }
    registry = LocalRegistry()
    payload = {"schema": json.dumps(schema), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema(subject, Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    return DataContract(registry, subject, dlq_sink=sink), sink


def _ids(sink: LocalTopicSink, topic: str) -> list[int]:
    return sorted(int(json.loads(record.value)["id"]) for record in sink.read(topic))


def test_valid_rows_never_reach_python_when_the_input_reads_twice_safely(spark: Any, tmp_path: Path) -> None:
    contract, sink = _contract(tmp_path, "ids-value", "message.id % 3 != 0", "threes")
    out = contract.write(spark.range(0, 300, 1, 3))
    plan = _plan(out)
    assert "ArrowEvalPython" not in plan and "MapInArrow" in plan, plan
    assert sorted(row.id for row in out.collect()) == [i for i in range(300) if i % 3]
    assert _ids(sink, "threes") == list(range(0, 300, 3))


def test_an_input_holding_a_contracts_routing_is_read_once(spark: Any, tmp_path: Path) -> None:
    """The first contract's DLQ pass is in the second's input: reading that input twice would run
    it twice, delivering its records again under other writer ids."""
    evens, even_sink = _contract(tmp_path / "a", "a-value", "message.id % 2 != 0", "evens")
    fives, five_sink = _contract(tmp_path / "b", "b-value", "message.id % 5 != 0", "fives")
    out = fives.write(evens.write(spark.range(0, 100, 1, 2)))
    assert "ArrowEvalPython" in _plan(out)
    assert sorted(row.id for row in out.collect()) == [i for i in range(100) if i % 2 and i % 5]
    assert _ids(even_sink, "evens") == list(range(0, 100, 2))
    assert _ids(five_sink, "fives") == list(range(5, 100, 10))


def test_an_input_whose_reads_differ_is_read_once(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    contract, sink = _contract(tmp_path, "ids-value", "message.id >= 0", "negative")
    df = spark.range(0, 200, 1, 2).select((F.rand(7) * 100 - 50).cast("long").alias("id"))
    out = contract.write(df)
    assert "ArrowEvalPython" in _plan(out)
    kept = out.count()
    assert kept + len(sink.read("negative")) == 200


def _doubled(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.udf(lambda x: x * 2, "long")(F.col(name)).alias("doubled")


def _observed(df: Any) -> Any:
    """`df` with an observation, which a second read would count again."""
    from pyspark.sql import functions as F

    return df.observe("seen", F.count(F.lit(1)).alias("rows"))


@pytest.mark.parametrize(
    ("build", "safe"),
    [
        (lambda spark: spark.range(3), True),
        (lambda spark: spark.range(3).selectExpr("id", "id * 2 AS twice"), True),
        (lambda spark: spark.range(3).selectExpr("rand() AS r"), False),
        (lambda spark: spark.range(3).selectExpr("uuid() AS u"), False),
        (lambda spark: spark.range(3).selectExpr("monotonically_increasing_id() AS m"), False),
        (lambda spark: spark.range(3).selectExpr("id AS current_udf_python_rand"), True),
        (lambda spark: spark.range(3).selectExpr("current_timestamp() AS now"), True),
        (lambda spark: spark.range(3).selectExpr("shuffle(array(1, 2)) AS s"), False),
        (lambda spark: spark.range(3).selectExpr("spark_partition_id() AS p"), False),
        (lambda spark: spark.range(3).mapInArrow(lambda batches: batches, "id long"), False),
        (lambda spark: _observed(spark.range(3)), False),
        (lambda spark: spark.range(3).select(_doubled("id")), False),
    ],
)
def test_what_reads_twice_safely(spark: Any, build: Any, safe: bool) -> None:
    assert reads_twice_safely(build(spark)) is safe


def test_a_micro_batch_is_read_once(spark: Any) -> None:
    """In `foreach_batch` a second read would fetch the micro-batch from its source again and the
    query's progress would count its rows twice."""
    with read_once():
        assert reads_twice_safely(spark.range(3)) is False
    assert reads_twice_safely(spark.range(3)) is True
