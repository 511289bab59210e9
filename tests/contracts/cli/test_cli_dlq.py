"""`spark-contracts dlq show` and `dlq replay`: a DLQ topic as a table, and replayed after a fix."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actions.dlq import replays
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


def _version(root: Path, version: int, minimum_age: int, unnamed: str = "unnamed") -> None:
    rule = {
        "name": "adult",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": f"message.age >= {minimum_age}",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "minors"},
    }
    named = {**rule, "name": "named", "expr": "size(message.name) > 1", "params": {"dlq.topic": unnamed}}
    payload = {"schema": json.dumps(USER), "ruleSet": {"domainRules": [rule, named]}}
    path = root / SUBJECT / f"{version}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


@pytest.mark.one_pass  # dlq show reads files in Python; the session only writes them
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

    status, out, err = cli("dlq", "show", "minors", "--dlq-dir", str(dlq_dir), "--json", spark=spark)
    assert status == 0 and err == f"minors: 3 records in {dlq_dir}/minors (showing 3)\n"
    wire, *written = [json.loads(line) for line in out.splitlines()]
    assert wire["value"] == {"base64": "AAAAAAEC"} and wire["rule"] == "deserialize"
    assert wire["timestamp"] == "1970-01-01T00:00:00.001Z"
    (bob,) = [r for r in written if json.loads(r["value"]) == {"name": "bob", "age": 12}]
    assert (bob["rule"], bob["mode"], bob["subject"], bob["reason"], bob["replayed"]) == (
        "adult",
        "WRITE",
        "users-value",
        "Rule expr failed: message.age >= 18",
        False,
    )
    assert [h["key"] for h in bob["headers"]][-1] == "__rule.exception" and bob["offset"] in (0, 1)


@pytest.mark.one_pass  # the replay itself runs on both: tests/contracts/api/test_replay.py
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


@pytest.mark.one_pass  # the bookkeeping is the session's on both: tests/contracts/api/test_replay.py
def test_a_replay_rerun_with_its_run_id_takes_the_same_records_and_loses_none(
    spark: Any, tmp_path: Path
) -> None:
    contracts, dlq_dir, output = tmp_path / "contracts", tmp_path / "dlq", tmp_path / "valid"
    _version(contracts, 1, 18, unnamed="minors")
    sink = LocalTopicSink(dlq_dir)
    contract = DataContract(LocalRegistry(contracts), SUBJECT, dlq_sink=sink)
    df = spark.createDataFrame([("ann", 30), ("bob", 16), ("c", 15)], "name string, age int")
    assert contract.write(df).count() == 1
    _version(contracts, 2, 16, unnamed="minors")  # "c", past `adult`, fails `named` back into minors

    argv = ["dlq", "replay", "minors", "--registry", str(contracts), "--subject", SUBJECT]
    argv += ["--dlq-dir", str(dlq_dir)]
    for _ in range(2):  # the same run id twice: the same records, nothing lost or added
        status, out, err = cli(*argv, "--output", str(output), "--run-id", "fix1", spark=spark)
        assert status == 0, err
        assert out.splitlines() == [
            "replayed 2 records of minors (run fix1)",
            f"valid rows: 1 -> {output}",
            f"DLQ minors: 1 rows -> {dlq_dir}/minors",
        ]
        assert sink.count("minors") == 3
    status, out, _ = cli("dlq", "show", "minors", "--dlq-dir", str(dlq_dir), spark=spark)
    assert out.splitlines()[-1] == f"minors: 3 records in {dlq_dir}/minors, 2 taken by replays (showing 3)"


def _records(dlq_dir: Path, topic: str, *values: bytes) -> None:
    with LocalTopicSink(dlq_dir).open(f"{topic}-job.00000") as writer:
        for at, value in enumerate(values):
            headers = (("__rule.name", b"positive"), ("__rule.exception", b"x" * 100))
            writer.write(DlqRecord(topic, b"k", value, headers, at))


def test_dlq_show_reads_the_files_without_importing_pyspark(tmp_path: Path) -> None:
    _records(tmp_path, "orders-dlq", b'{"id": 1}', b'{"id": 2}')
    script = (
        "import sys\n"
        "from contracts.cli.main import main\n"
        f"missing = main(['dlq', 'show', 'order-dlq', '--dlq-dir', {str(tmp_path)!r}])\n"
        "assert missing == 1, missing\n"  # its error told without Spark too
        f"status = main(['dlq', 'show', 'orders-dlq', '--dlq-dir', {str(tmp_path)!r}])\n"
        "assert not [m for m in sys.modules if m.startswith(('pyspark', 'py4j', 'pyarrow'))]\n"
        "sys.exit(status)\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.startswith("spark-contracts dlq: DlqError: no topic 'order-dlq'")
    assert shown.stdout.splitlines()[2].split()[2:4] == ["positive", "-"]
    assert shown.stdout.splitlines()[-1] == f"orders-dlq: 2 records in {tmp_path}/orders-dlq (showing 2)"


def test_dlq_show_cuts_cells_unless_full(tmp_path: Path) -> None:
    _records(tmp_path, "orders-dlq", b"\xff\x00")
    status, out, _ = cli("dlq", "show", "orders-dlq", "--dlq-dir", str(tmp_path))
    assert status == 0 and "x" * 59 + "…" in out and "0xff00" in out
    status, out, _ = cli("dlq", "show", "orders-dlq", "--dlq-dir", str(tmp_path), "--full")
    assert status == 0 and "x" * 100 in out


def test_dlq_errors_are_one_line_and_exit_1_naming_the_topics_there(tmp_path: Path) -> None:
    _records(tmp_path, "orders-dlq", b"{}")
    _records(tmp_path, "users-dlq", b"{}")
    status, out, err = cli("dlq", "show", "order-dlq", "--dlq-dir", str(tmp_path))
    assert (status, out) == (1, "")
    assert err == (
        f"spark-contracts dlq: DlqError: no topic 'order-dlq' in {tmp_path}; its topics: orders-dlq,"
        " users-dlq\n"
    )
    status, _, err = cli("dlq", "show", "t", "--dlq-dir", str(tmp_path / "nowhere"))
    assert (
        status == 1
        and err == f"spark-contracts dlq: DlqError: no DLQ directory {tmp_path}/nowhere (--dlq-dir)\n"
    )
    _version(tmp_path / "contracts", 1, 18)
    argv = ["dlq", "replay", "order-dlq", "--registry", str(tmp_path / "contracts"), "--output", "o"]
    status, _, err = cli(*argv, "--subject", SUBJECT, "--dlq-dir", str(tmp_path))
    assert status == 1 and err.startswith("spark-contracts dlq: DlqError: no topic 'order-dlq'")
    status, _, err = cli(*argv, "--subject", "nobody", "--dlq-dir", str(tmp_path))  # the contract first
    assert (
        status == 1
        and err
        == "spark-contracts dlq: RegistryError: Subject 'nobody' not found. (status 404, error_code 40401)\n"
    )
    status, _, err = cli("--debug", "dlq", "show", "order-dlq", "--dlq-dir", str(tmp_path))
    assert status == 1 and "Traceback (most recent call last)" in err and "DlqError" in err.splitlines()[-1]


def test_dlq_replay_of_records_other_replays_took_says_which_and_runs_nothing(tmp_path: Path) -> None:
    _version(tmp_path / "contracts", 1, 18)
    _records(tmp_path, "minors", b"{}", b"{}")
    replays.take(LocalTopicSink(tmp_path), "minors", "fix1")  # as a replay that failed leaves it
    argv = ["dlq", "replay", "minors", "--registry", str(tmp_path / "contracts"), "--subject", SUBJECT]
    status, out, err = cli(*argv, "--output", "o", "--dlq-dir", str(tmp_path), "--run-id", "fix2")
    assert (status, err) == (0, "")
    assert out == (
        "nothing to replay in minors (run fix2); skipped 2 that replay fix1 took: rerun it with its"
        " --run-id if it failed\n"
    )


def test_dlq_help_says_what_topic_is_and_the_default_directory() -> None:
    for action in ("show", "replay"):
        status, out, _ = cli("dlq", action, "--help")
        assert status == 0
        assert "TOPIC" in out and "the DLQ topic: a directory of --dlq-dir" in out
        assert "(default: ./dlq-topics)" in out
