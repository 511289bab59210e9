"""`--rule-config-file` and `--rule-config-env`: the rule config from a file or the environment,
never printed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, python_m_cli, write_version
from cli_users import SUBJECT, cel, contract_payload
from encrypt_oracle import KMS_PARAMS, encrypt_rule

from contracts import DataContract, LocalRegistry

# -- --rule-config-file and --rule-config-env ------------------------------------------------

PEOPLE = "people-value"
PERSON = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    ],
}
ENCRYPT_PII = encrypt_rule(
    params={**KMS_PARAMS, "encrypt.kek.name": "people-kek", "encrypt.kms.key.id": "people-key"}
)
KMS_SECRET = "kms-secret-7f3e9a1c"
OTHER_SECRET = "other-secret-55d20b8e"
PEOPLE_ROWS = [("ann", 30, "111-22-3333"), ("cy", 9, "444-55-6666")]
RULE_CONFIG_ENV = "PEOPLE_RULE_CONFIG"


@pytest.fixture
def people_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry directory holding an ENCRYPT contract on local-kms (its DEKs go under it); no
    $LOCAL_SECRET, so the secret can only come from the rule config."""
    monkeypatch.delenv("LOCAL_SECRET", raising=False)
    root = tmp_path / "people"
    write_version(root, PEOPLE, 1, contract_payload([ENCRYPT_PII], PERSON))
    return root


def secret_file(path: Path, secret: str = KMS_SECRET) -> Path:
    path.write_text(json.dumps({"secret": secret}))
    return path


def people_jsonl(path: Path) -> Path:
    lines = [json.dumps({"name": name, "age": age, "ssn": ssn}) + "\n" for name, age, ssn in PEOPLE_ROWS]
    path.write_text("".join(lines))
    return path


def people_frames(spark: Any, people_dir: Path, path: Path) -> Path:
    """The people in Confluent frames, their ssn encrypted under KMS_SECRET, as Parquet."""
    contract = DataContract(LocalRegistry(people_dir), PEOPLE, rule_config={"secret": KMS_SECRET})
    frames = contract.serialize(spark.createDataFrame(PEOPLE_ROWS, "name string, age int, ssn string"))
    frames.write.parquet(str(path))
    return path


