"""deserialize on the spark-avro path with the frames the Python decoder must read or judge in a
branch of their own: when the input reads twice safely, the rows `from_avro` decoded and no one
must judge never cross to Python, and the rows, DLQ records and errors are the fastavro path's
(docs/semantics.md §8.10)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
from decode_paths import SUBJECT, path_chosen

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.engine import jvm_avro
from contracts.engine.read_twice import physical_plan
from contracts.formats.wire import encode_frame

SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}],
}


def _body(record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), record)
    return out.getvalue()


def _branches(plan: str) -> tuple[str, str]:
    """The two children of the plan's union, as printed (the first child's lines start ':')."""
    lines = plan.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("+-: ").startswith("Union"))
    depth = len(lines[start]) - len(lines[start].lstrip("+-: "))
    below = [line[depth:] for line in lines[start + 1 :] if line.strip()]
    first = [line for line in below if line.startswith(":")]
    return "\n".join(first), "\n".join(line for line in below if not line.startswith(":"))


def _deserialized(
    spark: Any, tmp: Path, frames: list[bytes | None], path: str, observed: bool = False
) -> Any:
    """deserialize (DLQ policy) of `frames` in two Spark partitions, on the chosen Avro path."""
    from pyspark.sql import functions as F

    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema(json.dumps(SCHEMA)))
    rows = spark.createDataFrame(
        [(str(i).encode(), frame, "orders", 0, i) for i, frame in enumerate(frames)],
        "key binary, value binary, topic string, partition int, offset long",
    ).repartition(2, "offset")
    if observed:
        rows = rows.observe("seen", F.count(F.lit(1)))
    with path_chosen(jvm_avro.PATH_ENV, path):
        contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp / path))
        return contract.deserialize(rows, on_decode_error="DLQ", decode_dlq_topic="bad")


def _outcome(df: Any, tmp: Path, path: str) -> tuple[list[Any], list[Any]]:
    rows = sorted((row["offset"], row["id"], row["note"]) for row in df.collect())
    sink = LocalTopicSink(tmp / path)
    records = sink.read("bad") if sink.topics() else []
    return rows, sorted((r.key, r.value, tuple(r.headers)) for r in records)


def test_the_rows_from_avro_decodes_never_reach_python(spark: Any, tmp_path: Path) -> None:
    frames = [encode_frame(1, _body({"id": i, "note": f"n{i}"})) for i in range(12)]
    decoded = _deserialized(spark, tmp_path, frames, "jvm")
    jvm_rows, python_rows = _branches(physical_plan(decoded))
    assert "from_avro" in jvm_rows and "ArrowEvalPython" not in jvm_rows, jvm_rows
    assert "ArrowEvalPython" in python_rows, python_rows
    assert _outcome(decoded, tmp_path, "jvm") == _outcome(
        _deserialized(spark, tmp_path, frames, "python"), tmp_path, "python"
    )


def test_unknown_ids_corrupt_bodies_bad_utf8_and_tombstones_decode_as_fastavro_does(
    spark: Any, tmp_path: Path
) -> None:
    """The Python branch reads a frame of an id the plan does not know, and judges a body
    `from_avro` reads as nulls and a string that is not UTF-8: DLQ records and rows agree."""
    frames: list[bytes | None] = [encode_frame(1, _body({"id": i, "note": f"n{i}"})) for i in range(8)]
    frames[2] = encode_frame(1, b"\x02\x06ab")  # the note's length runs past the body
    frames[4] = encode_frame(1, b"\x04\x04\xff\xfe")  # a note that is not UTF-8
    frames[5] = encode_frame(99, _body({"id": 5, "note": "n5"}))
    frames[6] = None
    decoded = _deserialized(spark, tmp_path, frames, "jvm")
    assert "Union" in physical_plan(decoded)
    got = _outcome(decoded, tmp_path, "jvm")
    assert got == _outcome(_deserialized(spark, tmp_path, frames, "python"), tmp_path, "python")
    rows, dlq = got
    assert [offset for offset, _, _ in rows] == [0, 1, 3, 6, 7]
    assert len(dlq) == 3


def test_an_observed_input_is_decoded_in_one_pass(spark: Any, tmp_path: Path) -> None:
    """An observation would count each row twice: the query keeps one pass over the input."""
    frames = [encode_frame(1, _body({"id": i, "note": f"n{i}"})) for i in range(6)]
    decoded = _deserialized(spark, tmp_path, frames, "jvm", observed=True)
    assert "Union" not in physical_plan(decoded)
    assert [row for row, *_ in _outcome(decoded, tmp_path, "jvm")[0]] == list(range(6))
