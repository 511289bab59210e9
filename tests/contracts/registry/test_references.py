"""Schema references: each (subject, version) resolved once per load, iteratively, within bounds —
for loading a contract, for LocalRegistry's own checks and for copying schemas between registries
(contracts/registry/references.py, docs/semantics.md §1.1)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from registry_server import RegistryServer, running_registry

from contracts import DataContract
from contracts.errors import ContractError, RegistryError
from contracts.model import RegisteredSchema, Schema, SchemaReference
from contracts.registry import references
from contracts.registry.http import SchemaRegistryClient
from contracts.registry.local import LocalRegistry
from contracts.remap import _Remapper

# -- reference graphs ------------------------------------------------------------------------------


def record(name: str, fields: dict[str, str]) -> str:
    return json.dumps(
        {"type": "record", "name": name, "fields": [{"name": k, "type": t} for k, t in fields.items()]}
    )


def leaf(name: str) -> Schema:
    return Schema(record(name, {"x": "int"}))


def referring(name: str, targets: dict[str, str], uses: tuple[str, ...] | None = None) -> Schema:
    """A record referencing each subject of `targets` (field -> subject) under its type's name (the
    subject upper-cased), with a field of that type for those `uses` names (default: all)."""
    used = targets if uses is None else {field: targets[field] for field in uses}
    fields = {field: subject.upper() for field, subject in used.items()}
    refs = tuple(SchemaReference(subject.upper(), subject, 1) for subject in targets.values())
    return Schema(record(name, fields), references=refs)


def chain(depth: int) -> dict[str, Schema]:
    """s0 -> s1 -> … -> s{depth}: `depth` levels of references."""
    graph = {f"s{i}": referring(f"S{i}", {"next": f"s{i + 1}"}) for i in range(depth)}
    graph[f"s{depth}"] = leaf(f"S{depth}")
    return graph


def diamond(depth: int) -> dict[str, Schema]:
    """root -> a0, b0; a_i and b_i -> a_{i+1}, b_{i+1}; `depth` levels below the root, 2 ** depth
    paths to the bottom, 2 * depth + 1 distinct schemas. Each record has a field of the next `a`
    type only, so the record stays a chain (a field of both would double its Spark type per level)."""
    graph = {"root": referring("Root", {"next": "a0", "also": "b0"}, uses=("next",))}
    for i in range(depth - 1):
        for side in "ab":
            targets = {"next": f"a{i + 1}", "also": f"b{i + 1}"}
            graph[f"{side}{i}"] = referring(f"{side.upper()}{i}", targets, uses=("next",))
    for side in "ab":
        graph[f"{side}{depth - 1}"] = leaf(f"{side.upper()}{depth - 1}")
    return graph


class GraphRegistry(LocalRegistry):
    """A registry serving `graph` (subject -> its only version) as it is, checking nothing, so the
    client side meets shapes a registry would have refused to store."""

    def __init__(self, graph: dict[str, Schema]) -> None:
        super().__init__()
        self.graph = graph

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        if subject not in self.graph or version not in (1, "latest"):
            raise RegistryError(f"Subject '{subject}' not found.", status=404, error_code=40401)
        return RegisteredSchema(list(self.graph).index(subject) + 1, self.graph[subject], subject, 1)

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        return self.get_version(subject, "latest")


def within(seconds: float, work: Callable[[], Any]) -> Any:
    """`work()`'s result, failing the test if it takes longer (main resolved diamonds for ever)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("ok", work()))
        except BaseException as error:  # handed to the test below
            outcome.append(("error", error))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"still resolving after {seconds:g}s"
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Schema]], RegistryServer]]:
    servers: list[Any] = []

    def start(graph: dict[str, Schema]) -> RegistryServer:
        context = running_registry(GraphRegistry(graph))
        servers.append(context)
        return context.__enter__()

    yield start
    for context in servers:
        context.__exit__(None, None, None)


# -- loading a contract -------------------------------------------------------------------------------


def test_a_diamond_forty_levels_deep_loads_each_version_once(serve: Any) -> None:
    server = serve(diamond(40))
    contract = within(60, lambda: DataContract(SchemaRegistryClient(server.url), "root"))
    assert len(contract.target.named_schemas) == 80
    assert server.count() == 81  # the root's latest version and each referenced version once
    assert contract.spark_schema.fieldNames() == ["next"]


