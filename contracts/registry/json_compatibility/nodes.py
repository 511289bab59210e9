"""The schema kinds the registry's loader makes of JSON Schema data: strings, numbers, objects,
arrays, combinations, `$ref`s and the rest."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar


@dataclass(eq=False, kw_only=True)
class Node:
    """A loaded schema. `meta` is the JSON object it was read from (title, default, ...), empty for the
    parts the loader splits one object into; nodes compare by identity, as the pairs of a walk do."""

    meta: Mapping[str, Any] = field(default_factory=dict)
    ident: Any = None
    kind: ClassVar[str]

    def describe(self) -> str:
        return self.kind


@dataclass(eq=False, kw_only=True)
class EmptyNode(Node):
    kind = "{}"


@dataclass(eq=False, kw_only=True)
class TrueNode(EmptyNode):
    kind = "true"


@dataclass(eq=False, kw_only=True)
class FalseNode(Node):
    kind = "false"


@dataclass(eq=False, kw_only=True)
class BooleanNode(Node):
    kind = "boolean"


@dataclass(eq=False, kw_only=True)
class NullNode(Node):
    kind = "null"


@dataclass(eq=False, kw_only=True)
class ConditionalNode(Node):
    kind = "if/then/else"


@dataclass(eq=False, kw_only=True)
class StringNode(Node):
    kind = "string"
    min_length: int | None
    max_length: int | None
    pattern: str | None


@dataclass(eq=False, kw_only=True)
class NumberNode(Node):
    kind = "number"
    integer: bool
    minimum: float | None
    maximum: float | None
    exclusive_minimum: float | None
    exclusive_maximum: float | None
    multiple_of: Decimal | None

    def describe(self) -> str:
        return "integer" if self.integer else "number"


@dataclass(eq=False, kw_only=True)
class ObjectNode(Node):
    kind = "object"
    properties: Mapping[str, Node]
    required: frozenset[str]
    permits_additional: bool
    additional: Node | None
    pattern_properties: Sequence[tuple[re.Pattern[str], Node]]
    property_dependencies: Mapping[str, frozenset[str]]
    schema_dependencies: Mapping[str, Node]
    min_properties: int | None
    max_properties: int | None


@dataclass(eq=False, kw_only=True)
class ArrayNode(Node):
    kind = "array"
    all_items: Node | None
    item_list: Sequence[Node]
    permits_additional: bool
    additional: Node | None
    min_items: int | None
    max_items: int | None
    unique: bool


@dataclass(eq=False, kw_only=True)
class EnumNode(Node):
    kind = "enum"
    values: frozenset[str]
    """Each value as canonical JSON text, so 1, 1.0 and true stay apart."""


@dataclass(eq=False, kw_only=True)
class ConstNode(Node):
    kind = "const"
    value: str
    """The value as canonical JSON text."""


@dataclass(eq=False, kw_only=True)
class CombinedNode(Node):
    kind = "combined"
    criterion: str
    subschemas: Sequence[Node]

    def describe(self) -> str:
        return self.criterion


@dataclass(eq=False, kw_only=True)
class NotNode(Node):
    kind = "not"
    schema: Node


@dataclass(eq=False, kw_only=True)
class RefNode(Node):
    """A `$ref`; `target` is filled in once the whole document is loaded."""

    kind = "$ref"
    ref: str
    target: Node | None = None


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def follow(node: Node) -> Node:
    """A `$ref`'s target (through chains of them; `Document` rejected cycles of bare refs)."""
    while isinstance(node, RefNode):
        assert node.target is not None
        node = node.target
    return node
