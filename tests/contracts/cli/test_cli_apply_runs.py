"""`spark-contracts apply` end to end on Parquet, JSON lines and wire format: valid rows, DLQ
records, the summary, keys, ERROR actions, reruns and the version it targets."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, write_version
from cli_users import RULES, SUBJECT, USER, cel, contract_payload, dlq, summary_row

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.wire import encode_frame

# -- apply -----------------------------------------------------------------------------------


def test_apply_write_on_parquet_writes_valid_rows_the_dlq_and_a_summary(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "users.parquet"
    rows = [("ann", 30, "ann@example.com"), ("bob", 12, "bob@example.com"), ("", 40, "x@example.com")]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "write",
        "--input", str(source), "--format", "parquet", "--output", str(output), "--dlq-dir", str(dlq_dir),
        spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    valid = spark.read.parquet(str(output)).orderBy("age").collect()
    assert [tuple(row) for row in valid] == [("ann", 30, "ann@example.com"), ("", 40, "x@example.com")]
    [rejected] = dlq(dlq_dir, "minors")
    assert rejected["value"] == {"name": "bob", "age": 12, "email": "bob@example.com"}
    assert rejected["headers"]["__rule.name"] == b"adult"
    assert ran.out.splitlines() == [
        "rule   mode   passed  failed  actions",
        "-----  -----  ------  ------  ------------",
        "adult  WRITE       2       1  NONE=2 DLQ=1",
        "named  WRITE       1       1  NONE=2",
        f"valid rows: 2 -> {output}",
        f"DLQ minors: 1 rows -> {dlq_dir}/minors",
    ]


def test_apply_read_on_json_lines_runs_the_read_rules(spark: Any, users_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "users.jsonl"
    lines = [
        {"name": "ann", "age": 30, "email": "ann@example.com"},
        {"name": "cy", "age": 9, "email": "nope"},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ",
        "--input", str(source), "--format", "json", "--output", str(output), "--dlq-dir", str(dlq_dir),
        spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    assert [row.name for row in spark.read.parquet(str(output)).collect()] == ["ann"]
    assert [r["value"]["name"] for r in dlq(dlq_dir, "bad-emails")] == ["cy"]
    assert summary_row(ran.out, "validEmail") == ["validEmail", "READ", "1", "1", "NONE=1", "DLQ=1"]


@pytest.fixture(scope="module")
def frames(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """Three records in Confluent wire format, written with the users contract's version 1."""
    root = tmp_path_factory.mktemp("frames")
    write_version(root / "registry", SUBJECT, 1, contract_payload(RULES))
    contract = DataContract(LocalRegistry(root / "registry"), SUBJECT, dlq_sink=LocalTopicSink(root / "dlq"))
    rows = [("ann", 30, "ann@example.com"), ("dee", 50, "not-an-email"), ("eve", 22, "eve@example.com")]
    df = spark.createDataFrame(
        [(*row, row[0]) for row in rows], "name string, age int, email string, key string"
    )
    return [bytes(row.value) for row in contract.serialize(df).orderBy("key").collect()]


@pytest.mark.parametrize("fmt", ["avro-parquet", "avro-json"])
def test_apply_on_wire_format_decodes_then_runs_the_read_rules(
    spark: Any, users_dir: Path, tmp_path: Path, frames: list[bytes], fmt: str
) -> None:
    source = tmp_path / "topic"
    if fmt == "avro-parquet":
        spark.createDataFrame([(f,) for f in frames], "value binary").write.parquet(str(source))
    else:
        source.write_text("".join(json.dumps({"value": base64.b64encode(f).decode()}) + "\n" for f in frames))
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ",
        "--input", str(source), "--format", fmt, "--output", str(output), "--dlq-dir", str(dlq_dir),
        spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    valid = spark.read.parquet(str(output)).orderBy("name").collect()
    assert [(row.name, row.age) for row in valid] == [("ann", 30), ("eve", 22)]
    [rejected] = LocalTopicSink(dlq_dir).read("bad-emails")
    assert (
        rejected.value == frames[1]
    )  # on READ the DLQ gets the bytes as they arrived (docs/semantics.md §7)
    assert summary_row(ran.out, "validEmail") == ["validEmail", "READ", "2", "1", "NONE=2", "DLQ=1"]
    assert f"DLQ bad-emails: 1 rows -> {dlq_dir}/bad-emails" in ran.out
    assert "READ rules of users-value version 1" in ran.err


