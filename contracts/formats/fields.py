"""The tagged-field walk a format gives the field rules (CEL_FIELD, ENCRYPT), as the reference's
`field_transformer` belongs to its serde (docs/semantics.md §4, §11.1).

A format that has one implements `FieldWalking` beside `SchemaFormat`: `field_walk` walks a record
as the reference's walk does, handing each leaf value of a field a rule's tags select to a visit,
and `field_tree` (optional) gives the same walk as a tree of nodes resolved once, for a native
compiler to unroll over the record's Spark struct. The nodes here are that tree's vocabulary:
records field by field, arrays, maps, unions by branch, leaves by the reference's type names.
Tags are a field's own plus the metadata tag paths matching its full name (`tag_matches`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

PRIMITIVE_TYPE_NAMES = frozenset({"INT", "LONG", "FLOAT", "DOUBLE", "BOOLEAN", "NULL", "STRING", "BYTES"})
"""The reference's primitive field types: the values a CEL_FIELD expression sees (enums, fixed and
containers never do)."""


@dataclass(frozen=True)
class Leaf:
    """A value that is not a container, by its type name (and logical type, where the format has
    one that makes CEL see it otherwise than Spark holds it)."""

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
    """A value of one of several branches, in declared order; Spark holds a nullable single branch
    as that branch, a union of several as a struct of one member per non-null branch."""

    branches: tuple[Node, ...]


@dataclass(frozen=True)
class Present:
    """A field with presence (a Protobuf message, wrapper, oneof member or optional scalar): its
    value walked when set, skipped when unset (null in Spark), never visited as a null."""

    node: Node


@dataclass(frozen=True)
class Wrapped:
    """A message Spark holds as one value (a Protobuf wrapper: its scalar; Duration: an interval),
    which the walk still walks as a message of `fields`, under that message's names."""

    full_name: str
    fields: tuple[Field, ...]


Node = Leaf | Record | Array | Map | Union | Present | Wrapped
NULL = Leaf("NULL", None)


@dataclass(frozen=True)
class FieldTree:
    """A format's walk as a tree: the record's node, and how a field rule's result is set back.
    `converting_writes`: the format's runtime converts some results to the field's type rather than
    refusing them (the protobuf runtime takes UTF-8 bytes for a string field and an int for a
    bool), where fastavro's validation refuses them; a native compiler must then leave such
    results to the Python walk."""

    record: Record
    converting_writes: bool = False


@dataclass
class WalkedField:
    """The field a walk is visiting: its names and tags, the record holding it (with the new values
    of the fields a transform visited before it), and its value's type name; `view` turns the
    record holding it into what CEL reads of it, where its format decides presence otherwise than
    by keys (a Protobuf message: `contracts.formats.protocol.presence_view`)."""

    name: str
    full_name: str
    tags: frozenset[str]
    containing: Any
    type_name: str
    view: Callable[[Any], Any] | None = None


FieldVisit = Callable[[WalkedField, Any], Any]
"""What a walk does with a leaf value its rule's tags select: the field and the value, to the new value."""


class ConditionFailed(Exception):
    """A condition's walk met a field whose result is a plain false: the CONDITION fails, its
    reason naming the field (`field`, its full name; None when a walk does not say)."""

    def __init__(self, field: str | None = None) -> None:
        super().__init__(field)
        self.field = field


@runtime_checkable
class FieldWalking(Protocol):
    """A format's tagged-field walk: what CEL_FIELD and ENCRYPT rules need of it."""

    def field_walk(
        self,
        parsed: Any,
        metadata_tags: Mapping[str, tuple[str, ...]],
        rule_tags: frozenset[str],
        visit: FieldVisit,
        condition: bool = False,
    ) -> Callable[[Any], Any]:
        """The reference's walk of records of `parsed`: `visit` on each leaf value of a field that
        `rule_tags` select (none: every field), its type name the reference's. A condition's walk
        changes nothing and raises ConditionFailed where a field's result is a plain false (a
        selected leaf's visit, or an unselected leaf's own value); a transform's walks a copy, so a
        failed one leaves the record as it was, and raises (ValueError) when a result does not fit."""
        ...

    def field_tree(self, parsed: Any, metadata_tags: Mapping[str, tuple[str, ...]]) -> FieldTree | None:
        """The walk as a tree over the record's Spark struct, or None when it has no such form
        (its branches or presence decided by values the Spark struct does not show)."""
        ...


def field_walking(schema_format: Any) -> FieldWalking | None:
    """`schema_format` as a FieldWalking format, or None when it walks no fields."""
    return schema_format if isinstance(schema_format, FieldWalking) else None


def tags_of(full_name: str, own: Any, metadata_tags: Mapping[str, tuple[str, ...]]) -> frozenset[str]:
    """A field's tags: its own (`own`, an iterable or None) plus those of every metadata tag path
    matching its full name."""
    tags = set(own or ())
    for path, path_tags in metadata_tags.items():
        if tag_matches(full_name, path):
            tags.update(path_tags)
    return frozenset(tags)


_WILDCARDS = {"*": r"[^.]*", "?": r"[^.]"}
# Only these are escaped by the reference; any other regex syntax in a pattern stays regex syntax.
_REGEX_ESCAPED = frozenset(".+{}()|^$")


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


def selects(rule_tags: frozenset[str], field_tags: frozenset[str]) -> bool:
    """Whether a rule with `rule_tags` (none: every field) selects a field with `field_tags`."""
    return not rule_tags or not rule_tags.isdisjoint(field_tags)
