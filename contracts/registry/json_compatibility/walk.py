"""Walking a writer and a reader schema together: each pair compared once, a pair met again on its
own stack assumed compatible, differences collected by path."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from contracts.registry.json_compatibility.changes import COMPATIBLE_CHANGES, Change, Difference
from contracts.registry.json_compatibility.nodes import Node, canonical, follow

Pair = tuple[Node, Node]


Steps = Iterator[Any]


"""Part of a walk, run by `run`. Comparing a pair of schemas yields the walk of that pair, which `run`
finishes first, so recursive schemas nest on `run`'s list rather than on Python's call stack."""


def run(steps: Steps) -> None:
    stack = [steps]
    while stack:
        try:
            nested = next(stack[-1])
        except StopIteration:
            stack.pop()
        else:
            stack.append(nested)


@dataclass
class Walk:
    """State one pass shares: results per pair of schemas (paths relative to the pair), the pairs being
    compared up the stack, and pairs an earlier pass found incompatible."""

    known_incompatible: Mapping[Pair, tuple[Difference, ...]]
    kinds: Callable[[Diff, Node, Node], Steps]
    """How a pair of schemas (references followed) is compared by their kinds (kinds.py)."""
    memo: dict[Pair, tuple[Difference, ...]] = field(default_factory=dict)
    active: set[Pair] = field(default_factory=set)
    assumed: bool = False
    """Whether a pair met again on its own stack was assumed compatible (so the pass may be optimistic)."""


class Diff:
    """Differences found at and under one path of a walk."""

    def __init__(self, walk: Walk, path: Sequence[str] = ()) -> None:
        self.walk = walk
        self.path = list(path)
        self.found: list[Difference] = []

    def probe(self) -> Diff:
        """A fresh collector at the same path, for comparisons whose outcome decides what is kept."""
        return Diff(self.walk, self.path)

    @contextmanager
    def at(self, *segments: str) -> Iterator[None]:
        self.path.extend(segments)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(segments) :]

    def add(self, change: Change, *segments: str, detail: str = "") -> None:
        self.found.append(Difference(change, (*self.path, *segments), detail))

    def extend(self, found: Sequence[Difference]) -> None:
        self.found.extend(found)

    def rebased(self, found: Sequence[Difference]) -> None:
        self.found.extend(replace(d, path=(*self.path, *d.path)) for d in found)

    @property
    def compatible(self) -> bool:
        return all_compatible(self.found)


def all_compatible(found: Sequence[Difference]) -> bool:
    return all(d.change in COMPATIBLE_CHANGES for d in found)


def compare(diff: Diff, writer: Node | None, reader: Node | None) -> Steps:
    if writer is None and reader is None:
        return
    if writer is None:
        diff.add(Change.SCHEMA_ADDED, detail="the reader constrains what the writer left unconstrained")
        return
    if reader is None:
        diff.add(Change.SCHEMA_REMOVED)
        return
    pair = (follow(writer), follow(reader))
    walk = diff.walk
    found = walk.memo.get(pair)
    if found is None:
        if pair in walk.active:
            if pair not in walk.known_incompatible:
                walk.assumed = True
            diff.rebased(walk.known_incompatible.get(pair, ()))
            return
        walk.active.add(pair)
        try:
            inner = Diff(walk)
            yield walk.kinds(inner, *pair)
        finally:
            walk.active.discard(pair)
        found = walk.memo[pair] = tuple(inner.found)
    diff.rebased(found)


def bound(diff: Diff, keyword: str, family: str, writer: float | None, reader: float | None) -> None:
    """A numeric limit added, removed, increased or decreased: `Change` {family}_{ADDED, ...}."""
    if writer == reader:
        return
    if writer is None:
        suffix = "ADDED"
    elif reader is None:
        suffix = "REMOVED"
    else:
        suffix = "INCREASED" if writer < reader else "DECREASED"
    diff.add(Change[f"{family}_{suffix}"], keyword, detail=f"writer {shown(writer)}, reader {shown(reader)}")


def shown(value: Any) -> str:
    return "none" if value is None else canonical(value)
