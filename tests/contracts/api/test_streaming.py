"""Contracts on Structured Streaming DataFrames: a file source, a checkpointed sink, stop and restart."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from pyspark import cloudpickle
from query_start import start

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, metrics_of
from contracts.errors import ContractError
from contracts.formats.wire import encode_frame

# The foreachBatch writers defined here are pickled to the Connect server by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "users-value"
USER = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
    ],
}
COLUMNS = "id long, name string, age int"
ADULT = {
    "name": "adult",
    "kind": "CONDITION",
    "type": "CEL",
    "mode": "WRITEREAD",
    "expr": "message.age >= 18",
    "onFailure": "DLQ",
    "params": {"dlq.topic": "minors"},
}


@pytest.fixture
def registry() -> LocalRegistry:
    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(USER), "ruleSet": {"domainRules": [ADULT]}})
    )
    return registry


@pytest.fixture
def sink(tmp_path: Path) -> LocalTopicSink:
    return LocalTopicSink(tmp_path / "dlq")


def people(first_id: int, count: int) -> list[dict[str, Any]]:
    """`count` people from `first_id`; every third one is a minor."""
    return [
        {"id": i, "name": f"p{i}", "age": 10 if i % 3 == 0 else 30} for i in range(first_id, first_id + count)
    ]


def drop_json(directory: Path, name: str, rows: list[dict[str, Any]]) -> None:
    """A new file in the source directory, written whole then renamed in, as file sources expect."""
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{name}.tmp"
    temporary.write_text("".join(json.dumps(row) + "\n" for row in rows))
    temporary.rename(directory / name)


def run_available(writer: Any, checkpoint: Path, **sink: Any) -> Any:
    """Process everything available, then stop — one run of a restartable query."""
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    started = start(query, **sink)
    started.awaitTermination()
    assert started.exception() is None
    return started


def minors(rows: list[dict[str, Any]]) -> list[int]:
    return sorted(row["id"] for row in rows if row["age"] < 18)


def adults(rows: list[dict[str, Any]]) -> list[int]:
    return sorted(row["id"] for row in rows if row["age"] >= 18)


def dlq_ids(sink: LocalTopicSink, topic: str = "minors") -> list[int]:
    return sorted(json.loads(record.value or b"")["id"] for record in sink.read(topic))


def test_write_on_a_stream_keeps_every_row_across_a_restart(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink, tmp_path: Path
) -> None:
    source, output, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    first, second = people(0, 9), people(100, 6)
    drop_json(source, "a.json", first)

    def start() -> tuple[Any, Any]:
        stream = spark.readStream.schema(COLUMNS).json(str(source))
        valid = contract.write(stream)
        return valid, run_available(valid.writeStream.format("parquet"), checkpoint, path=str(output))

    valid, query = start()
    metrics = metrics_of(valid)
    assert metrics is not None
    # The query's progress reports the counts under the name this call generated.
    assert metrics.name in query.lastProgress["observedMetrics"]
    counts = metrics.get(query.lastProgress)["adult"]
    assert (counts.passed, counts.failed) == (len(adults(first)), len(minors(first)))
    table = metrics.to_pandas(query.lastProgress)
    assert table[["rule", "passed", "failed"]].values.tolist() == [["adult", counts.passed, counts.failed]]
    assert metrics.summary(query.lastProgress).splitlines()[2].split()[:4] == [
        "adult",
        "WRITE",
        str(counts.passed),
        str(counts.failed),
    ]
    drop_json(source, "b.json", second)
    start()  # a new run of the same query: the checkpoint says a.json is done
    written = sorted(row["id"] for row in spark.read.parquet(str(output)).collect())
    assert written == adults(first + second)
    assert dlq_ids(sink) == minors(first + second)


def test_a_stream_written_under_a_run_id_keeps_the_records_of_committed_micro_batches(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink, tmp_path: Path
) -> None:
    source, output, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    first, second = people(0, 9), people(100, 6)

    def start() -> None:
        stream = spark.readStream.schema(COLUMNS).json(str(source))
        valid = contract.write(stream, run_id="users-stream")
        run_available(valid.writeStream.format("parquet"), checkpoint, path=str(output))

    drop_json(source, "a.json", first)
    start()
    drop_json(source, "b.json", second)
    start()  # restarted with the same run id: the micro-batch of a.json is not replayed
    assert dlq_ids(sink) == minors(first + second)


def test_metrics_of_a_stream_need_the_query_progress(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    valid = contract.write(
        spark.readStream.format("rate").load().selectExpr("value AS id", "'x' AS name", "20 AS age")
    )
    metrics = metrics_of(valid)
    assert metrics is not None
    with pytest.raises(ContractError, match="lastProgress"):
        metrics.get()


def write_batch_directory(root: str, counts_root: str | None = None) -> Any:
    """A foreachBatch writer that is idempotent per micro-batch: one directory per batch id; with
    `counts_root`, it then writes the batch's per-rule counts there as JSON, one file per batch id
    (on Spark Connect the writer runs in a server-side Python process, so a file is how it tells)."""

    def write(valid: Any, batch_id: int) -> None:
        valid.write.mode("overwrite").parquet(f"{root}/batch={batch_id}")
        if counts_root is not None:
            metrics = metrics_of(valid)
            assert metrics is not None, "the micro-batch's valid rows carry no counts"
            frame = metrics.to_df(valid.sparkSession, timeout=60)
            counts = {row.rule: [row.passed, row.failed] for row in frame.collect()}
            Path(counts_root, f"{batch_id}.json").write_text(json.dumps(counts))

    return write


def test_foreach_batch_routes_dlq_and_writes_valid_rows_across_a_restart(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink, tmp_path: Path
) -> None:
    source, output, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    function = contract.foreach_batch(write_batch_directory(str(output)), name="users-q1")
    first, second = people(0, 7), people(50, 5)
    for name, rows in (("a.json", first), ("b.json", second)):
        drop_json(source, name, rows)
        stream = spark.readStream.schema(COLUMNS).json(str(source))
        run_available(stream.writeStream.foreachBatch(function), checkpoint)
    written = sorted(row["id"] for row in spark.read.parquet(str(output)).collect())
    assert written == adults(first + second)
    assert dlq_ids(sink) == minors(first + second)


def test_a_foreach_batch_writer_reads_its_own_micro_batch_counts(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink, tmp_path: Path
) -> None:
    source, output, counts = tmp_path / "in", tmp_path / "out", tmp_path / "counts"
    counts.mkdir()
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    function = contract.foreach_batch(write_batch_directory(str(output), str(counts)), name="users-q3")
    first, second = people(0, 7), people(50, 5)
    for name, rows in (("a.json", first), ("b.json", second)):
        drop_json(source, name, rows)
        stream = spark.readStream.schema(COLUMNS).json(str(source))
        run_available(stream.writeStream.foreachBatch(function), tmp_path / "checkpoint")
    by_batch = {path.stem: json.loads(path.read_text()) for path in counts.iterdir()}
    assert by_batch == {
        "0": {"adult": [len(adults(first)), len(minors(first))]},
        "1": {"adult": [len(adults(second)), len(minors(second))]},
    }


def test_a_replayed_micro_batch_replaces_its_dlq_output(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink, tmp_path: Path
) -> None:
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    function = contract.foreach_batch(write_batch_directory(str(tmp_path / "out")), name="users-q2")
    rows = people(0, 6)
    batch = spark.createDataFrame([(r["id"], r["name"], r["age"]) for r in rows], COLUMNS)
    function(batch, 7)
    function(batch, 7)  # Spark runs batch 7 again after a restart
    function(batch, 8)
    assert dlq_ids(sink) == sorted(minors(rows) * 2)
    assert spark.read.parquet(str(tmp_path / "out")).count() == 2 * len(adults(rows))


def test_foreach_batch_rejects_what_it_cannot_apply(registry: LocalRegistry, sink: LocalTopicSink) -> None:
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    with pytest.raises(ContractError, match="applies one of"):
        contract.foreach_batch(print, name="q", apply="explain")
    with pytest.raises(ContractError, match="name"):
        contract.foreach_batch(print, name="no spaces")
    with pytest.raises(ContractError, match="run_id"):
        contract.foreach_batch(print, name="q", run_id="fixed")


def frame(registry: LocalRegistry, record: dict[str, Any]) -> bytes:
    registered = registry.get_version(SUBJECT, 1)
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(USER), record)
    return encode_frame(registered.schema_id, body.getvalue())


def test_deserialize_and_serialize_on_a_stream(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink, tmp_path: Path
) -> None:
    rows = people(0, 6)
    framed = spark.createDataFrame(
        [(frame(registry, row), "users", 0, offset) for offset, row in enumerate(rows)],
        "value binary, topic string, partition int, offset long",
    )
    framed.write.parquet(str(tmp_path / "topic"))
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    stream = spark.readStream.schema(framed.schema).parquet(str(tmp_path / "topic"))
    decoded = contract.deserialize(stream)
    assert decoded.isStreaming
    reframed = contract.serialize(decoded.drop("topic", "partition", "offset"))
    run_available(reframed.writeStream.format("parquet"), tmp_path / "ck", path=str(tmp_path / "out"))
    back = contract.deserialize(spark.read.parquet(str(tmp_path / "out")))
    assert sorted(row["id"] for row in back.collect()) == adults(rows)
    # READ sent the minors to the DLQ with their original bytes; WRITE then saw only adults.
    assert sorted(record.value for record in sink.read("minors")) == sorted(
        frame(registry, row) for row in rows if row["age"] < 18
    )
