"""Exact reasons only where they are unknown (docs/semantics.md §2.2): a native rule tells a clean
failure (its reason is the rule's own) from an evaluation error, and only the rows it rejected with
an error are evaluated again by its Python twin."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from executors.protocol import BatchStep, NativeOutcome, NativeStep, Outcome, RuleContext, Step

# Spark's Python workers cannot import this test module: its executor travels by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SCHEMA = {"type": "record", "name": "Reading", "fields": [{"name": "id", "type": "long"}]}


@dataclass(frozen=True)
class _Twin:
    """The twin of POSITIVE: fails every record it sees, with a reason naming it, and leaves a file
    in `seen` per record, so a test can tell which records it evaluated."""

    seen: str

    def __call__(self) -> Any:
        def evaluate(records: Sequence[Any]) -> list[Outcome]:
            for record in records:
                (Path(self.seen) / f"{record['id']}.{uuid.uuid4().hex}").touch()
            return [Outcome(False, record, f"twin saw {record['id']}") for record in records]

        return evaluate


@dataclass(frozen=True)
class PositiveExecutor:
    """Rule type POSITIVE: `id > 0` natively; an id below -10 is an evaluation error."""

    seen: str
    type: str = "POSITIVE"

    def compile(self, ctx: RuleContext) -> Step:
        def build(record: Any) -> NativeOutcome:
            return NativeOutcome(record["id"] > 0, error=record["id"] < -10)

        return NativeStep(build, batch=BatchStep(_Twin(self.seen)))


def _contract(tmp_path: Path, seen: Path, expr: str = "id > 0") -> tuple[DataContract, LocalTopicSink]:
    rule = {
        "name": "positive",
        "kind": "CONDITION",
        "type": "POSITIVE",
        "mode": "WRITE",
        "expr": expr,
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad"},
    }
    registry = LocalRegistry()
    payload = {"schema": json.dumps(SCHEMA), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema("readings-value", Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(
        registry, "readings-value", executors=[PositiveExecutor(str(seen))], dlq_sink=sink
    )
    return contract, sink


def test_only_rows_rejected_by_an_evaluation_error_reach_the_twin(spark: Any, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    contract, sink = _contract(tmp_path, seen)
    df = spark.createDataFrame([(1,), (-1,), (-20,), (-30,)], "id long")
    assert [row.id for row in contract.write(df).collect()] == [1]
    reasons = {
        json.loads(record.value)["id"]: dict(record.headers)["__rule.exception"].decode()
        for record in sink.read("bad")
    }
    assert reasons == {-1: "Rule expr failed: id > 0", -20: "twin saw -20", -30: "twin saw -30"}
    assert sorted(path.name.split(".")[0] for path in seen.iterdir()) == ["-20", "-30"]


def test_the_rejected_rows_of_apply_carry_the_same_reasons(spark: Any, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    contract, _ = _contract(tmp_path, seen)
    df = spark.createDataFrame([(1,), (-1,), (-20,)], "id long")
    rejected = contract.apply(df).rejected
    reasons = {row.id: row["_contract"]["reason"] for row in rejected.collect()}
    assert reasons == {-1: "Rule expr failed: id > 0", -20: "twin saw -20"}
