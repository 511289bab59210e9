"""Each call's per-rule counts on real DataFrames: observed or on demand, where in the query, and
as a DataFrame, a pandas frame and a table."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from dataframe_users import PythonOnly, ids, make_contract, rule

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, metrics_of
from contracts.errors import ContractError
from executors.cel.executor import CelExecutor


def test_observed_metrics_asked_before_any_action_fail_fast_saying_why(
    sink: LocalTopicSink, users: Any
) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="NONE")]
    result = make_contract(sink, rules, collect_metrics="observe").apply(users)
    assert result.metrics is not None
    answers: list[Any] = []

    def ask() -> None:
        try:
            answers.append(result.metrics.get())  # type: ignore[union-attr]
        except ContractError as error:
            answers.append(error)

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(60)
    assert answers, "metrics.get() is still waiting for an action that nobody runs"
    assert isinstance(answers[0], ContractError), answers
    assert "no Spark action on the result has finished" in str(answers[0])
    with pytest.raises(ContractError, match="no Spark action"):
        result.metrics.get(timeout=0.1)
    assert ids(result.valid) == [1, 2, 3]
    assert (result.metrics.get()["positiveAge"].passed, result.metrics.get()["positiveAge"].failed) == (1, 2)


def test_each_call_keeps_its_own_counts(sink: LocalTopicSink, users: Any, spark: Any) -> None:
    """Two calls on one contract: each result answers with its own counts, whichever ran last, and
    through `df.transform` too; a DataFrame no call returned has none."""
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "age"})]
    contract = make_contract(sink, rules)
    older = spark.createDataFrame([(4, "dan", None, 40), (5, "eve", None, 50)], users.schema)
    first = contract.write(users)
    second = older.transform(contract.write)
    result = contract.apply(users)
    assert (ids(second), ids(first)) == ([4, 5], [1])
    for written, expected in ((first, (1, 2)), (second, (2, 0))):
        metrics = metrics_of(written)
        assert metrics is not None
        counts = metrics.get()["positiveAge"]
        assert (counts.passed, counts.failed) == expected
    assert metrics_of(first) is not metrics_of(second)
    assert metrics_of(first).name != metrics_of(second).name  # type: ignore[union-attr]
    assert metrics_of(result.valid) is result.metrics and metrics_of(result.rejected) is result.metrics
    assert metrics_of(first.select("id")) is None and metrics_of(users) is None
    assert not hasattr(contract, "metrics")


def test_without_metrics_there_is_no_observation(sink: LocalTopicSink, users: Any, capsys: Any) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "age"})]
    contract = make_contract(sink, rules, collect_metrics=False)
    result = contract.apply(users)
    assert result.metrics is None and metrics_of(result.valid) is None
    written = contract.write(users)
    assert ids(written) == [1] and metrics_of(written) is None
    written.explain(True)
    assert "CollectMetrics" not in capsys.readouterr().out


def test_native_field_transforms_fold_into_the_reading_projection(
    sink: LocalTopicSink, spark: Any, capsys: Any
) -> None:
    """The record is never packed into a struct: Spark computes each transformed field in the
    projection that reads the input, as it would the same transform written by hand."""
    from pyspark.sql import functions as F

    masks = [
        {**rule("upper", "name == 'name' ; value + '!'"), "type": "CEL_FIELD", "kind": "TRANSFORM"},
        {**rule("older", "name == 'age' ; value + 1"), "type": "CEL_FIELD", "kind": "TRANSFORM"},
    ]
    contract = make_contract(sink, masks, collect_metrics=False)
    # Computed input columns (over a range, which no optimizer folds away): a struct of them read
    # field by field is what Spark will not inline.
    computed = spark.range(1, 4).select(
        "id",
        F.upper(F.concat(F.lit("n"), F.col("id").cast("string"))).alias("name"),
        F.lit(None).cast("string").alias("email"),
        (F.col("id") * 2).cast("int").alias("age"),
    )
    written = contract.write(computed)
    assert [(row["name"], row["age"]) for row in written.orderBy("id").collect()] == [
        ("N1!", 3),
        ("N2!", 5),
        ("N3!", 7),
    ]
    written.explain(True)
    optimized = (
        capsys.readouterr().out.split("== Optimized Logical Plan ==")[1].split("== Physical Plan ==")[0]
    )
    assert "struct(" not in optimized, optimized
    assert "concat(upper(concat(n" in optimized, optimized


def optimized_plan(df: Any, capsys: Any) -> str:
    df.explain(True)
    return capsys.readouterr().out.split("== Optimized Logical Plan ==")[1].split("== Physical Plan ==")[0]


def observed_on_output(optimized: str) -> bool:
    """Whether the plan's CollectMetrics sits on top, under only the projection dropping the
    outcome columns: nothing of the rules' status or filter above it."""
    lines = optimized.strip().splitlines()
    return lines[0].startswith("Project") and "CollectMetrics" in lines[1]


