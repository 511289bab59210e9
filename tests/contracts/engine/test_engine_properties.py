"""Properties of the engine on random rows and rule sets: nothing lost, every rejection explained."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
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


# Transforms that run natively (CEL_FIELD) and in Python (a CEL record narrows `age` to an Avro int,
# which the compiler leaves to cel-python), each with the same change in plain Python.
TRANSFORMS = [
    (
        "CEL",
        "{'id': message.id, 'name': 'a' + message.name, 'age': message.age + 1}",
        lambda row: {**row, "name": "a" + row["name"], "age": row["age"] + 1},
    ),
    ("CEL_FIELD", "typeName == 'STRING' ; 'b' + value", lambda row: {**row, "name": "b" + row["name"]}),
    ("CEL_FIELD", "name == 'age' ; value - 2", lambda row: {**row, "age": row["age"] - 2}),
]


@st.composite
def rule_sets(draw: st.DrawFn) -> list[tuple[dict[str, Any], Any]]:
    """Conditions (a check) and transforms (a change) in any order: later rules see the changes."""
    count = draw(st.integers(1, 4))
    rules: list[tuple[dict[str, Any], Any]] = [draw(conditions(i)) for i in range(count)]
    for t in range(draw(st.integers(0, 3))):
        rule_type, expr, change = draw(st.sampled_from(TRANSFORMS))
        transform = {
            "name": f"change{t}",
            "kind": "TRANSFORM",
            "type": rule_type,
            "mode": "WRITE",
            "expr": expr,
        }
        rules.insert(draw(st.integers(0, len(rules))), (transform, change))
    return rules


people = st.lists(
    st.tuples(st.text(alphabet="abcxyz", max_size=8), st.integers(-10, 90)), min_size=1, max_size=30
)


def expected_outcome(
    rows: list[dict[str, Any]], rules: list[tuple[dict[str, Any], Any]]
) -> dict[int, dict[str, Any] | str]:
    """Per row, computed in plain Python: the rule that sends it to the DLQ, or the valid row."""
    outcome: dict[int, dict[str, Any] | str] = {}
    for original in rows:
        row = dict(original)
        for rule, check in rules:
            if rule["kind"] == "TRANSFORM":
                row = check(row)
            elif not check(row) and rule["onFailure"] == "DLQ":
                outcome[row["id"]] = rule["name"]
                break
        else:
            outcome[row["id"]] = row
    return outcome


def _transform(t: int, which: int) -> tuple[dict[str, Any], Any]:
    rule_type, expr, change = TRANSFORMS[which]
    return {
        "name": f"change{t}",
        "kind": "TRANSFORM",
        "type": rule_type,
        "mode": "WRITE",
        "expr": expr,
    }, change


def _age_check(limit: int, action: str) -> tuple[dict[str, Any], Any]:
    rule = {
        "name": "old",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": f"message.age > {limit}",
    }
    return {**rule, "onFailure": action, "params": {"dlq.topic": "topic-0"}}, lambda row: row["age"] > limit


SOME_PEOPLE = [("ann", 30), ("bob", 3), ("", -4)]


@settings(
    max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=people, rules=rule_sets())
# Native transforms, then Python, then native again: every pass must see the previous one's record.
@example(rows=SOME_PEOPLE, rules=[_transform(0, 1), _transform(1, 0), _age_check(2, "NONE")])
@example(rows=SOME_PEOPLE, rules=[_transform(0, 2), _transform(1, 0), _transform(2, 1), _age_check(2, "DLQ")])
@example(rows=SOME_PEOPLE, rules=[_age_check(0, "DLQ"), _transform(0, 0), _transform(1, 2)])
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

    valid = [row.asDict() for row in contract.write(df).collect()]

    dlq = [record for topic in sink.topics() for record in sink.read(topic)]
    assert len(valid) + len(dlq) == len(rows)
    rejected_by = {
        json.loads(record.value)["id"]: dict(record.headers)["__rule.name"].decode() for record in dlq
    }
    expected = expected_outcome(records, rules)
    assert sorted(valid, key=lambda row: row["id"]) == [
        v for _, v in sorted(expected.items()) if isinstance(v, dict)
    ]
    assert rejected_by == {i: rule for i, rule in expected.items() if isinstance(rule, str)}
    for record in dlq:
        headers = dict(record.headers)
        rule = next(r for r, _ in rules if r["name"] == headers["__rule.name"].decode())
        assert record.topic == rule["params"]["dlq.topic"]
        assert headers["__rule.mode"] == b"WRITE"
        assert headers["__rule.subject"] == SUBJECT.encode()
        assert json.loads(record.value) == records[json.loads(record.value)["id"]]


PLUGIN_MODULE = '''
"""A user's plugin package: an executor and an action advertised through entry points."""

import json

from actions.protocol import ActionPlan, Effect


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
