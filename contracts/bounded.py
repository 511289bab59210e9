"""A bounded per-process cache: what a Python worker compiles or looks up once and reuses.

Workers live as long as the executor and see every contract, rule and schema a session uses, so
each of their caches holds at most `capacity` entries, the least recently used leaving first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most `capacity` entries, least recently used evicted first; safe across threads."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a cache holds at least one entry, not {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The entry for `key` (now the most recently used), or None."""
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: K, value: V) -> V:
        """Keep `value` for `key`, evicting the least recently used entry when full; returns it."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return value

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The entry for `key`, made (outside the lock: making may be slow) and kept on a miss."""
        found = self.get(key)
        return found if found is not None else self.put(key, make())

    def __len__(self) -> int:
        return len(self._entries)
