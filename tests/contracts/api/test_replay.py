"""Replaying DLQ topics end to end with real DataFrames: write with DLQ rules, fix the contract,
replay, and account for every record (docs/semantics.md §7.7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts import (
    ContractError,
    DataContract,
    DlqError,
    LocalRegistry,
    LocalTopicSink,
    RegistryError,
    Schema,
    metrics_of,
)

SUBJECT = "payments-value"
SCHEMA = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
    ],
}


def _rule(name: str, expr: str, topic: str, mode: str = "WRITE") -> dict[str, Any]:
    return {
        "name": name,
        "kind": "CONDITION",
        "type": "CEL",
        "mode": mode,
        "expr": expr,
        "onFailure": "DLQ",
        "params": {"dlq.topic": topic},
    }


def _register(registry: LocalRegistry, *rules: dict[str, Any]) -> None:
    payload = {"schema": json.dumps(SCHEMA), "ruleSet": {"domainRules": list(rules)}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))


POSITIVE = _rule("positive", "message.amount > 0.0", "payments-dlq")
# Version 1 knows two currencies; version 2, the fix, knows GBP too.
CURRENCY_V1 = _rule("knownCurrency", "message.currency in ['EUR', 'USD']", "payments-dlq")
CURRENCY_V2 = _rule("knownCurrency", "message.currency in ['EUR', 'USD', 'GBP']", "payments-dlq")

ROWS = [
    (1, 10.0, "EUR"),  # valid
    (2, -5.0, "EUR"),  # fails positive
    (3, 7.0, "GBP"),  # fails knownCurrency (fixed in version 2)
    (4, -1.0, "JPY"),  # fails positive; replayed past it, fails knownCurrency
    (5, 0.0, "USD"),  # fails positive
    (6, 3.0, "GBP"),  # fails knownCurrency (fixed in version 2)
]


def _payments(spark: Any) -> Any:
    df = spark.createDataFrame(ROWS, "id long, amount double, currency string")
    return df.selectExpr("*", "cast(id as string) as key", "'payments' as topic")


def test_a_fixed_contract_replays_a_dlq_topic_and_nothing_is_lost(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    _register(registry, POSITIVE, CURRENCY_V1)
    sink = LocalTopicSink(tmp_path / "dlq")
    first = DataContract(registry, SUBJECT, dlq_sink=sink)
    assert [row.id for row in first.write(_payments(spark)).collect()] == [1]
    assert sink.count("payments-dlq") == 5
    failed_on = {row.record.id: row.rule for row in sink.read_df(spark, "payments-dlq", first).collect()}
    assert failed_on == {2: "positive", 3: "knownCurrency", 4: "positive", 5: "positive", 6: "knownCurrency"}

    _register(registry, POSITIVE, CURRENCY_V2)  # the fix: version 2
    fixed = DataContract(registry, SUBJECT, dlq_sink=sink)
    assert fixed.version == 2
    replayed = fixed.replay("payments-dlq", run_id="fix-1", spark=spark)
    valid = sorted(replayed.collect(), key=lambda row: row.id)
    # Each record skipped the rule it had failed on: 2 and 5 pass positive's skip and the rest,
    # 3 and 6 pass now GBP is known (and JPY's 4, past positive, fails knownCurrency again).
    assert [(row.id, row.amount, row.currency) for row in valid] == [
        (2, -5.0, "EUR"),
        (3, 7.0, "GBP"),
        (5, 0.0, "USD"),
        (6, 3.0, "GBP"),
    ]
    assert replayed.columns == ["id", "amount", "currency", "key", "headers", "topic"]
    # The counts of the replay's parts, per rule: 3 and 6 ran positive, 2, 4 and 5 knownCurrency.
    counts = metrics_of(replayed).get()  # type: ignore[union-attr]
    assert {rule: (c.passed, c.failed, c.by_action.get("DLQ")) for rule, c in counts.items()} == {
        "positive": (2, 0, 0),
        "knownCurrency": (2, 1, 1),
    }
    assert {row.topic for row in valid} == {"payments"}  # the topic they were first bound for
    assert [row.key for row in valid] == [b"2", b"3", b"5", b"6"]

    again = [
        row for row in sink.read_df(spark, "payments-dlq", fixed).collect() if row.writer.startswith("fix-1-")
    ]
    assert sum(sink.count("payments-dlq", run_id=f"fix-1-{n}") for n in range(3)) == 1
    (record,) = again
    assert (record.record.id, record.rule, record.mode, record.source_topic) == (
        4,
        "knownCurrency",
        "WRITE",
        "payments",
    )
    # Its headers: those it arrived with (the first failure's), then the new failure's.
    names = [header.key for header in record.headers]
    assert names.count("__rule.name") == 2
    assert [h.value for h in record.headers if h.key == "__rule.name"] == [b"positive", b"knownCurrency"]
    assert record.key == b"4"
    assert len(valid) + len(again) == 5  # every replayed record is valid or in a DLQ again


def test_a_record_replayed_twice_skips_the_rule_it_failed_on_last(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    _register(registry, POSITIVE, CURRENCY_V1)
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    df = spark.createDataFrame([(4, -1.0, "JPY")], "id long, amount double, currency string")
    assert contract.write(df).count() == 0
    assert contract.replay("payments-dlq", run_id="r1", spark=spark).count() == 0
    second = sink.read_df(spark, "payments-dlq").filter("writer like 'r1-%'")
    assert [row.rule for row in second.collect()] == ["knownCurrency"]
    # Replayed again, it skips knownCurrency (its last __rule.name) and fails positive once more.
    assert contract.replay(second, run_id="r2").count() == 0
    third = sink.read_df(spark, "payments-dlq").filter("writer like 'r2-%'").collect()
    assert [row.rule for row in third] == ["positive"]
    assert [h.value for h in third[0].headers if h.key == "__rule.name"] == [
        b"positive",
        b"knownCurrency",
        b"positive",
    ]


def test_a_rerun_of_a_replay_with_its_run_id_replaces_its_dlq_output(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    _register(registry, POSITIVE, CURRENCY_V1)
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    contract.write(_payments(spark)).collect()
    dlq = sink.read_df(spark, "payments-dlq")
    for _ in range(2):
        # 2 and 5 skip positive, 3 and 6 skip knownCurrency; 4 skips positive, fails knownCurrency.
        assert contract.replay(dlq, run_id="again").count() == 4
    # 4 is in the DLQ once however often the replay ran, and the topic holds the first run's 5.
    assert sum(sink.count("payments-dlq", run_id=f"again-{n}") for n in range(3)) == 1
    assert sink.count("payments-dlq") == 6


@pytest.mark.one_pass  # which files a replay takes is decided on the driver, whatever the session
def test_replays_of_a_topic_take_only_what_no_replay_took_and_reruns_converge(
    spark: Any, tmp_path: Path
) -> None:
    registry = LocalRegistry()
    _register(registry, POSITIVE, CURRENCY_V1)
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    contract.write(_payments(spark)).collect()

    def replayed(run_id: str) -> list[int]:
        return sorted(row.id for row in contract.replay("payments-dlq", run_id=run_id, spark=spark).collect())

    def sent_back(run_id: str) -> int:
        return sum(sink.count("payments-dlq", run_id=f"{run_id}-{n}") for n in range(3))

    # Run twice with one run id, the replay takes the same five records and sends 4 back once.
    for _ in range(2):
        assert replayed("fix1") == [2, 3, 5, 6]
        assert (sink.count("payments-dlq"), sent_back("fix1")) == (6, 1)
    # The next replay takes only what fix1 sent back: 4, which skips knownCurrency and fails
    # positive, going back once; nothing recovered comes out again.
    assert replayed("fix2") == []
    assert (sink.count("payments-dlq"), sent_back("fix2")) == (7, 1)
    # fix2 took what fix1 sent back: rerunning fix1 would replay 4 twice.
    with pytest.raises(DlqError, match="replay 'fix2' took records replay 'fix1' sent back"):
        contract.replay("payments-dlq", run_id="fix1", spark=spark)
    assert sink.count("payments-dlq") == 7


def test_wire_format_rejects_replay_through_deserialize(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    not_test = _rule("notTest", "message.currency != 'XXX'", "payments-read-dlq", mode="READ")
    positive = _rule("positiveRead", "message.amount > 0.0", "payments-read-dlq", mode="READ")
    _register(registry, not_test, positive)
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    rows = [(1, 1.0, "EUR"), (2, 2.0, "XXX"), (3, -3.0, "XXX")]
    frames = contract.serialize(
        spark.createDataFrame(rows, "id long, amount double, currency string").selectExpr(
            "*", "cast(id as string) as key", "'payments' as topic"
        )
    )
    originals = {row.key: row.value for row in frames.collect()}
    decoded = contract.deserialize(frames.select("key", "value", "topic"))
    assert [row.id for row in decoded.collect()] == [1]
    # READ rules run in reverse order: 3 fails positiveRead first, 2 fails notTest.
    assert {row.key: row.rule for row in sink.read_df(spark, "payments-read-dlq").collect()} == {
        b"2": "notTest",
        b"3": "positiveRead",
    }

    replayed = contract.replay("payments-read-dlq", apply="deserialize", run_id="read-fix", spark=spark)
    assert [(row.id, row.key, row.topic) for row in replayed.collect()] == [(2, b"2", "payments")]
    (back,) = sink.read_df(spark, "payments-read-dlq").filter("writer like 'read-fix-%'").collect()
    # 3 skipped positiveRead and failed notTest: its frame goes back as it arrived.
    assert (back.key, back.rule, back.mode, back.value) == (b"3", "notTest", "READ", originals["3"])


@pytest.mark.one_pass  # `read`'s records as any: JSON values read back natively
def test_records_read_rejected_replay_through_read(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    _register(registry, _rule("notTest", "message.currency != 'XXX'", "read-dlq", mode="READ"))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    rows = spark.createDataFrame([(1, 1.0, "EUR"), (2, 2.0, "XXX")], contract.spark_schema)
    assert [row.id for row in contract.read(rows).collect()] == [1]
    # Its value is the record as JSON; replayed through `read`, it skips notTest.
    replayed = contract.replay("read-dlq", apply="read", writer_version=1, run_id="fix", spark=spark)
    assert [(row.id, row.currency) for row in replayed.collect()] == [(2, "XXX")]


def test_a_wire_format_record_replayed_as_json_fails_the_job_saying_what_to_do(
    spark: Any, tmp_path: Path
) -> None:
    registry = LocalRegistry()
    _register(registry, _rule("positiveRead", "message.amount > 0.0", "read-dlq", mode="READ"))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    frames = contract.serialize(
        spark.createDataFrame([(3, -3.0, "EUR")], "id long, amount double, currency string")
    )
    assert contract.deserialize(frames).count() == 0
    with pytest.raises(Exception, match=r"holds no JSON record.*apply='deserialize'"):
        contract.replay("read-dlq", run_id="as-json", spark=spark).collect()


def test_replay_refuses_bad_arguments(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    _register(registry, POSITIVE)
    contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / "dlq"))
    with pytest.raises(ContractError, match="replaying topic 'payments-dlq' needs a run_id"):
        contract.replay("payments-dlq", spark=spark)
    with pytest.raises(ContractError, match="apply must be one of write, read, deserialize"):
        contract.replay("payments-dlq", apply="decode", run_id="r", spark=spark)
    with pytest.raises(ContractError, match="read takes only writer_version, got on_decode_error"):
        contract.replay("payments-dlq", apply="read", run_id="r", on_decode_error="DLQ", spark=spark)
    with pytest.raises(ContractError, match="1-96 ASCII letters"):
        contract.replay("payments-dlq", run_id="x" * 97, spark=spark)
    with pytest.raises(ContractError, match="write takes no options, got on_decode_error"):
        contract.replay("payments-dlq", run_id="r", spark=spark, on_decode_error="DLQ")
    assert not (tmp_path / "dlq").exists()  # refused before the replay took anything


def test_a_replays_registry_looks_up_the_schemas_it_gives() -> None:
    # A schema id first seen while a replay runs is read through the replay's registry, then
    # looked up under the subject: the rule-disabled schema it gave must be found.
    from contracts.replay import RuleSkippingRegistry

    registry = LocalRegistry()
    _register(registry, POSITIVE)
    _register(registry, POSITIVE, CURRENCY_V1)
    skipping = RuleSkippingRegistry(registry, "positive")
    schema_id = registry.get_version(SUBJECT, 2).schema_id

    found = skipping.lookup_schema(SUBJECT, skipping.get_schema(schema_id))

    assert found.version == 2
    assert [(r.name, r.disabled) for r in found.schema.rule_set.domain_rules] == [
        ("positive", True),
        ("knownCurrency", False),
    ]
    with pytest.raises(RegistryError):
        skipping.lookup_schema(SUBJECT, Schema(json.dumps({**SCHEMA, "name": "Other"})))
