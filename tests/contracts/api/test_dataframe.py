"""The DataContract API end to end on real DataFrames: rule order, modes, actions, DLQ, metrics."""

from __future__ import annotations

import io
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pyspark import cloudpickle
from read_counter import ReadCounter

from actions.builtin import DlqAction
from actions.dlq.local_topic import LocalTopicSink
from actions.protocol import ActionContext, ActionPlan, Effect
from contracts import DataContract, LocalRegistry, Schema, formats, metrics_of
from contracts.engine.python_migration import project
from contracts.errors import ContractError, SerializationError
from contracts.formats.avro import parse_schema
from contracts.formats.wire import encode_frame
from executors.cel.executor import CelExecutor
from executors.protocol import NativeStep

# Executors and actions defined here run on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "users-value"
USER = {
    "type": "record",
    "name": "User",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "age", "type": "int"},
    ],
}
ROWS = [(1, "ann", "ann@example.com", 30), (2, "bob", None, -1), (3, "", "not-an-email", 0)]


def register(registry: LocalRegistry, domain_rules: list[dict[str, Any]], **metadata: str) -> None:
    payload: dict[str, Any] = {"schema": json.dumps(USER), "ruleSet": {"domainRules": domain_rules}}
    if metadata:
        payload["metadata"] = {"properties": metadata}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))


def rule(name: str, expr: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": expr, **fields}


@pytest.fixture
def sink(tmp_path: Path) -> LocalTopicSink:
    return LocalTopicSink(tmp_path / "dlq")


@pytest.fixture
def users(spark: Any) -> Any:
    return spark.createDataFrame(ROWS, "id long, name string, email string, age int")


def make_contract(sink: LocalTopicSink, rules: list[dict[str, Any]], **options: Any) -> DataContract:
    registry = LocalRegistry()
    register(registry, rules)
    return DataContract(registry, SUBJECT, dlq_sink=sink, **options)


def ids(df: Any) -> list[int]:
    return sorted(row["id"] for row in df.collect())


def test_failed_condition_with_none_keeps_every_row(sink: LocalTopicSink, users: Any) -> None:
    contract = make_contract(sink, [rule("positiveAge", "message.age > 0", onFailure="NONE")])
    result = contract.apply(users)
    assert ids(result.valid) == [1, 2, 3]
    assert result.rejected.count() == 0


def test_failed_condition_with_dlq_rejects_the_row(sink: LocalTopicSink, users: Any) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "bad-users"})]
    result = make_contract(sink, rules).apply(users)
    assert ids(result.valid) == [1]
    rejected = {row["id"]: row for row in result.rejected.collect()}
    assert sorted(rejected) == [2, 3]
    status = rejected[2]["_contract"]
    assert (status["rule"], status["mode"], status["action"], status["topic"]) == (
        "positiveAge",
        "WRITE",
        "DLQ",
        "bad-users",
    )
    assert status["reason"] == "Rule expr failed: message.age > 0"
    assert (status["subject"], status["version"]) == (SUBJECT, 1)
    assert rejected[3]["name"] == ""


def test_a_native_rule_rejection_carries_the_evaluation_error_text(sink: LocalTopicSink, users: Any) -> None:
    rules = [rule("ratio", "100 / message.age > 1", onFailure="DLQ", params={"dlq.topic": "ratios"})]
    contract = make_contract(sink, rules)
    assert "(native)" in contract.explain("WRITE")
    reasons = {row["id"]: row["_contract"]["reason"] for row in contract.apply(users).rejected.collect()}
    assert reasons[2] == "Rule expr failed: 100 / message.age > 1"  # false: the generic text
    assert "divide by zero" in reasons[3]  # an error: the twin's text, as the reference says it
    assert ids(contract.write(users)) == [1]
    (exception,) = [
        dict(r.headers)["__rule.exception"] for r in sink.read("ratios") if r.value and b'"id": 3' in r.value
    ]
    assert exception == reasons[3].encode()


def test_the_rule_doc_is_the_failure_reason(sink: LocalTopicSink, users: Any) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", doc="age must be positive")]
    rules[0]["params"] = {"dlq.topic": "bad"}
    result = make_contract(sink, rules).apply(users)
    assert {row["_contract"]["reason"] for row in result.rejected.collect()} == {"age must be positive"}


@pytest.mark.parametrize("on_failure", ["ERROR", None])
def test_error_fails_the_job_naming_subject_version_rule_and_mode(
    sink: LocalTopicSink, users: Any, on_failure: str | None
) -> None:
    fields = {"onFailure": on_failure} if on_failure else {}
    contract = make_contract(sink, [rule("positiveAge", "message.age > 0", **fields)])
    valid = contract.apply(users).valid
    with pytest.raises(Exception) as caught:
        valid.collect()
    message = str(caught.value)
    for part in ("positiveAge", SUBJECT, "version 1", "in WRITE on", "Rule expr failed: message.age > 0"):
        assert part in message


def test_error_does_not_fire_when_every_row_passes(sink: LocalTopicSink, users: Any) -> None:
    contract = make_contract(sink, [rule("knownId", "message.id > 0", onFailure="ERROR")])
    assert ids(contract.write(users)) == [1, 2, 3]


def test_on_success_action_runs(sink: LocalTopicSink, users: Any) -> None:
    rules = [rule("flagAdults", "message.age >= 18", onSuccess="DLQ", onFailure="NONE")]
    rules[0]["params"] = {"dlq.topic": "adults"}
    result = make_contract(sink, rules).apply(users)
    assert ids(result.valid) == [2, 3]
    assert ids(result.rejected) == [1]


def test_disabled_rules_are_skipped(sink: LocalTopicSink, users: Any) -> None:
    contract = make_contract(sink, [rule("neverPasses", "false", disabled=True)])
    assert ids(contract.write(users)) == [1, 2, 3]
    assert "no rules" in contract.explain("WRITE")


@pytest.mark.parametrize(
    ("enable_at", "skipped"), [("SERVER", True), ("GATEWAY", True), ("CLIENT", False), ("ALL", False)]
)
def test_a_rule_set_enabled_off_the_client_is_skipped(
    sink: LocalTopicSink, users: Any, enable_at: str, skipped: bool
) -> None:
    registry = LocalRegistry()
    rule_set = {"domainRules": [rule("neverPasses", "false")], "enableAt": enable_at}
    registry.register_schema(SUBJECT, Schema.from_dict({"schema": json.dumps(USER), "ruleSet": rule_set}))
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    explained = contract.explain("WRITE")
    if skipped:
        assert ids(contract.write(users)) == [1, 2, 3]
        assert f"enableAt is {enable_at!r}: a client skips all 1 of its rules" in explained
    else:
        assert "neverPasses" in explained and "enableAt" not in explained
        with pytest.raises(Exception, match="neverPasses"):
            contract.write(users).collect()


