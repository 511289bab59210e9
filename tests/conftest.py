"""Shared fixtures: one session-scoped local[2] SparkSession (classic, or Connect under SPARK_REMOTE),
with the Spark connectors `make jars` fetched on its classpath."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import settings
from hypothesis_profiles import chosen_profile

from tools.jars import spark_jars_setting

settings.load_profile(chosen_profile())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the `spark` fixture, so the Connect pass can select them, and
    every test that uses the Kafka broker (tests/kafka/conftest.py) `kafka`."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if "kafka_broker" in fixtures:
            item.add_marker(pytest.mark.kafka)


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
    # spark-sql-kafka and spark-avro (tools/maven/spark-connectors): static, so set before the JVM
    # (classic) or the local Connect server starts.
    connectors = spark_jars_setting()
    if connectors:
        builder = builder.config("spark.jars", connectors)
    if os.environ.get("SPARK_REMOTE"):
        builder = builder.remote(os.environ["SPARK_REMOTE"])
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
