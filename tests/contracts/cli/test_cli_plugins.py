"""`--executor` and `--action`: rule types and actions loaded from the current directory."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, write_version
from cli_users import SUBJECT, cel, contract_payload, dlq, summary_row

# -- --executor and --action -----------------------------------------------------------------

MY_RULES = '''
"""Plugins a test loads with --executor and --action from the current directory."""

from actions.protocol import ActionPlan, Effect


class Shout:
    """Rule type SHOUT, one record at a time (so it runs in Spark's Python workers)."""

    type = "SHOUT"

    def transform(self, ctx, message):
        return message["name"].isupper()


class Quarantine:
    """Action QUARANTINE: the row goes to the DLQ topic `quarantine`."""

    name = "QUARANTINE"

    def plan(self, ctx):
        return ActionPlan(self.name, Effect.REJECT, topic="quarantine")


quarantine = Quarantine()


class NeedsArgs:
    type = "NEEDS"

    def __init__(self, level):
        self.level = level
'''
LOUD = {"name": "loud", "kind": "CONDITION", "type": "SHOUT", "mode": "WRITE", "onFailure": "QUARANTINE"}


@pytest.fixture
def my_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory holds `my_rules.py` (plugins) and `broken_rules.py` (fails to import),
    importable only once the CLI puts the current directory on sys.path."""
    from pyspark import cloudpickle

    (tmp_path / "my_rules.py").write_text(MY_RULES)
    (tmp_path / "broken_rules.py").write_text('raise RuntimeError("boom")\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", ".")])
    yield tmp_path
    module = sys.modules.pop("my_rules", None)
    if module is not None and "my_rules" in cloudpickle.list_registry_pickle_by_value():
        cloudpickle.unregister_pickle_by_value(module)


def test_apply_runs_an_executor_and_an_action_loaded_from_the_current_directory(
    spark: Any, my_rules: Path
) -> None:
    registry, output, dlq_dir = my_rules / "registry", my_rules / "valid", my_rules / "dlq"
    adult = cel("adult", "message.age >= 18", onFailure="DLQ", params={"dlq.topic": "minors"})
    write_version(registry, SUBJECT, 1, contract_payload([adult, LOUD]))
    source = my_rules / "users.parquet"
    rows = [("ANN", 30, "ann@example.com"), ("bob", 40, "bob@example.com"), ("CY", 9, "cy@example.com")]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))
    argv = [
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "parquet", "--output", str(output), "--dlq-dir", str(dlq_dir),
    ]  # fmt: skip

    without = cli(*argv, spark=spark)
    assert without.status == 1 and "unknown action 'QUARANTINE'" in without.err

    plugins = ["--executor", "my_rules:Shout", "--action", "my_rules:quarantine"]
    dry = cli(*argv, *plugins, "--dry-run", spark=spark)  # the rule in Python: counts observed

    assert dry.status == 0, dry.err
    table, _, rest = dry.out.partition("valid rows: 1 (dry run: not written)\n")
    assert summary_row(table, "loud") == ["loud", "WRITE", "1", "1", "NONE=1", "QUARANTINE=1"]
    assert "DLQ quarantine: 1 rows (dry run: not written)" in rest
    assert not output.exists() and not dlq_dir.exists()

    ran = cli(*argv, *plugins, spark=spark)

    assert ran.status == 0, ran.err
    assert [row.name for row in spark.read.parquet(str(output)).collect()] == ["ANN"]
    assert [r["value"]["name"] for r in dlq(dlq_dir, "minors")] == ["CY"]
    assert [(r["value"]["name"], r["headers"]["__rule.name"]) for r in dlq(dlq_dir, "quarantine")] == [
        ("bob", b"loud")
    ]
    assert summary_row(ran.out, "loud") == ["loud", "WRITE", "1", "1", "NONE=1", "QUARANTINE=1"]


def test_dlq_replay_takes_the_same_plugin_flags(spark: Any, my_rules: Path) -> None:
    registry, output, dlq_dir = my_rules / "registry", my_rules / "replayed", my_rules / "dlq"
    write_version(registry, SUBJECT, 1, contract_payload([LOUD]))
    source = my_rules / "users.jsonl"
    source.write_text(json.dumps({"name": "bob", "age": 40, "email": "bob@example.com"}) + "\n")
    plugins = ["--executor", "my_rules:Shout", "--action", "my_rules:Quarantine"]
    applied = cli(
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE", "--input",
        str(source), "--format", "json", "--output", str(my_rules / "valid"), "--dlq-dir", str(dlq_dir),
        *plugins, spark=spark,
    )  # fmt: skip
    assert applied.status == 0, applied.err
    argv = ["dlq", "replay", "quarantine", "--registry", str(registry), "--subject", SUBJECT]
    argv += ["--output", str(output), "--dlq-dir", str(dlq_dir)]

    without = cli(*argv, spark=spark)
    assert without.status == 1 and "unknown action 'QUARANTINE'" in without.err

    replayed = cli(*argv, *plugins, spark=spark)  # past `loud`, the rule the record failed

    assert replayed.status == 0, replayed.err
    assert [row.name for row in spark.read.parquet(str(output)).collect()] == ["bob"]


@pytest.mark.parametrize("command", ["apply", "dlq replay"])
@pytest.mark.parametrize(
    ("flag", "spec", "problem"),
    [
        (
            "--executor",
            "no_such_module:Shout",
            "cannot import 'no_such_module': ModuleNotFoundError: No module",
        ),
        ("--action", "broken_rules:Quarantine", "cannot import 'broken_rules': RuntimeError: boom"),
        ("--executor", "my_rules:Whisper", "module 'my_rules' has no attribute 'Whisper'"),
        ("--executor", "my_rules", "expected MODULE:ATTR"),
        ("--executor", "my_rules:NeedsArgs", "cannot instantiate NeedsArgs without arguments: TypeError:"),
        ("--executor", "my_rules:quarantine", "quarantine is not an executor: it needs a str `type`"),
        ("--action", "my_rules:Shout", "Shout is not an action: it needs a str `name` and `plan(ctx)`"),
    ],
)
def test_a_plugin_that_does_not_load_is_a_usage_error_naming_the_flag_and_value(
    my_rules: Path, users_dir: Path, command: str, flag: str, spec: str, problem: str
) -> None:
    common = ["--registry", str(users_dir), "--subject", SUBJECT, "--output", "out", flag, spec]
    if command == "apply":
        argv = ["apply", "--mode", "WRITE", "--input", "x", "--format", "json", *common]
    else:
        argv = ["dlq", "replay", "minors", *common]

    ran = cli(*argv, spark=object())

    assert ran.status == 2
    [line] = ran.err.splitlines()
    assert line.startswith(f"spark-contracts {command.split()[0]}: error: {flag} {spec}: {problem}"), line


def test_debug_shows_the_traceback_of_a_plugin_that_does_not_import(my_rules: Path, users_dir: Path) -> None:
    ran = cli(
        "apply", "--debug", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", "x", "--format", "json", "--output", "out", "--action", "broken_rules:A", spark=object(),
    )  # fmt: skip
    assert ran.status == 2
    assert "Traceback" in ran.err and 'broken_rules.py", line 1' in ran.err
    assert ran.err.splitlines()[-1].startswith("spark-contracts apply: error: --action broken_rules:A: ")