def test_migration_rules_of_a_set_enabled_off_the_client_are_skipped(
    sink: LocalTopicSink, users: Any
) -> None:
    registry = LocalRegistry()
    register(registry, [])
    blocker = {"name": "blockUpgrade", "kind": "CONDITION", "type": "CEL", "mode": "UPGRADE", "expr": "false"}
    later = {**USER, "fields": [*USER["fields"], {"name": "tier", "type": "int", "default": 0}]}
    for enable_at in ("SERVER", "CLIENT"):
        rule_set = {"migrationRules": [blocker], "enableAt": enable_at}
        registry.register_schema(
            SUBJECT, Schema.from_dict({"schema": json.dumps(later), "ruleSet": rule_set})
        )
    server_only = DataContract(registry, SUBJECT, version=2, dlq_sink=sink)
    assert sorted(row["tier"] for row in server_only.read(users, writer_version=1).collect()) == [0, 0, 0]
    client = DataContract(registry, SUBJECT, version=3, dlq_sink=sink)
    with pytest.raises(Exception, match="blockUpgrade"):
        client.read(users.selectExpr("*", "1 AS tier"), writer_version=2).collect()


def test_a_row_rejected_goes_no_further(sink: LocalTopicSink, users: Any) -> None:
    rules = [
        rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "age"}),
        rule("hasName", "message.name != ''", onFailure="DLQ", params={"dlq.topic": "name"}),
    ]
    result = make_contract(sink, rules).apply(users)
    assert {row["id"]: row["_contract"]["rule"] for row in result.rejected.collect()} == {
        2: "positiveAge",
        3: "positiveAge",
    }
    metrics = result.metrics.get()
    assert (metrics["positiveAge"].passed, metrics["positiveAge"].failed) == (1, 2)
    assert (metrics["hasName"].passed, metrics["hasName"].failed) == (1, 0)
    assert metrics["positiveAge"].by_action == {"NONE": 1, "DLQ": 2}


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


def _suffix(name: str, suffix: str, mode: str = "WRITEREAD") -> dict[str, Any]:
    expr = (
        "{'id': message.id, 'name': message.name + '"
        + suffix
        + "', 'email': message.email, 'age': message.age}"
    )
    return {"name": name, "kind": "TRANSFORM", "type": "CEL", "mode": mode, "expr": expr}


def test_a_transform_feeds_the_next_rule(sink: LocalTopicSink, users: Any) -> None:
    rules = [
        _suffix("bang", "!", mode="WRITE"),
        rule("endsWithBang", "message.name.endsWith('!')", onFailure="ERROR"),
    ]
    valid = make_contract(sink, rules).write(users)
    assert sorted(row["name"] for row in valid.collect()) == ["!", "ann!", "bob!"]


def test_a_transform_result_without_a_nullable_field_writes_null(sink: LocalTopicSink, users: Any) -> None:
    drop_email = "{'id': message.id, 'name': message.name, 'age': message.age}"
    valid = make_contract(sink, [rule("dropEmail", drop_email, kind="TRANSFORM")]).write(users)
    assert {row["id"]: row["email"] for row in valid.collect()} == {1: None, 2: None, 3: None}


def test_a_transform_result_not_fitting_the_schema_fails_the_job_in_one_line_as_a_native_failure(
    sink: LocalTopicSink, users: Any
) -> None:
    """Raised in a Python worker, it fails the job as a native failure does: Spark's own exception
    whose first line says what and why, not a worker's traceback (docs/semantics.md §9.9)."""
    stringly = "{'id': message.id, 'name': message.name, 'age': string(message.age)}"
    rules = [rule("stringly", stringly, kind="TRANSFORM", onFailure="DLQ", params={"dlq.topic": "t"})]
    contract = make_contract(sink, rules)
    assert "(python)" in contract.explain()
    expected = (
        "SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] SerializationError: the result of TRANSFORM rule 'stringly' (WRITE)"
        " does not match the schema of subject 'users-value' version 1: com.acme.User.age is <30> of"
        " type <class 'str'> expected int SQLSTATE: P0001",
    )
    assert failure(contract.write(users.where("id = 1")))[:2] == expected
    assert failure(contract.apply(users.where("id = 1")).valid)[:2] == expected


@dataclass(frozen=True)
class Untyped:
    """A batch executor claiming its results keep the schema, which they do not: the pass cannot
    write them back."""

    type = "UNTYPED"

    def compile(self, ctx: Any) -> Any:
        from executors.protocol import BatchStep

        return BatchStep(factory=_untyped_evaluator, keeps_schema=True)


def _untyped_evaluator() -> Any:
    from executors.protocol import Outcome

    return lambda records: [Outcome(True, {**record, "age": "old"}) for record in records]


def test_an_engine_error_raised_for_a_whole_batch_in_python_fails_the_job_in_one_line(
    sink: LocalTopicSink, users: Any
) -> None:
    rules = [rule("untyped", "", kind="TRANSFORM", type="UNTYPED")]
    name, first, _ = failure(make_contract(sink, rules, executors=[Untyped()]).write(users))
    assert name == "SparkRuntimeException"
    assert first.startswith("[USER_RAISED_EXCEPTION] SerializationError: records do not match")
    assert "Could not convert 'old'" in first


def test_read_runs_rules_in_reverse_order(sink: LocalTopicSink, users: Any) -> None:
    contract = make_contract(sink, [_suffix("addA", "a"), _suffix("addB", "b")])
    assert {row["id"]: row["name"] for row in contract.write(users).collect()}[1] == "annab"
    assert {row["id"]: row["name"] for row in contract.read(users).collect()}[1] == "annba"


def test_action_pair_applies_per_direction(sink: LocalTopicSink, users: Any) -> None:
    pair = rule("positiveAge", "message.age > 0", mode="WRITEREAD", onFailure="DLQ,NONE")
    pair["params"] = {"dlq.topic": "bad"}
    contract = make_contract(sink, [pair])
    assert ids(contract.apply(users, mode="WRITE").valid) == [1]
    assert ids(contract.apply(users, mode="READ").valid) == [1, 2, 3]


def test_dlq_topic_falls_back_to_the_metadata_property(sink: LocalTopicSink, users: Any) -> None:
    registry = LocalRegistry()
    register(
        registry, [rule("positiveAge", "message.age > 0", onFailure="DLQ")], **{"dlq.topic": "from-meta"}
    )
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    assert {row["_contract"]["topic"] for row in contract.apply(users).rejected.collect()} == {"from-meta"}


def test_an_unresolvable_reference_fails_at_load_naming_subject_and_version(sink: LocalTopicSink) -> None:
    registry = LocalRegistry()
    registry.register_schema("address-value", Schema.from_dict({"schema": json.dumps(USER)}))
    payload = {
        "schema": json.dumps({**USER, "name": "Holder"}),
        "references": [{"name": "com.acme.User", "subject": "address-value", "version": 1}],
    }
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    registry.delete_subject("address-value")
    registry.delete_subject("address-value", permanent=True)
    with pytest.raises(ContractError, match="cannot be resolved") as caught:
        DataContract(registry, SUBJECT, dlq_sink=sink)
    assert (caught.value.subject, caught.value.version) == (SUBJECT, 1)