def test_counts_of_a_plan_that_cannot_reject_are_observed_on_the_output(
    sink: LocalTopicSink, users: Any, capsys: Any
) -> None:
    """No rule can reject a row, so every row a rule evaluated reaches the output: the outcome
    columns travel to the top of the query and are counted there, exactly."""
    masks = [{**rule("mask", "name == 'name' ; 'x'"), "type": "CEL_FIELD", "kind": "TRANSFORM"}]
    contract = make_contract(sink, masks, collect_metrics="observe")
    written = contract.write(users)
    assert sorted(row["name"] for row in written.collect()) == ["x", "x", "x"]
    metrics = metrics_of(written)
    assert metrics is not None
    counts = metrics.get()["mask"]
    assert (counts.passed, counts.failed, counts.by_action) == (3, 0, {"NONE": 3, "ERROR": 0})
    assert observed_on_output(optimized_plan(written, capsys))

    checked = make_contract(
        sink, [*masks, rule("adult", "message.age > 0", onFailure="NONE")], collect_metrics="observe"
    )
    for output in (checked.write(users), checked.apply(users).valid):
        output.collect()
        counted = metrics_of(output)
        assert counted is not None
        assert (counted.get()["adult"].passed, counted.get()["adult"].failed) == (1, 2)
        assert counted.get()["mask"].passed == 3
        assert observed_on_output(optimized_plan(output, capsys))
    assert output.columns == ["id", "name", "email", "age"]


def test_transforms_are_counted_on_the_output_unless_a_rule_can_reject(
    spark: Any, sink: LocalTopicSink, capsys: Any
) -> None:
    """A native CEL transform that cannot fail, or whose failure keeps the record (onFailure NONE),
    rejects no row: it is counted on the output, exactly. Behind a rule that can send rows to a DLQ
    topic the counts are taken inside the query, before the rejected rows leave it."""
    note = {
        "type": "record",
        "name": "Note",
        "fields": [{"name": "id", "type": "long"}, {"name": "text", "type": "string"}],
    }
    registry = LocalRegistry()
    rules = [
        {**rule("tag", "{'id': message.id, 'text': 'note: ' + message.text}"), "kind": "TRANSFORM"},
    ]
    payload = {"schema": json.dumps(note), "ruleSet": {"domainRules": rules}}
    registry.register_schema("notes-value", Schema.from_dict(payload))
    contract = DataContract(registry, "notes-value", dlq_sink=sink, collect_metrics="observe")
    assert "(native)" in contract.explain()
    notes = spark.range(1, 4).selectExpr("id", "concat('n', id) AS text")
    written = contract.write(notes)
    assert sorted(row["text"] for row in written.collect()) == ["note: n1", "note: n2", "note: n3"]
    metrics = metrics_of(written)
    assert metrics is not None and metrics.get()["tag"].passed == 3
    assert observed_on_output(optimized_plan(written, capsys))

    # An index out of range fails the transform for ids 2 and 3, whose records stay as they were.
    risky = {"name": "first", "expr": "{'id': message.id, 'text': [message.text][message.id - 1]}"}
    gate = rule("short", "size(message.text) < 3", onFailure="DLQ", params={"dlq.topic": "long"})
    transform = {**rule(**risky), "kind": "TRANSFORM", "onFailure": "NONE"}
    longer = notes.union(spark.range(4, 5).selectExpr("id", "'n4444' AS text"))
    cases = (([], ["n1", "n2", "n3", "n4444"], (1, 3), True), ([gate], ["n1", "n2", "n3"], (1, 2), False))
    for before, texts, first_counts, observed_on_top in cases:
        rule_set = {"domainRules": [*before, transform]}
        registry.register_schema("risky-value", Schema.from_dict({**payload, "ruleSet": rule_set}))
        counted = DataContract(registry, "risky-value", dlq_sink=sink, collect_metrics="observe")
        assert "(native)" in counted.explain()
        written = counted.write(longer)
        assert sorted(row["text"] for row in written.collect()) == texts
        counts = metrics_of(written).get()  # type: ignore[union-attr]
        assert (counts["first"].passed, counts["first"].failed) == first_counts
        assert observed_on_output(optimized_plan(written, capsys)) is observed_on_top


