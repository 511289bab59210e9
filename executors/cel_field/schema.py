"""The CEL_FIELD view of an Avro schema: the tree of values its field walk meets, resolved once.

Each record field carries its `name`, `fullName` and `tags` (inline `confluent:tags` plus the
metadata tag patterns that match the full name), so a rule's visit decisions are plan-time facts.
The tree is built from the fully expanded schema, the form the reference walks (docs/semantics.md §4).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import fastavro
from fastavro.schema import expand_schema
from fastavro.validation import validate

from contracts.formats.avro import TAGS_PROP, AvroSchema

# FieldType names whose values reach the expression; ENUM, FIXED and containers never do.
PRIMITIVE_TYPE_NAMES = frozenset({"INT", "LONG", "FLOAT", "DOUBLE", "BOOLEAN", "NULL", "STRING", "BYTES"})
_TYPE_NAMES = {
    "record": "RECORD",
    "enum": "ENUM",
    "array": "ARRAY",
    "map": "MAP",
    "fixed": "FIXED",
    "string": "STRING",
    "bytes": "BYTES",
    "int": "INT",
    "long": "LONG",
    "float": "FLOAT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
}


@dataclass(frozen=True)
class Leaf:
    """A value that is not a container: a primitive (visited) or an enum/fixed (left alone)."""

    type_name: str
    logical: str | None

    @property
    def primitive(self) -> bool:
        return self.type_name in PRIMITIVE_TYPE_NAMES


@dataclass(frozen=True)
class Field:
    """A record field as a rule sees it: its names, its tags and the tree of its value."""

    name: str
    full_name: str
    tags: frozenset[str]
    node: Node


@dataclass(frozen=True)
class Record:
    full_name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Array:
    items: Node


@dataclass(frozen=True)
class Map:
    values: Node


@dataclass(frozen=True)
class Union:
    """A union: its branches in declared order, each with a standalone schema to test values against
    (the reference takes the first branch that validates the value)."""

    branches: tuple[Node, ...]
    branch_schemas: tuple[Any, ...]

    def branch_for(self, value: Any) -> int | None:
        """Index of the first branch accepting `value`, as the reference's `_resolve_union`."""
        for index, schema in enumerate(self.branch_schemas):
            if validate(value, schema, raise_errors=False):
                return index
        return None


@dataclass(frozen=True)
class Present:
    """A Protobuf field with presence (a message, wrapper, oneof member or optional scalar): its
    value walked when set, skipped when unset (null in Spark), never visited as a null."""

    node: Node


@dataclass(frozen=True)
class Wrapped:
    """A Protobuf well-known message Spark holds as one value (a wrapper: its scalar; Duration: an
    interval), which the walk still walks as a message of `fields`, under that message's names."""

    full_name: str
    fields: tuple[Field, ...]


Node = Leaf | Record | Array | Map | Union | Present | Wrapped
NULL = Leaf("NULL", None)
_WILDCARDS = {"*": r"[^.]*", "?": r"[^.]"}
# Only these are escaped by the reference; any other regex syntax in a pattern stays regex syntax.
_REGEX_ESCAPED = frozenset(".+{}()|^$")


def schema_tree(schema: AvroSchema, metadata_tags: Mapping[str, tuple[str, ...]]) -> Node:
    """The walk's tree of a parsed schema, with metadata tags (pattern → tags) applied to fields."""
    patterns = tuple((_pattern(path), frozenset(tags)) for path, tags in metadata_tags.items())
    return _Builder(patterns).node(expand_schema(schema))


class _Builder:
    def __init__(self, patterns: tuple[tuple[re.Pattern[str], frozenset[str]], ...]) -> None:
        self.patterns = patterns

    def node(self, schema: Any) -> Node:
        if isinstance(schema, list):
            return Union(
                tuple(self.node(branch) for branch in schema),
                tuple(fastavro.parse_schema(_standalone(branch, set())) for branch in schema),
            )
        kind = schema if isinstance(schema, str) else schema["type"]
        if kind == "record":
            return Record(
                schema["name"], tuple(self.field(schema["name"], field) for field in schema["fields"])
            )
        if kind == "array":
            return Array(self.node(schema["items"]))
        if kind == "map":
            return Map(self.node(schema["values"]))
        if kind == "null":
            return NULL
        if isinstance(kind, dict | list):
            return self.node(kind)
        logical = schema.get("logicalType") if isinstance(schema, dict) else None
        return Leaf(_TYPE_NAMES.get(kind, "NULL"), logical)

    def field(self, record_name: str, field: Mapping[str, Any]) -> Field:
        full_name = f"{record_name}.{field['name']}"
        tags = set(field.get(TAGS_PROP) or ())
        for pattern, pattern_tags in self.patterns:
            if pattern.fullmatch(full_name):
                tags |= pattern_tags
        return Field(field["name"], full_name, frozenset(tags), self.node(field["type"]))


def _standalone(schema: Any, seen: set[str]) -> Any:
    """An expanded sub-schema with repeated named types written as names again, so it parses alone."""
    if isinstance(schema, list):
        return [_standalone(branch, seen) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema["type"]
    if kind in ("record", "enum", "fixed"):
        if schema["name"] in seen:
            return schema["name"]
        seen.add(schema["name"])
    if kind == "record":
        fields = [{**field, "type": _standalone(field["type"], seen)} for field in schema["fields"]]
        return {**schema, "fields": fields}
    if kind == "array":
        return {**schema, "items": _standalone(schema["items"], seen)}
    if kind == "map":
        return {**schema, "values": _standalone(schema["values"], seen)}
    if isinstance(kind, dict | list):
        return {**schema, "type": _standalone(kind, seen)}
    return {key: value for key, value in schema.items() if not key.startswith("__")}


@lru_cache(maxsize=256)
def _pattern(path: str) -> re.Pattern[str]:
    """A metadata tag path as a regex over dot-separated names, as Confluent's wildcard matcher reads
    it: `**` any characters, `*` any characters but a dot, `?` one character but a dot."""
    source = path.replace("**.*", "**")
    out: list[str] = []
    i = 0
    while i < len(source):
        char = source[i]
        i += 1
        if char == "*" and source[i : i + 1] == "*":
            out.append(".*")
            i += 1
        elif char in _WILDCARDS:
            out.append(_WILDCARDS[char])
        elif char == "\\":
            # The matcher's quirk: a backslash becomes a literal backslash and swallows the next
            # character unless that one is the last (kept for the next round).
            if i + 1 < len(source):
                out.append("\\\\" + source[i])
                i += 1
            else:
                out.append("\\\\")
        elif char in _REGEX_ESCAPED:
            out.append("\\" + char)
        else:
            out.append(char)
    return re.compile("".join(out))


def tag_matches(full_name: str, path: str) -> bool:
    """Whether the metadata tag path pattern `path` names the field `full_name`."""
    return _pattern(path).fullmatch(full_name) is not None
