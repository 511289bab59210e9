"""Comparing objects: required names, properties added and removed under open or closed content
models, dependencies, additional properties, sizes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.registry.json_compatibility.changes import Change
from contracts.registry.json_compatibility.nodes import EmptyNode, FalseNode, Node, ObjectNode
from contracts.registry.json_compatibility.walk import Diff, Steps, bound, compare


def compare_objects(diff: Diff, writer: ObjectNode, reader: ObjectNode) -> Steps:
    _compare_required(diff, writer, reader)
    with diff.at("properties"):
        for name in _union(writer.properties, reader.properties):
            with diff.at(name):
                yield from _compare_property(diff, writer, reader, name)
    yield from _compare_dependencies(diff, writer, reader)
    yield from compare_additional(
        diff,
        "additionalProperties",
        "ADDITIONAL_PROPERTIES",
        (writer.permits_additional, writer.additional),
        (reader.permits_additional, reader.additional),
    )
    bound(diff, "maxProperties", "MAX_PROPERTIES", writer.max_properties, reader.max_properties)
    bound(diff, "minProperties", "MIN_PROPERTIES", writer.min_properties, reader.min_properties)


def _union(first: Mapping[str, Any], second: Mapping[str, Any]) -> list[str]:
    return [*first, *(name for name in second if name not in first)]


def _compare_required(diff: Diff, writer: ObjectNode, reader: ObjectNode) -> None:
    with diff.at("required"):
        for name in writer.properties:
            if name not in reader.properties:
                continue
            was, now = name in writer.required, name in reader.required
            if was and not now:
                diff.add(Change.REQUIRED_ATTRIBUTE_REMOVED, name)
            elif now and not was:
                if "default" in reader.properties[name].meta:
                    diff.add(Change.REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED, name)
                else:
                    diff.add(
                        Change.REQUIRED_ATTRIBUTE_ADDED,
                        name,
                        detail="the reader requires, without a default, a property the writer left optional",
                    )


def _open(node: ObjectNode) -> bool:
    """Any extra property allowed, with any value: no additionalProperties schema, no patternProperties."""
    return node.permits_additional and node.additional is None and not node.pattern_properties


def _cover(node: ObjectNode, name: str) -> Node | None:
    """The schema a partially open object gives a property it does not declare, if any."""
    for pattern, schema in node.pattern_properties:
        if pattern.search(name):
            return schema
    return node.additional


def compare_covered(diff: Diff, writer: Node, reader: Node, covered: Change, uncovered: Change) -> Steps:
    probe = diff.probe()
    yield from compare(probe, writer, reader)
    diff.extend(probe.found)
    if probe.compatible:
        diff.add(covered)
    else:
        diff.add(uncovered, detail="the schema the other side gives it does not fit")


def _compare_property(diff: Diff, writer: ObjectNode, reader: ObjectNode, name: str) -> Steps:
    written, read = writer.properties.get(name), reader.properties.get(name)
    if read is None:
        assert written is not None
        yield from _property_removed(diff, written, reader, name)
    elif written is None:
        yield from _property_added(diff, writer, reader, read, name)
    else:
        yield from compare(diff, written, read)


def _property_removed(diff: Diff, written: Node, reader: ObjectNode, name: str) -> Steps:
    if _open(reader):
        diff.add(Change.PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL)
        return
    cover = _cover(reader, name)
    if cover is not None:
        yield from compare_covered(
            diff,
            written,
            cover,
            Change.PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    elif isinstance(written, FalseNode):
        diff.add(Change.PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL)
    else:
        diff.add(
            Change.PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL,
            detail="the reader allows no additional properties, and the writer may have written this one",
        )


_ANY_PROPERTY = "the writer allows any additional property, so may have written this one with any value"


def _property_added(diff: Diff, writer: ObjectNode, reader: ObjectNode, read: Node, name: str) -> Steps:
    has_default = "default" in read.meta
    if _open(writer):
        if isinstance(read, EmptyNode):
            diff.add(Change.PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL)
        elif name not in reader.required:
            diff.add(
                Change.OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL,
                detail=_ANY_PROPERTY,
            )
        elif has_default:
            diff.add(
                Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL,
                detail=_ANY_PROPERTY,
            )
        else:
            diff.add(
                Change.REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL,
                detail="the reader requires, without a default, a property the writer does not declare",
            )
        return
    cover = _cover(writer, name)
    if cover is not None:
        yield from compare_covered(
            diff,
            cover,
            read,
            Change.PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    if name not in reader.required:
        diff.add(Change.OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL)
    elif has_default:
        diff.add(Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL)
    else:
        diff.add(
            Change.REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
            detail="the reader requires, without a default, a property the writer does not declare",
        )


def _compare_dependencies(diff: Diff, writer: ObjectNode, reader: ObjectNode) -> Steps:
    with diff.at("dependencies"):
        for name in _union(writer.property_dependencies, reader.property_dependencies):
            before, after = writer.property_dependencies.get(name), reader.property_dependencies.get(name)
            if after is None:
                diff.add(Change.DEPENDENCY_ARRAY_REMOVED, name)
            elif before is None:
                diff.add(Change.DEPENDENCY_ARRAY_ADDED, name, detail=f"reader {sorted(after)}")
            elif before != after:
                change = (
                    Change.DEPENDENCY_ARRAY_EXTENDED
                    if after >= before
                    else Change.DEPENDENCY_ARRAY_NARROWED
                    if before >= after
                    else Change.DEPENDENCY_ARRAY_CHANGED
                )
                diff.add(change, name, detail=f"writer {sorted(before)}, reader {sorted(after)}")
        for name in _union(writer.schema_dependencies, reader.schema_dependencies):
            written, read = writer.schema_dependencies.get(name), reader.schema_dependencies.get(name)
            if read is None:
                diff.add(Change.DEPENDENCY_SCHEMA_REMOVED, name)
            elif written is None:
                diff.add(Change.DEPENDENCY_SCHEMA_ADDED, name)
            else:
                with diff.at(name):
                    yield from compare(diff, written, read)


def compare_additional(
    diff: Diff,
    keyword: str,
    family: str,
    writer: tuple[bool, Node | None],
    reader: tuple[bool, Node | None],
) -> Steps:
    """additionalProperties/additionalItems: allowed or not, and the schema extras must match if any."""
    (writer_permits, written), (reader_permits, read) = writer, reader
    with diff.at(keyword):
        if writer_permits != reader_permits:
            suffix = "ADDED" if reader_permits else "REMOVED"
            detail = "" if reader_permits else "the reader forbids what the writer allows"
            diff.add(Change[f"{family}_{suffix}"], detail=detail)
        elif written is None and read is not None:
            diff.add(Change[f"{family}_NARROWED"], detail="the reader constrains what the writer left free")
        elif written is not None and read is None:
            diff.add(Change[f"{family}_EXTENDED"])
        else:
            yield from compare(diff, written, read)
