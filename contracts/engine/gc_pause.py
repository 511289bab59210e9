"""Python's cyclic garbage collector paused while a worker turns one Arrow batch into records and back.

A batch builds tens of thousands of record dicts and outcomes that live until its Arrow columns
are built; each generation-0 collection on the way walks all of them, and collections came to a
sixth of a decrypting pass's time. The records hold no cycles (reference counting frees them),
and the collector runs again as soon as the batch is done, so a batch's memory is what it was.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (unless the collector was already off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
