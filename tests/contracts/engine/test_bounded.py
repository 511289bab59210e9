"""Per-worker caches stay within their bounds, and keep answering the same."""

from __future__ import annotations

import pytest

from contracts.bounded import BoundedCache
from contracts.engine import python_pass
from contracts.formats.avro import values
from executors.cel import runtime
from executors.jsonata import runtime as jsonata_runtime


def test_the_least_recently_used_entry_leaves_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2


def test_get_or_make_makes_once_per_key() -> None:
    cache: BoundedCache[int, list[int]] = BoundedCache(4)
    made: list[int] = []
    first = cache.get_or_make(1, lambda: made.append(1) or [1])
    assert cache.get_or_make(1, lambda: made.append(2) or [2]) is first
    assert made == [1]


def test_a_cache_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one"):
        BoundedCache(0)


@pytest.mark.parametrize(
    "cache", [runtime._PROGRAMS, jsonata_runtime._EXPRESSIONS, python_pass._EVALUATORS, values._CODECS]
)
def test_each_worker_cache_is_bounded(cache: BoundedCache) -> None:
    assert isinstance(cache, BoundedCache) and cache.capacity <= 4096


def test_many_distinct_expressions_keep_the_program_cache_at_its_bound_and_answers_unchanged() -> None:
    bound = runtime._PROGRAMS.capacity
    for n in range(bound + 50):
        runtime.compile_program(f"message.x == {n}")
    assert len(runtime._PROGRAMS) == bound
    again = runtime.compile_program("message.x == 0")  # evicted long ago: compiled afresh
    assert again is runtime.compile_program("message.x == 0")


def test_many_distinct_jsonata_expressions_keep_the_expression_cache_at_its_bound() -> None:
    bound = jsonata_runtime._EXPRESSIONS.capacity
    for n in range(bound + 10):
        jsonata_runtime.parse(f"x + {n}")
    assert len(jsonata_runtime._EXPRESSIONS) == bound
    assert jsonata_runtime.parse("x + 1").evaluate({"x": 1}) == 2
