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