def test_a_chain_deeper_than_the_bound_is_a_contract_error_naming_it(serve: Any) -> None:
    server = serve(chain(200))
    with pytest.raises(ContractError, match="nest deeper than 64 levels") as error:
        DataContract(SchemaRegistryClient(server.url), "s0")
    assert (error.value.subject, error.value.version, error.value.position) == ("s0", 1, "references")
    assert "s1 version 1 -> s2 version 1 -> s3 version 1 -> s4 version 1 -> … 57 more … ->" in str(
        error.value
    )
    assert "s65 version 1" in str(error.value)
    assert server.count() <= 66


def test_a_chain_within_the_bound_loads(serve: Any) -> None:
    server = serve(chain(64))
    contract = DataContract(SchemaRegistryClient(server.url), "s0")
    assert len(contract.target.named_schemas) == 64


def test_a_cycle_is_a_contract_error_naming_it(serve: Any) -> None:
    graph = chain(3)
    graph["s3"] = referring("S3", {"back": "s1"})
    server = serve(graph)
    with pytest.raises(
        ContractError, match="cycle: s1 version 1 -> s2 version 1 -> s3 version 1 -> s1 version 1"
    ):
        DataContract(SchemaRegistryClient(server.url), "s0")


def test_more_referenced_schemas_than_the_bound_is_a_contract_error(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(references, "MAX_REFERENCED_SCHEMAS", 10)
    graph = {f"t{i}": leaf(f"T{i}") for i in range(12)}
    graph["wide"] = referring("Wide", {f"f{i}": f"t{i}" for i in range(12)})
    server = serve(graph)
    with pytest.raises(ContractError, match="references more than 10 schemas: t10 version 1"):
        DataContract(SchemaRegistryClient(server.url), "wide")
    assert server.count() == 11


def test_one_version_referenced_under_two_names_is_listed_under_both() -> None:
    shared = SchemaReference("first.proto", "common", 1)
    again = SchemaReference("second.proto", "common", 1)
    fetched: list[SchemaReference] = []

    def fetch(reference: SchemaReference) -> Schema:
        fetched.append(reference)
        return leaf("Common")

    found = references.referenced_schemas(Schema("{}", references=(shared, again, shared)), fetch)
    assert [r.reference for r in found] == [shared, again]
    assert fetched == [shared]


# -- LocalRegistry's own checks ---------------------------------------------------------------------------


def register_bottom_up(registry: LocalRegistry, graph: dict[str, Schema]) -> None:
    for subject in reversed(list(graph)):
        registry.register_schema(subject, graph[subject])


def test_local_registry_registers_a_deep_diamond_checking_each_version_once() -> None:
    registry = LocalRegistry()
    within(60, lambda: register_bottom_up(registry, diamond(30)))
    contract = DataContract(registry, "root")
    assert len(contract.target.named_schemas) == 60


def test_local_registry_refuses_references_nested_deeper_than_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(references, "MAX_REFERENCE_DEPTH", 5)
    registry = LocalRegistry()
    graph = chain(6)
    register_bottom_up(registry, {k: v for k, v in graph.items() if k != "s0"})
    with pytest.raises(RegistryError, match="nest deeper than 5 levels: s1 version 1 ->") as error:
        registry.register_schema("s0", graph["s0"])
    assert error.value.error_code == 42201


# -- copying schemas to another registry ----------------------------------------------------------------


class CountingLocal(LocalRegistry):
    """A LocalRegistry that counts lookups and registrations (in this process)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        self.calls.append(f"lookup {subject}")
        return super().lookup_schema(subject, schema)

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        self.calls.append(f"version {subject}")
        return super().get_version(subject, version)


def test_copying_a_diamond_copies_each_referenced_version_once() -> None:
    source, destination = CountingLocal(), CountingLocal()
    graph = diamond(14)
    register_bottom_up(source, graph)
    root_id = source.get_latest_version("root").schema_id
    source.calls.clear()
    remapper = _Remapper(source, destination, lambda *_: "root", "t", None, (("value", False),), "call")
    destination_id = within(60, lambda: remapper.destination_id(root_id, "t", False))
    assert destination.get_latest_version("root").schema_id == destination_id
    assert len(source.calls) == 28  # each referenced version fetched once
    assert len([call for call in destination.calls if call.startswith("lookup")]) <= 2 * 29
    copied = destination.get_latest_version("a0").schema.references
    assert copied == (SchemaReference("A1", "a1", 1), SchemaReference("B1", "b1", 1))
