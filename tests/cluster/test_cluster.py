"""The engine on a multi-process cluster (local-cluster[2,1,1024]): executors are other JVMs with
other working directories, each with its own Python workers, as on a real cluster. Each scenario
is one that a single local[2] JVM could get right by accident: DLQ delivery from executors,
migrations and encryption keys found by workers through a registry directory, a streaming
foreachBatch over several micro-batches, and what a worker cannot see of the driver, named."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cluster_session import MASTER, executor_count
from encrypt_oracle import KMS_PARAMS, encrypt_rule
from fastavro import parse_schema, schemaless_writer
from pyspark import cloudpickle
from query_start import start

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.wire import encode_frame

# The foreachBatch writer below is pickled by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SECRET = "cluster-secret"
USER = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "age", "type": "int"},
    ],
}
COLUMNS = "id long, name string, ssn string, age int"
ADULT = {
    "name": "adult",
    "kind": "CONDITION",
    "type": "CEL",
    "mode": "WRITEREAD",
    "expr": "message.age >= 18",
    "onFailure": "DLQ",
    "params": {"dlq.topic": "minors"},
}


def people(count: int, first: int = 0) -> list[tuple[Any, ...]]:
    """`count` people; every fourth one a minor."""
    return [(i, f"p{i}", f"{i:09d}", 10 if i % 4 == 0 else 30) for i in range(first, first + count)]


@pytest.fixture
def directory(tmp_path: Path) -> LocalRegistry:
    return LocalRegistry(tmp_path / "registry", create=True)


def test_tasks_run_in_two_executors_with_their_own_working_directories(cluster: Any) -> None:
    assert cluster.sparkContext.master == MASTER
    assert executor_count(cluster) == 2

    def where(batches: Any) -> Any:
        import os

        import pyarrow as pa

        for batch in batches:
            yield pa.RecordBatch.from_pydict({"cwd": [os.getcwd()] * batch.num_rows})

    places = {
        row.cwd for row in cluster.range(0, 8, numPartitions=8).mapInArrow(where, "cwd string").collect()
    }
    assert len(places) == 2 and str(Path.cwd()) not in places


def test_write_routes_rejects_to_the_dlq_from_both_executors(
    cluster: Any, directory: LocalRegistry, tmp_path: Path
) -> None:
    directory.register_schema(
        "users-value", Schema.from_dict({"schema": json.dumps(USER), "ruleSet": {"domainRules": [ADULT]}})
    )
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(directory, "users-value", dlq_sink=sink)
    df = cluster.createDataFrame(people(40), COLUMNS).repartition(4)
    valid = contract.write(df, run_id="cluster-write")
    assert sorted(row.id for row in valid.collect()) == [i for i in range(40) if i % 4]
    assert sorted(json.loads(r.value or b"")["id"] for r in sink.read("minors")) == list(range(0, 40, 4))


def test_serialize_then_deserialize_with_a_migration(
    cluster: Any, directory: LocalRegistry, tmp_path: Path
) -> None:
    v1 = {**USER, "fields": [f for f in USER["fields"] if f["name"] != "ssn"]}
    v2 = {
        **v1,
        "fields": [{"name": "id", "type": "long"}, {"name": "fullName", "type": "string"}, v1["fields"][2]],
    }
    rename = {
        "name": "rename",
        "kind": "TRANSFORM",
        "type": "JSONATA",
        "mode": "UPGRADE",
        "expr": "$merge([$sift($, function($v, $k) {$k != 'name'}), {'fullName': $.name}])",
    }
    directory.set_config("orders-value", compatibility="NONE")
    directory.register_schema("orders-value", Schema(json.dumps(v1)))
    directory.register_schema(
        "orders-value", Schema.from_dict({"schema": json.dumps(v2), "ruleSet": {"migrationRules": [rename]}})
    )
    sink = LocalTopicSink(tmp_path / "dlq")
    writer = DataContract(directory, "orders-value", version=1, dlq_sink=sink)
    reader = DataContract(directory, "orders-value", dlq_sink=sink)
    rows = [(i, f"n{i}", 30) for i in range(20)]
    frames = writer.serialize(cluster.createDataFrame(rows, "id long, name string, age int").repartition(2))
    read = reader.deserialize(frames.select("value"), key_col=None)
    assert sorted((r.id, r.fullName, r.age) for r in read.collect()) == sorted(rows)


def test_encrypt_round_trips_through_a_registry_directory(
    cluster: Any, directory: LocalRegistry, tmp_path: Path
) -> None:
    directory.register_schema(
        "people-value",
        Schema.from_dict({"schema": json.dumps(USER), "ruleSet": {"domainRules": [encrypt_rule()]}}),
    )
    contract = DataContract(
        directory, "people-value", rule_config={"secret": SECRET}, dlq_sink=LocalTopicSink(tmp_path / "dlq")
    )
    rows = people(12)
    framed = contract.serialize(cluster.createDataFrame(rows, COLUMNS).repartition(2))
    frames = [bytes(row.value) for row in framed.collect()]
    assert all(f"{i:09d}".encode() not in frame for i, frame in zip(range(12), frames, strict=False))
    assert directory.get_dek(KMS_PARAMS["encrypt.kek.name"], "people-value").version == 1
    back = contract.deserialize(framed, key_col=None)
    assert sorted(tuple(row) for row in back.select("id", "name", "ssn", "age").collect()) == rows


class PerBatch:
    """A foreachBatch writer: each micro-batch's valid rows to their own parquet directory."""

    def __init__(self, root: str) -> None:
        self.root = root

    def __call__(self, batch: Any, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(f"{self.root}/batch={batch_id}")


def test_foreach_batch_over_two_micro_batches(cluster: Any, directory: LocalRegistry, tmp_path: Path) -> None:
    directory.register_schema(
        "users-value", Schema.from_dict({"schema": json.dumps(USER), "ruleSet": {"domainRules": [ADULT]}})
    )
    source = tmp_path / "in"
    source.mkdir()
    for name, first in (("a.json", 0), ("b.json", 100)):
        lines = [
            json.dumps(dict(zip(["id", "name", "ssn", "age"], row, strict=True))) for row in people(8, first)
        ]
        (source / name).write_text("\n".join(lines) + "\n")
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(directory, "users-value", dlq_sink=sink)
    stream = cluster.readStream.schema(COLUMNS).option("maxFilesPerTrigger", 1).json(str(source))
    writer = (
        stream.writeStream.foreachBatch(
            contract.foreach_batch(PerBatch(str(tmp_path / "out")), name="cluster-q")
        )
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )
    query = start(writer)
    query.awaitTermination()
    assert query.exception() is None
    assert [p["batchId"] for p in query.recentProgress if p["numInputRows"]] == [0, 1]
    out = cluster.read.parquet(str(tmp_path / "out"))
    expected = [i for first in (0, 100) for i in range(first, first + 8) if i % 4]
    assert sorted(row.id for row in out.collect()) == expected
    assert sorted(json.loads(r.value or b"")["id"] for r in sink.read("minors")) == [0, 4, 100, 104]


def test_what_a_worker_cannot_see_of_an_in_memory_registry_is_named(cluster: Any, tmp_path: Path) -> None:
    # A LocalRegistry in memory reaches each task as a copy taken when the DataFrame was built: a
    # version the driver registers afterwards is not in it, and the reason says why.
    memory = LocalRegistry()
    memory.register_schema("users-value", Schema(json.dumps(USER)))
    later = {**USER, "fields": [*USER["fields"], {"name": "email", "type": "string", "default": ""}]}
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(later), {"id": 1, "name": "a", "ssn": "1", "age": 30, "email": "e"})
    frames = cluster.createDataFrame([(encode_frame(2, body.getvalue()),)], "value binary")
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = DataContract(memory, "users-value", dlq_sink=sink)
    planned = reader.deserialize(frames, key_col=None, on_decode_error="DLQ", decode_dlq_topic="undecodable")
    assert memory.register_schema("users-value", Schema(json.dumps(later))) == 2
    assert planned.collect() == []
    [record] = sink.read("undecodable")
    reason = dict(record.headers)["__rule.exception"].decode()
    assert reason.startswith(
        "unknown schema id 2: the registry has no such schema (the registry is a LocalRegistry"
    )
    assert "give it a directory" in reason