def test_native_rules_are_counted_on_demand_outside_the_query(
    sink: LocalTopicSink, users: Any, capsys: Any
) -> None:
    """Rules that all run as Spark expressions leave the call's query as it would be without
    counts (no CollectMetrics); the first `get()` counts them in a job of its own, before or after
    any action, without delivering a DLQ record twice."""
    rules = [
        rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "age"}),
        rule("hasName", "message.name != ''", onFailure="NONE"),
    ]
    contract = make_contract(sink, rules)
    written = contract.write(users)
    metrics = metrics_of(written)
    assert metrics is not None
    counts = metrics.get()
    assert (counts["positiveAge"].passed, counts["positiveAge"].failed) == (1, 2)
    assert (counts["hasName"].passed, counts["hasName"].failed) == (1, 0)
    assert sink.count("age") == 0, "counting delivered DLQ records"
    assert ids(written) == [1] and sink.count("age") == 2
    assert metrics.get() == counts and sink.count("age") == 2
    assert "CollectMetrics" not in optimized_plan(written, capsys)
    result = contract.apply(users)
    assert "CollectMetrics" not in optimized_plan(result.valid, capsys)
    assert result.metrics is not None and result.metrics.get()["positiveAge"].by_action == {
        "NONE": 1,
        "DLQ": 2,
    }


def test_rules_run_in_python_are_observed_during_the_first_action(
    sink: LocalTopicSink, users: Any, capsys: Any
) -> None:
    """A Python pass would run again to count on demand: its counts are observed instead."""
    rules = [rule("positiveAge", "message.age > 0", onFailure="NONE")]
    python = make_contract(sink, rules, executors={"positiveAge": PythonOnly(CelExecutor())})
    written = python.write(users)
    assert "CollectMetrics" in optimized_plan(written, capsys)
    assert ids(written) == [1, 2, 3]
    counts = metrics_of(written).get()["positiveAge"]  # type: ignore[union-attr]
    assert (counts.passed, counts.failed) == (1, 2)


@pytest.mark.parametrize("runs", ["native", "python"])
def test_counts_asked_before_any_action_are_counted_on_demand_for_native_and_python_rules(
    sink: LocalTopicSink, users: Any, runs: str
) -> None:
    """One behaviour wherever a rule runs: `get()` before an action answers, delivering nothing;
    afterwards (an action observed them, or a grouping of no rows lost them) it answers the same."""
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "age"})]
    executors = {"positiveAge": PythonOnly(CelExecutor())} if runs == "python" else None
    contract = make_contract(sink, rules, executors=executors)
    written = contract.write(users)
    counts = metrics_of(written).get(timeout=0.1)["positiveAge"]  # type: ignore[union-attr]
    assert (counts.passed, counts.failed) == (1, 2) and sink.count("age") == 0
    assert ids(written) == [1] and sink.count("age") == 2

    result = contract.apply(users.where("age > 0"))  # no row rejected
    assert result.rejected.groupBy("name").count().collect() == []
    assert result.metrics is not None and result.metrics.get()["positiveAge"].passed == 1


def test_counts_as_a_dataframe_a_pandas_frame_and_a_table(
    sink: LocalTopicSink, users: Any, spark: Any, capsys: Any
) -> None:
    rules = [
        rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "age"}),
        rule("hasName", "message.name != ''", onFailure="NONE"),
    ]
    metrics = make_contract(sink, rules).apply(users).metrics
    assert metrics is not None
    frame = metrics.to_df(spark)
    assert frame.columns == ["rule", "mode", "passed", "failed", "by_action"]
    assert [(r.rule, r.mode, r.passed, r.failed, r.by_action) for r in frame.collect()] == [
        ("positiveAge", "WRITE", 1, 2, {"NONE": 1, "DLQ": 2}),
        ("hasName", "WRITE", 1, 0, {"NONE": 1}),
    ]
    table = metrics.to_pandas()
    assert table["rule"].tolist() == ["positiveAge", "hasName"] and table["failed"].tolist() == [2, 0]
    metrics.show()
    shown = capsys.readouterr().out
    assert shown == metrics.summary()
    assert shown.splitlines() == [
        "rule         mode   passed  failed  actions",
        "-----------  -----  ------  ------  ------------",
        "positiveAge  WRITE       1       2  NONE=1 DLQ=2",
        "hasName      WRITE       1       0  NONE=1",
    ]


def test_collect_metrics_takes_true_false_or_observe(sink: LocalTopicSink) -> None:
    with pytest.raises(ContractError, match="collect_metrics must be True, False or 'observe', not 'yes'"):
        make_contract(sink, [], collect_metrics="yes")
