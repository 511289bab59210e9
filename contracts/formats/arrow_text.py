"""Arrow arrays as Spark hands them to Python: strings that may not be UTF-8 (Spark does not
require it) and null-typed children pyarrow casts at the wrong length; and Python strings that
are not Unicode text, which no Arrow or Spark string holds. Shared by the formats."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`): text a reason, a header
    or an Arrow string can carry as UTF-8, whatever a value or an expression put in it."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def lone_surrogate(text: str) -> str | None:
    """Why `text` is not Unicode text a Spark string can hold: the first lone surrogate in it (a
    JSON `\\ud800` escape without its pair decodes to one), escaped; None for any other text."""
    found = _SURROGATE.search(text)
    if found is None:
        return None
    start = max(found.start() - 8, 0)
    return (
        f"a string holding a lone surrogate, U+{ord(found.group()):04X}, which is not Unicode text"
        f" (at character {found.start()}: {text[start : found.start() + 8]!r})"
    )


def invalid_utf8_rows(array: pa.Array | pa.ChunkedArray) -> Iterator[tuple[int, UnicodeDecodeError]]:
    """Each row of the array holding a string that is not valid UTF-8, with the decoding error."""
    for row in range(len(array)):
        try:
            array[row].as_py()
        except UnicodeDecodeError as e:
            yield row, e


def valid_utf8(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The array with every string's bytes that are not UTF-8 replaced by U+FFFD, nested ones too."""
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([valid_utf8(chunk) for chunk in array.chunks], type=array.type)
    kind = array.type
    if pa.types.is_string(kind):
        raw = array.cast(pa.binary()).to_pylist()
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in raw], type=kind)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_list(kind):
        return pa.ListArray.from_arrays(array.offsets, valid_utf8(array.values), type=kind, mask=mask)
    if pa.types.is_map(kind):
        keys, items = valid_utf8(array.keys), valid_utf8(array.items)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=kind, mask=mask)
    if pa.types.is_struct(kind):
        children = [valid_utf8(child) for child in array.flatten()]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    return array


def text_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The array's values, with the bytes of nested strings that are not UTF-8 as U+FFFD: the keys
    of Kafka headers, which a DataFrame may hold as any bytes, read without failing the pass."""
    try:
        return array.to_pylist()
    except UnicodeDecodeError:
        return valid_utf8(array).to_pylist()


def sound_nulls(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The array with each null-typed child as long as its list offsets say. pyarrow's cast of a
    nested list of nulls (e.g. list<list<null>>) keeps the inner null child at the wrong length,
    which to_pylist then cannot read."""
    if isinstance(array, pa.ChunkedArray):
        if not _holds_null(array.type):
            return array
        return pa.chunked_array([sound_nulls(chunk) for chunk in array.chunks], type=array.type)
    kind = array.type
    if not _holds_null(kind):
        return array
    if pa.types.is_null(kind):
        return pa.nulls(len(array))
    mask = array.is_null() if array.null_count else None
    if pa.types.is_list(kind):
        offsets = array.offsets
        size = offsets[-1].as_py() if len(offsets) else 0
        values = pa.nulls(size) if pa.types.is_null(kind.value_type) else sound_nulls(array.values)
        return pa.ListArray.from_arrays(offsets, values, type=kind, mask=mask)
    if pa.types.is_map(kind):
        offsets = array.offsets
        size = offsets[-1].as_py() if len(offsets) else 0
        items = pa.nulls(size) if pa.types.is_null(kind.item_type) else sound_nulls(array.items)
        return pa.MapArray.from_arrays(offsets, array.keys, items, type=kind, mask=mask)
    if pa.types.is_struct(kind):
        children = [sound_nulls(child) for child in array.flatten()]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    return array


def _holds_null(kind: pa.DataType) -> bool:
    if pa.types.is_null(kind):
        return True
    if pa.types.is_list(kind):
        return _holds_null(kind.value_type)
    if pa.types.is_map(kind):
        return _holds_null(kind.item_type)
    if pa.types.is_struct(kind):
        return any(_holds_null(field.type) for field in kind)
    return False


def struct_values(column: pa.Array | pa.ChunkedArray) -> tuple[list[Any], dict[int, str]]:
    """A struct column's rows as Python values (nulls sound), and, by row, why a row's value is
    unreadable: a string that is not valid UTF-8 (it is read with U+FFFD in its place)."""
    column = sound_nulls(column)
    unreadable: dict[int, str] = {}
    try:
        return column.to_pylist(), unreadable
    except UnicodeDecodeError:
        for row, error in invalid_utf8_rows(column):
            unreadable[row] = (
                f"a string that is not valid UTF-8 ({error.reason} at byte {error.start}"
                f" of {error.object[:16]!r})"
            )
        return valid_utf8(column).to_pylist(), unreadable
