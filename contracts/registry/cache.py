"""A bounded, optionally expiring, thread-safe cache whose concurrent misses share one load."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, TypeVar

V = TypeVar("V")


class LoadingCache(Generic[V]):
    """LRU cache of at most `max_entries` values, each kept for `ttl` seconds (None: forever).

    `get_or_load` runs the loader once per key however many threads miss at the same time
    (single flight): the first caller loads, the others wait for its result or its error.
    """

    def __init__(self, max_entries: int, ttl: float | None, clock: Callable[[], float]) -> None:
        if max_entries < 1:
            raise ValueError("a cache needs room for at least one entry")
        self._max_entries = max_entries
        self._ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._loading: dict[Hashable, Future[V]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get_or_load(self, key: Hashable, load: Callable[[], V]) -> V:
        """The cached value for `key`, or the result of `load()` (stored for next time)."""
        with self._lock:
            hit = self._fresh(key)
            if hit is not None:
                return hit[1]
            pending = self._loading.get(key)
            if pending is None:
                pending = self._loading[key] = Future()
                leader = True
            else:
                leader = False
        if not leader:
            return pending.result()
        try:
            value = load()
        except BaseException as error:
            with self._lock:
                del self._loading[key]
            pending.set_exception(error)
            raise
        with self._lock:
            # Stored before the load is unregistered, so no caller in between starts a second load.
            self._store(key, value)
            del self._loading[key]
        pending.set_result(value)
        return value

    def get(self, key: Hashable) -> V | None:
        """The fresh value for `key`, or None; never loads."""
        with self._lock:
            hit = self._fresh(key)
            return None if hit is None else hit[1]

    def put(self, key: Hashable, value: V) -> None:
        """Store `value`, evicting the least recently used entry when full."""
        with self._lock:
            self._store(key, value)

    def discard_if(self, matches: Callable[[Hashable], bool]) -> None:
        """Drop every entry whose key `matches` accepts (a deleted subject's versions, say)."""
        with self._lock:
            for key in [key for key in self._entries if matches(key)]:
                del self._entries[key]

    def _store(self, key: Hashable, value: V) -> None:
        self._entries[key] = (self._clock(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def _fresh(self, key: Hashable) -> tuple[float, V] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._ttl is not None and self._clock() - entry[0] >= self._ttl:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry
