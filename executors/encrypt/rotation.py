"""The DEK version a WRITE encrypts with, kept current on each worker (docs/semantics.md §11.2).

The reference asks its DEK registry for the newest DEK on every record it encrypts, and creates
the next version once that one is older than `encrypt.dek.expiry.days`. Here the plan carries the
version the driver found when the rule compiled, and how long it stays current; a worker judges
that when each batch starts and, once it is stale, runs `ensure_dek` itself (the newest version,
or a new one), so a long-running job (a stream, a plan reused for days) rotates its DEK as the
reference does, without asking the registry per record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from contracts.registry.dek import DekRegistry
from executors.encrypt.keys import MILLIS_IN_DAY, KeySpec, ensure_dek
from executors.encrypt.kms import KmsDriver

FOREVER = 2**63 - 1
"""When a DEK that never expires stops being current: never (version 1 is the only one)."""


@dataclass(frozen=True)
class WriteDek:
    """The DEK version a WRITE encrypts with, current until `until` (epoch milliseconds)."""

    version: int
    until: int


def write_dek(
    spec: KeySpec,
    registry: DekRegistry,
    config: Mapping[str, str],
    drivers: Iterable[KmsDriver],
    now_millis: Callable[[], int],
    ttl_ms: int,
) -> WriteDek:
    """`ensure_dek`'s DEK, current for `ttl_ms` and not past the first millisecond `ensure_dek`
    would find it expired (a DEK already expired by this clock, as one just made by a registry with
    another clock, for `ttl_ms`); without `encrypt.dek.expiry.days`, for good."""
    now = now_millis()
    dek = ensure_dek(spec, registry, config, drivers, lambda: now)
    if not spec.rotated:
        return WriteDek(dek.version, FOREVER)
    until = now + ttl_ms
    if dek.ts is not None:
        expires = dek.ts + spec.expiry_days * MILLIS_IN_DAY + 1
        if expires > now:
            until = min(until, expires)
    return WriteDek(dek.version, until)


class WriteKeys:
    """A worker's current WRITE DEK: the plan's, then `renew()`'s (`write_dek` with the rule's keys)
    whenever the clock reaches its `until` at the start of a batch. Without `renew` the plan's is
    kept for good: a registry in memory is copied into each task, where a DEK made would be lost
    to every reader."""

    def __init__(
        self, first: WriteDek, now_millis: Callable[[], int], renew: Callable[[], WriteDek] | None
    ) -> None:
        self.current = first
        self._now = now_millis
        self._renew = renew

    def __repr__(self) -> str:
        return f"WriteKeys(version={self.current.version}, until={self.current.until})"

    def version(self) -> int:
        """The version to encrypt a batch with; an EncryptionKeyError when a stale one cannot be
        replaced (the next batch tries again)."""
        if self._renew is not None and self._now() >= self.current.until:
            self.current = self._renew()
        return self.current.version
