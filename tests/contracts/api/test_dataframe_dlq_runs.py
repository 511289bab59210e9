"""DLQ output of a call on real DataFrames: run ids and reruns, headers, one scan of the source, and
copy actions sending each record once."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dataframe_users import ROWS, SUBJECT, PythonOnly, ids, make_contract, rule, suffix
from pyspark import cloudpickle
from read_counter import ReadCounter

from actions.dlq.local_topic import LocalTopicSink
from actions.protocol import ActionContext, ActionPlan, Effect
from contracts.errors import ContractError
from executors.cel.executor import CelExecutor

# Executors and actions defined here run on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


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
    # Partitions [0, 1] [2, 3] [4, 5]: the third, holding the unnamed user, fails the job, which
    # may have committed some minors of the others by then (none when the valid rows' branch runs
    # first, docs/semantics.md §7.5).
    with pytest.raises(Exception, match="named"):
        contract.write(people(spark, 3, unnamed=5), run_id="nightly-42").collect()
    assert sink.count("minors") <= 4

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
        suffix("bang", "!", mode="WRITE"),
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
    # Only the rejected rows cross to Python, in a branch of their own (docs/semantics.md §7.5).
    assert "MapInArrow" in plan and "ArrowEvalPython" not in plan
    assert ids(without_dlq.write(users)) == [1, 2, 3]


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


def test_names_spark_reads_as_paths_or_quotes_keep_their_columns_and_values(
    sink: LocalTopicSink, spark: Any
) -> None:
    """Record fields and passed-through columns named with a dot, a space or a backquote come out
    of `write` under their own names, with their values, in the valid rows and the DLQ records
    (the query names such columns by quoted strings, docs/architecture.md)."""
    from contracts import DataContract, LocalRegistry, Schema

    names = ["a.b", "with space", "back`tick"]
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, **{name: {"type": "string"} for name in names}},
        "required": ["id", *names],
    }
    even = rule("even", "message.id % 2 == 0", onFailure="DLQ", params={"dlq.topic": "odd"})
    registry = LocalRegistry()
    payload = {"schemaType": "JSON", "schema": json.dumps(schema), "ruleSet": {"domainRules": [even]}}
    registry.register_schema("names-value", Schema.from_dict(payload))
    contract = DataContract(registry, "names-value", dlq_sink=sink)
    df = spark.range(4).selectExpr(
        "id",
        "concat('x', id) AS `a.b`",
        "'s' AS `with space`",
        "'t' AS `back``tick`",
        "id * 10 AS `pass.through`",
    )

    valid = contract.write(df, run_id="names")

    assert valid.columns == ["id", *names, "pass.through"]
    assert sorted(tuple(row) for row in valid.collect()) == [(0, "x0", "s", "t", 0), (2, "x2", "s", "t", 20)]
    rejected = sorted((json.loads(record.value or b"") for record in sink.read("odd")), key=lambda r: r["id"])
    assert rejected == [{"id": n, "a.b": f"x{n}", "with space": "s", "back`tick": "t"} for n in (1, 3)]