def people(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    return [(r.name, r.age, r.ssn) for r in spark.read.parquet(str(path)).orderBy("name").collect()]


def test_apply_takes_the_rule_config_from_a_file_or_the_environment(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, encrypted, decrypted = people_jsonl(tmp_path / "people.jsonl"), tmp_path / "enc", tmp_path / "dec"
    write = ["apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "WRITE", "--input",
             str(source), "--format", "json", "--dlq-dir", str(tmp_path / "dlq")]  # fmt: skip

    without = cli(*write, "--output", str(tmp_path / "none"), spark=spark)
    assert without.status == 1 and "local-kms needs a secret" in without.err

    config = secret_file(tmp_path / "rc.json")
    ran = cli(*write, "--output", str(encrypted), "--rule-config-file", str(config), spark=spark)

    assert ran.status == 0, ran.err
    written = people(spark, encrypted)
    assert [(name, age) for name, age, _ in written] == [(name, age) for name, age, _ in PEOPLE_ROWS]
    assert all(ssn != plain for (_, _, ssn), (_, _, plain) in zip(written, PEOPLE_ROWS, strict=True))
    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": KMS_SECRET}))

    read = cli(
        "apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "READ", "--input",
        str(encrypted), "--format", "parquet", "--output", str(decrypted), "--dlq-dir", str(tmp_path / "dlq"),
        "--rule-config-env", RULE_CONFIG_ENV, spark=spark,
    )  # fmt: skip

    assert read.status == 0, read.err
    assert people(spark, decrypted) == PEOPLE_ROWS


def test_apply_of_wire_format_takes_the_environments_keys_over_the_files(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = people_frames(spark, people_dir, tmp_path / "frames")
    stale = secret_file(tmp_path / "stale.json", OTHER_SECRET)
    read = ["apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "READ", "--input",
            str(frames), "--format", "avro-parquet", "--dlq-dir", str(tmp_path / "dlq"),
            "--rule-config-file", str(stale)]  # fmt: skip

    wrong = cli(*read, "--output", str(tmp_path / "wrong"), spark=spark)
    assert wrong.status == 1 and "ENCRYPT cannot decrypt field 'Person.ssn'" in wrong.err

    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": KMS_SECRET}))
    ran = cli(*read, "--output", str(tmp_path / "dec"), "--rule-config-env", RULE_CONFIG_ENV, spark=spark)

    assert ran.status == 0, ran.err
    assert people(spark, tmp_path / "dec") == PEOPLE_ROWS


def test_dlq_replay_takes_the_rule_config_too(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adult = cel("adult", "message.age >= 18", onFailure="DLQ", params={"dlq.topic": "minors"})
    write_version(people_dir, PEOPLE, 1, contract_payload([adult, ENCRYPT_PII], PERSON))
    dlq_dir, config = tmp_path / "dlq", tmp_path / "rc.json"
    # Replayable: the DLQ keeps the encrypted fields' plaintext instead of "<REDACTED>".
    config.write_text(json.dumps({"secret": KMS_SECRET, "dlq.redact.rule.types": ""}))
    applied = cli(
        "apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "WRITE", "--input",
        str(people_jsonl(tmp_path / "people.jsonl")), "--format", "json", "--output", str(tmp_path / "valid"),
        "--dlq-dir", str(dlq_dir), "--rule-config-file", str(config), spark=spark,
    )  # fmt: skip
    assert applied.status == 0, applied.err
    replay = ["dlq", "replay", "minors", "--registry", str(people_dir), "--subject", PEOPLE,
              "--dlq-dir", str(dlq_dir), "--output", str(tmp_path / "replayed")]  # fmt: skip

    without = cli(*replay, spark=spark)
    assert without.status == 1 and "local-kms needs a secret" in without.err
    # The failed replay took the record: it says how to finish it, its run id.
    (run_id,) = re.findall(r"rerun with --run-id (\w+) to replay the same records", without.err)

    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": KMS_SECRET}))
    ran = cli(*replay, "--run-id", run_id, "--rule-config-env", RULE_CONFIG_ENV, spark=spark)

    assert ran.status == 0, ran.err
    [(name, age, ssn)] = people(spark, tmp_path / "replayed")  # past `adult`, then encrypted
    assert (name, age) == ("cy", 9) and ssn != "444-55-6666"
    reader = DataContract(LocalRegistry(people_dir), PEOPLE, rule_config={"secret": KMS_SECRET})
    replayed = spark.read.parquet(str(tmp_path / "replayed")).select("name", "age", "ssn")
    assert [row.ssn for row in reader.read(replayed).collect()] == ["444-55-6666"]


@pytest.mark.parametrize("command", ["apply", "dlq replay"])
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read it: No such file or directory"),
        (b"\xff" + KMS_SECRET.encode(), "is not UTF-8 text"),
        (f'{{"secret": "{KMS_SECRET}"'.encode(), "not JSON (Expecting ',' delimiter at line 1 column"),
        (json.dumps([KMS_SECRET]).encode(), "must hold a JSON object of strings, not an array"),
        (json.dumps({"secret": KMS_SECRET, "n": 8}).encode(), "value of 'n' must be a string, not a number"),
        (json.dumps({"secret": KMS_SECRET, "on": None}).encode(), "value of 'on' must be a string, not null"),
    ],
)  # fmt: skip
def test_a_rule_config_file_that_cannot_be_used_is_a_usage_error_naming_it(
    users_dir: Path, tmp_path: Path, command: str, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "rule-config.json"
    if content is not None:
        path.write_bytes(content)
    common = [
        "--registry",
        str(users_dir),
        "--subject",
        SUBJECT,
        "--output",
        "out",
        "--rule-config-file",
        str(path),
    ]
    if command == "apply":
        argv = ["apply", "--mode", "WRITE", "--input", "x", "--format", "json", *common]
    else:
        argv = ["dlq", "replay", "minors", *common]

    for debug in ([], ["--debug"]):
        ran = cli(*debug, *argv, spark=object())

        assert ran.status == 2
        *traceback, line = ran.err.splitlines()
        assert line.startswith(f"spark-contracts {command.split()[0]}: error: --rule-config-file {path}: ")
        assert problem in line, line
        assert bool(traceback) == bool(debug)
        assert KMS_SECRET not in ran.out + ran.err


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, f"the environment variable {RULE_CONFIG_ENV} is not set"),
        (KMS_SECRET, "not JSON (Expecting value at line 1 column 1)"),
        (json.dumps({"secret": [KMS_SECRET]}), "the value of 'secret' must be a string, not an array"),
    ],
)
def test_a_rule_config_variable_that_cannot_be_used_is_a_usage_error_naming_it(
    users_dir: Path, monkeypatch: pytest.MonkeyPatch, value: str | None, problem: str
) -> None:
    monkeypatch.delenv(RULE_CONFIG_ENV, raising=False)
    if value is not None:
        monkeypatch.setenv(RULE_CONFIG_ENV, value)

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE", "--input", "x",
        "--format", "json", "--output", "out", "--rule-config-env", RULE_CONFIG_ENV, spark=object(),
    )  # fmt: skip

    assert ran.status == 2
    [line] = ran.err.splitlines()
    assert line == f"spark-contracts apply: error: --rule-config-env {RULE_CONFIG_ENV}: {problem}"
    assert KMS_SECRET not in ran.out + ran.err