def test_dlq_without_a_topic_fails_at_load(sink: LocalTopicSink) -> None:
    with pytest.raises(ContractError, match="DLQ action has no topic") as caught:
        make_contract(sink, [rule("positiveAge", "message.age > 0", onFailure="DLQ")])
    assert (caught.value.subject, caught.value.version, caught.value.rule) == (SUBJECT, 1, "positiveAge")


@pytest.mark.parametrize("topic", ["../../etc", "a b", "..", "x" * 250])
def test_an_invalid_dlq_topic_param_fails_at_load(sink: LocalTopicSink, topic: str) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": topic})]
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        make_contract(sink, rules)
    error = caught.value
    assert (error.subject, error.version, error.rule, error.position) == (
        SUBJECT,
        1,
        "positiveAge",
        "params.dlq.topic",
    )


def test_an_invalid_dlq_topic_in_the_metadata_fails_at_load(sink: LocalTopicSink) -> None:
    registry = LocalRegistry()
    register(registry, [rule("positiveAge", "message.age > 0", onFailure="DLQ")], **{"dlq.topic": "a/b"})
    with pytest.raises(ContractError, match="DLQ topic may contain only") as caught:
        DataContract(registry, SUBJECT, dlq_sink=sink)
    assert (caught.value.rule, caught.value.position) == ("positiveAge", "metadata.properties.dlq.topic")


def test_an_invalid_dlq_topic_given_through_the_api_fails_at_load(sink: LocalTopicSink) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "fine"})]
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        make_contract(sink, rules, actions=[DlqAction(topic="../up")])
    assert (caught.value.rule, caught.value.position) == ("positiveAge", "DlqAction.topic")

    @dataclass(frozen=True)
    class Quarantine:
        name: str = "QUARANTINE"

        def plan(self, ctx: ActionContext) -> ActionPlan:
            return ActionPlan(self.name, Effect.REJECT, topic="quarantine/today")

    rules = [rule("positiveAge", "message.age > 0", onFailure="QUARANTINE")]
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        make_contract(sink, rules, actions=[Quarantine()])
    assert (caught.value.subject, caught.value.version, caught.value.rule) == (SUBJECT, 1, "positiveAge")
    assert caught.value.position == "actions.QUARANTINE.topic"


def test_an_invalid_decode_dlq_topic_fails_before_anything_runs(sink: LocalTopicSink, spark: Any) -> None:
    contract = make_contract(sink, [])
    frames = spark.createDataFrame([(b"\x00",)], "value binary")
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        contract.deserialize(frames, on_decode_error="DLQ", decode_dlq_topic="../undecodable")
    assert (caught.value.subject, caught.value.position) == (SUBJECT, "decode_dlq_topic")


def test_unknown_action_fails_at_load(sink: LocalTopicSink) -> None:
    with pytest.raises(ContractError, match="unknown action 'PAGE'"):
        make_contract(sink, [rule("positiveAge", "message.age > 0", onFailure="PAGE")])


def test_unknown_rule_type_fails_the_rule_and_skips_the_rest(sink: LocalTopicSink, users: Any) -> None:
    rules = [
        {"name": "mystery", "kind": "CONDITION", "type": "NOPE", "mode": "WRITE", "onFailure": "NONE"},
        rule("rejectAll", "false", onFailure="DLQ", params={"dlq.topic": "all"}),
    ]
    contract = make_contract(sink, rules)
    assert ids(contract.write(users)) == [1, 2, 3]
    assert "no executor" in contract.explain()


def test_unknown_rule_type_with_default_action_fails_the_job(sink: LocalTopicSink, users: Any) -> None:
    contract = make_contract(
        sink, [{"name": "mystery", "kind": "CONDITION", "type": "NOPE", "mode": "WRITE"}]
    )
    with pytest.raises(Exception, match="Could not find rule executor of type NOPE"):
        contract.write(users).collect()


def people(spark: Any, partitions: int, minors: int = 4, unnamed: int | None = None) -> Any:
    """Users 0-5 in `partitions` partitions (ids in order); the first `minors` are 10 years old, and
    user `unnamed`, if any, has an empty name."""
    return spark.range(0, 6, 1, partitions).selectExpr(
        "id",
        f"IF(id = {-1 if unnamed is None else unnamed}, '', concat('p', id)) AS name",
        "CAST(NULL AS STRING) AS email",
        f"CAST(IF(id < {minors}, 10, 30) AS INT) AS age",
    )


def dlq_user_ids(sink: LocalTopicSink, topic: str) -> list[int]:
    return sorted(json.loads(record.value or b"")["id"] for record in sink.read(topic))


def test_a_rerun_with_the_run_id_of_a_failed_job_replaces_its_dlq_records(
    sink: LocalTopicSink, spark: Any
) -> None:
    rules = [
        rule("adult", "message.age >= 18", onFailure="DLQ", params={"dlq.topic": "minors"}),
        rule("named", "size(message.name) > 0", onFailure="ERROR"),
    ]
    contract = make_contract(sink, rules)
    # Partitions [0, 1] [2, 3] [4, 5]: the third, holding the unnamed user, starts only once one of
    # the first two (local[2]) has committed its minors, then fails the job.
    with pytest.raises(Exception, match="named"):
        contract.write(people(spark, 3, unnamed=5), run_id="nightly-42").collect()
    assert 1 <= sink.count("minors") <= 4

    # Fixed, rerun with the same run id and other partitions: exactly this run's minors.
    assert ids(contract.write(people(spark, 1), run_id="nightly-42")) == [4, 5]
    assert dlq_user_ids(sink, "minors") == [0, 1, 2, 3]
    # Again, with fewer rows rejected: the earlier run's records are gone, not merely overwritten.
    assert ids(contract.write(people(spark, 2, minors=1), run_id="nightly-42")) == [1, 2, 3, 4, 5]
    assert dlq_user_ids(sink, "minors") == [0]
    # Another run id adds its own records.
    contract.write(people(spark, 2, minors=1), run_id="nightly-43").collect()
    assert dlq_user_ids(sink, "minors") == [0, 0]


@pytest.mark.parametrize("method", ["write", "serialize", "read", "deserialize"])
def test_every_call_that_routes_rows_replaces_the_dlq_output_of_its_run_id(
    sink: LocalTopicSink, spark: Any, method: str
) -> None:
    mode = "READ" if method in ("read", "deserialize") else "WRITE"
    adult = rule("adult", "message.age >= 18", mode=mode, onFailure="DLQ", params={"dlq.topic": "minors"})
    contract = make_contract(sink, [adult])
    options: dict[str, Any] = {}
    if method == "deserialize":
        options = {"on_decode_error": "DLQ", "decode_dlq_topic": "undecodable"}

    def source(partitions: int) -> Any:
        records = people(spark, partitions)
        if method != "deserialize":
            return records
        garbage = spark.createDataFrame([(b"\x00",)], "value binary")
        return contract.serialize(records).select("value").unionByName(garbage)

    for partitions in (3, 1, 2):
        getattr(contract, method)(source(partitions), run_id="replay-me", **options).collect()
    if method == "deserialize":
        # A READ-side DLQ record holds the frame as it arrived: four distinct minors, once each.
        assert len({record.value for record in sink.read("minors")}) == sink.count("minors") == 4
        assert [record.value for record in sink.read("undecodable")] == [b"\x00"]
    else:
        assert dlq_user_ids(sink, "minors") == [0, 1, 2, 3]


