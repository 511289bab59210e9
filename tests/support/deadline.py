"""A deadline for a call that a regression would make run for hours (a regex backtracking without
bound): the test fails when it passes, instead of hanging the suite."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def within(seconds: float, call: Callable[[], T], spark: Any = None) -> T:
    """`call()`'s result, or a test failure once `seconds` have passed. The call goes on in a
    daemon thread (a regex search cannot be interrupted); with `spark`, its jobs are cancelled."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:
            outcome.append((False, e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        if spark is not None:
            _cancel(spark)
        pytest.fail(f"still running after {seconds} s")
    done, value = outcome[0]
    if not done:
        raise value
    return value  # type: ignore[no-any-return]


def _cancel(spark: Any) -> None:
    """Cancel the session's jobs: Spark Connect interrupts its operations, a classic session its jobs."""
    if hasattr(spark, "interruptAll") and type(spark).__module__.startswith("pyspark.sql.connect"):
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


def python_within(seconds: float, code: str) -> str:
    """What a fresh Python running `code` prints, or a test failure once `seconds` have passed (the
    process killed): for a call that holds the interpreter's lock while it runs, as Python's `re`
    does, which no thread of the test's own process could outwait."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    try:
        command = [sys.executable, "-c", code]
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=seconds, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {seconds} s")
    assert done.returncode == 0, done.stderr
    return done.stdout