@pytest.mark.one_pass  # what it checks is the same on any session; its last command runs classic
def test_rule_config_values_are_never_printed_even_with_debug_or_on_failure(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not on the command's streams, and, run as its own process with Spark's log on, not by
    Spark, its workers or the registry client either."""
    secrets = (KMS_SECRET, OTHER_SECRET)
    frames = people_frames(spark, people_dir, tmp_path / "frames")
    common = ["--debug", "apply", "--registry", str(people_dir), "--subject", PEOPLE, "--dlq-dir",
              str(tmp_path / "dlq")]  # fmt: skip
    source, config = people_jsonl(tmp_path / "people.jsonl"), secret_file(tmp_path / "rc.json")
    written = cli(
        *common, "--mode", "WRITE", "--input", str(source), "--format", "json", "--output",
        str(tmp_path / "enc"), "--rule-config-file", str(config), spark=spark,
    )  # fmt: skip
    assert written.status == 0, written.err
    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": OTHER_SECRET}))
    wrong_secret = [*common, "--mode", "READ", "--input", str(frames), "--format", "avro-parquet",
                    "--rule-config-env", RULE_CONFIG_ENV]  # fmt: skip
    failed = cli(*wrong_secret, "--output", str(tmp_path / "dec"), spark=spark)
    assert failed.status == 1 and "Traceback" in failed.err
    assert "ENCRYPT cannot decrypt field 'Person.ssn'" in failed.err.splitlines()[-1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"secret": KMS_SECRET, "retries": 3}))
    refused = cli(
        *common, "--mode", "WRITE", "--input", "x", "--format", "json", "--output", "out",
        "--rule-config-file", str(bad), spark=spark,
    )  # fmt: skip
    assert refused.status == 2 and "Traceback" in refused.err
    monkeypatch.setenv("SPARK_LOG_LEVEL", "INFO")
    for connect in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):  # the command's own classic session
        monkeypatch.delenv(connect, raising=False)
    process = python_m_cli(*wrong_secret, "--output", str(tmp_path / "dec2"), cwd=tmp_path)
    assert process.returncode == 1, process.stderr[-2000:]
    assert "ERROR Executor: Exception in task" in process.stderr  # Spark's own log of the failure
    assert "ENCRYPT cannot decrypt field 'Person.ssn'" in process.stderr.splitlines()[-1]

    for out, err in [(ran.out, ran.err) for ran in (written, failed, refused)] + [
        (process.stdout, process.stderr)
    ]:
        for secret in secrets:
            assert secret not in out + err
