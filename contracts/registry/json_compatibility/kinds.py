"""Comparing a writer and a reader schema by their kinds (each kind's comparison in its module),
and the passes that settle recursive schemas."""

from __future__ import annotations

from contracts.registry.json_compatibility.arrays import compare_arrays
from contracts.registry.json_compatibility.changes import Change, Difference
from contracts.registry.json_compatibility.combiners import (
    compare_combined,
    compare_nots,
    reader_branch_reads,
    writer_branch_read,
)
from contracts.registry.json_compatibility.nodes import (
    ArrayNode,
    CombinedNode,
    ConstNode,
    EmptyNode,
    EnumNode,
    FalseNode,
    Node,
    NotNode,
    NumberNode,
    ObjectNode,
    StringNode,
)
from contracts.registry.json_compatibility.objects import compare_objects
from contracts.registry.json_compatibility.scalars import (
    compare_annotations,
    compare_consts,
    compare_enums,
    compare_numbers,
    compare_strings,
)
from contracts.registry.json_compatibility.walk import (
    Diff,
    Pair,
    Steps,
    Walk,
    all_compatible,
    compare,
    run,
)


def differences(writer: Node, reader: Node) -> list[Difference]:
    """Every difference from `writer` to `reader`. Pairs met again while being compared are assumed
    compatible; passes repeat, feeding back the pairs found incompatible, until no new ones appear."""
    known: dict[Pair, tuple[Difference, ...]] = {}
    while True:
        walk = Walk(known, _compare_kinds)
        diff = Diff(walk)
        run(compare(diff, writer, reader))
        incompatible = {pair: found for pair, found in walk.memo.items() if not all_compatible(found)}
        if not walk.assumed or incompatible.keys() <= known.keys():
            return diff.found
        known = {**known, **incompatible}


def _compare_kinds(diff: Diff, writer: Node, reader: Node) -> Steps:
    if not isinstance(writer, CombinedNode) and isinstance(reader, CombinedNode):
        if (yield from reader_branch_reads(diff, writer, reader)):
            return
    elif (
        isinstance(writer, CombinedNode)
        and not isinstance(reader, CombinedNode)
        and (yield from writer_branch_read(diff, writer, reader))
    ):
        return
    if type(writer) is not type(reader):
        if (
            isinstance(writer, FalseNode)
            or isinstance(reader, EmptyNode)
            or _both_connect_bytes(writer, reader)
        ):
            return
        diff.add(Change.TYPE_CHANGED, detail=f"writer {writer.describe()}, reader {reader.describe()}")
        return
    compare_annotations(diff, writer, reader)
    if isinstance(writer, StringNode):
        compare_strings(diff, writer, reader)
    elif isinstance(writer, NumberNode):
        compare_numbers(diff, writer, reader)
    elif isinstance(writer, ConstNode):
        compare_consts(diff, writer, reader)
    elif isinstance(writer, EnumNode):
        compare_enums(diff, writer, reader)
    elif isinstance(writer, CombinedNode):
        yield from compare_combined(diff, writer, reader)
    elif isinstance(writer, NotNode):
        yield from compare_nots(diff, writer, reader)
    elif isinstance(writer, ObjectNode):
        yield from compare_objects(diff, writer, reader)
    elif isinstance(writer, ArrayNode):
        yield from compare_arrays(diff, writer, reader)


def _both_connect_bytes(writer: Node, reader: Node) -> bool:
    """Kafka Connect's bytes, whatever schema type carries them (the registry lets them change)."""
    return writer.meta.get("connect.type") == "bytes" == reader.meta.get("connect.type")
