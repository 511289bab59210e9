"""Whether a DataFrame may be read twice in one query, as a rule pass whose rejected rows reach
Python in a branch of their own reads it (docs/semantics.md §7.5).

Reading twice is safe when both reads give the same rows and nothing happens as a side effect: the
plan holds no Python node (a contract's own DLQ routing, or any UDF, which may deliver or count
something each time it runs) and no function whose value changes from one read to the next. Told
from the plan Spark prints (the DataFrame API has nothing else on Spark Connect), conservatively:
any name that may be one of those makes the answer no, and the caller then reads once. A
micro-batch given to `foreach_batch` is read once too (`read_once`): a second read would fetch it
from its source again, and the streaming query's progress would count its rows twice.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_PYTHON_NODE = re.compile(r"Python|Pandas|InArrow|\bUDF\b|UDTF")
"""Python nodes of a physical plan (ArrowEvalPython, BatchEvalPython, MapInArrow, MapInPandas,
FlatMapGroupsInPandas, ...) and JVM UDFs as Spark prints them."""
_CHANGING = re.compile(
    r"\b(?:rand|randn|random|uuid|shuffle|monotonically_increasing_id|spark_partition_id)\(", re.IGNORECASE
)
"""Functions whose value differs between two reads of one query (the current time does not: Spark
fixes it once per query)."""
_OBSERVED = re.compile(r"\bCollectMetrics\b")
"""An observation (`DataFrame.observe`, a contract's counts), which would count each row twice."""
_MICRO_BATCH: ContextVar[bool] = ContextVar("contracts_micro_batch", default=False)


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """The calls planned inside read each input once: they run on a streaming micro-batch."""
    token = _MICRO_BATCH.set(True)
    try:
        yield
    finally:
        _MICRO_BATCH.reset(token)


def physical_plan(df: DataFrame) -> str:
    """The physical plan Spark prints for `df`."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        df.explain()
    return printed.getvalue()


def reads_twice_safely(df: DataFrame, plan: str | None = None) -> bool:
    """Whether `df` gives the same rows on two reads in one query, with no side effect either time
    (`plan`: its `physical_plan`, when the caller has it)."""
    if df.isStreaming or _MICRO_BATCH.get():
        return False
    printed = physical_plan(df) if plan is None else plan
    return not any(pattern.search(printed) for pattern in (_PYTHON_NODE, _CHANGING, _OBSERVED))
