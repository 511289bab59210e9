"""serialize on the spark-avro path with the records fastavro must judge in a branch of their own:
when the input reads twice safely no row crosses to Python but those, and the frames and failures
are the fastavro path's (docs/semantics.md §8.10)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import pytest
from decode_paths import SUBJECT, path_chosen

from contracts import DataContract, LocalRegistry, Schema
from contracts.engine import jvm_avro

SCHEMA = {
    "type": "record",
    "name": "Flag",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "on", "type": "boolean"},
        {"name": "nick", "type": ["null", "string"]},
    ],
}


def _plan(df: Any) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        df.explain()
    return printed.getvalue()


def _serialized(spark: Any, build: Any, path: str) -> Any:
    """serialize's DataFrame for the rows `build` makes, on the chosen Avro path."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema(json.dumps(SCHEMA)))
    with path_chosen(jvm_avro.PATH_ENV, path):
        return DataContract(registry, SUBJECT).serialize(build(spark))


def _rows(spark: Any, name: Any = None, on: Any = None, local: bool = False) -> Any:
    """Twenty records in two Spark partitions of ten (from rows held by the driver when `local`, which
    Spark may number on the driver); `name` and `on` replace those columns."""
    from pyspark.sql import functions as F

    values = ", ".join(f"({i}L)" for i in range(20))
    ids = spark.sql(f"SELECT id FROM VALUES {values} AS rows(id)")
    source = ids if local else spark.range(0, 20, 1, 2)
    df = source.select(
        F.col("id"),
        (name if name is not None else F.concat(F.lit("n"), F.col("id").cast("string"))).alias("name"),
        (on if on is not None else F.col("id") % 2 == 0).alias("on"),
        F.when(F.col("id") % 3 == 0, F.lit("x")).alias("nick"),
        F.col("id").cast("string").alias("key"),
    )
    return df


def _frames(df: Any) -> dict[str, bytes]:
    return {row["key"]: bytes(row["value"]) for row in df.collect()}


def test_only_the_suspects_reach_python_and_the_frames_are_fastavros(spark: Any) -> None:
    jvm = _serialized(spark, _rows, "jvm")
    plan = _plan(jvm)
    assert "ArrowEvalPython" not in plan and "SuspectFrames" in plan, plan
    assert _frames(jvm) == _frames(_serialized(spark, _rows, "python"))


def test_a_suspect_fastavro_writes_is_in_the_output(spark: Any) -> None:
    """fastavro writes a null boolean as false: that row comes from the suspects' branch."""
    from pyspark.sql import functions as F

    def build(spark: Any) -> Any:
        return _rows(spark, on=F.when(F.col("id") != 13, F.col("id") % 2 == 0))

    jvm = _frames(_serialized(spark, build, "jvm"))
    assert len(jvm) == 20
    assert jvm == _frames(_serialized(spark, build, "python"))


@pytest.mark.parametrize(("bad", "local"), [("null name", False), ("bad utf-8", False), ("bad utf-8", True)])
def test_a_refused_record_fails_naming_the_row_the_fastavro_path_names(
    spark: Any, bad: str, local: bool
) -> None:
    """The suspect is the sixth row of the second partition: numbered before it is picked out."""
    from pyspark.sql import functions as F

    name = F.concat(F.lit("n"), F.col("id").cast("string"))
    broken = F.lit(None).cast("string") if bad == "null name" else F.unhex(F.lit("61FF62")).cast("string")

    def build(spark: Any) -> Any:
        return _rows(spark, name=F.when(F.col("id") == 15, broken).otherwise(name), local=local)

    messages = {}
    for path in ("python", "jvm"):
        with pytest.raises(Exception) as caught:
            _serialized(spark, build, path).collect()
        found = re.search(r"SerializationError: [^\n]*", str(caught.value))
        assert found is not None, str(caught.value)[:2000]
        messages[path] = found.group(0)
    assert messages["jvm"] == messages["python"]
    if bad == "bad utf-8":
        assert "row 5 of Spark partition 1" in messages["jvm"], messages


def test_an_input_that_does_not_read_twice_safely_is_encoded_in_one_pass(spark: Any) -> None:
    from pyspark.sql import functions as F

    def build(spark: Any) -> Any:
        return _rows(spark, name=F.concat(F.lit("p"), F.spark_partition_id().cast("string")))

    jvm = _serialized(spark, build, "jvm")
    plan = _plan(jvm)
    assert "ArrowEvalPython" in plan and "SuspectFrames" not in plan, plan
    assert len(_frames(jvm)) == 20


def test_rows_the_driver_holds_are_encoded_in_one_pass(spark: Any) -> None:
    """Spark may number a projection of driver-held rows on the driver, all as partition 0: those
    keep the one-pass UDF, which numbers them in their tasks."""
    jvm = _serialized(spark, lambda spark: _rows(spark, local=True), "jvm")
    plan = _plan(jvm)
    assert "SuspectFrames" not in plan, plan
    assert len(_frames(jvm)) == 20
