"""Comparing annotations (id, title, description, default) and the scalar kinds: strings, numbers,
consts and enums."""

from __future__ import annotations

from decimal import Decimal

from contracts.registry.json_compatibility.changes import Change
from contracts.registry.json_compatibility.nodes import (
    ConstNode,
    EnumNode,
    Node,
    NumberNode,
    StringNode,
    canonical,
)
from contracts.registry.json_compatibility.walk import Diff, bound, shown


def compare_annotations(diff: Diff, writer: Node, reader: Node) -> None:
    if writer.ident != reader.ident:
        diff.add(Change.ID_CHANGED)
    if writer.meta.get("title") != reader.meta.get("title"):
        diff.add(Change.TITLE_CHANGED)
    if writer.meta.get("description") != reader.meta.get("description"):
        diff.add(Change.DESCRIPTION_CHANGED)
    if _default(writer) != _default(reader):
        diff.add(Change.DEFAULT_CHANGED)


def _default(node: Node) -> str | None:
    return canonical(node.meta["default"]) if "default" in node.meta else None


def compare_strings(diff: Diff, writer: StringNode, reader: StringNode) -> None:
    bound(diff, "maxLength", "MAX_LENGTH", writer.max_length, reader.max_length)
    bound(diff, "minLength", "MIN_LENGTH", writer.min_length, reader.min_length)
    if writer.pattern != reader.pattern:
        change = (
            Change.PATTERN_ADDED
            if writer.pattern is None
            else Change.PATTERN_REMOVED
            if reader.pattern is None
            else Change.PATTERN_CHANGED
        )
        diff.add(change, "pattern", detail=f"writer {shown(writer.pattern)}, reader {shown(reader.pattern)}")


def compare_numbers(diff: Diff, writer: NumberNode, reader: NumberNode) -> None:
    bound(diff, "maximum", "MAXIMUM", writer.maximum, reader.maximum)
    bound(diff, "minimum", "MINIMUM", writer.minimum, reader.minimum)
    bound(diff, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM", writer.exclusive_maximum, reader.exclusive_maximum)
    bound(diff, "exclusiveMinimum", "EXCLUSIVE_MINIMUM", writer.exclusive_minimum, reader.exclusive_minimum)
    _compare_multiple_of(diff, writer.multiple_of, reader.multiple_of)
    if writer.integer != reader.integer:
        change = Change.TYPE_EXTENDED if writer.integer else Change.TYPE_NARROWED
        diff.add(change, detail=f"writer {writer.describe()}, reader {reader.describe()}")


def _compare_multiple_of(diff: Diff, writer: Decimal | None, reader: Decimal | None) -> None:
    if writer == reader:
        return
    if writer is None:
        change = Change.MULTIPLE_OF_ADDED
    elif reader is None:
        change = Change.MULTIPLE_OF_REMOVED
    elif reader % writer == 0:
        change = Change.MULTIPLE_OF_EXPANDED
    elif writer % reader == 0:
        change = Change.MULTIPLE_OF_REDUCED
    else:
        change = Change.MULTIPLE_OF_CHANGED
    diff.add(change, "multipleOf", detail=f"writer {_shown_decimal(writer)}, reader {_shown_decimal(reader)}")


def _shown_decimal(value: Decimal | None) -> str:
    return "none" if value is None else str(value)


def compare_consts(diff: Diff, writer: ConstNode, reader: ConstNode) -> None:
    if writer.value != reader.value:
        diff.add(Change.ENUM_ARRAY_CHANGED, "const", detail=f"writer {writer.value}, reader {reader.value}")


def compare_enums(diff: Diff, writer: EnumNode, reader: EnumNode) -> None:
    if writer.values == reader.values:
        return
    if reader.values >= writer.values:
        diff.add(Change.ENUM_ARRAY_EXTENDED, "enum")
        return
    change = Change.ENUM_ARRAY_NARROWED if writer.values >= reader.values else Change.ENUM_ARRAY_CHANGED
    lacking = ", ".join(sorted(writer.values - reader.values))
    diff.add(change, "enum", detail=f"the reader lacks {lacking}")
