"""What `spark-contracts` checks before a Spark session exists: the contract, local paths, the rule
config and the registry's credentials; each mistake is one line, in seconds, with no session."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, write_version
from registry_server import running_registry

from contracts import LocalRegistry, Schema
from contracts.cli.inputs import literal

SUBJECT = "people-value"
PERSON = {"type": "record", "name": "Person", "fields": [{"name": "age", "type": "int"}]}


@pytest.fixture(autouse=True)
def no_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any command here that starts a Spark session fails its test."""

    def refuse() -> Any:
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(importlib.import_module("contracts.cli.main"), "new_session", refuse)


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    rule = {"name": "adult", "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": "message.age >= 18"}
    payload = {"schemaType": "AVRO", "schema": json.dumps(PERSON), "ruleSet": {"domainRules": [rule]}}
    write_version(tmp_path / "contracts", SUBJECT, 1, payload)
    return tmp_path / "contracts"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "people.jsonl"
    path.write_text('{"age": 30}\n')
    return path


def apply(registry: Path, *argv: str) -> Any:
    return cli("apply", "--registry", str(registry), "--mode", "WRITE", "--format", "json", *argv)


def test_a_mistyped_subject_is_one_line_before_spark_starts(
    registry: Path, source: Path, tmp_path: Path
) -> None:
    ran = apply(
        registry, "--subject", "poeple-value", "--input", str(source), "--output", str(tmp_path / "o")
    )
    assert ran.status == 1
    [line] = ran.err.splitlines()
    assert line.startswith("spark-contracts apply: RegistryError: ") and "poeple-value" in line


def test_a_rule_no_executor_handles_stops_the_run_before_spark_starts(tmp_path: Path, source: Path) -> None:
    rule = {"name": "odd", "kind": "CONDITION", "type": "MYSTERY", "mode": "WRITE", "expr": "x"}
    payload = {"schemaType": "AVRO", "schema": json.dumps(PERSON), "ruleSet": {"domainRules": [rule]}}
    write_version(tmp_path / "contracts", SUBJECT, 1, payload)
    ran = apply(tmp_path / "contracts", "--subject", SUBJECT, "--input", str(source), "--dry-run")
    assert ran.status == 1
    assert "no executor handles this rule type" in ran.err and "ContractWarning" not in ran.err


def test_a_missing_input_or_an_existing_output_is_one_line_before_spark_starts(
    registry: Path, source: Path, tmp_path: Path
) -> None:
    missing = apply(registry, "--subject", SUBJECT, "--input", str(tmp_path / "nope.jsonl"), "--dry-run")
    assert missing.status == 1
    assert missing.err == (
        "spark-contracts apply: FileNotFoundError: [Errno 2] --input does not exist:"
        f" '{tmp_path / 'nope.jsonl'}'\n"
    )
    (tmp_path / "out").mkdir()
    taken = apply(registry, "--subject", SUBJECT, "--input", str(source), "--output", str(tmp_path / "out"))
    assert taken.status == 1
    assert taken.err == (
        "spark-contracts apply: FileExistsError: [Errno 17] --output exists (--output-mode overwrite"
        f" replaces it, append adds to it): '{tmp_path / 'out'}'\n"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--table", "t", "--input", "x"], "give --input PATH or --table NAME, not both"),
        (["--table", "t", "--format", "csv"], "--table reads a table's rows"),
        (["--table", "t", "--output", "o", "--output-mode", "append", "--run-id", "r1"], "does not go with"),
        (["--table", "t", "--dry-run", "--output-mode", "overwrite"], "a dry run writes nothing"),
        (["--input", "x", "--format", "json", "--dry-run", "--unreadable-dlq", "bad topic"], "'bad topic'"),
        (["--table", "t", "--dry-run", "--unreadable-dlq", "lines"], "not parquet records"),
        (["--input", "x", "--dry-run"], "--format is required with --input"),
    ],
)
def test_apply_input_and_output_usage_errors(registry: Path, extra: list[str], message: str) -> None:
    ran = cli("apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE", *extra)
    assert ran.status == 2, ran.err
    [line] = ran.err.splitlines()
    assert line.startswith("spark-contracts apply: error: ") and message in line


def test_a_local_path_is_read_as_that_very_file_not_as_a_glob(tmp_path: Path) -> None:
    (tmp_path / "in[1].jsonl").write_text("")
    assert literal(str(tmp_path / "in[1].jsonl")) == str(tmp_path / "in\\[1\\].jsonl")
    assert literal(str(tmp_path / "in[2].jsonl")) == str(tmp_path / "in[2].jsonl")  # none such: a glob
    assert literal("s3a://bucket/in[1].jsonl") == "s3a://bucket/in[1].jsonl"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "holds more than 1024 KiB"),  # /dev/zero
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to be a JSON object of strings"),
    ],
)
def test_a_rule_config_file_too_large_or_too_deep_is_a_usage_error(
    registry: Path, source: Path, tmp_path: Path, content: str | None, message: str
) -> None:
    path = "/dev/zero" if content is None else str(tmp_path / "config.json")
    if content is not None:
        Path(path).write_text(content)
    ran = apply(
        registry, "--subject", SUBJECT, "--input", str(source), "--dry-run", "--rule-config-file", path
    )
    assert ran.status == 2
    assert ran.err == f"spark-contracts apply: error: --rule-config-file {path}: {message}\n"


def test_registry_credentials_come_from_a_file_or_a_variable_not_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = LocalRegistry()
    remote.register_schema(SUBJECT, Schema(json.dumps(PERSON)))
    credentials = tmp_path / "sr.auth"
    credentials.write_text("key:s3cret\n")
    monkeypatch.setenv("SR_USER_INFO", "key:s3cret")
    with running_registry(remote, basic_auth=("key", "s3cret")) as server:
        refused = cli("lint", "--registry", server.url, "--subject", SUBJECT)
        by_file = cli("lint", "--registry", server.url, "--registry-auth-file", str(credentials))
        by_variable = cli("lint", "--registry", server.url, "--registry-auth-env", "SR_USER_INFO")
    assert refused.status == 1 and "Unauthorized (status 401" in refused.out
    assert (by_file.status, by_file.err) == (0, "lint: no problems\n")
    assert (by_variable.status, by_variable.err) == (0, "lint: no problems\n")
    assert "s3cret" not in refused.out + refused.err + by_file.err + by_variable.err

    monkeypatch.setenv("SR_USER_INFO", "no colon")
    with running_registry(remote) as server:
        bad = cli("lint", "--registry", server.url, "--registry-auth-env", "SR_USER_INFO")
    assert (bad.status, bad.err) == (
        2,
        "spark-contracts lint: error: --registry-auth-env SR_USER_INFO: must hold one line KEY:SECRET\n",
    )
