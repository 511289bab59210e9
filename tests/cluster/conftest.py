"""One session on `local-cluster[2,1,1024]`: a master and two worker JVMs started by the driver,
each worker's executor its own process with its own working directory and Python workers, as on
a real cluster (on one machine). It cannot share a process with the suite's local[2] session, so
these tests run in their own pytest process: `pytest -m cluster` (`make test` does)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest
from cluster_session import EXECUTORS, MASTER, await_executors, work_directory
from spark_settings import LOAD_TOLERANT_CONFS

from tools.jars import spark_jars_setting


@pytest.fixture(scope="session")
def cluster() -> Iterator[object]:
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        pytest.fail("a Spark session runs in this process already: run the cluster tests alone (-m cluster)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(MASTER)
        .appName("spark-data-contracts-cluster-tests")
        .config("spark.executor.memory", "512m")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
    )
    for key, value in LOAD_TOLERANT_CONFS.items():
        builder = builder.config(key, value)
    connectors = spark_jars_setting()
    if connectors:
        builder = builder.config("spark.jars", connectors)
    session = builder.getOrCreate()
    work = work_directory(session)
    try:
        await_executors(session, EXECUTORS)
        yield session
    finally:
        session.stop()
        shutil.rmtree(work, ignore_errors=True)
