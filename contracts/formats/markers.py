"""What the formats mark on records and on Spark fields for the rules that read them, whichever
format wrote the marks: a value CEL sees as a `uint`, and the Spark field metadata a native
compiler reads (the format's own type name, logical types, a value CEL sees otherwise than Spark
holds it, and how a field's presence is decided, docs/semantics.md §3.1)."""

from __future__ import annotations

TYPE_KEY = "avro.type"
"""Field metadata: the Avro type name of the field's value (`COMBINED` for a union struct)."""
LOGICAL_TYPES_KEY = "avro.logicalTypes"
"""Field metadata: the logical types in the field's type, through unions, arrays and maps (not
into records, whose fields say their own) — an int or long column may hold a time of day."""
CEL_DIFFERS_KEY = "protobuf.celDiffers"
"""Field metadata marking a field whose Spark value is not the value CEL sees (native CEL leaves
it to cel-python)."""


class Unsigned(int):
    """A value of an unsigned integer field (Protobuf's uint32, uint64, fixed32, fixed64, their
    wrappers): an int that tells CEL it is a uint, as the reference binds those fields."""

    __slots__ = ()


PRESENCE_KEY = "presence"
"""Field metadata: how CEL's `has()` decides the field is present (docs/semantics.md §3.6), when not
simply by being a field of the record (Avro: every field is present):

- `SET`: when it holds a value (not null); read unset, it is null (a Protobuf message or wrapper);
- `SET_OR_DEFAULT`: when it holds a value; read unset, it is its default, `PRESENCE_DEFAULT_KEY`
  (a Protobuf `optional` scalar, a oneof member);
- `NOT_DEFAULT`: when its value is not its default (a Protobuf scalar without presence);
- `NON_EMPTY`: when it holds at least one element or entry (a repeated or map field);
- `IN_DOCUMENT`: when it holds a value; null, it is absent from the document, and reading it is a
  "no such key" error (an optional JSON property whose schema refuses null);
- `IN_DOCUMENT_OR_NULL`: as IN_DOCUMENT, but a null is the property's own null unless the record's
  `ABSENT_FIELD` lists the property's JSON pointer (an optional JSON property that accepts null).
"""
SET, SET_OR_DEFAULT, NOT_DEFAULT, NON_EMPTY = "set", "set_or_default", "not_default", "non_empty"
IN_DOCUMENT, IN_DOCUMENT_OR_NULL = "in_document", "in_document_or_null"
PRESENCE_DEFAULT_KEY = "presence.default"
"""Field metadata: the JSON text of a field's default as Spark holds it (bytes as a list of byte
values, an enum as its value's name); absent, the default is its Spark type's zero."""
ABSENT_FIELD = "_absent"
"""The record field a JSON Schema record has when some optional property accepts null: the JSON
pointers (`/a/0/b`) of the properties absent from the document whose Spark value is null (null: none)."""
ABSENT_MARK = "presence.absent"
"""Field metadata marking the `ABSENT_FIELD` field: the engine's, not a property (CEL never sees it,
and a DataFrame may leave it out: none absent)."""


def pointer(parent: str, name: str) -> str:
    """The JSON pointer of property (or element) `name` below `parent` (RFC 6901's escapes)."""
    return f"{parent}/{name.replace('~', '~0').replace('/', '~1')}"


class PresenceRecord(dict):  # type: ignore[type-arg]
    """A record as CEL reads it where a field's presence is not its being a key (a Protobuf
    message): every field a key, holding what reading it gives (its default, or null, when unset),
    and `unset` the fields `has()` finds absent (docs/semantics.md §3.6)."""

    __slots__ = ("unset",)

    def __init__(self, fields: dict[str, object], unset: frozenset[str]) -> None:
        super().__init__(fields)
        self.unset = unset
