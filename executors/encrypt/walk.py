"""The ENCRYPT field walk: the reference's Avro walk over records, applying a function to each
tagged leaf, with fields and tags resolved once by the CEL_FIELD tree (executors/cel_field/schema.py);
on JSON Schema records, the reference's JSON walk (executors/cel_field/json_walk.py); on Protobuf
records, its Protobuf walk (executors/cel_field/protobuf_walk.py).

Records are walked field by field (a copy, so a failed record stays as it was; only the fields
holding a leaf the rule selects, found once from the tree), arrays item by item, maps value by
value, unions by the first branch that validates the value. A leaf is transformed when the rule
has no tags or shares one with its field (docs/semantics.md §11).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts.errors import ContractError
from contracts.formats.json_schema import JsonSchema
from contracts.registry.protobuf_schema import ProtoSchema
from executors.cel_field.json_walk import JsonField, JsonFieldWalk
from executors.cel_field.protobuf_walk import ProtobufFieldWalk, ProtoField
from executors.cel_field.schema import Array, Field, Leaf, Map, Node, Record, Union, schema_tree

LeafTransform = Callable[[Leaf, Any, Any], Any]
"""(the leaf, the field holding it: a Field, JsonField or ProtoField, each with `full_name`), value
-> value."""


class FieldWalk:
    """Applies `transform(leaf, field, value)` to every leaf the rule's `tags` select, through a
    walk compiled once from the tree: only the parts of a record holding such a leaf are visited."""

    def __init__(self, tree: Node, tags: frozenset[str], transform: LeafTransform) -> None:
        self.tree = tree
        self.tags = tags
        self.transform = transform
        self._walk = self._compiled(tree, None) or _unchanged

    def __call__(self, record: Any) -> Any:
        return self._walk(record)

    def _compiled(self, node: Node, field: Field | None) -> Callable[[Any], Any] | None:
        """The walk of values of `node` (held by `field`); None when no leaf under it is selected."""
        if isinstance(node, Union):
            branches = [self._compiled(branch, field) for branch in node.branches]
            return None if not any(branches) else _union(node, branches)
        if isinstance(node, Array):
            items = self._compiled(node.items, field)
            return None if items is None else _array(items)
        if isinstance(node, Map):
            values = self._compiled(node.values, field)
            return None if values is None else _map(values)
        if isinstance(node, Record):
            walked = [(child.name, self._compiled(child.node, child)) for child in node.fields]
            children = [(name, walk) for name, walk in walked if walk is not None]
            return _record(children) if children else None
        if field is None or (self.tags and self.tags.isdisjoint(field.tags)):
            return None
        transform, leaf, holder = self.transform, node, field
        return lambda value: transform(leaf, holder, value)


def _unchanged(value: Any) -> Any:
    return value


def _union(node: Union, branches: list[Callable[[Any], Any] | None]) -> Callable[[Any], Any]:
    def walk(value: Any) -> Any:
        branch = node.branch_for(value)
        chosen = None if branch is None else branches[branch]
        return value if chosen is None else chosen(value)

    return walk


def _array(items: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: [items(item) for item in value] if isinstance(value, list) else value


def _map(values: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def walk(value: Any) -> Any:
        return {key: values(item) for key, item in value.items()} if isinstance(value, dict) else value

    return walk


def _record(children: list[tuple[str, Callable[[Any], Any]]]) -> Callable[[Any], Any]:
    def walk(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        current = dict(value)
        for name, child in children:
            if name in value:
                current[name] = child(value[name])
        return current

    return walk


def walkable(schema: Any) -> bool:
    """Whether `field_walk` walks records of this parsed schema (Avro, JSON Schema or Protobuf)."""
    return isinstance(schema, JsonSchema | ProtoSchema | str | list | dict)


def field_walk(
    schema: Any, metadata_tags: Mapping[str, tuple[str, ...]], tags: frozenset[str], transform: LeafTransform
) -> Callable[[Any], Any]:
    """The walk of records of `schema` applying `transform` to each leaf `tags` select (none: every
    leaf): a JSON Schema's by the reference's JSON walk, a Protobuf schema's by its Protobuf walk,
    an Avro schema's by FieldWalk."""

    def visit(field: JsonField | ProtoField, value: Any) -> Any:
        return transform(Leaf(field.type_name, None), field, value)

    if isinstance(schema, JsonSchema):
        return JsonFieldWalk(schema.document, metadata_tags, tags, visit)
    if isinstance(schema, ProtoSchema):
        return ProtobufFieldWalk(schema, metadata_tags, tags, visit)
    if not walkable(schema):
        raise ContractError(f"no field walk for records of a {type(schema).__name__}", position="type")
    return FieldWalk(schema_tree(schema, metadata_tags), tags, transform)
