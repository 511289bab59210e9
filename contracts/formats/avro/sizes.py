"""Declared sizes in Avro bodies, bounded before fastavro reads them.

fastavro trusts an array's block counts. Items of most types take at least one byte each, so a
count larger than the body runs into its end and fastavro raises at once, as it does for a
string or bytes longer than the bytes left, and for any map (each key takes a byte). Items that
take no bytes at all — null, a fixed of size 0, a record of such fields — are the exception: a
7-byte body can declare 2^40 of them, which fastavro builds one by one until memory runs out.
For a schema with an array of such items, the body is walked first, and a record declaring more
than MAX_ZERO_SIZE_ITEMS of them in all its arrays together is refused as undecodable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts.errors import SerializationError
from contracts.formats.avro.types import _NAMED, AvroSchema, _Names

MAX_ZERO_SIZE_ITEMS = 1_000_000
"""The most array items of zero-size types (null, fixed of size 0, records of such fields) one
record may declare, in all its arrays together."""

_MAX_VARINT_BYTES = 10
_FIXED_WIDTHS = {"boolean": 1, "float": 4, "double": 8}
_VARINTS = frozenset({"int", "long", "enum"})


class _Cursor:
    """A position in one body, and the zero-size items its arrays declared so far."""

    __slots__ = ("data", "position", "zero_size_items")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0
        self.zero_size_items = 0

    @property
    def remaining(self) -> int:
        return len(self.data) - self.position

    def skip(self, size: int, what: str) -> None:
        if not 0 <= size <= self.remaining:
            raise SerializationError(f"{what} declares {size} bytes, but {self.remaining} remain in the body")
        self.position += size

    def long(self) -> int:
        """An Avro int or long: a zigzag varint of at most 10 bytes."""
        data, position = self.data, self.position
        value = shift = 0
        for _ in range(_MAX_VARINT_BYTES):
            if position >= len(data):
                raise SerializationError("the body ends inside a number")
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.position = position
                return (value >> 1) ^ -(value & 1)
            shift += 7
        raise SerializationError(f"a number takes more than {_MAX_VARINT_BYTES} bytes")


Walk = Callable[[_Cursor], None]


def _nothing(cursor: _Cursor) -> None:
    """A value that takes no bytes (null)."""


def _varint(cursor: _Cursor) -> None:
    cursor.long()


def _sized(cursor: _Cursor) -> None:
    cursor.skip(cursor.long(), "a string or bytes value")


def _width(size: int) -> Walk:
    return lambda cursor: cursor.skip(size, "a fixed-size value")


class _SizeWalker:
    """One writer schema's walk: a function per node; it notes whether any array holds zero-size items."""

    def __init__(self, schema: AvroSchema) -> None:
        self.names = _Names(schema)
        self.walks: dict[str, Walk] = {}
        self.bounded = False

    def walk(self, schema: AvroSchema) -> Walk:
        resolved = self.names.resolve(schema, "")
        if isinstance(resolved, list):
            return self._union([self.walk(branch) for branch in resolved])
        kind = resolved["type"]
        if kind not in _NAMED:
            return self._unnamed(resolved)
        name = resolved["name"]
        known = self.walks.get(name)
        if known is None:
            # Registered before its fields are compiled, so a recursive reference finds it.
            slot: list[Walk] = []
            known = self.walks[name] = lambda cursor: slot[0](cursor)
            slot.append(self._named(resolved))
        return known

    def _unnamed(self, resolved: dict[str, Any]) -> Walk:
        kind = resolved["type"]
        if kind == "null":
            return _nothing
        if kind in _VARINTS:
            return _varint
        if kind in ("string", "bytes"):
            return _sized
        if kind in _FIXED_WIDTHS:
            return _width(_FIXED_WIDTHS[kind])
        if kind == "array":
            items = resolved["items"]
            if _zero_size(items, self.names, frozenset()):
                self.bounded = True
                return _blocks(None, "an array")
            return _blocks(self.walk(items), "an array")
        if kind == "map":
            return _blocks(_entry(self.walk(resolved["values"])), "a map")
        raise SerializationError(f"unknown Avro type {kind!r}")

    def _named(self, resolved: dict[str, Any]) -> Walk:
        kind = resolved["type"]
        if kind == "enum":
            return _varint
        if kind == "fixed":
            return _width(int(resolved["size"]))
        fields = [self.walk(f["type"]) for f in resolved["fields"]]

        def record(cursor: _Cursor) -> None:
            for field in fields:
                field(cursor)

        return record

    @staticmethod
    def _union(branches: list[Walk]) -> Walk:
        def union(cursor: _Cursor) -> None:
            index = cursor.long()
            if not 0 <= index < len(branches):
                raise SerializationError(
                    f"union branch {index} does not exist (the union has {len(branches)})"
                )
            branches[index](cursor)

        return union


def _entry(value: Walk) -> Walk:
    """A map entry: its string key, then its value."""

    def entry(cursor: _Cursor) -> None:
        _sized(cursor)
        value(cursor)

    return entry


def _blocks(item: Walk | None, what: str) -> Walk:
    """An array's or map's blocks; `item` None for zero-size items, which are only counted."""

    def blocks(cursor: _Cursor) -> None:
        while True:
            count = cursor.long()
            if count == 0:
                return
            if count < 0:
                count = -count
                cursor.long()  # the block's size in bytes
            if item is None:
                cursor.zero_size_items += count
                if cursor.zero_size_items > MAX_ZERO_SIZE_ITEMS:
                    raise SerializationError(
                        f"{what} declares {count} items of a type that takes no bytes; a record may"
                        f" declare at most {MAX_ZERO_SIZE_ITEMS} such items"
                    )
                continue
            if count > cursor.remaining:
                raise SerializationError(
                    f"{what} declares {count} items, but only {cursor.remaining} bytes remain in the body"
                )
            for _ in range(count):
                item(cursor)

    return blocks


def _zero_size(schema: AvroSchema, names: _Names, open_records: frozenset[str]) -> bool:
    """Whether every value of the type takes no bytes: null, fixed of size 0, records of such fields."""
    resolved = names.resolve(schema, "")
    if isinstance(resolved, list):
        return False
    kind = resolved["type"]
    if kind == "null":
        return True
    if kind == "fixed":
        return int(resolved["size"]) == 0
    if kind != "record" or resolved["name"] in open_records:
        return False
    inner = open_records | {resolved["name"]}
    return all(_zero_size(f["type"], names, inner) for f in resolved["fields"])


def size_check(schema: AvroSchema) -> Callable[[bytes], None] | None:
    """For a writer schema with an array of zero-size items: a check that raises SerializationError
    when a body declares more of them than MAX_ZERO_SIZE_ITEMS, or more items or bytes than it
    holds. None for every other schema, whose bodies fastavro bounds itself."""
    compiler = _SizeWalker(schema)
    top = compiler.walk(schema)
    if not compiler.bounded:
        return None

    def check(body: bytes) -> None:
        top(_Cursor(body))

    return check
