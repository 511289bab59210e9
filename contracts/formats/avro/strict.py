"""Writer schemas for fastavro's reader that refuse an enum or union index outside its schema.

fastavro reads an enum's symbol and a union's branch by indexing a Python list with the index the
body holds, so a negative index counts from the end: an enum index of -1 (the byte 0x01) reads as
the last symbol, and a union index of -1 as the last branch. Java's Avro decoder refuses both, and
so does spark-avro's `from_avro`; a body holding one is undecodable (docs/semantics.md §8.3).
The copy of the writer schema fastavro reads with (`StrictReader`) holds each enum's symbols and
each union's branches in an `IndexChecked` list, which refuses such an index when fastavro looks
it up: one check per enum or union value read, where walking every body beforehand would cost
about as much as decoding it.
"""

from __future__ import annotations

import copy
import io
from typing import Any

import fastavro
from fastavro import schemaless_reader

from contracts.formats.avro.types import AvroSchema


class IndexChecked(list[Any]):
    """A list of enum symbols or union branches that refuses, with a reason, an index outside it.

    fastavro's compiled reader adds a list's length to a negative index before looking it up
    (Python's own wraparound), taking the length from `len()`; this list reports a length of 0, so
    the index arrives unchanged and is refused. Its truth value and its items stay the list's own.
    """

    def __init__(self, items: list[Any], what: str) -> None:
        super().__init__(items)
        self.what = what
        self.size = list.__len__(self)

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return self.size > 0

    def __getitem__(self, index: Any) -> Any:
        if type(index) is int and not 0 <= index < self.size:  # fastavro's indexes are ints
            raise IndexError(f"index {index} is outside {self.what.format(self.size)}")
        return list.__getitem__(self, index)


_BRANCHES = "the union's {} branches"
_VALUE = "value"
"""The one field of the record a schema other than a parsed record is read as (fastavro parses
such a schema again on every read, which would drop the checked lists)."""


class StrictReader:
    """fastavro's reader for the bodies of one writer schema, refusing an enum or union index outside it."""

    def __init__(self, writer: AvroSchema) -> None:
        parsed = isinstance(writer, dict) and bool(writer.get("__fastavro_parsed"))
        # A schema other than a parsed record without enums or unions (a `string` key) is read as it is.
        self.wrapped = not parsed and _indexed(writer)
        self.schema = writer
        if parsed or self.wrapped:
            copied = copy.deepcopy(_wrap(writer) if self.wrapped else writer)
            seen: set[int] = set()
            for node in [copied, *copied["__named_schemas"].values()]:
                _check_indexes(node, seen)
            self.schema = copied
        self._readers: dict[int, tuple[AvroSchema, AvroSchema]] = {}

    def read(self, body: bytes, reader: AvroSchema | None, tagged: bool) -> Any:
        """The body's value, resolved against `reader` when given; with `tagged`, a multi-branch
        union's value carries its branch name (fastavro's `return_named_type`)."""
        if self.wrapped and reader is not None:
            reader = self._wrapped_reader(reader)
        value = schemaless_reader(io.BytesIO(body), self.schema, reader, return_named_type=tagged)
        return value[_VALUE] if self.wrapped else value

    def _wrapped_reader(self, reader: AvroSchema) -> AvroSchema:
        """The reader schema wrapped as the writer is, once per reader schema."""
        known = self._readers.get(id(reader))
        if known is None or known[0] is not reader:
            known = self._readers[id(reader)] = (reader, _wrap(reader))
        return known[1]


def _wrap(schema: AvroSchema) -> AvroSchema:
    """A parsed record whose one field has the type `schema`: its bodies are `schema`'s bodies."""
    return fastavro.parse_schema(
        {"type": "record", "name": "__contract_value", "fields": [{"name": _VALUE, "type": schema}]}
    )


def _indexed(node: Any) -> bool:
    """Whether a schema holds a union or an enum anywhere."""
    if isinstance(node, list):
        return True
    if not isinstance(node, dict):
        return False
    if node.get("type") == "enum":
        return True
    children = [field["type"] for field in node.get("fields", ())]
    children += [node[key] for key in ("items", "values", "type") if isinstance(node.get(key), dict | list)]
    return any(_indexed(child) for child in children)


def _check_indexes(node: Any, seen: set[int]) -> None:
    """Replace, in place below `node`, every union's branches and every enum's symbols by an
    `IndexChecked` list."""
    if not isinstance(node, dict) or id(node) in seen:
        return
    seen.add(id(node))
    if node.get("type") == "enum":
        node["symbols"] = IndexChecked(node["symbols"], f"enum {node['name']}'s {{}} symbols")
        return
    slots: list[tuple[dict[str, Any], str]] = [(field, "type") for field in node.get("fields", ())]
    slots += [(node, key) for key in ("items", "values") if key in node]
    if isinstance(node.get("type"), dict | list):
        slots.append((node, "type"))
    for holder, key in slots:
        value = holder[key]
        if isinstance(value, list):
            holder[key] = value = IndexChecked(value, _BRANCHES)
            for branch in value:
                _check_indexes(branch, seen)
        else:
            _check_indexes(value, seen)
