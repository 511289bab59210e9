"""`spark-contracts dlq show` and `dlq replay`: a DLQ topic as a table, and replayed after a fix."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from actions.dlq.local_topic import LocalTopicSink
from actions.dlq.sink import DlqRecord
from contracts import DataContract, LocalRegistry
from contracts.cli.main import run

SUBJECT = "users-value"
USER = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}


def cli(*argv: str, spark: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), spark=spark, stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _version(root: Path, version: int, minimum_age: int) -> None:
    rule = {
        "name": "adult",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": f"message.age >= {minimum_age}",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "minors"},
    }
    named = {**rule, "name": "named", "expr": "size(message.name) > 1", "params": {"dlq.topic": "unnamed"}}
    payload = {"schema": json.dumps(USER), "ruleSet": {"domainRules": [rule, named]}}
    path = root / SUBJECT / f"{version}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_dlq_show_prints_the_records_with_their_rule_and_reason(spark: Any, tmp_path: Path) -> None:
    contracts, dlq_dir = tmp_path / "contracts", tmp_path / "dlq"
    _version(contracts, 1, 18)
    sink = LocalTopicSink(dlq_dir)
    contract = DataContract(LocalRegistry(contracts), SUBJECT, dlq_sink=sink)
    df = spark.createDataFrame([("ann", 30), ("bob", 12), ("cy", 9)], "name string, age int")
    assert contract.write(df).count() == 1
    with sink.open("wire.00000") as writer:  # a read-side reject: its value is a wire frame
        writer.write(
            DlqRecord("minors", None, b"\x00\x00\x00\x00\x01\x02", (("__rule.name", b"deserialize"),), 1)
        )

    status, out, err = cli("dlq", "show", "minors", "--dlq-dir", str(dlq_dir), spark=spark)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["timestamp", "rule", "mode", "subject", "reason", "key", "value"]
    body = lines[2:-1]
    assert len(body) == 3
    assert "deserialize" in body[0] and "0x00000000010" in body[0]  # the oldest first; bytes as hex
    shown = set(body[1:])
    assert any(
        '{"name": "bob", "age": 12}' in line and "Rule expr failed: message.age >= 18" in line
        for line in shown
    )
    assert all(line.split()[2:5] == ["adult", "WRITE", "users-value"] for line in shown), out
    assert lines[-1] == f"minors: 3 records in {dlq_dir}/minors (showing 3)"

    status, out, _ = cli("dlq", "show", "minors", "--dlq-dir", str(dlq_dir), "-n", "1", spark=spark)
    assert status == 0 and out.splitlines()[-1].endswith("(showing 1)") and len(out.splitlines()) == 4


def test_dlq_replay_writes_the_fixed_rows_and_sends_the_rest_back(spark: Any, tmp_path: Path) -> None:
    contracts, dlq_dir, output = tmp_path / "contracts", tmp_path / "dlq", tmp_path / "valid"
    _version(contracts, 1, 18)
    sink = LocalTopicSink(dlq_dir)
    contract = DataContract(LocalRegistry(contracts), SUBJECT, dlq_sink=sink)
    df = spark.createDataFrame([("ann", 30), ("bob", 16), ("c", 15)], "name string, age int")
    assert contract.write(df).count() == 1
    assert sink.count("minors") == 2
    _version(contracts, 2, 16)  # the fix; replayed past `adult`, "c" still fails `named`

    argv = ["dlq", "replay", "minors", "--registry", str(contracts), "--subject", SUBJECT]
    argv += ["--output", str(output), "--dlq-dir", str(dlq_dir), "--run-id", "fix"]
    status, out, err = cli(*argv, spark=spark)
    assert status == 0, err
    assert out.splitlines() == [
        "replayed 2 records of minors (run fix)",
        f"valid rows: 1 -> {output}",
        f"DLQ unnamed: 1 rows -> {dlq_dir}/unnamed",
    ]
    assert [(r.name, r.age) for r in spark.read.parquet(str(output)).collect()] == [("bob", 16)]
    (back,) = sink.read_df(spark, "unnamed").collect()
    assert (back.rule, json.loads(back.value)) == ("named", {"name": "c", "age": 15})

    # The same run id again replaces the output and the replay's own DLQ records.
    status, out, err = cli(*argv, spark=spark)
    assert status == 0, err
    assert sink.count("unnamed") == 1
    assert spark.read.parquet(str(output)).count() == 1


def test_dlq_usage_errors_exit_2(tmp_path: Path) -> None:
    assert cli("dlq", "show", "t", "-n", "0")[0] == 2
    assert (
        cli("dlq", "replay", "t", "--registry", "r", "--subject", "s", "--output", "o", "--run-id", "a.b")[0]
        == 2
    )
    assert cli("dlq")[0] == 2
