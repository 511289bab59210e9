"""Running the `spark-contracts` command in-process for tests, and writing registry directories."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.cli.main import run

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Ran:
    """One CLI run: its exit status and what it printed."""

    status: int
    out: str
    err: str


def cli(*argv: str, spark: Any = None) -> Ran:
    """`spark-contracts ARGV` through the CLI's entry point, on `spark` when given."""
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), spark=spark, stdout=out, stderr=err)
    return Ran(status, out.getvalue(), err.getvalue())


def write_version(root: Path, subject: str, version: int, payload: Any) -> Path:
    """`<root>/<subject>/<version>.json` holding `payload` (a dict as JSON, or text as it is)."""
    path = root / subject / f"{version}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


def python_m_cli(*argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m contracts.cli ARGV` in a fresh interpreter that imports this checkout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "contracts.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
