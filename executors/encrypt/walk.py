"""The ENCRYPT field walk: the reference's Avro walk over records, applying a function to each
tagged leaf, with fields and tags resolved once by the CEL_FIELD tree (executors/cel_field/schema.py).

Records are walked field by field (a copy, so a failed record stays as it was), arrays item by
item, maps value by value, unions by the first branch that validates the value. A leaf is
transformed when the rule has no tags or shares one with its field (docs/semantics.md §11).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from executors.cel_field.schema import Array, Field, Leaf, Map, Node, Record, Union

LeafTransform = Callable[[Leaf, Field, Any], Any]


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
