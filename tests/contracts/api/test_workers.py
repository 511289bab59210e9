"""A session whose Python workers cannot import the package: one line saying what to set, the first
time a DataContract touches it (contracts.engine.workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.engine.workers import check_workers

SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from contracts import ContractError, DataContract, LocalRegistry, Schema

spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.pyspark.python", sys.argv[1])
    .config("spark.ui.enabled", "false")
    .config("spark.log.level", "OFF")
    .getOrCreate()
)
registry = LocalRegistry()
schema = {"type": "record", "name": "P", "fields": [{"name": "age", "type": "int"}]}
registry.register_schema("p-value", Schema(json.dumps(schema)))
contract = DataContract(registry, "p-value")
for attempt in range(2):
    try:
        contract.write(spark.createDataFrame([(1,)], "age int"))
        print("no error")
    except ContractError as error:
        print(str(error))
"""


@pytest.mark.one_pass  # a process of its own, with its own classic session
def test_workers_whose_python_lacks_the_package_are_named_with_what_to_set(tmp_path: Path) -> None:
    bare = sys._base_executable  # type: ignore[attr-defined]  # the interpreter below the venv
    # The package reaches the workers neither through PYSPARK_PYTHON nor through PYTHONPATH.
    dropped = ("PYSPARK_PYTHON", "SPARK_REMOTE", "PYTHONPATH")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT, bare],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    said = (
        " which cannot import spark-data-contracts: set PYSPARK_PYTHON (or spark.pyspark.python) before"
        f" the session starts to a Python that has it, e.g. {sys.executable}"
    )
    lines = ran.stdout.splitlines()
    assert len(lines) == 2, ran.stderr[-3000:]
    for line in lines:  # the second call too: a session whose workers failed is checked again
        python, _, rest = line.removeprefix("Spark's Python workers run ").partition(",")
        assert Path(python).resolve() == Path(bare).resolve() and rest == said, line


def test_workers_that_run_the_package_pass_once_per_session(spark: object) -> None:
    check_workers(spark)  # type: ignore[arg-type]
    check_workers(spark)  # type: ignore[arg-type]  # known now: no second job


def test_a_worker_description_is_json_naming_its_python() -> None:
    from contracts.engine.worker_probe import describe

    assert json.loads(describe()) == {
        "python": sys.executable,
        "found": True,
        "version": json.loads(describe())["version"],
    }
