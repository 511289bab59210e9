"""The Spark session a command starts when it is not given one, with Spark's own output kept off
the command's stderr (the examples start theirs the same way)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PANDAS_WARNING = "PySpark does not yet fully support pandas"
"""PySpark 4 warns that pandas 3 is not fully supported; this project uses only Arrow paths, where it
works (docs/development.md), so commands and examples filter that one warning out of their output."""


def new_session() -> SparkSession:
    """A session for the CLI: Spark Connect when SPARK_REMOTE is set, else SPARK_MASTER (local[2]).

    Spark's own output is off unless SPARK_LOG_LEVEL says otherwise: the CLI prints the progress,
    the summary and the first line of a failure itself.
    """
    from pyspark.sql import SparkSession

    # Local Python workers must run this interpreter, the one with the project installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("spark-contracts")
    if os.environ.get("SPARK_REMOTE"):
        builder = builder.remote(os.environ["SPARK_REMOTE"])
    else:
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        # Static settings: a Connect session cannot set them (it warns); its server's are its own.
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        builder = builder.config("spark.log.level", os.environ.get("SPARK_LOG_LEVEL", "OFF"))
    if os.environ.get("SPARK_LOG_LEVEL"):
        return builder.getOrCreate()
    with spark_output_discarded():
        return builder.getOrCreate()


@contextlib.contextmanager
def spark_output_discarded() -> Iterator[None]:
    """This process's stderr (fd 2) on /dev/null while a session starts: the JVM it starts keeps
    it, and so do the Python workers that JVM starts, so Spark's start-up lines and its workers'
    noise (a daemon's BrokenPipeError when a job fails) stay off stderr, which is this process's
    own again once the session exists."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PySpark's own warnings while it starts
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
