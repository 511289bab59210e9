"""The ENCRYPT field walk: the reference's Avro walk over records, applying a function to each
tagged leaf, with fields and tags resolved once by the CEL_FIELD tree (executors/cel_field/schema.py);
on JSON Schema records, the reference's JSON walk (executors/cel_field/json_walk.py); on Protobuf
records, its Protobuf walk (executors/cel_field/protobuf_walk.py).

Records are walked field by field (a copy, so a failed record stays as it was), arrays item by
item, maps value by value, unions by the first branch that validates the value. A leaf is
transformed when the rule has no tags or shares one with its field (docs/semantics.md §11).
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
    """Applies `transform(leaf, field, value)` to every leaf the rule's `tags` select."""

    def __init__(self, tree: Node, tags: frozenset[str], transform: LeafTransform) -> None:
        self.tree = tree
        self.tags = tags
        self.transform = transform

    def __call__(self, record: Any) -> Any:
        return self._visit(self.tree, record, None)

    def _visit(self, node: Node, value: Any, field: Field | None) -> Any:
        if isinstance(node, Union):
            branch = node.branch_for(value)
            return value if branch is None else self._visit(node.branches[branch], value, field)
        if isinstance(node, Array):
            return (
                [self._visit(node.items, item, field) for item in value] if isinstance(value, list) else value
            )
        if isinstance(node, Map):
            if not isinstance(value, dict):
                return value
            return {key: self._visit(node.values, item, field) for key, item in value.items()}
        if isinstance(node, Record):
            if not isinstance(value, dict):
                return value
            current = dict(value)
            for child in node.fields:
                if child.name in value:
                    current[child.name] = self._visit(child.node, value[child.name], child)
            return current
        if field is None or (self.tags and self.tags.isdisjoint(field.tags)):
            return value
        return self.transform(node, field, value)


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
