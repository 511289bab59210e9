"""A user's mistakes through `spark-contracts`: one line on stderr, the traceback only with --debug."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import Ran, cli, python_m_cli, write_version
from cli_users import RULES, SUBJECT, contract_payload

# -- user errors -----------------------------------------------------------------------------


def one_error_line(ran: Ran, command: str) -> str:
    """The one line a user error printed on stderr; no traceback anywhere."""
    assert ran.status == 1, ran
    assert "Traceback" not in ran.err and "\tat " not in ran.err, ran.err
    line = ran.err.splitlines()[-1]
    assert line.startswith(f"spark-contracts {command}: "), ran.err
    return line


def test_a_registry_url_without_a_host_is_one_line_and_debug_shows_the_traceback() -> None:
    ran = cli("lint", "--registry", "http://")
    line = one_error_line(ran, "lint")
    assert line.startswith("spark-contracts lint: RegistryError: ") and "'http://'" in line
    assert ran.err == line + "\n"

    debug = cli("lint", "--registry", "http://", "--debug")
    assert debug.status == 1
    assert "Traceback (most recent call last):" in debug.err
    assert debug.err.rstrip().endswith(line)


def test_an_unreachable_registry_is_one_line_on_stderr() -> None:
    ran = cli("lint", "--registry", "http://127.0.0.1:1")
    line = one_error_line(ran, "lint")
    assert "could not reach the schema registry at http://127.0.0.1:1" in line
    assert ran.err == line + "\n"  # the client's retry warnings only with --debug
    assert "failed (attempt 1 of " in cli("--debug", "lint", "--registry", "http://127.0.0.1:1").err


def test_a_version_file_that_is_not_a_number_is_a_lint_problem(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    write_version(root, SUBJECT, 1, contract_payload(RULES))
    (root / SUBJECT / "\u00b2.json").write_text(json.dumps(contract_payload(RULES)))

    ran = cli("lint", str(root))

    assert ran.status == 1
    assert "Traceback" not in ran.err
    [problem] = ran.out.splitlines()
    assert f"subject={SUBJECT} version=- rule=- position=-: unexpected file '\u00b2.json'" in problem


def test_user_errors_through_python_m_are_one_line_without_traceback(tmp_path: Path) -> None:
    ran = python_m_cli("lint", "--registry", "http://", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (1, "")
    [line] = ran.stderr.splitlines()
    assert line.startswith("spark-contracts lint: RegistryError: ") and "'http://'" in line

    pushed = python_m_cli(
        "push", str(tmp_path / "nonexistent"), "--registry", str(tmp_path / "dest"), cwd=tmp_path
    )
    assert (pushed.returncode, pushed.stdout) == (1, "")
    [line] = pushed.stderr.splitlines()
    assert line.startswith("spark-contracts push: ") and "nonexistent" in line
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "dest").exists()

    debug = python_m_cli("lint", "--registry", "http://", "--debug", cwd=tmp_path)
    assert debug.returncode == 1
    assert "Traceback (most recent call last):" in debug.stderr


def test_apply_on_malformed_json_lines_is_one_line_naming_the_file(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text('{"name": "ann", "age": 30, "email": "ann@example.com"}\n{"name": oops\n')
    argv = [
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"),
        "--dlq-dir", str(tmp_path / "dlq"),
    ]  # fmt: skip

    ran = cli(*argv, spark=spark)
    line = one_error_line(ran, "apply")

    assert line == (
        "spark-contracts apply: SparkRuntimeException: [USER_RAISED_EXCEPTION] malformed JSON line in"
        f" {source}: '{{\"name\": oops'; --unreadable-dlq TOPIC sends each such JSON line to a DLQ topic"
        " instead SQLSTATE: P0001"
    )

    debug = cli(*argv, "--debug", spark=spark)
    assert debug.status == 1
    assert "Traceback (most recent call last):" in debug.err


def test_apply_on_a_missing_input_or_with_a_bad_registry_is_one_line(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    missing = one_error_line(
        cli(
            "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
            "--input", str(tmp_path / "nowhere.jsonl"), "--format", "json", "--output", str(tmp_path / "o"),
            "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
        ),
        "apply",
    )  # fmt: skip
    assert "nowhere.jsonl" in missing

    registry = one_error_line(
        cli(
            "apply", "--registry", str(tmp_path / "no-registry"), "--subject", SUBJECT, "--mode", "WRITE",
            "--input", "x", "--format", "json", "--output", str(tmp_path / "o"), spark=spark,
        ),
        "apply",
    )  # fmt: skip
    assert "no-registry" in registry


def test_a_rule_evaluated_in_python_that_fails_the_job_is_one_line_naming_it(
    spark: Any, users_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sized = {"name": "sized", "kind": "CONDITION", "type": "JSONATA", "mode": "WRITE"}
    sized["expr"] = "$count($split(email, '@')) = 2 and $uppercase(name) != name"
    write_version(users_dir, SUBJECT, 2, contract_payload([sized]))
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ANN", "age": 30, "email": "ann@example.com"}) + "\n")

    monkeypatch.chdir(tmp_path)

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"), spark=spark,
    )  # fmt: skip

    line = one_error_line(ran, "apply")
    assert "'sized'" in line and SUBJECT in line, line
    assert not (tmp_path / "dlq-topics").exists()  # no rule can reject a row: no DLQ directory
