"""The reference's Avro field walk (docs/semantics.md §4.1, §11.1): its tree, resolved once from the
fully expanded schema, and the walk of records compiled from that tree.

Each record field carries its `name`, `fullName` and `tags` (inline `confluent:tags` plus the
metadata tag patterns that match the full name), so a rule's visit decisions are plan-time facts.
Records are walked field by field (a transform on a copy, later fields seeing earlier fields' new
values through the record), arrays element by element, maps value by value, unions by the first
branch that validates the value (a null in a nullable union is visited as NULL), as confluent-kafka
2.16.1's `common/avro.py` walk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.schema import expand_schema
from fastavro.validation import validate

from contracts.formats.avro.types import TAGS_PROP, AvroSchema
from contracts.formats.fields import (
    NULL,
    Array,
    ConditionFailed,
    Field,
    FieldVisit,
    Leaf,
    Map,
    Node,
    Record,
    Union,
    WalkedField,
    selects,
    tags_of,
)

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
class AvroUnion(Union):
    """A union with a standalone schema per branch to test values against (the reference takes the
    first branch that validates the value)."""

    branch_schemas: tuple[Any, ...] = ()

    def branch_for(self, value: Any) -> int | None:
        """Index of the first branch accepting `value`, as the reference's `_resolve_union`."""
        for index, schema in enumerate(self.branch_schemas):
            if validate(value, schema, raise_errors=False):
                return index
        return None


def schema_tree(schema: AvroSchema, metadata_tags: Mapping[str, tuple[str, ...]]) -> Node:
    """The walk's tree of a parsed schema, with metadata tags (pattern → tags) applied to fields."""
    return _Builder(metadata_tags).node(expand_schema(schema))


class _Builder:
    def __init__(self, metadata_tags: Mapping[str, tuple[str, ...]]) -> None:
        self.metadata_tags = metadata_tags

    def node(self, schema: Any) -> Node:
        if isinstance(schema, list):
            return AvroUnion(
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
        tags = tags_of(full_name, field.get(TAGS_PROP), self.metadata_tags)
        return Field(field["name"], full_name, tags, self.node(field["type"]))


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


Walk = Callable[[Any, Any], Any]
"""A compiled walk of values of one node: (value, the record holding it) → the new value."""


class AvroFieldWalk:
    """The walk of records of one tree, compiled once: a transform's visits only the parts of a
    record holding a leaf the rule selects; a condition's every field (an unselected leaf holding
    a plain false fails it too, as in the reference)."""

    def __init__(self, tree: Node, rule_tags: frozenset[str], visit: FieldVisit, condition: bool) -> None:
        self.rule_tags = rule_tags
        self.visit = visit
        self.condition = condition
        self._walk = self._compiled(tree, None) or _unchanged

    def __call__(self, record: Any) -> Any:
        return self._walk(record, None)

    def _compiled(self, node: Node, field: Field | None) -> Walk | None:
        """The walk of values of `node` (held by `field`); None when it changes and checks nothing."""
        if isinstance(node, AvroUnion):
            branches = [self._compiled(branch, field) for branch in node.branches]
            return None if not any(branches) else _union(node, branches)
        # A list or a map of results is never a plain false: one that visits nothing is skipped.
        if isinstance(node, Array):
            items = self._compiled(node.items, field)
            return None if items is None or items is _unchanged else _array(items)
        if isinstance(node, Map):
            values = self._compiled(node.values, field)
            return None if values is None or values is _unchanged else _map(values)
        if isinstance(node, Record):
            walked = [(child, self._compiled(child.node, child)) for child in node.fields]
            children = [(child.name, child.full_name, walk) for child, walk in walked if walk is not None]
            return self._record(children) if children else None
        assert isinstance(node, Leaf)
        if field is None:
            return None
        if not selects(self.rule_tags, field.tags):
            return _unchanged if self.condition else None
        visit, name, full_name, tags, type_name = (
            self.visit,
            field.name,
            field.full_name,
            field.tags,
            node.type_name,
        )
        return lambda value, containing: visit(
            WalkedField(name, full_name, tags, containing, type_name), value
        )

    def _record(self, children: list[tuple[str, str, Walk]]) -> Walk:
        condition = self.condition

        def walk(value: Any, _containing: Any) -> Any:
            if not isinstance(value, dict):
                return value
            # A copy, not the reference's in-place update, so a failed rule leaves the record as it
            # was; later fields still see earlier fields' new values through the record.
            current = value if condition else dict(value)
            for name, full_name, child in children:
                if name not in value:
                    continue
                result = child(current[name], current)
                if condition:
                    # Only a plain false at field level fails: an array's list of results never does.
                    if result is False:
                        raise ConditionFailed(full_name)
                else:
                    current[name] = result
            return current

        return walk


def _unchanged(value: Any, _containing: Any = None) -> Any:
    return value


def _union(node: AvroUnion, branches: list[Walk | None]) -> Walk:
    def walk(value: Any, containing: Any) -> Any:
        branch = node.branch_for(value)
        chosen = None if branch is None else branches[branch]
        return value if chosen is None else chosen(value, containing)

    return walk


def _array(items: Walk) -> Walk:
    def walk(value: Any, containing: Any) -> Any:
        return [items(item, containing) for item in value] if isinstance(value, list) else value

    return walk


def _map(values: Walk) -> Walk:
    def walk(value: Any, containing: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {key: values(item, containing) for key, item in value.items()}

    return walk
