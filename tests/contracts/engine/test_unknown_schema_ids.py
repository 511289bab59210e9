"""Frames naming schema ids the registry does not know, or knows under another subject: each id is
asked about once per worker and batch, not once per row (docs/semantics.md §8.2)."""

from __future__ import annotations

import io
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from pyspark import cloudpickle
from registry_server import RegistryServer, error_reply, running_registry

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, SchemaRegistryClient
from contracts.errors import RegistryError
from contracts.formats.wire import encode_frame

# The counting registry below is pickled to the Connect server's workers by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "o-value"
ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "string"}]}
UNKNOWN_ID = 999
ROWS = 240  # a third each: valid, an unknown id, an id of another subject
PARTITIONS = 2
EXPECTED = (ROWS // 3, 2 * ROWS // 3)  # (valid, undecodable)


def body(record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(ORDER), record)
    return out.getvalue()


def register(registry: Any) -> tuple[int, int]:
    """The subject's schema id and the id of a schema registered under another subject only."""
    own = registry.register_schema(SUBJECT, Schema(json.dumps(ORDER)))
    foreign = registry.register_schema("p-value", Schema(json.dumps(OTHER)))
    return own, foreign


def frames(spark: Any, own: int, foreign: int) -> Any:
    ids = [own, UNKNOWN_ID, foreign]
    rows = [(i, encode_frame(ids[i % 3], body({"id": i}))) for i in range(ROWS)]
    return spark.createDataFrame(rows, "offset long, value binary").repartition(PARTITIONS)


def deserialized_counts(contract: DataContract, df: Any, dlq: Path) -> tuple[int, int]:
    out = contract.deserialize(df, on_decode_error="DLQ", decode_dlq_topic="undecodable")
    return out.count(), len(LocalTopicSink(str(dlq)).read("undecodable"))


def test_unknown_ids_ask_the_registry_once_per_worker_not_per_row(spark: Any, tmp_path: Path) -> None:
    with running_registry(LocalRegistry()) as server:
        client = SchemaRegistryClient(server.url, max_retries=0)
        own, foreign = register(client)
        contract = DataContract(client, SUBJECT, dlq_sink=LocalTopicSink(str(tmp_path / "dlq")))
        server.reset_log()
        assert deserialized_counts(contract, frames(spark, own, foreign), tmp_path / "dlq") == EXPECTED
        unknown = server.count("GET", f"/schemas/ids/{UNKNOWN_ID}")
        other_subject = server.count("POST", f"/subjects/{SUBJECT}")
    # Each id at most once per task (fewer when a worker runs several); each row asked before.
    assert 1 <= unknown <= PARTITIONS
    assert 1 <= other_subject <= PARTITIONS


class CountingRegistry:
    """A registry that appends one line per id lookup to `log` (workers are other processes)."""

    def __init__(self, inner: LocalRegistry, log: str) -> None:
        self.inner = inner
        self.log = log

    def get_schema(self, schema_id: int) -> Schema:
        with open(self.log, "a") as out:
            out.write(f"{schema_id}\n")
        return self.inner.get_schema(schema_id)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("inner", "log"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_unknown_ids_in_a_registry_directory_are_read_once_per_batch(spark: Any, tmp_path: Path) -> None:
    directory = LocalRegistry(tmp_path / "registry", create=True)
    own, foreign = register(directory)
    log = tmp_path / "lookups.log"
    log.touch()
    registry = CountingRegistry(directory, str(log))
    contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(str(tmp_path / "dlq")))
    assert deserialized_counts(contract, frames(spark, own, foreign), tmp_path / "dlq") == EXPECTED
    looked_up = log.read_text().split()
    # A directory is scanned on every lookup; each frame of an unknown id made one before.
    assert 1 <= looked_up.count(str(UNKNOWN_ID)) <= PARTITIONS
    assert looked_up.count(str(foreign)) <= PARTITIONS


# -- the client's negative cache, without Spark ----------------------------------------------------


@pytest.fixture
def server() -> Any:
    with running_registry(LocalRegistry()) as running:
        yield running


def test_a_missing_id_is_remembered_for_missing_cache_ttl(server: RegistryServer) -> None:
    now = [0.0]
    client = SchemaRegistryClient(server.url, missing_cache_ttl=10, clock=lambda: now[0])
    for _ in range(5):
        with pytest.raises(RegistryError) as error:
            client.get_schema(UNKNOWN_ID)
        assert error.value.error_code == 40403
    assert server.count() == 1
    now[0] += 10
    with pytest.raises(RegistryError):
        client.get_schema(UNKNOWN_ID)
    assert server.count() == 2


def test_missing_versions_and_lookups_are_remembered_until_a_register(server: RegistryServer) -> None:
    client = SchemaRegistryClient(server.url)
    schema = Schema(json.dumps(ORDER))
    for _ in range(3):
        with pytest.raises(RegistryError, match="not found"):
            client.lookup_schema(SUBJECT, schema)
        with pytest.raises(RegistryError, match="not found"):
            client.get_version(SUBJECT, 1)
    assert server.count() == 2
    schema_id = client.register_schema(SUBJECT, schema)
    assert client.lookup_schema(SUBJECT, schema).schema_id == schema_id
    assert client.get_version(SUBJECT, 1).schema_id == schema_id


def test_outages_are_not_remembered_and_a_zero_ttl_remembers_nothing(server: RegistryServer) -> None:
    client = SchemaRegistryClient(server.url, max_retries=0)
    server.inject(error_reply(500, 50001, "store down"))
    with pytest.raises(RegistryError, match="store down"):
        client.get_schema(UNKNOWN_ID)
    with pytest.raises(RegistryError, match="not found"):
        client.get_schema(UNKNOWN_ID)
    assert server.count() == 2
    forgetful = SchemaRegistryClient(server.url, missing_cache_ttl=0)
    for _ in range(2):
        with pytest.raises(RegistryError, match="not found"):
            forgetful.get_schema(UNKNOWN_ID)
    assert server.count() == 4


def test_copies_of_one_client_in_a_process_share_its_caches(server: RegistryServer) -> None:
    client = SchemaRegistryClient(server.url)
    schema_id = client.register_schema(SUBJECT, Schema(json.dumps(ORDER)))
    tasks = [pickle.loads(pickle.dumps(client)) for _ in range(3)]  # as Spark ships it to each task
    server.reset_log()
    for task in tasks:
        assert task.get_schema(schema_id).schema_str == json.dumps(ORDER)
        with pytest.raises(RegistryError):
            task.get_schema(UNKNOWN_ID)
    assert server.count() == 2
    other = SchemaRegistryClient(server.url)  # another client: caches of its own
    other.get_schema(schema_id)
    assert server.count() == 3