@pytest.mark.parametrize("run_id", ["", "a.b", "a/b", "x" * 101])
def test_a_run_id_must_be_a_plain_name(sink: LocalTopicSink, spark: Any, run_id: str) -> None:
    contract = make_contract(sink, [])
    with pytest.raises(ContractError, match="run_id") as caught:
        contract.write(people(spark, 1), run_id=run_id)
    assert caught.value.subject == SUBJECT


def test_write_sends_rejected_rows_to_their_topic_with_headers(sink: LocalTopicSink, spark: Any) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "bad-users"})]
    contract = make_contract(sink, rules)
    df = spark.createDataFrame(ROWS, "id long, name string, email string, age int").withColumn(
        "topic", __import__("pyspark.sql.functions", fromlist=["lit"]).lit("users")
    )
    assert ids(contract.write(df)) == [1]
    records = sink.read("bad-users")
    assert sorted(json.loads(record.value)["id"] for record in records) == [2, 3]
    by_id = {json.loads(record.value)["id"]: record for record in records}
    assert json.loads(by_id[2].value) == {"id": 2, "name": "bob", "email": None, "age": -1}
    assert by_id[2].key is None
    assert list(by_id[2].headers) == [
        ("__rule.name", b"positiveAge"),
        ("__rule.mode", b"WRITE"),
        ("__rule.subject", SUBJECT.encode()),
        ("__rule.topic", b"users"),
        ("__rule.exception", b"Rule expr failed: message.age > 0"),
    ]


def test_write_scans_the_source_once(sink: LocalTopicSink, spark: Any, tmp_path: Path) -> None:
    marks = tmp_path / "reads"
    marks.mkdir()
    source = spark.createDataFrame(ROWS, "id long, name string, email string, age int").repartition(2)
    counted = source.mapInArrow(ReadCounter(str(marks)), source.schema)
    rules = [
        rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "bad"}),
        _suffix("bang", "!", mode="WRITE"),
    ]
    valid = make_contract(sink, rules).write(counted)
    assert ids(valid) == [1]
    assert sink.count("bad") == 2
    assert len(list(marks.iterdir())) == 2  # one read per source partition, not one per output


def test_write_adds_no_python_pass_when_no_rule_can_reject_and_sends_only_rejected_rows_to_python(
    sink: LocalTopicSink, users: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    without_dlq = make_contract(sink, [rule("positiveAge", "message.age > -5", onFailure="ERROR")])
    without_dlq.write(users).explain()
    assert "MapInArrow" not in capsys.readouterr().out
    with_dlq = make_contract(
        sink, [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "t"})]
    )
    with_dlq.write(users).explain()
    plan = capsys.readouterr().out
    # Only the rejected rows cross to Python, in an Arrow UDF; no row crosses whole (a mapInArrow).
    assert "ArrowEvalPython" in plan and "MapInArrow" not in plan
    assert ids(without_dlq.write(users)) == [1, 2, 3]


def test_write_composes_with_transform(sink: LocalTopicSink, users: Any) -> None:
    contract = make_contract(
        sink, [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "b"})]
    )
    assert ids(users.transform(contract.write)) == [1]


def test_missing_or_mistyped_columns_are_contract_errors(sink: LocalTopicSink, spark: Any) -> None:
    contract = make_contract(sink, [])
    with pytest.raises(ContractError, match="no column 'age'"):
        contract.apply(spark.createDataFrame([(1, "a", None)], "id long, name string, email string"))
    with pytest.raises(ContractError, match="column 'age' is string"):
        contract.apply(
            spark.createDataFrame([(1, "a", None, "x")], "id long, name string, email string, age string")
        )


def test_extra_columns_pass_through_in_place(sink: LocalTopicSink, spark: Any) -> None:
    contract = make_contract(sink, [_suffix("bang", "!", mode="WRITE")])
    df = spark.createDataFrame(
        [("k1", 1, "ann", None, 3)], "key string, id long, name string, email string, age int"
    )
    valid = contract.write(df)
    assert valid.columns == ["key", "id", "name", "email", "age"]
    assert valid.first().asDict() == {"key": "k1", "id": 1, "name": "ann!", "email": None, "age": 3}


class Shout:
    """A Confluent-style per-record executor: upper-cases the name."""

    type = "SHOUT"

    def transform(self, ctx: Any, message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "name": message["name"].upper()}


def test_user_record_executor_by_registration(sink: LocalTopicSink, users: Any) -> None:
    rules = [{"name": "shout", "kind": "TRANSFORM", "type": "SHOUT", "mode": "WRITE"}]
    contract = make_contract(sink, rules, executors=[Shout()])
    assert sorted(row["name"] for row in contract.write(users).collect()) == ["", "ANN", "BOB"]
    assert "python" in contract.explain()


def test_executor_configured_for_a_rule_name_wins_over_the_type(sink: LocalTopicSink, users: Any) -> None:
    rules = [_suffix("bang", "!", mode="WRITE")]
    contract = make_contract(sink, rules, executors={"bang": Shout()})
    assert sorted(row["name"] for row in contract.write(users).collect()) == ["", "ANN", "BOB"]


class Audit:
    """A custom action: appends a line per record it fires on to a file, then processing continues."""

    name = "AUDIT"

    def __init__(self, path: str) -> None:
        self.path = path

    def plan(self, ctx: ActionContext) -> ActionPlan:
        return ActionPlan(self.name, Effect.CONTINUE, callback=self._record)

    def _record(self, ctx: ActionContext, record: Any, reason: str | None) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"rule": ctx.rule.name, "id": record["id"], "reason": reason}) + "\n")


def test_user_action_by_registration(sink: LocalTopicSink, users: Any, tmp_path: Path) -> None:
    audit_log = tmp_path / "audit.jsonl"
    contract = make_contract(
        sink, [rule("positiveAge", "message.age > 0", onFailure="AUDIT")], actions=[Audit(str(audit_log))]
    )
    assert ids(contract.write(users)) == [1, 2, 3]
    lines = [json.loads(line) for line in audit_log.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == [2, 3]
    assert {line["reason"] for line in lines} == {"Rule expr failed: message.age > 0"}


# -- migration rules see the record they migrate ------------------------------------------------

ITEMS = "items-value"
ITEM_V1 = {
    "type": "record",
    "name": "Item",
    "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "int"}],
}
ITEM_V2 = {**ITEM_V1, "fields": [ITEM_V1["fields"][0], {"name": "quantity", "type": "int"}]}
ITEM_V3 = {**ITEM_V2, "fields": [*ITEM_V2["fields"], {"name": "total", "type": "long"}]}


def migration(name: str, mode: str, expr: str, kind: str = "TRANSFORM", **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "type": "CEL", "mode": mode, "expr": expr, **fields}


def register_versions(
    subject: str, versions: list[tuple[dict[str, Any], list[dict[str, Any]]]]
) -> LocalRegistry:
    """Each version in its own major, so a rename needs no default to be registered."""
    registry = LocalRegistry()
    registry.set_config(subject, compatibilityGroup="major")
    for major, (schema, rules) in enumerate(versions, start=1):
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {"major": str(major)}},
            "ruleSet": {"migrationRules": rules},
        }
        registry.register_schema(subject, Schema.from_dict(payload))
    return registry


