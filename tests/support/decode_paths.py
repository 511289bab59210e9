"""What the differential tests of the decode paths share (docs/semantics.md §8.10, §8.11): a
path chosen through its environment variable, whether a plan runs the JVM decoder, and
`deserialize` run on both paths for the same rows."""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry

SUBJECT = "orders-value"
ROWS = "key binary, value binary, topic string, partition int, offset long"


@contextlib.contextmanager
def path_chosen(variable: str, path: str) -> Iterator[None]:
    """The environment variable `variable` set to `path` for the calls made inside."""
    before = os.environ.get(variable)
    os.environ[variable] = path
    try:
        yield
    finally:
        if before is None:
            del os.environ[variable]
        else:
            os.environ[variable] = before


def plan_names(df: Any, function: str) -> bool:
    """Whether the query's analyzed plan names `function` (Spark may fold it over local data away
    in the optimized one)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    return function in out.getvalue()


PYTHON_NODES = ("ArrowEvalPython", "BatchEvalPython", "MapInArrow", "MapInPandas", "PythonUDF")
"""The physical plan nodes in which rows cross to a Python worker."""


def union_branches(df: Any) -> list[str]:
    """The subtrees under the physical plan's first Union, each as its plan text ([] without one)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain()
    lines = out.getvalue().split("== Physical Plan ==")[-1].strip("\n").splitlines()
    found = [(i, re.search(r"(?:^|- )((?:\*\(\d+\) )?Union)\b", line)) for i, line in enumerate(lines)]
    unions = [(i, match) for i, match in found if match is not None]
    if not unions:
        return []
    start, match = unions[0]
    column = match.start(1)  # where each child's ":- " or "+- " begins (a codegen stage's "*(2) " too)
    branches: list[list[str]] = []
    for line in lines[start + 1 :]:
        node = re.match(r"[ :]*[:+]- ", line)  # not a node: an expression's text running on
        if node is not None and node.end() - 3 < column:
            break
        if node is not None and node.end() - 3 == column:
            branches.append([])
        branches[-1].append(line)
    return ["\n".join(branch) for branch in branches]


def decoded_natively(df: Any) -> bool:
    """Whether the query's rows a JVM decoder reads meet no Python node: the plan is a union of a
    branch with no Python node (the JVM's rows; over local data Spark may compute it while planning)
    and one where Python runs (docs/semantics.md §8.10)."""
    python = [any(node in branch for node in PYTHON_NODES) for branch in union_branches(df)]
    return sorted(python) == [False, True]


def both_paths(
    spark: Any,
    tmp: Path,
    registry: LocalRegistry,
    rows: list[tuple[Any, ...]],
    variable: str,
    function: str,
    schema: str = ROWS,
    **kw: Any,
) -> dict[str, tuple[list[str], list[Any], bool]]:
    """deserialize(DLQ policy) on each path: its rows, its DLQ records, whether `function` ran."""
    out = {}
    for path in ("python", "jvm"):
        sink = LocalTopicSink(tmp / path)
        with path_chosen(variable, path):
            contract = DataContract(registry, SUBJECT, dlq_sink=sink, **kw)
            decoded = contract.deserialize(
                spark.createDataFrame(rows, schema), on_decode_error="DLQ", decode_dlq_topic="bad"
            )
            jvm = plan_names(decoded, function)
            try:
                got = sorted(repr(row.asDict(recursive=True)) for row in decoded.collect())
            except Exception as e:  # the job failed: both paths must fail it alike
                got = re.findall(r"\w+Error: [^\n]*", str(e))[-1:] or [type(e).__name__]
        records = sink.read("bad") if sink.topics() else []
        dlq = sorted(((r.key, r.value, tuple(r.headers)) for r in records), key=repr)
        out[path] = (got, dlq, jvm)
    return out
