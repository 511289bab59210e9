"""The DataContract API end to end on real DataFrames: rule order, modes, actions, transforms,
user executors and actions, columns, conform, pickling."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dataframe_users import SUBJECT, USER, PythonOnly, failure, ids, make_contract, register, rule, suffix
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from actions.protocol import ActionContext, ActionPlan, Effect
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError
from executors.cel.executor import CelExecutor

# Executors and actions defined here run on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


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


def test_a_transform_feeds_the_next_rule(sink: LocalTopicSink, users: Any) -> None:
    rules = [
        suffix("bang", "!", mode="WRITE"),
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
    contract = make_contract(sink, [suffix("addA", "a"), suffix("addB", "b")])
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
    contract = make_contract(sink, [suffix("bang", "!", mode="WRITE")])
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
    rules = [suffix("bang", "!", mode="WRITE")]
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