ITEM_VERSIONS = [
    (ITEM_V1, []),
    (
        ITEM_V2,
        [
            # First in the list: on UPGRADE it reads the writer's record, on DOWNGRADE (reversed,
            # after qtyDown) the version-1 record qtyDown made; either way it has `qty`.
            migration("positive", "UPDOWN", "message.qty > 0", kind="CONDITION", onFailure="DLQ,NONE",
                      params={"dlq.topic": "nonpositive"}),
            migration("qtyUp", "UPGRADE", "{'id': message.id, 'quantity': message.qty}"),
            migration("qtyDown", "DOWNGRADE", "{'id': message.id, 'qty': message.quantity}"),
        ],
    ),
    (
        ITEM_V3,
        [
            # Receives what version 2's migration left: a version-2 record.
            migration("totalUp", "UPGRADE",
                      "{'id': message.id, 'quantity': message.quantity, 'total': message.quantity * 2}"),
            migration("totalDown", "DOWNGRADE", "{'id': message.id, 'quantity': message.quantity}"),
        ],
    ),
]  # fmt: skip


def test_cel_migration_rules_compile_against_the_record_they_receive(
    spark: Any, sink: LocalTopicSink
) -> None:
    registry = register_versions(ITEMS, ITEM_VERSIONS)
    v1_rows = spark.createDataFrame([(1, 5), (2, 0)], "id long, qty int")
    latest = DataContract(registry, ITEMS, version=3, dlq_sink=sink)
    assert [tuple(row) for row in latest.read(v1_rows, writer_version=1).collect()] == [(1, 5, 10)]
    (rejected,) = sink.read("nonpositive")
    headers = dict(rejected.headers)
    assert (headers["__rule.name"], headers["__rule.mode"]) == (b"positive", b"UPGRADE")

    v3_rows = spark.createDataFrame([(1, 5, 10), (2, 0, 0)], "id long, quantity int, total long")
    oldest = DataContract(registry, ITEMS, version=1, dlq_sink=sink)
    # Downgrading, `positive` fails the second record and its action pair says NONE.
    assert sorted(tuple(row) for row in oldest.read(v3_rows, writer_version=3).collect()) == [(1, 5), (2, 0)]
    middle = DataContract(registry, ITEMS, version=2, dlq_sink=sink)
    v2_rows = spark.createDataFrame([(3, 7)], "id long, quantity int")
    assert [tuple(row) for row in latest.read(v2_rows, writer_version=2).collect()] == [(3, 7, 14)]
    assert [tuple(row) for row in middle.read(v1_rows.where("id = 1"), writer_version=1).collect()] == [
        (1, 5)
    ]


def test_a_migration_rule_reading_a_field_its_record_lacks_is_refused_naming_that_record(spark: Any) -> None:
    typo = migration("qtyUp", "UPGRADE", "{'id': message.id, 'quantity': message.quantity}")
    registry = register_versions(ITEMS, [(ITEM_V1, []), (ITEM_V2, [typo])])
    contract = DataContract(registry, ITEMS, version=2)
    rows = spark.createDataFrame([(1, 5)], "id long, qty int")
    with pytest.raises(ContractError, match="reads field 'quantity'") as caught:
        contract.read(rows, writer_version=1)
    error = caught.value
    assert (error.subject, error.version, error.rule, error.position) == (ITEMS, 2, "qtyUp", "1:40")
    assert "receives records of version 1" in str(error)


SECRET_V1 = {
    "type": "record",
    "name": "Secret",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "email", "type": "string"},
    ],
}
SECRET_V2 = {
    **SECRET_V1,
    "fields": [
        SECRET_V1["fields"][0],
        {"name": "socialSecurityNumber", "type": "string", "confluent:tags": ["PII"]},
        SECRET_V1["fields"][2],
    ],
}
# Version 2 tags `email` in its metadata: its field rules see that tag on either version's record.
SECRET_V2_TAGS = {"**.email": ["PII"]}
SECRETS = "secrets-value"


def _rename(name: str, mode: str, old: str, new: str) -> dict[str, Any]:
    expr = f"$merge([$sift($, function($v, $k) {{$k != '{old}'}}), {{'{new}': $.'{old}'}}])"
    return {"name": name, "kind": "TRANSFORM", "type": "JSONATA", "mode": mode, "expr": expr}


SSN_UP = _rename("ssnUp", "UPGRADE", "ssn", "socialSecurityNumber")
SSN_DOWN = _rename("ssnDown", "DOWNGRADE", "socialSecurityNumber", "ssn")
MASK = {"name": "maskPii", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "UPDOWN", "tags": ["PII"]}


def register_secrets(migrations: list[dict[str, Any]]) -> LocalRegistry:
    registry = LocalRegistry()
    registry.set_config(SECRETS, compatibilityGroup="major")
    for major, (schema, rules, tags) in enumerate(
        [(SECRET_V1, [], {}), (SECRET_V2, migrations, SECRET_V2_TAGS)], 1
    ):
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {"major": str(major)}, "tags": tags},
            "ruleSet": {"migrationRules": rules},
        }
        registry.register_schema(SECRETS, Schema.from_dict(payload))
    return registry


def kafka_rows(
    spark: Any, registry: LocalRegistry, version: int, records: list[dict[str, Any]], subject: str = SECRETS
) -> Any:
    """The records framed by `version`, as a Kafka source's rows (key, value, topic, partition, offset)."""
    registered = registry.get_version(subject, version)
    schema = fastavro.parse_schema(json.loads(registered.schema.schema_str))
    topic = subject.removesuffix("-value")
    rows = []
    for offset, record in enumerate(records):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema, record)
        rows.append((b"k%d" % offset, encode_frame(registered.schema_id, body.getvalue()), topic, 0, offset))
    return spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")


def secrets_read(contract: DataContract, df: Any, writer: int, framed: bool) -> list[tuple[Any, ...]]:
    """The records `contract` reads from `df` (decoded rows of `writer`, or frames), as tuples."""
    if framed:
        read = contract.deserialize(df, key_col="key").drop("key", "topic", "partition", "offset")
    else:
        read = contract.read(df, writer_version=writer)
    return sorted(tuple(row) for row in read.collect())


V1_SECRETS = [{"id": 1, "ssn": "123", "email": "a@x"}, {"id": 2, "ssn": "4567", "email": "b@y"}]
V2_SECRETS = [{"id": 1, "socialSecurityNumber": "123", "email": "a@x"}]


