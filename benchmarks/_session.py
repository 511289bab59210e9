"""The one local[2] SparkSession every benchmark script runs on, configured the same way."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any


def session(app_name: str, connectors: bool = False) -> Any:
    """A quiet local[2] session (no UI, two shuffle partitions, UTC) whose workers run this Python;
    with `connectors`, the Spark connectors `make jars` fetched (spark-avro) on its classpath."""
    from pyspark.sql import SparkSession

    from tools.jars import spark_jars_setting

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    jars = spark_jars_setting() if connectors else None
    spark = (builder.config("spark.jars", jars) if jars else builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
