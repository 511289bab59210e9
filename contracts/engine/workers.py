"""Whether a session's Python workers can run the engine: checked by one tiny job the first time a
DataContract touches the session, so a worker Python without the package is one line saying what
to set, not a worker traceback on every action (docs/semantics.md §9.8).

The probe is pickled by value (`worker_probe`), so it runs on a worker that cannot import this
package; it asks the worker's Python what it is and whether it finds the package.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

from contracts.engine import worker_probe
from contracts.errors import ContractError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DISTRIBUTION = "spark-data-contracts"

_CHECKED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Sessions whose workers were found able to run the engine."""
_LOCK = threading.Lock()


def check_workers(spark: SparkSession) -> None:
    """Nothing when `spark`'s Python workers run a Python that imports this package (the same
    release as the driver's); else a ContractError saying what to set. One job per session."""
    with _LOCK:
        if spark in _CHECKED:
            return
    answer = _probe(spark)
    problem = _problem(answer)
    if problem is not None:
        raise ContractError(
            f"{problem}: set PYSPARK_PYTHON (or spark.pyspark.python) before the session starts to a"
            f" Python that has it, e.g. {sys.executable}"
        )
    with _LOCK:
        _CHECKED.add(spark)


def _probe(spark: SparkSession) -> dict[str, Any]:
    """What one Python worker of `spark` says of itself (worker_probe.describe)."""
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    cloudpickle.register_pickle_by_value(worker_probe)
    probe = F.udf(worker_probe.describe, "string", useArrow=False)
    try:
        (row,) = spark.range(1).select(probe().alias("worker")).collect()
    except Exception as error:
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        raise ContractError(
            f"Spark's Python workers cannot start ({first}): set PYSPARK_PYTHON (or"
            f" spark.pyspark.python) before the session starts to a Python that has {DISTRIBUTION},"
            f" e.g. {sys.executable}"
        ) from error
    answer: dict[str, Any] = json.loads(row["worker"])
    return answer


def _problem(answer: dict[str, Any]) -> str | None:
    """Why the worker described by `answer` cannot run the engine; None when it can."""
    python = answer["python"]
    if not answer["found"]:
        return f"Spark's Python workers run {python}, which cannot import {DISTRIBUTION}"
    ours = _version()
    theirs = answer["version"]
    if ours is not None and theirs is not None and theirs != ours:
        return f"Spark's Python workers run {python} with {DISTRIBUTION} {theirs}, the driver {ours}"
    return None


def _version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