@pytest.mark.parametrize("framed", [False, True], ids=["read", "deserialize"])
@pytest.mark.parametrize(
    "rules",
    [[{**MASK, "expr": "'XXX'"}, SSN_UP, SSN_DOWN], [SSN_UP, SSN_DOWN, {**MASK, "expr": "'XXX'"}]],
    ids=["mask-receives-version-1", "mask-receives-version-2"],
)
def test_a_cel_field_transform_masks_the_tagged_fields_across_versions(
    spark: Any, sink: LocalTopicSink, rules: list[dict[str, Any]], framed: bool
) -> None:
    """As Java's client runs it, a CEL_FIELD migration rule walks the record it receives (the writer's
    first in the list, the renamed one after a rename; on DOWNGRADE the list runs reversed), with that
    record's inline tags and the rule version's metadata tags (docs/semantics.md §4.7). The Python
    reference fails such a rule on every record instead."""
    registry = register_secrets(rules)
    newer = DataContract(registry, SECRETS, version=2, dlq_sink=sink)
    older = DataContract(registry, SECRETS, version=1, dlq_sink=sink)
    if framed:
        v1_rows, v2_rows = (
            kafka_rows(spark, registry, 1, V1_SECRETS),
            kafka_rows(spark, registry, 2, V2_SECRETS),
        )
    else:
        v1_rows = spark.createDataFrame(
            [tuple(r.values()) for r in V1_SECRETS], "id long, ssn string, email string"
        )
        v2_rows = spark.createDataFrame(
            [tuple(r.values()) for r in V2_SECRETS], "id long, socialSecurityNumber string, email string"
        )
    assert secrets_read(newer, v1_rows, 1, framed) == [(1, "XXX", "XXX"), (2, "XXX", "XXX")]
    assert secrets_read(older, v2_rows, 2, framed) == [(1, "XXX", "XXX")]
    assert secrets_read(newer, v2_rows, 2, framed) == [(1, "123", "a@x")]  # no migration, no mask


@pytest.mark.parametrize("framed", [False, True], ids=["read", "deserialize"])
@pytest.mark.parametrize("on_failure", ["NONE", "DLQ"])
def test_a_cel_field_condition_checks_the_tagged_fields_across_versions(
    spark: Any, sink: LocalTopicSink, on_failure: str, framed: bool
) -> None:
    """Record 2's social security number has four digits: the UPDOWN condition fails it upgrading
    (on the version-2 record ssnUp made) and downgrading (on the version-1 record ssnDown made);
    its action decides."""
    check = {
        "name": "shortPii",
        "kind": "CONDITION",
        "type": "CEL_FIELD",
        "mode": "UPDOWN",
        "tags": ["PII"],
        "expr": "size(value) == 3",
        "onFailure": on_failure,
        "params": {"dlq.topic": "long-pii"},
    }
    registry = register_secrets([SSN_UP, check, SSN_DOWN])
    newer = DataContract(registry, SECRETS, version=2, dlq_sink=sink)
    older = DataContract(registry, SECRETS, version=1, dlq_sink=sink)
    v2_secrets = [*V2_SECRETS, {"id": 2, "socialSecurityNumber": "4567", "email": "b@y"}]
    if framed:
        v1_rows, v2_rows = (
            kafka_rows(spark, registry, 1, V1_SECRETS),
            kafka_rows(spark, registry, 2, v2_secrets),
        )
    else:
        v1_rows = spark.createDataFrame(
            [tuple(r.values()) for r in V1_SECRETS], "id long, ssn string, email string"
        )
        v2_rows = spark.createDataFrame(
            [tuple(r.values()) for r in v2_secrets], "id long, socialSecurityNumber string, email string"
        )
    kept = [(1, "123", "a@x"), (2, "4567", "b@y")] if on_failure == "NONE" else [(1, "123", "a@x")]
    assert secrets_read(newer, v1_rows, 1, framed) == kept
    assert secrets_read(older, v2_rows, 2, framed) == kept
    if on_failure == "DLQ":
        rejected = sink.read("long-pii")
        headers = [dict(record.headers) for record in rejected]
        assert sorted((h["__rule.name"], h["__rule.mode"]) for h in headers) == [
            (b"shortPii", b"DOWNGRADE"),
            (b"shortPii", b"UPGRADE"),
        ]
        if framed:  # the frames as they arrived
            assert {record.key for record in rejected} == {b"k1"}


# -- a migrated record the target cannot read is undecodable, naming the rule ------------------

ITEM_V1_NOTED = {**ITEM_V1, "fields": [*ITEM_V1["fields"], {"name": "note", "type": "string", "default": ""}]}
ITEM_RECORDS = [{"id": 1, "qty": 5}, {"id": 2, "qty": 0}]


def assert_undecodable(
    spark: Any, sink: LocalTopicSink, rule: dict[str, Any], why: str, kept: list[tuple[Any, ...]]
) -> None:
    """Version 2 (ITEM_V1_NOTED) migrates ITEM_RECORDS with `rule`; those not `kept` cannot be read
    as version 2, for the reason `why`: `read` fails naming it, `deserialize` fails naming the
    first such record's position under ERROR and routes each one's frame to the decode DLQ under DLQ."""
    registry = register_versions(ITEMS, [(ITEM_V1, []), (ITEM_V1_NOTED, [rule])])
    contract = DataContract(registry, ITEMS, version=2, dlq_sink=sink)
    rows = spark.createDataFrame([tuple(r.values()) for r in ITEM_RECORDS], "id long, qty int")
    name, first, _ = failure(contract.read(rows, writer_version=1))
    assert name == "SparkRuntimeException" and first.startswith(f"[USER_RAISED_EXCEPTION] {why}")
    frames = kafka_rows(spark, registry, 1, ITEM_RECORDS, subject=ITEMS)
    offset = next(i for i, record in enumerate(ITEM_RECORDS) if (record["id"], record["qty"], "") not in kept)
    where = (
        f"cannot deserialize the record at topic items, partition 0, offset {offset} of subject 'items-value'"
    )
    assert f"{where}: {why}" in failure(contract.deserialize(frames.where(f"offset = {offset}")))[2]
    read = contract.deserialize(
        frames, key_col="key", on_decode_error="DLQ", decode_dlq_topic="items-undecodable"
    )
    assert sorted(tuple(row) for row in read.select("id", "qty", "note").collect()) == kept
    routed = sink.read("items-undecodable")
    assert len(routed) == len(ITEM_RECORDS) - len(kept)
    framed = {row["key"]: row["value"] for row in frames.collect()}
    for record in routed:
        assert record.value == framed[record.key]
        assert dict(record.headers)["__rule.exception"] == why.encode()


NOT_RECORDS = [
    ("JSONATA", "qty > 0 ? $ : 42", "42"),
    ("JSONATA", "qty > 0 ? $ : 'abc'", "'abc'"),
    ("JSONATA", "qty > 0 ? $ : [1, 2]", "[1, 2]"),
    ("CEL", "message.qty > 0 ? message : 42", "42"),
    ("CEL", "message.qty > 0 ? message : [message.qty]", "[0]"),
]


