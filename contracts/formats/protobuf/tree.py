"""The Protobuf field walk as a tree (`FieldWalking.field_tree`) for a native compiler: the values
the reference's Protobuf walk meets (docs/semantics.md §4.9), with `Present` for fields with
presence (skipped when unset) and `Wrapped` for the well-known messages Spark holds as one value.

Leaves carry the walk's type names; a value CEL sees otherwise than Spark holds it carries a
`logical` mark, which keeps a rule that visits it in Python: an unsigned integer (a `uint` in CEL),
a Timestamp (typed LONG, a timestamp in CEL) and a `confluent.type.Decimal` (typed BYTES, its
message's fields in CEL). Enums and map values are leaves the expression never sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from contracts.formats.fields import Array, Field, Leaf, Map, Node, Present, Record, Wrapped, tags_of
from contracts.formats.protobuf.fields import type_name
from contracts.formats.protobuf.options import field_tags
from contracts.formats.protobuf.types import (
    DECIMAL,
    DURATION,
    TIMESTAMP,
    UNSIGNED,
    WRAPPERS,
    is_map,
    is_repeated,
)
from contracts.registry.protobuf_schema import ProtoSchema

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor

_LOGICAL = {TIMESTAMP: "timestamp", DECIMAL: "decimal"}
"""The messages the walk visits as one value, and the mark keeping them out of native code."""


def protobuf_tree(schema: ProtoSchema, metadata_tags: Mapping[str, tuple[str, ...]]) -> Record:
    """The walk's tree of the schema's record message, metadata tags (path → tags) applied."""
    return _Builder(metadata_tags).record(schema.message())


class _Builder:
    def __init__(self, metadata_tags: Mapping[str, tuple[str, ...]]) -> None:
        self.metadata_tags = metadata_tags

    def record(self, message: Descriptor) -> Record:
        return Record(message.full_name, tuple(self.field(field) for field in message.fields))

    def field(self, field: FieldDescriptor) -> Field:
        tags = tags_of(field.full_name, field_tags(field), self.metadata_tags)
        return Field(field.name, field.full_name, tags, self.node(field))

    def node(self, field: FieldDescriptor) -> Node:
        if is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            # The walk hands a map's values over typed MAP (never visited) unless they are messages.
            return Map(self.value(value_field) if _walked_message(value_field) else Leaf("MAP", None))
        if is_repeated(field):
            return Array(self.value(field))
        value = self.value(field)
        return Present(value) if field.has_presence else value

    def value(self, field: FieldDescriptor) -> Node:
        """One value of the field (an element of a repeated one)."""
        message = field.message_type
        if message is None:
            return Leaf(type_name(field), "uint" if field.type in UNSIGNED else None)
        name = message.full_name
        if name in _LOGICAL:
            return Leaf(type_name(field), _LOGICAL[name])
        if name in WRAPPERS or name == DURATION:
            return Wrapped(name, tuple(self.field(inner) for inner in message.fields))
        return self.record(message)


def _walked_message(field: FieldDescriptor) -> bool:
    """Whether the walk descends into the field's values (a message that is not one value)."""
    return field.message_type is not None and field.message_type.full_name not in _LOGICAL
