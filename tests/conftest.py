"""Shared fixtures: one session-scoped local[2] SparkSession (classic, or Connect under SPARK_REMOTE),
with the Spark connectors `make jars` fetched on its classpath."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings
from hypothesis_profiles import CONNECT_SHARE, chosen_profile
from spark_settings import LOAD_TOLERANT_CONFS

from tools.jars import spark_jars_setting

settings.load_profile(chosen_profile())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses the `spark` fixture, so the Connect pass can select them, every
    test that uses the Kafka broker (tests/kafka/conftest.py) `kafka`, and every test on the
    local-cluster session (tests/cluster/conftest.py) `cluster`: those run only when chosen
    (`-m cluster`), in a process of their own, as no other session may exist beside theirs."""
    chosen = "cluster" in config.option.markexpr and "not cluster" not in config.option.markexpr
    alone = pytest.mark.skip(
        reason="the local-cluster tests run in a process of their own: pytest -m cluster"
    )
    if os.environ.get("SPARK_REMOTE"):
        _a_share_of_each_corpus(config, items)
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if "kafka_broker" in fixtures:
            item.add_marker(pytest.mark.kafka)
        if "cluster" in fixtures:
            item.add_marker(pytest.mark.cluster)
            if not chosen:
                item.add_marker(alone)


CORPUS_SIZE = 8
"""A test parametrized over at least this many cases is a corpus: Spark Connect runs a share of it."""


def _a_share_of_each_corpus(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On Spark Connect, every CONNECT_SHARE-th case of a corpus (its first included), as property
    tests draw a share of their examples there: the classic pass checks every case, this pass proves
    the corpus runs on Connect. Which cases run is fixed by their order, never by chance."""
    cases: dict[str, list[pytest.Item]] = {}
    for item in items:
        if getattr(item, "callspec", None) is not None:
            cases.setdefault(item.nodeid.split("[", 1)[0], []).append(item)
    left_out = [
        item
        for corpus in cases.values()
        if len(corpus) >= CORPUS_SIZE
        for index, item in enumerate(corpus)
        if index % CONNECT_SHARE
    ]
    if left_out:
        dropped = set(map(id, left_out))
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if id(item) not in dropped]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    # Python workers must run the interpreter that has the project installed, not the system one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.appName("spark-data-contracts-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in LOAD_TOLERANT_CONFS.items():
        builder = builder.config(key, value)
    # spark-sql-kafka and spark-avro (tools/maven/spark-connectors): static, so set before the JVM
    # (classic) or the local Connect server starts.
    connectors = spark_jars_setting()
    if connectors:
        builder = builder.config("spark.jars", connectors)
    if os.environ.get("SPARK_REMOTE"):
        builder = builder.remote(os.environ["SPARK_REMOTE"])
        if os.environ["SPARK_REMOTE"].startswith("local"):
            builder = _on_a_free_port(builder)
    else:
        # JVM options are fixed when the JVM starts; a Connect session cannot set them (it warns).
        builder = (
            builder.master("local[2]")
            .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
            .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        )
    session = builder.getOrCreate()
    yield session
    session.stop()


def _on_a_free_port(builder: Any) -> Any:
    """A local Connect server on a free port instead of the fixed 15002, so two suites on one
    machine do not meet on it ("Failed to bind to address 0.0.0.0:15002"). PySpark's local
    `remote("local[N]")` always dials `sc://localhost` on the default port, and only its own test
    mode (SPARK_TESTING, which changes much else) picks another: the client's default port is
    pointed at the chosen one instead."""
    from pyspark.sql.connect.client import DefaultChannelBuilder

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    DefaultChannelBuilder.default_port = staticmethod(lambda: port)  # type: ignore[method-assign]
    return builder.config("spark.connect.grpc.binding.port", str(port))
