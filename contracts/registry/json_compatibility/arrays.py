"""Comparing arrays: items (one schema or a tuple), tuple items added and removed, additional
items, sizes, unique items."""

from __future__ import annotations

from contracts.registry.json_compatibility.changes import Change
from contracts.registry.json_compatibility.nodes import ArrayNode, EmptyNode, FalseNode, Node
from contracts.registry.json_compatibility.objects import compare_additional, compare_covered
from contracts.registry.json_compatibility.walk import Diff, Steps, bound, compare


def _open_items(node: ArrayNode) -> bool:
    return node.permits_additional and node.additional is None


def compare_arrays(diff: Diff, writer: ArrayNode, reader: ArrayNode) -> Steps:
    with diff.at("items"):
        yield from compare(diff, writer.all_items, reader.all_items)
    yield from _compare_item_lists(diff, writer, reader)
    yield from compare_additional(
        diff,
        "additionalItems",
        "ADDITIONAL_ITEMS",
        (writer.permits_additional, writer.additional),
        (reader.permits_additional, reader.additional),
    )
    bound(diff, "maxItems", "MAX_ITEMS", writer.max_items, reader.max_items)
    bound(diff, "minItems", "MIN_ITEMS", writer.min_items, reader.min_items)
    if writer.unique != reader.unique:
        diff.add(Change.UNIQUE_ITEMS_REMOVED if writer.unique else Change.UNIQUE_ITEMS_ADDED, "uniqueItems")
    # Not keywords the loader reads in these drafts, yet the registry compares them when present.
    bound(
        diff,
        "maxContains",
        "MAX_CONTAINS",
        _meta_number(writer, "maxContains"),
        _meta_number(reader, "maxContains"),
    )
    bound(
        diff,
        "minContains",
        "MIN_CONTAINS",
        _meta_number(writer, "minContains"),
        _meta_number(reader, "minContains"),
    )


def _meta_number(node: Node, keyword: str) -> float | None:
    value = node.meta.get(keyword)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _compare_item_lists(diff: Diff, writer: ArrayNode, reader: ArrayNode) -> Steps:
    """Tuple validation (`items` as an array): positions both have, then those only one side has."""
    written, read = writer.item_list, reader.item_list
    for index in range(min(len(written), len(read))):
        with diff.at("items", str(index)):
            yield from compare(diff, written[index], read[index])
    for index in range(len(read), len(written)):
        with diff.at("items", str(index)):
            yield from _item_removed(diff, written[index], reader)
    for index in range(len(written), len(read)):
        with diff.at("items", str(index)):
            yield from _item_added(diff, writer, read[index])


def _item_removed(diff: Diff, written: Node, reader: ArrayNode) -> Steps:
    if _open_items(reader):
        diff.add(Change.ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL)
    elif reader.additional is not None:
        yield from compare_covered(
            diff,
            written,
            reader.additional,
            Change.ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    elif isinstance(written, FalseNode):
        diff.add(Change.ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL)
    else:
        diff.add(
            Change.ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL,
            detail="the reader allows no additional items, and the writer may have written this one",
        )


def _item_added(diff: Diff, writer: ArrayNode, read: Node) -> Steps:
    if _open_items(writer):
        if isinstance(read, EmptyNode):
            diff.add(Change.ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL)
        else:
            diff.add(
                Change.ITEM_ADDED_TO_OPEN_CONTENT_MODEL,
                detail="the writer allows any additional item, so may have written this one with any value",
            )
    elif writer.additional is not None:
        yield from compare_covered(
            diff,
            writer.additional,
            read,
            Change.ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    else:
        diff.add(Change.ITEM_ADDED_TO_CLOSED_CONTENT_MODEL)
