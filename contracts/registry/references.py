"""Resolving a schema's references: every schema it needs, each (subject, version) fetched once.

A registered schema names the schemas it builds on (Avro named types, Protobuf imports, JSON
Schema `$ref`s) as references to (subject, version), and those may reference others. Loading a
contract, checking a schema in LocalRegistry, copying one to another registry and pulling a
registry into a directory all need that whole graph, dependencies first. It is walked here, and
only here, iteratively (a long chain cannot exhaust the
stack), with each (subject, version) fetched once (a diamond-shaped graph costs its size, not its
paths), and within bounds: a chain deeper than MAX_REFERENCE_DEPTH, more than
MAX_REFERENCED_SCHEMAS schemas, or a cycle is a ContractError naming the chain (docs/semantics.md
§1.1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from contracts.errors import ContractError, RegistryError
from contracts.model import Schema, SchemaReference
from contracts.registry.protocol import Registry

MAX_REFERENCE_DEPTH = 64
"""The longest chain of references followed from a schema (it → a → b … is a chain of depth 2)."""
MAX_REFERENCED_SCHEMAS = 1000
"""The most distinct (subject, version) pairs one schema may reference, directly or not."""

_SHOWN_LINKS = 4  # a chain names this many links at each end


@dataclass(frozen=True)
class Reference:
    """A schema another one references, as a format parses it: the name it is referenced by (an
    Avro schema's names do not need it; a JSON Schema's `$ref` and a Protobuf import do) and its text."""

    name: str
    schema_str: str


@dataclass(frozen=True)
class Resolved:
    """One referenced schema, under the name a schema that references it gives it."""

    reference: SchemaReference
    schema: Schema

    def named(self) -> Reference:
        """The schema's text under the name it is referenced by."""
        return Reference(self.reference.name, self.schema.schema_str)


@dataclass
class _Frame:
    """A schema being resolved: the reference that led to it and its references not yet visited."""

    reference: SchemaReference | None
    schema: Schema
    pending: Iterator[SchemaReference]


def referenced_schemas(schema: Schema, fetch: Callable[[SchemaReference], Schema]) -> list[Resolved]:
    """Every schema `schema` references, directly or through others, dependencies first: each
    (subject, version) fetched once with `fetch` (its errors pass through), each (name, subject,
    version) listed once."""
    fetched: dict[tuple[str, int], Schema] = {}
    listed: set[tuple[str, str, int]] = set()
    resolved: list[Resolved] = []
    stack = [_Frame(None, schema, iter(schema.references))]
    chain: list[tuple[str, int]] = []  # the (subject, version) of each frame above the first

    def list_once(reference: SchemaReference, found: Schema) -> None:
        key = (reference.name, reference.subject, reference.version)
        if key not in listed:
            listed.add(key)
            resolved.append(Resolved(reference, found))

    while stack:
        frame = stack[-1]
        reference = next(frame.pending, None)
        if reference is None:
            stack.pop()
            if frame.reference is not None:
                chain.pop()
                list_once(frame.reference, frame.schema)
            continue
        link = (reference.subject, reference.version)
        if link in chain:
            raise _bounded("schema references form a cycle", [*chain, link])
        if link in fetched:  # resolved already, through another path
            list_once(reference, fetched[link])
            continue
        if len(chain) >= MAX_REFERENCE_DEPTH:
            raise _bounded(f"schema references nest deeper than {MAX_REFERENCE_DEPTH} levels", [*chain, link])
        if len(fetched) >= MAX_REFERENCED_SCHEMAS:
            raise _bounded(f"a schema references more than {MAX_REFERENCED_SCHEMAS} schemas", [*chain, link])
        found = fetched[link] = fetch(reference)
        chain.append(link)
        stack.append(_Frame(reference, found, iter(found.references)))
    return resolved


def registry_references(registry: Registry, schema: Schema) -> list[Resolved]:
    """Every schema `schema` references in `registry`, as `referenced_schemas` lists them; a
    ContractError naming the reference the registry cannot give, its error chained."""

    def fetch(reference: SchemaReference) -> Schema:
        try:
            return registry.get_version(reference.subject, reference.version).schema
        except RegistryError as e:
            raise ContractError(
                f"reference {reference.name!r} to {reference.subject} version {reference.version}"
                f" cannot be resolved: {e}",
                position="references",
            ) from e

    return referenced_schemas(schema, fetch)


def _bounded(reason: str, chain: list[tuple[str, int]]) -> ContractError:
    links = [f"{subject} version {version}" for subject, version in chain]
    if len(links) > 2 * _SHOWN_LINKS:
        skipped = len(links) - 2 * _SHOWN_LINKS
        links = [*links[:_SHOWN_LINKS], f"… {skipped} more …", *links[-_SHOWN_LINKS:]]
    return ContractError(f"{reason}: {' -> '.join(links)}", position="references")
