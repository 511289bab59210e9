"""Comparing combinations (allOf, anyOf, oneOf) and `not`s, and a combination against a schema of
one kind."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from contracts.registry.json_compatibility.changes import Change, Difference
from contracts.registry.json_compatibility.nodes import CombinedNode, Node, NotNode, canonical
from contracts.registry.json_compatibility.walk import Diff, Steps, compare


def reader_branch_reads(diff: Diff, writer: Node, reader: CombinedNode) -> Generator[Any, None, bool]:
    """A reader anyOf/oneOf (or a single-branch combination) with a branch that reads the whole writer."""
    single = len(reader.subschemas) == 1
    if not single and reader.criterion == "allOf":
        return False
    for branch in reader.subschemas:
        probe = diff.probe()
        yield from compare(probe, writer, branch)
        if probe.compatible:
            diff.extend(probe.found)
            if not single:
                diff.add(Change.SUM_TYPE_EXTENDED)
            return True
    return False


def writer_branch_read(diff: Diff, writer: CombinedNode, reader: Node) -> Generator[Any, None, bool]:
    """A writer allOf (or a single-branch combination) with a branch the whole reader reads."""
    single = len(writer.subschemas) == 1
    if not single and writer.criterion != "allOf":
        return False
    for branch in writer.subschemas:
        probe = diff.probe()
        yield from compare(probe, branch, reader)
        if probe.compatible:
            diff.extend(probe.found)
            if not single:
                diff.add(Change.PRODUCT_TYPE_NARROWED)
            return True
    return False


def compare_nots(diff: Diff, writer: NotNode, reader: NotNode) -> Steps:
    # What the reader excludes must be something the writer excluded: compare the other way round.
    with diff.at("not"):
        probe = diff.probe()
        yield from compare(probe, reader.schema, writer.schema)
        if probe.compatible:
            diff.add(Change.NOT_TYPE_NARROWED)
        else:
            diff.add(Change.NOT_TYPE_EXTENDED, detail="the reader excludes values the writer allows")


def _criteria_change(writer: CombinedNode, reader: CombinedNode) -> Change | None:
    """None when both use one criterion; else whether the reader's is at least as permissive."""
    if writer.criterion == reader.criterion:
        return None
    single_writer, single_reader = len(writer.subschemas) == 1, len(reader.subschemas) == 1
    if (
        reader.criterion == "anyOf"
        or (single_writer and (single_reader or reader.criterion == "oneOf"))
        or (single_reader and writer.criterion == "allOf")
    ):
        return Change.COMBINED_TYPE_EXTENDED
    return Change.COMBINED_TYPE_CHANGED


def compare_combined(diff: Diff, writer: CombinedNode, reader: CombinedNode) -> Steps:
    criteria = _criteria_change(writer, reader)
    if criteria is not None:
        diff.add(criteria, detail=f"writer {writer.criterion}, reader {reader.criterion}")
        if criteria is Change.COMBINED_TYPE_CHANGED:
            return
    writers, readers = _distinct(writer.subschemas), _distinct(reader.subschemas)
    counts = f"writer {len(writers)} branches, reader {len(readers)}"
    if len(writers) < len(readers):
        diff.add(
            Change.PRODUCT_TYPE_EXTENDED if reader.criterion == "allOf" else Change.SUM_TYPE_EXTENDED,
            detail=counts,
        )
    elif len(writers) > len(readers):
        diff.add(
            Change.PRODUCT_TYPE_NARROWED if writer.criterion == "allOf" else Change.SUM_TYPE_NARROWED,
            detail=counts,
        )
    readable: dict[int, dict[int, list[Difference]]] = {}
    for i, branch in enumerate(writers):
        with diff.at(writer.criterion, str(i)):
            for j, candidate in enumerate(readers):
                probe = diff.probe()
                yield from compare(probe, branch, candidate)
                if probe.compatible:
                    readable.setdefault(i, {})[j] = probe.found
    matching = _maximum_matching(readable)
    for i, j in sorted(matching.items()):
        diff.extend(readable[i][j])
    if len(matching) < min(len(writers), len(readers)):
        diff.add(
            Change.COMBINED_TYPE_SUBSCHEMAS_CHANGED,
            detail="the branches cannot be paired so that each reader branch reads a writer branch",
        )


def _distinct(subschemas: Sequence[Node]) -> list[Node]:
    """Branches without repeats: equal JSON counts once (parts split from one object by identity)."""
    seen: set[Any] = set()
    distinct = []
    for node in subschemas:
        key = canonical(node.meta) if node.meta else id(node)
        if key not in seen:
            seen.add(key)
            distinct.append(node)
    return distinct


def _maximum_matching(edges: Mapping[int, Mapping[int, Sequence[Difference]]]) -> dict[int, int]:
    """A maximum bipartite matching (augmenting paths): left index -> right index. Edges with fewer
    differences are tried first, so identical branches pair up with each other."""
    owner: dict[int, int] = {}

    def augment(left: int, seen: set[int]) -> bool:
        for right in sorted(edges[left], key=lambda r: (len(edges[left][r]), r)):
            if right not in seen:
                seen.add(right)
                if right not in owner or augment(owner[right], seen):
                    owner[right] = left
                    return True
        return False

    for left in sorted(edges):
        augment(left, set())
    return {left: right for right, left in owner.items()}
