"""The commands of README's quick start and of docs/first-contract.md, run as written: the quick
start as a user's shell runs it, in an empty folder outside the repository; the tutorial's
`spark-contracts` commands through the CLI's entry point on the test session (one Spark, not one
per command), its other shell lines with bash, its Python as it is."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_run import Ran, cli

ROOT = Path(__file__).resolve().parents[1]
INSTALLS = ("python -m venv", "pip install")
"""Lines the tests leave out: this checkout is installed in the interpreter running them."""


def fenced(markdown: str) -> list[tuple[str, str]]:
    """The fenced code blocks of Markdown text, as (language, body)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", markdown, flags=re.S | re.M)


def quick_start() -> str:
    """README's quick start block, without the lines that install."""
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1]
    language, body = fenced(section)[0]
    assert language == "bash"
    return "\n".join(line for line in body.splitlines() if not line.startswith(INSTALLS))


@pytest.mark.one_pass  # a shell of its own, and the command's own classic session
def test_the_quick_start_runs_from_an_empty_folder_outside_the_repository(tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)
    dropped = ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_REMOTE", "VIRTUAL_ENV")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    assert not tmp_path.resolve().is_relative_to(ROOT)

    ran = subprocess.run(
        ["bash", "-e", "-c", quick_start()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "valid rows: 1 ->" in ran.stdout and "DLQ minors: 1 rows" in ran.stdout, ran.stdout
    assert "lint: no problems" in ran.stderr


@pytest.mark.one_pass  # what it checks is the same on any session; its Python starts a classic one
def test_the_first_contract_tutorial_runs_as_written(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    ran: list[Ran] = []
    for language, body in fenced((ROOT / "docs" / "first-contract.md").read_text()):
        if language == "bash" and not any(install in body for install in INSTALLS):
            ran += _shell(body, spark)
        elif language == "python":
            exec(compile(body, "docs/first-contract.md", "exec"), {"__name__": "tutorial"})

    for step in ran:
        assert step.status == 0, step.err
    lint, apply, show, replay, lint_again = ran
    assert lint.err == lint_again.err == "lint: no problems\n"
    assert "valid rows: 2 ->" in apply.out and "DLQ orders-rejected: 1 rows" in apply.out
    assert "o-2" in show.out and "positiveAmount" in show.out
    assert "replayed 1" in replay.out.lower() or "1 valid" in replay.out.lower(), replay.out
    shown = capsys.readouterr().out
    assert "Migration of subject 'orders-value' from version 1 to 2" in shown
    assert re.search(r"\|\s*o-1\s*\|\s*xxx\s*\|\s*12\.5\s*\|", shown), shown


def _shell(body: str, spark: Any) -> list[Ran]:
    """Run a bash block: its `spark-contracts` commands in this process on `spark`, every other
    line with bash, in order."""
    ran: list[Ran] = []
    pending: list[str] = []
    lines = iter(body.replace("\\\n", " ").splitlines())
    for line in lines:
        if line.startswith("spark-contracts "):
            _bash("\n".join(pending))
            pending = []
            argv = shlex.split(line, comments=True)
            ran.append(cli(*argv[1:], spark=spark))
            continue
        pending.append(line)
        if "<<'EOF'" in line:  # a here-document: its lines are data, up to EOF
            for data in lines:
                pending.append(data)
                if data == "EOF":
                    break
    _bash("\n".join(pending))
    return ran


def _bash(script: str) -> None:
    if script.strip():
        subprocess.run(["bash", "-e", "-c", script], check=True, timeout=60)