@pytest.mark.parametrize(
    ("rule_type", "expr", "shown"), NOT_RECORDS, ids=[f"{t}:{e}" for t, e, _ in NOT_RECORDS]
)
def test_a_migration_transform_whose_result_is_no_record_makes_the_record_undecodable(
    spark: Any, sink: LocalTopicSink, rule_type: str, expr: str, shown: str
) -> None:
    """Not a rule failure, and not a crash of the whole job: the record cannot be read as the
    target, like one missing a field (docs/semantics.md §6.5)."""
    rule = {"name": "reshape", "kind": "TRANSFORM", "type": rule_type, "mode": "UPGRADE", "expr": expr}
    named = "migration rule 'reshape' in UPGRADE on subject 'items-value' version 2"
    why = f"{named} returned {shown}, not a record"
    assert_undecodable(spark, sink, rule, why, kept=[(1, 5, "")])


UNFIT_FIELDS = [
    ("name == 'qty' ; 'abc'", "Item.qty is <abc> of type <class 'str'> expected int", []),
    (
        "name == 'qty' ; value * 1000000000",
        "Item.qty is <5000000000> of type <class 'int'> expected int",
        [(2, 0, "")],
    ),
]


@pytest.mark.parametrize(("expr", "invalid", "kept"), UNFIT_FIELDS, ids=["a string", "beyond int"])
def test_a_cel_field_migration_result_its_field_cannot_hold_makes_the_record_undecodable(
    spark: Any, sink: LocalTopicSink, expr: str, invalid: str, kept: list[tuple[Any, ...]]
) -> None:
    """Not a failure of the rule: the migrated record does not fit the target (docs/semantics.md
    §4.7, §6.4)."""
    rule = {"name": "scale", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "UPGRADE", "expr": expr}
    made_by = "(the result of migration rule 'scale' in UPGRADE on subject 'items-value' version 2)"
    why = f"migrated record does not fit the target schema: {invalid} {made_by}"
    assert_undecodable(spark, sink, rule, why, kept)


WRONG_SHAPES = [
    {"id": 1, "qty": {"a": 1}, "note": "n"},
    {"id": "1", "qty": 5},
    {"id": 1, "qty": None},
    {"id": 1, "qty": 1.5},
    {"id": 1, "qty": True},
    {1: 2},
    {"id": 2**70, "qty": 1},
    {"id": float("inf"), "qty": 1},
    {"id": 1, "qty": 1, "note": b"x"},
    {"id": 1, "qty": 1, "note": ["x"]},
    42,
    "abc",
    [1, 2],
]


@pytest.mark.parametrize("value", WRONG_SHAPES, ids=repr)
def test_whatever_a_migration_leaves_the_target_cannot_hold_is_a_serialization_error(value: Any) -> None:
    """The projection onto the target checks every value (docs/semantics.md §6.4): no shape a rule
    may produce reaches the Arrow conversion, where it failed the whole pass before."""
    with pytest.raises(SerializationError, match="migrated record"):
        project(value, parse_schema(ITEM_V1_NOTED), formats.get("AVRO"))


# -- an ERROR in Python fails the job as a native ERROR does ------------------------------------


@dataclass(frozen=True)
class PythonOnly:
    """A built-in executor whose rules run in the Python pass: its native steps' Python twins."""

    executor: Any

    @property
    def type(self) -> str:
        return str(self.executor.type)

    def compile(self, ctx: Any) -> Any:
        step = self.executor.compile(ctx)
        return step.batch if isinstance(step, NativeStep) else step


class Explode:
    """A per-record executor that raises: its rule fails with the exception as its reason."""

    type = "EXPLODE"

    def transform(self, ctx: Any, message: dict[str, Any]) -> bool:
        raise ValueError(f"cannot judge {message['name']!r}")


def failure(df: Any) -> tuple[str, str, str]:
    """The exception a Spark action on `df` raises: its class name, first line and whole text."""
    with pytest.raises(Exception) as caught:
        df.collect()
    text = str(caught.value)
    return type(caught.value).__name__, text.splitlines()[0], text


def test_an_error_action_in_the_python_pass_fails_the_job_as_a_native_one(
    sink: LocalTopicSink, users: Any
) -> None:
    rules = [rule("positiveAge", "message.age > 0")]
    native = make_contract(sink, rules)
    python = make_contract(sink, rules, executors={"positiveAge": PythonOnly(CelExecutor())})
    assert "(native)" in native.explain() and "(python)" in python.explain()
    expected = (
        "SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] Rule 'positiveAge' failed in WRITE on subject 'users-value' version 1:"
        " Rule expr failed: message.age > 0",
    )
    assert failure(native.write(users))[:2] == expected
    assert failure(python.write(users))[:2] == expected
    assert failure(python.apply(users).valid)[:2] == expected


def test_an_executor_exception_behind_an_error_action_keeps_its_traceback(
    sink: LocalTopicSink, users: Any
) -> None:
    contract = make_contract(sink, [rule("judged", "", type="EXPLODE")], executors=[Explode()])
    name, first, text = failure(contract.write(users.where("id = 2")))
    assert (name, first) == (
        "SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] Rule 'judged' failed in WRITE on subject 'users-value' version 1:"
        " ValueError: cannot judge 'bob'",
    )
    assert "Traceback (most recent call last)" in text and "in transform" in text


def test_a_migration_error_in_python_fails_the_job_as_a_native_one(spark: Any, sink: LocalTopicSink) -> None:
    """Migrations in Python (reading a decoded DataFrame, and inside the decode pass) fail with the
    first line a native ERROR rule gives."""
    positive, up, down = ITEM_VERSIONS[1][1]
    registry = register_versions(
        ITEMS, [(ITEM_V1, []), (ITEM_V2, [{**positive, "onFailure": "ERROR,NONE"}, up, down])]
    )
    contract = DataContract(registry, ITEMS, version=2, dlq_sink=sink)
    expected = (
        "SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] Rule 'positive' failed in UPGRADE on subject 'items-value' version 2:"
        " Rule expr failed: message.qty > 0",
    )
    rows = spark.createDataFrame([(1, 5), (2, 0)], "id long, qty int")
    assert failure(contract.read(rows, writer_version=1))[:2] == expected
    writer = registry.get_version(ITEMS, 1)
    frames = []
    for record in ({"id": 1, "qty": 5}, {"id": 2, "qty": 0}):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, fastavro.parse_schema(ITEM_V1), record)
        frames.append((encode_frame(writer.schema_id, body.getvalue()),))
    assert failure(contract.deserialize(spark.createDataFrame(frames, "value binary")))[:2] == expected


@pytest.mark.parametrize("call", ["apply", "write", "read", "serialize", "deserialize"])
@pytest.mark.parametrize("column", ["_contract", "__contract_record"])
def test_an_input_holding_a_column_the_contract_adds_is_refused_naming_it(
    sink: LocalTopicSink, users: Any, call: str, column: str
) -> None:
    """Applying a contract again to its `rejected` rows (which carry `_contract`) must not give two
    status columns: the call says which column to drop."""
    from pyspark.sql import functions as F

    contract = make_contract(sink, [rule("positiveAge", "message.age > 0", onFailure="NONE")])
    df = users.withColumn(column, F.lit(None).cast("string"))
    if call == "deserialize":
        df = contract.serialize(users).withColumn(column, F.lit(None).cast("string"))
    with pytest.raises(ContractError, match=f"already has column '{column}'.*drop it first") as raised:
        getattr(contract, call)(df)
    assert (raised.value.subject, raised.value.version) == (SUBJECT, 1)


