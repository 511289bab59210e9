"""How the `spark-contracts` command starts and reports: `python -m contracts.cli` as the console
script, `--version`, the progress line."""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, python_m_cli, write_version
from cli_users import EXAMPLES, SUBJECT, cel, contract_payload

import contracts
from contracts import RegistryError
from contracts.cli.progress import Progress


def test_python_m_contracts_cli_is_the_console_script(tmp_path: Path) -> None:
    clean = python_m_cli("lint", str(EXAMPLES), cwd=tmp_path)
    assert (clean.returncode, clean.stdout) == (0, "")
    assert clean.stderr == "lint: no problems\n"

    write_version(tmp_path / "contracts", SUBJECT, 1, contract_payload([cel("syntax", "message.age >= ")]))
    broken = python_m_cli("lint", str(tmp_path / "contracts"), cwd=tmp_path)
    assert broken.returncode == 1
    assert "rule=syntax position=1:13: CEL syntax error" in broken.stdout


# -- the progress line -----------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    num_tasks: int
    num_completed_tasks: int


class FakeConnectSession:
    """What Progress needs of a Spark Connect session: progress handler (un)registration."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def registerProgressHandler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def removeProgressHandler(self, handler: Any) -> None:
        self.handlers.remove(handler)


def test_progress_redraws_a_spinner_with_connect_task_counts_on_a_terminal() -> None:
    stream = io.StringIO()
    session = FakeConnectSession()
    with Progress("WRITE rules", stream, session, interval=0.001, interactive=True) as progress:
        assert session.handlers == [progress]
        session.handlers[0](
            stages=[Stage(4, 1), Stage(2, 2)], inflight_tasks=1, operation_id="op", done=False
        )
        assert progress.status(1).startswith("/ WRITE rules  ")
        assert progress.status(1).endswith("s  tasks 3/6")
        deadline = time.monotonic() + 10
        while "tasks 3/6" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.001)
    assert session.handlers == []
    drawn = stream.getvalue()
    assert re.search(r"\r\x1b\[K[|/\-\\] WRITE rules  \d+\.\ds  tasks 3/6", drawn)
    assert re.search(r"\r\x1b\[KWRITE rules: done in \d+\.\ds\n$", drawn)


def test_progress_in_a_log_writes_only_the_start_and_the_outcome() -> None:
    stream = io.StringIO()
    with pytest.raises(RegistryError), Progress("READ rules", stream, interactive=False):
        raise RegistryError("boom")
    first, second = stream.getvalue().splitlines()
    assert first == "READ rules ..."
    assert second.startswith("READ rules: FAILED in ")


# -- --version -------------------------------------------------------------------------------


def test_version_prints_the_package_version() -> None:
    ran = cli("--version")
    assert (ran.status, ran.out, ran.err) == (0, f"spark-contracts {contracts.__version__}\n", "")
