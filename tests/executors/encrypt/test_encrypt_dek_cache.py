"""A worker's DEK cache (`KeyRing`): bounded, each unwrapped DEK kept for the cache's time to live
and not past its own expiry, then fetched from the registry and unwrapped again — so a DEK
removed from the registry stops decrypting on the workers once its entry expires."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from contracts import LocalRegistry
from contracts.errors import RegistryError
from contracts.registry.dek import dek_not_found
from executors.encrypt import LocalKmsDriver
from executors.encrypt.cryptor import generate_key_material
from executors.encrypt.keys import MILLIS_IN_DAY, EncryptionKeyError, KeyRing, KeySpec, dek_ttl_ms

SECRET = "cache-secret"
SUBJECT = "people-value"
ALGORITHM = "AES256_GCM"


class _Counting:
    """A DEK registry that counts DEK fetches and can forget a DEK (crypto-shredding)."""

    def __init__(self, registry: LocalRegistry) -> None:
        self.registry = registry
        self.fetches: list[int] = []
        self.forgotten: set[int] = set()

    def get_kek(self, name: str, deleted: bool = False, context: str | None = None) -> Any:
        return self.registry.get_kek(name, deleted, context)

    def get_dek(
        self, kek_name: str, subject: str, algorithm: str, version: int = 1, deleted: bool = False
    ) -> Any:
        self.fetches.append(version)
        if version in self.forgotten:
            raise dek_not_found(kek_name, subject, algorithm, version)
        return self.registry.get_dek(kek_name, subject, algorithm, version, deleted)


@pytest.fixture
def registry() -> LocalRegistry:
    """A KEK and three wrapped DEK versions of the subject."""
    registry = LocalRegistry()
    registry.register_kek("kek1", "local-kms", "key1")
    aead = LocalKmsDriver().new_aead({"secret": SECRET}, "key1")
    for version in (1, 2, 3):
        wrapped = aead.encrypt(generate_key_material(ALGORITHM), b"")
        registry.register_dek("kek1", SUBJECT, base64.b64encode(wrapped).decode(), ALGORITHM, version)
    return registry


def _ring(counting: _Counting, clock: list[int], expiry_days: int = 0, **options: Any) -> KeyRing:
    spec = KeySpec("kek1", "local-kms", "key1", SUBJECT, ALGORITHM, expiry_days)
    return KeyRing(
        spec, counting, {"secret": SECRET}, [LocalKmsDriver()], now_millis_fn=lambda: clock[0], **options
    )


def test_a_dek_is_fetched_once_within_its_time_to_live(registry: LocalRegistry) -> None:
    counting, clock = _Counting(registry), [1_000]
    ring = _ring(counting, clock, ttl_ms=60_000)
    first = ring.cryptor(1)
    clock[0] += 59_999
    assert ring.cryptor(1) is first
    assert counting.fetches == [1]
    clock[0] += 1
    again = ring.cryptor(1)
    assert counting.fetches == [1, 1] and again is not first
    assert again.decrypt(first.encrypt(b"same key")) == b"same key"


def test_a_dek_removed_from_the_registry_stops_decrypting_after_the_time_to_live(
    registry: LocalRegistry,
) -> None:
    counting, clock = _Counting(registry), [0]
    ring = _ring(counting, clock, ttl_ms=1_000)
    ciphertext = ring.cryptor(2).encrypt(b"secret")
    counting.forgotten.add(2)
    assert ring.cryptor(2).decrypt(ciphertext) == b"secret"  # still cached
    clock[0] = 1_000
    with pytest.raises(EncryptionKeyError, match="no DEK version 2"):
        ring.cryptor(2)


def test_a_rotated_dek_leaves_the_cache_when_it_expires(registry: LocalRegistry) -> None:
    created = registry.get_dek("kek1", SUBJECT, ALGORITHM, 1).ts
    assert created is not None
    expires = created + MILLIS_IN_DAY
    counting, clock = _Counting(registry), [expires - 10]
    ring = _ring(counting, clock, expiry_days=1, ttl_ms=60_000)
    ring.cryptor(1)
    clock[0] = expires
    ring.cryptor(1)  # expired: fetched again, then kept for the time to live
    clock[0] = expires + 59_999
    ring.cryptor(1)
    assert counting.fetches == [1, 1]


def test_the_cache_holds_at_most_its_capacity(registry: LocalRegistry) -> None:
    counting, clock = _Counting(registry), [0]
    ring = _ring(counting, clock, capacity=2)
    for version in (1, 2, 1, 3, 1, 2):
        ring.cryptor(version)
    # 3 evicts 2 (1 was used after it); 2 is fetched again and evicts 3.
    assert counting.fetches == [1, 2, 3, 2]
    assert "cached=2" in repr(ring)


def test_bad_cache_settings_are_refused(registry: LocalRegistry) -> None:
    with pytest.raises(ValueError):
        _ring(_Counting(registry), [0], capacity=0)
    with pytest.raises(ValueError):
        dek_ttl_ms(0)
    assert dek_ttl_ms(0.0001) == 1 and dek_ttl_ms(300) == 300_000
    with pytest.raises(RegistryError):
        registry.get_dek("kek1", SUBJECT, ALGORITHM, 9)
