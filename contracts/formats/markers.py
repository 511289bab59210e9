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
