"""The one local[2] SparkSession every benchmark script runs on, configured the same way."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any


def session(app_name: str) -> Any:
    """A quiet local[2] session (no UI, two shuffle partitions, UTC) whose workers run this Python."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