def test_rejected_rows_applied_again_after_dropping_the_status_are_checked_afresh(
    sink: LocalTopicSink, users: Any
) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "bad-users"})]
    contract = make_contract(sink, rules)
    again = contract.apply(contract.apply(users).rejected.drop("_contract"))
    assert ids(again.valid) == [] and ids(again.rejected) == [2, 3]


@dataclass(frozen=True)
class CopyToAudit:
    """A copy action: the record goes on, and a copy of it to the `audit` topic."""

    name: str = "AUDIT"
    topic: str = "audit"

    def plan(self, ctx: ActionContext) -> ActionPlan:
        return ActionPlan(self.name, Effect.CONTINUE, topic=self.topic)


def audited(sink: LocalTopicSink) -> list[tuple[int, str, str | None]]:
    """(id, rule, reason) of each record in the `audit` topic."""
    records = []
    for record in sink.read("audit"):
        headers = dict(record.headers)
        reason = headers.get("__rule.exception")
        rule_name = headers["__rule.name"] or b""
        value = json.loads(record.value or b"")
        records.append((value["id"], rule_name.decode(), reason.decode() if reason else None))
    return sorted(records)


@pytest.mark.parametrize("runs_in", ["native", "python"])
def test_a_copy_action_sends_each_record_once_however_often_spark_computes_it(
    sink: LocalTopicSink, users: Any, runs_in: str
) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="AUDIT")]
    executors = {"positiveAge": PythonOnly(CelExecutor())} if runs_in == "python" else None
    contract = make_contract(sink, rules, actions=[CopyToAudit()], executors=executors)
    assert f"({runs_in})" in contract.explain()
    written = contract.write(users, run_id="audited-run")
    assert ids(written) == [1, 2, 3]  # the record goes on
    assert written.count() == 3
    written.write.format("noop").mode("overwrite").save()
    reason = "Rule expr failed: message.age > 0"
    assert audited(sink) == [(2, "positiveAge", reason), (3, "positiveAge", reason)]
    # A rerun under the same run id replaces the run's copies; apply() delivers none.
    assert ids(contract.write(users, run_id="audited-run")) == [1, 2, 3]
    assert ids(contract.apply(users).valid) == [1, 2, 3]
    assert len(audited(sink)) == 2


def test_a_row_copied_by_one_rule_and_rejected_by_the_next_goes_to_both_topics(
    sink: LocalTopicSink, users: Any
) -> None:
    rules = [
        rule("hasName", "message.name != ''", onSuccess="AUDIT", onFailure="NONE"),
        rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "age"}),
    ]
    written = make_contract(sink, rules, actions=[CopyToAudit()]).write(users)
    assert ids(written) == [1]
    assert [row[:2] for row in audited(sink)] == [(1, "hasName"), (2, "hasName")]
    assert sorted(json.loads(r.value or b"")["id"] for r in sink.read("age")) == [2, 3]


def test_a_copy_action_with_a_bad_topic_fails_at_load(sink: LocalTopicSink) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="AUDIT")]
    with pytest.raises(ContractError, match=r"actions\.AUDIT\.topic"):
        make_contract(sink, rules, actions=[CopyToAudit(topic="no spaces")])


@pytest.mark.parametrize("runs", ["native", "python"])
def test_warnings_column_names_the_none_rules_each_valid_row_failed(
    sink: LocalTopicSink, users: Any, runs: str
) -> None:
    rules = [
        rule("hasEmail", "has(message.email) && message.email != null", onFailure="NONE"),
        rule("named", "message.name != ''", onFailure="NONE"),
        rule("notBob", "message.name != 'bob'", onFailure="DLQ", params={"dlq.topic": "bobs"}),
    ]
    executors = {"named": PythonOnly(CelExecutor())} if runs == "python" else None
    contract = make_contract(sink, rules, executors=executors, warnings_column=True)

    result = contract.apply(users)
    written = contract.write(users)

    expected = {1: [], 3: ["named"]}
    assert {row["id"]: row["_contract_warnings"] for row in result.valid.collect()} == expected
    assert {row["id"]: row["_contract_warnings"] for row in written.collect()} == expected
    assert "_contract_warnings" not in result.rejected.columns
    assert "_contract_warnings" not in make_contract(sink, rules).apply(users).valid.columns
    with pytest.raises(ContractError, match="already has column '_contract_warnings'"):
        contract.apply(result.valid)


def test_conform_casts_and_reorders_what_widens_and_names_what_does_not(
    sink: LocalTopicSink, spark: Any
) -> None:
    contract = make_contract(sink, [])
    df = spark.createDataFrame([("t", 20, 1, "ann")], "topic string, age smallint, id int, name string")

    conformed = contract.conform(df)

    assert conformed.columns == ["id", "name", "email", "age", "topic"]
    assert [f.dataType.simpleString() for f in conformed.schema.fields] == [
        "bigint",
        "string",
        "string",
        "int",
        "string",
    ]
    assert [tuple(row) for row in contract.write(conformed).collect()] == [(1, "ann", None, 20, "t")]
    stringly = spark.createDataFrame([(1, "ann", "20")], "id long, name string, age string")
    with pytest.raises(ContractError, match="column 'age' is string but the schema says int") as refused:
        contract.conform(stringly)
    assert refused.value.position == "age"


def test_conform_matches_nested_fields_by_name_inside_arrays_and_maps(spark: Any) -> None:
    item = {
        "type": "record",
        "name": "Item",
        "fields": [{"name": "qty", "type": "long"}, {"name": "sku", "type": "string"}],
    }
    order = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "items", "type": {"type": "array", "items": item}},
            {"name": "prices", "type": {"type": "map", "values": "double"}},
        ],
    }
    registry = LocalRegistry()
    registry.register_schema("orders-value", Schema(json.dumps(order)))
    contract = DataContract(registry, "orders-value")
    df = spark.createDataFrame(
        [([("a", 2)], {"a": 1.5})], "items array<struct<sku:string,qty:int>>, prices map<string,float>"
    )

    conformed = contract.conform(df)

    assert conformed.schema.simpleString() == contract.spark_schema.simpleString()
    assert conformed.collect()[0]["items"][0].asDict() == {"qty": 2, "sku": "a"}
    extra = spark.createDataFrame([([("a", 2, "x")],)], "items array<struct<sku:string,qty:int,note:string>>")
    with pytest.raises(
        ContractError, match=r"column 'items\[\]' has field\(s\) note the schema's struct lacks"
    ):
        contract.conform(extra)


def test_a_contract_pickles_after_its_plans_compiled(sink: LocalTopicSink, users: Any) -> None:
    """foreach_batch on Spark Connect sends the contract to the server inside its function."""
    contract = make_contract(
        sink, [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "t"})]
    )
    contract.write(users)  # compiles the WRITE plan that runs
    copy = cloudpickle.loads(cloudpickle.dumps(contract))
    assert ids(copy.write(users)) == ids(contract.write(users))
