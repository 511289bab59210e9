"""Properties of the engine on random rows and rule sets: nothing lost, every rejection explained."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark import cloudpickle

from actions.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema

SUBJECT = "people-value"
PERSON = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
    ],
}


@st.composite
def conditions(draw: st.DrawFn, index: int) -> tuple[dict[str, Any], Any]:
    """A CEL condition with a NONE or DLQ failure action, and the same check in Python."""
    kind = draw(st.sampled_from(["age", "prefix", "length"]))
    if kind == "age":
        limit = draw(st.integers(-5, 60))
        expr, check = f"message.age > {limit}", (lambda row, limit=limit: row["age"] > limit)
    elif kind == "prefix":
        letter = draw(st.sampled_from("abc"))
        expr, check = (
            f"message.name.startsWith('{letter}')",
            (lambda row, letter=letter: row["name"].startswith(letter)),
        )
    else:
        size = draw(st.integers(0, 6))
        expr, check = f"size(message.name) < {size}", (lambda row, size=size: len(row["name"]) < size)
    action = draw(st.sampled_from(["NONE", "DLQ"]))
    rule = {
        "name": f"rule{index}",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": expr,
        "onFailure": action,
        "params": {"dlq.topic": f"topic-{index % 2}"},
    }
    return rule, check


@st.composite
def rule_sets(draw: st.DrawFn) -> list[tuple[dict[str, Any], Any]]:
    count = draw(st.integers(1, 4))
    rules = [draw(conditions(i)) for i in range(count)]
    if draw(st.booleans()):
        # A transform somewhere in the list: later conditions see its output.
        at = draw(st.integers(0, count))
        expr = "{'id': message.id, 'name': 'a' + message.name, 'age': message.age + 1}"
        transform = {"name": "prefixA", "kind": "TRANSFORM", "type": "CEL", "mode": "WRITE", "expr": expr}
        rules.insert(at, (transform, None))
    return rules


people = st.lists(
    st.tuples(st.text(alphabet="abcxyz", max_size=8), st.integers(-10, 90)), min_size=1, max_size=30
)


def expected_outcome(
    rows: list[dict[str, Any]], rules: list[tuple[dict[str, Any], Any]]
) -> dict[int, str | None]:
    """The rule that sends each row to the DLQ (None: the row is valid), computed in plain Python."""
    outcome: dict[int, str | None] = {}
    for original in rows:
        row = dict(original)
        outcome[row["id"]] = None
        for rule, check in rules:
            if check is None:
                row = {**row, "name": "a" + row["name"], "age": row["age"] + 1}
            elif not check(row) and rule["onFailure"] == "DLQ":
                outcome[row["id"]] = rule["name"]
                break
    return outcome


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=people, rules=rule_sets())
def test_every_row_is_valid_or_in_the_dlq_of_the_rule_that_rejected_it(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, int]], rules: list[Any]
) -> None:
    registry = LocalRegistry()
    payload = {"schema": json.dumps(PERSON), "ruleSet": {"domainRules": [rule for rule, _ in rules]}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path_factory.mktemp("dlq"))
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    records = [{"id": i, "name": name, "age": age} for i, (name, age) in enumerate(rows)]
    df = spark.createDataFrame([tuple(r.values()) for r in records], "id long, name string, age int")

    valid_ids = [row["id"] for row in contract.write(df).collect()]

    dlq = [record for topic in sink.topics() for record in sink.read(topic)]
    assert len(valid_ids) + len(dlq) == len(rows)
    rejected_by = {
        json.loads(record.value)["id"]: dict(record.headers)["__rule.name"].decode() for record in dlq
    }
    expected = expected_outcome(records, rules)
    assert sorted(valid_ids) == sorted(i for i, rule in expected.items() if rule is None)
    assert rejected_by == {i: rule for i, rule in expected.items() if rule is not None}
    for record in dlq:
        headers = dict(record.headers)
        rule = next(r for r, _ in rules if r["name"] == headers["__rule.name"].decode())
        assert record.topic == rule["params"]["dlq.topic"]
        assert headers["__rule.mode"] == b"WRITE"
        assert headers["__rule.subject"] == SUBJECT.encode()


PLUGIN_MODULE = '''
"""A user's plugin package: an executor and an action advertised through entry points."""

import json

from actions._protocol import ActionPlan, Effect


class Reverse:
    type = "REVERSE"

    def transform(self, ctx, message):
        return {**message, "name": message["name"][::-1]}


class Tally:
    name = "TALLY"
    path = None

    def plan(self, ctx):
        return ActionPlan(self.name, Effect.CONTINUE, callback=self.record)

    def record(self, ctx, record, reason):
        with open(Tally.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record["id"]) + "\\n")
'''


def test_executor_and_action_plug_in_by_entry_point(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site"
    (package / "userplugins-1.0.dist-info").mkdir(parents=True)
    (package / "userplugins.py").write_text(textwrap.dedent(PLUGIN_MODULE))
    (package / "userplugins-1.0.dist-info" / "METADATA").write_text("Name: userplugins\nVersion: 1.0\n")
    (package / "userplugins-1.0.dist-info" / "entry_points.txt").write_text(
        "[spark_data_contracts.executors]\nREVERSE = userplugins:Reverse\n\n"
        "[spark_data_contracts.actions]\nTALLY = userplugins:Tally\n"
    )
    monkeypatch.syspath_prepend(str(package))
    import userplugins  # type: ignore[import-not-found]

    cloudpickle.register_pickle_by_value(userplugins)
    tally = tmp_path / "tally.jsonl"
    monkeypatch.setattr(userplugins.Tally, "path", str(tally))

    registry = LocalRegistry()
    rules = [
        {"name": "reverse", "kind": "TRANSFORM", "type": "REVERSE", "mode": "WRITE"},
        {"name": "adult", "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": "message.age >= 18",
         "onFailure": "TALLY"},
    ]  # fmt: skip
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(PERSON), "ruleSet": {"domainRules": rules}})
    )
    contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / "dlq"))
    df = spark.createDataFrame([(1, "ann", 30), (2, "bob", 12)], "id long, name string, age int")
    assert sorted(row["name"] for row in contract.write(df).collect()) == ["bob", "nna"]
    assert [json.loads(line) for line in tally.read_text().splitlines()] == [2]
