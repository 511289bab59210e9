"""The local-cluster session's shape, and waiting for its executors."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

MASTER = "local-cluster[2,1,1024]"
"""Two workers of one core and 1024 MiB each: two executor JVMs, each with its own Python workers."""
EXECUTORS = 2
REGISTRATION_TIMEOUT = 300
"""Seconds the executors have to register: a loaded 2-core machine starts a JVM slowly."""


def executor_count(session: Any) -> int:
    """How many executors have registered with the driver (the driver not counted)."""
    return len(session.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1


def await_executors(session: Any, count: int) -> None:
    """Wait until `count` executors have registered: they start after the session does, and a
    test run before the second one came would put every task on one process."""
    ends = time.monotonic() + REGISTRATION_TIMEOUT
    while (registered := executor_count(session)) < count:
        if time.monotonic() > ends:
            pytest.fail(f"{registered} of {count} executors registered in {REGISTRATION_TIMEOUT}s")
        time.sleep(0.2)


def work_directory(session: Any) -> Path:
    """Where the workers keep the application's executor directories (logs, fetched jars):
    `<SPARK_HOME>/work/<application id>`, inside PySpark's own package when pip installed it."""
    from pyspark.find_spark_home import _find_spark_home

    return (
        Path(os.environ.get("SPARK_HOME") or _find_spark_home()) / "work" / session.sparkContext.applicationId
    )