def test_apply_decodes_framed_keys_with_the_key_subject_first(
    spark: Any, users_dir: Path, tmp_path: Path, frames: list[bytes]
) -> None:
    key_schema = {"type": "record", "name": "UserKey", "fields": [{"name": "id", "type": "string"}]}
    rule = cel(
        "knownId", "message.id != 'k-eve'", mode="READ", onFailure="DLQ", params={"dlq.topic": "bad-keys"}
    )
    registry = LocalRegistry(users_dir)  # registered after users-value, so its frames keep their id
    key_id = registry.register_schema("users-key", Schema.from_dict(contract_payload([rule], key_schema)))
    keys = [encode_frame(key_id, b"\x0a" + f"k-{name}".encode()) for name in ("ann", "dee", "eve")]
    source = tmp_path / "topic.jsonl"
    source.write_text(
        "".join(
            json.dumps({"key": base64.b64encode(k).decode(), "value": base64.b64encode(f).decode()}) + "\n"
            for k, f in zip(keys, frames, strict=True)
        )
    )
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ", "--input", str(source),
        "--format", "avro-json", "--key-subject", "users-key", "--output", str(output),
        "--dlq-dir", str(dlq_dir), spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    valid = spark.read.parquet(str(output)).collect()
    assert [(row.name, row.key.id) for row in valid] == [("ann", "k-ann")]
    assert [(r.key, r.value) for r in LocalTopicSink(dlq_dir).read("bad-keys")] == [(keys[2], frames[2])]
    assert "key rules of users-key:" in ran.out
    assert summary_row(ran.out, "knownId") == ["knownId", "READ", "2", "1", "NONE=2", "DLQ=1"]


def test_apply_takes_a_key_subject_with_wire_format_input_only(users_dir: Path) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ", "--input", "x",
        "--format", "json", "--key-subject", "users-key", "--output", "o",
    )  # fmt: skip
    assert ran.status == 2
    assert "--key-subject decodes framed keys: it takes avro-parquet or avro-json input" in ran.err


def test_apply_stops_with_the_rule_when_an_error_action_fires(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    payload = contract_payload([cel("mustBeOld", "message.age > 100")])
    write_version(users_dir, SUBJECT, 2, payload)
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ann", "age": 30, "email": "ann@example.com"}) + "\n")

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"),
        "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
    )  # fmt: skip

    assert ran.status == 1
    assert "mustBeOld" in ran.err
    assert "FAILED" in ran.err


def test_apply_fails_with_the_same_line_whether_the_rule_ran_natively_or_in_python(
    spark: Any, tmp_path: Path
) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ann", "age": 30, "email": "ann@example.com"}) + "\n")
    failures = []
    # The same rule name and doc; the second expression has no native form and runs in Python.
    for run_number, expr in enumerate(["message.age > 100", "format('%s', [message.name]) == 'nobody'"]):
        root = tmp_path / f"contracts{run_number}"
        write_version(root, SUBJECT, 1, contract_payload([cel("mustBeOld", expr, doc="too young")]))
        explained = DataContract(LocalRegistry(root), SUBJECT).explain()
        assert explained.endswith("(native)") if run_number == 0 else "(python); no native form" in explained
        ran = cli(
            "apply", "--registry", str(root), "--subject", SUBJECT, "--mode", "WRITE",
            "--input", str(source), "--format", "json", "--output", str(tmp_path / f"out{run_number}"),
            "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
        )  # fmt: skip
        assert ran.status == 1
        failures.append(ran.err.splitlines()[-1:])  # the error; the line before names the run id
    assert (
        failures[0]
        == failures[1]
        == [
            "spark-contracts apply: SparkRuntimeException: [USER_RAISED_EXCEPTION] Rule 'mustBeOld' failed in"
            " WRITE on subject 'users-value' version 1: too young"
        ]
    )


