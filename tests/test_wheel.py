"""The built wheel installs and runs on its own: built from a copy of the sources, installed into a
temporary directory, and imported from there (never from this checkout) by an interpreter that
sees only that directory and the environment's third-party packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import contracts

ROOT = Path(__file__).resolve().parents[1]
# What a source distribution holds: the packages, the metadata and the README it names.
SOURCES = ("contracts", "executors", "actions", "pyproject.toml", "README.md")
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 120


def _copy_sources(destination: Path) -> Path:
    """The packaged sources in a directory of their own, so building leaves the checkout untouched."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=ignore)
        else:
            shutil.copy2(source, destination / name)
    return destination


def _installed_env(target: Path) -> dict[str, str]:
    """PYTHONPATH: the installed wheel first, then the environment's packages (pyspark, …)."""
    paths = dict.fromkeys([str(target), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE")}
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def _run(*argv: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.wheel
def test_the_wheel_installs_and_runs_from_its_own_copy(tmp_path: Path) -> None:
    source = _copy_sources(tmp_path / "source")
    dist, target, work = tmp_path / "dist", tmp_path / "installed", tmp_path / "work"
    work.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--wheel-dir", str(dist), str(source)],
        check=True,
        timeout=BUILD_TIMEOUT_S,
    )
    (wheel,) = dist.glob("spark_data_contracts-*.whl")
    assert wheel.name == f"spark_data_contracts-{contracts.__version__}-py3-none-any.whl"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=BUILD_TIMEOUT_S,
    )
    env = _installed_env(target)

    # -S: no site hooks, so the development install of the checkout cannot be imported instead.
    python = [sys.executable, "-S"]
    probe = (
        "import importlib.metadata as m, contracts, executors, actions;"
        "from contracts import DataContract, LocalRegistry, LocalTopicSink;"
        "print(contracts.__version__, m.version('spark-data-contracts'));"
        "print(contracts.__file__); print(executors.__file__); print(actions.__file__)"
    )
    lines = _run(*python, "-c", probe, env=env, cwd=work).stdout.splitlines()
    assert lines[0] == f"{contracts.__version__} {contracts.__version__}"
    for path in lines[1:]:
        assert Path(path).is_relative_to(target), path

    helped = _run(*python, "-m", "contracts.cli", "--help", env=env, cwd=work).stdout
    assert "usage: spark-contracts" in helped and "dlq" in helped
    # The console script pip installed runs with site hooks, the checkout's development install
    # among them: the installed copy still comes first. It lints the example's contracts, every rule
    # compiled by the executors the wheel registers as entry points.
    with_site = _run(sys.executable, "-c", "import contracts; print(contracts.__file__)", env=env, cwd=work)
    assert Path(with_site.stdout.strip()).is_relative_to(target)
    script = target / "bin" / "spark-contracts"
    linted = _run(str(script), "lint", str(ROOT / "examples" / "registry"), env=env, cwd=work)
    assert linted.stderr.strip().endswith("lint: no problems"), linted.stderr