def test_a_failed_apply_rerun_under_its_run_id_leaves_exactly_its_dlq_records(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    adult = cel("adult", "message.age >= 18", onFailure="DLQ", params={"dlq.topic": "minors"})
    write_version(users_dir, SUBJECT, 2, contract_payload([adult, cel("named", "size(message.name) > 0")]))
    source = tmp_path / "users"
    source.mkdir()

    def users(path: str, *rows: tuple[str, int]) -> None:
        lines = [json.dumps({"name": name, "age": age, "email": f"{name}@example.com"}) for name, age in rows]
        (source / path).write_text("".join(line + "\n" for line in lines))

    users("a.jsonl", ("al", 10), ("bo", 11))
    users("b.jsonl", ("cy", 12), ("di", 40))
    users("c.jsonl", ("", 50))  # fails the ERROR rule `named`, in its own partition
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"
    argv = [
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(output), "--dlq-dir", str(dlq_dir),
    ]  # fmt: skip

    failed = cli(*argv, spark=spark)

    assert failed.status == 1
    assert "named" in failed.err
    [run_id] = re.findall(r"rerun with --run-id (\S+)", failed.err)

    users("c.jsonl", ("ed", 50))
    rerun = cli(*argv, "--run-id", run_id, spark=spark)

    assert rerun.status == 0, rerun.err
    assert sorted(row.name for row in spark.read.parquet(str(output)).collect()) == ["di", "ed"]
    assert sorted(r["value"]["name"] for r in dlq(dlq_dir, "minors")) == ["al", "bo", "cy"]
    assert f"DLQ minors: 3 rows -> {dlq_dir}/minors" in rerun.out
    assert cli(*argv, "--run-id", "not.a.name", spark=spark).status == 2


def test_apply_refuses_a_rule_no_executor_handles_unless_allowed(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    mystery = {"name": "mystery", "kind": "CONDITION", "type": "NOPE", "mode": "WRITE", "onFailure": "DLQ"}
    mystery["params"] = {"dlq.topic": "mysteries"}
    write_version(users_dir, SUBJECT, 2, contract_payload([mystery]))
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ann", "age": 30, "email": "ann@example.com"}) + "\n")
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"
    argv = [
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(output), "--dlq-dir", str(dlq_dir),
    ]  # fmt: skip
    warning = f"subject={SUBJECT} version=2 rule=mystery type=NOPE: no executor handles this rule type"

    refused = cli(*argv, spark=spark)

    assert refused.status == 1
    assert warning in refused.err
    assert "--allow-unknown-rule-types" in refused.err
    assert not output.exists() and not dlq_dir.exists()

    allowed = cli(*argv, "--allow-unknown-rule-types", spark=spark)

    assert allowed.status == 0, allowed.err
    assert warning in allowed.err
    assert spark.read.parquet(str(output)).count() == 0
    assert [r["value"]["name"] for r in dlq(dlq_dir, "mysteries")] == ["ann"]


def test_apply_of_wire_format_checks_the_migration_rules_too(users_dir: Path, tmp_path: Path) -> None:
    renamed = {**USER, "fields": [*USER["fields"][:2], {"name": "mail", "type": "string"}]}
    upgrade = {"name": "rename", "kind": "TRANSFORM", "type": "NOPE", "mode": "UPGRADE", "expr": "x"}
    payload = contract_payload([], renamed)
    payload["ruleSet"]["migrationRules"] = [upgrade]
    write_version(users_dir, SUBJECT, 2, payload)

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ",
        "--input", "x", "--format", "avro-json", "--output", str(tmp_path / "out"), spark=object(),
    )  # fmt: skip

    assert ran.status == 1
    assert f"subject={SUBJECT} version=2 rule=rename type=NOPE: no executor handles" in ran.err
    assert "in UPGRADE it fails every record (on failure: ERROR)" in ran.err


def test_apply_of_wire_format_wants_read_mode(users_dir: Path, tmp_path: Path) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", "x", "--format", "avro-json", "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert ran.status == 2
    assert "use --mode READ" in ran.err


def test_apply_reports_an_unknown_subject_without_starting_a_job(users_dir: Path, tmp_path: Path) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", "nobody-value", "--mode", "WRITE",
        "--input", "x", "--format", "json", "--output", str(tmp_path / "out"), spark=object(),
    )  # fmt: skip
    assert ran.status == 1
    assert "RegistryError" in ran.err
    assert "nobody-value" in ran.err


def test_apply_targets_the_latest_version_with_the_metadata_asked(spark: Any, tmp_path: Path) -> None:
    """`--use-latest-with-metadata KEY=VALUE` picks the version as Confluent's use.latest.with.metadata:
    here major 1 (version 1, whose rule rejects minors) over the newer major 2 (no rules)."""
    registry = tmp_path / "registry"
    major1 = {**contract_payload([cel("adult", "message.age >= 18", onFailure="DLQ",
                                      params={"dlq.topic": "minors"})]),
              "metadata": {"properties": {"major": "1"}}}  # fmt: skip
    write_version(registry, SUBJECT, 1, major1)
    write_version(registry, SUBJECT, 2, {**contract_payload([]), "metadata": {"properties": {"major": "2"}}})
    source = tmp_path / "users.parquet"
    rows = [("ann", 30, "ann@example.com"), ("bob", 12, "bob@example.com")]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))
    ran = cli(
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE",
        "--use-latest-with-metadata", "major=1",
        "--input", str(source), "--format", "parquet", "--output", str(tmp_path / "valid"),
        "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
    )  # fmt: skip
    assert ran.status == 0, ran.err
    assert [row.name for row in spark.read.parquet(str(tmp_path / "valid")).collect()] == ["ann"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--use-latest-with-metadata", "major"], "takes KEY=VALUE, not 'major'"),
        (["--use-latest-with-metadata", "major=1", "--version", "1"], "either --version or"),
    ],
)
def test_apply_refuses_metadata_it_cannot_use(
    users_dir: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", "x", "--format", "json", "--output", str(tmp_path / "out"), *extra,
    )  # fmt: skip
    assert ran.status == 2 and message in ran.err
