"""A rule's keys: its KEK from the DEK registry and the subject's DEKs, unwrapped through the KMS.

`ensure_dek` runs on the driver when a WRITE rule compiles, and on a worker when the DEK it
encrypts with is stale (rotation.py): it finds the subject's DEK (the newest, with
`encrypt.dek.expiry.days`) or creates it, wrapped by the KEK, as the reference's
`_get_or_create_dek` does on produce. `KeyRing` runs on each worker: it fetches the KEK and a DEK
version from the registry and unwraps it once, keeping at most `capacity` unwrapped DEKs, each
for at most `ttl_ms` and not past the DEK's own expiry, so a DEK removed from the registry (or a
KEK revoked in the KMS) stops decrypting on the workers too.
"""

from __future__ import annotations

import base64
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from contracts.codes import DEK_ALREADY_EXISTS, KEY_NOT_FOUND
from contracts.errors import DataContractError, RegistryError
from contracts.registry.dek import LATEST, Dek, DekRegistry, Kek
from contracts.registry.local import copy_note
from executors.encrypt.cryptor import EMPTY_AAD, Cryptor, cryptor, generate_key_material
from executors.encrypt.kms import KmsDriver, KmsError, find_driver

ALTERNATE_KMS_KEY_IDS = "encrypt.alternate.kms.key.ids"
MILLIS_IN_DAY = 24 * 60 * 60 * 1000
DEFAULT_CAPACITY = 1000
DEFAULT_TTL_MS = 5 * 60 * 1000


class EncryptionKeyError(DataContractError):
    """A KEK or DEK that cannot be found, created or unwrapped; the message never holds key bytes."""


@dataclass(frozen=True)
class KeySpec:
    """Which keys a rule uses: its KEK (and the KMS the rule names), the subject and the algorithm."""

    kek_name: str
    kms_type: str | None
    kms_key_id: str | None
    subject: str
    algorithm: str
    expiry_days: int = 0

    @property
    def rotated(self) -> bool:
        return self.expiry_days > 0

    @property
    def context(self) -> str | None:
        """The registry context of a qualified subject (`:.ctx:subject`), as the reference finds it."""
        prefix = ":."
        if not self.subject.startswith(prefix):
            return None
        rest = self.subject[len(prefix) :]
        end = rest.find(":")
        context = self.subject[1 : end + len(prefix)] if end >= 0 else self.subject[1:]
        return None if context == "." else context


def ensure_dek(
    spec: KeySpec,
    registry: DekRegistry,
    config: Mapping[str, str],
    drivers: Iterable[KmsDriver],
    now_millis: Callable[[], int],
) -> Dek:
    """The subject's DEK a WRITE encrypts with, registering the KEK and a new DEK (version 1, or the
    next one when the newest has expired) where needed."""
    kek = _kek(spec, registry, create=True)
    wanted = LATEST if spec.rotated else 1
    dek = _dek(spec, registry, kek, wanted)
    expired = (
        spec.rotated and dek is not None and (now_millis() - (dek.ts or 0)) / MILLIS_IN_DAY > spec.expiry_days
    )
    if dek is not None and not expired:
        return dek
    wrapped = None
    if not kek.shared:
        material = generate_key_material(spec.algorithm)
        wrapped = base64.b64encode(_wrapping(kek, config, drivers, "wrap", material)).decode("ascii")
    version = dek.version + 1 if dek is not None else 1
    try:
        created = registry.register_dek(kek.name, spec.subject, wrapped, spec.algorithm, version)
    except RegistryError as e:
        if e.error_code != DEK_ALREADY_EXISTS and e.status != 409:
            raise EncryptionKeyError(
                f"could not register DEK version {version} for KEK {kek.name!r}: {e}"
            ) from e
        # Another writer created it first: use theirs.
        created = _dek(spec, registry, kek, wanted) or dek
        if created is None:
            raise EncryptionKeyError(f"no DEK found for KEK {kek.name!r} after a conflicting create") from e
    return created


def kek_problem(
    spec: KeySpec, registry: DekRegistry, drivers: Iterable[KmsDriver], *, reading: bool
) -> str | None:
    """Why the rule could not have its KEK, judged without changing the registry: absent (on WRITE
    with no KMS to create it from; `reading`, where nothing creates it, at all), of another KMS than
    the rule names, or on a KMS type no driver serves; None when it could, or when the registry
    does not answer (nothing to judge)."""
    try:
        kek = registry.get_kek(spec.kek_name, context=spec.context)
    except RegistryError as e:
        if not _not_found(e):
            return None
        if reading:
            return f"no KEK {spec.kek_name!r} in the DEK registry to decrypt with"
        if not spec.kms_type or not spec.kms_key_id:
            missing = "encrypt.kms.type" if not spec.kms_type else "encrypt.kms.key.id"
            return f"no KEK {spec.kek_name!r} in the DEK registry and no {missing} to create it"
        return _no_driver(spec.kek_name, spec.kms_type, drivers)
    return _mismatch(spec, kek) or _no_driver(kek.name, kek.kms_type, drivers)


def _no_driver(kek_name: str, kms_type: str, drivers: Iterable[KmsDriver]) -> str | None:
    """Why no KMS driver could wrap or unwrap with the KEK, if none serves its KMS type."""
    try:
        find_driver(kms_type, drivers)
    except KmsError as e:
        return f"KEK {kek_name!r} cannot be used: {e}"
    return None


class KeyRing:
    """A worker's keys for one rule: the KEK, and unwrapped DEKs by version (bounded LRU), each kept
    until `ttl_ms` after it was fetched or its DEK expires (`encrypt.dek.expiry.days`), whichever
    comes first, then fetched and unwrapped again (with the KEK). `now_millis_fn` is the clock."""

    def __init__(
        self,
        spec: KeySpec,
        registry: DekRegistry,
        config: Mapping[str, str],
        drivers: Iterable[KmsDriver],
        capacity: int = DEFAULT_CAPACITY,
        ttl_ms: int = DEFAULT_TTL_MS,
        now_millis_fn: Callable[[], int] | None = None,
    ) -> None:
        if capacity < 1 or ttl_ms < 1:
            raise ValueError(f"a DEK cache holds at least one DEK for 1 ms, not {capacity} for {ttl_ms} ms")
        self.spec = spec
        self._registry = registry
        self._config = config
        self._drivers = tuple(drivers)
        self._capacity = capacity
        self._ttl_ms = ttl_ms
        self._now = now_millis_fn or now_millis
        self._kek: Kek | None = None
        self._cryptors: OrderedDict[int, tuple[Cryptor, int]] = OrderedDict()

    def __repr__(self) -> str:
        spec = self.spec
        return f"KeyRing(kek={spec.kek_name!r}, subject={spec.subject!r}, cached={len(self._cryptors)})"

    def cryptor(self, version: int) -> Cryptor:
        """The DEK `version` of the subject, unwrapped (fetched and unwrapped again once expired)."""
        now = self._now()
        found = self._cryptors.get(version)
        if found is not None and now < found[1]:
            self._cryptors.move_to_end(version)
            return found[0]
        if found is not None:
            del self._cryptors[version]
            self._kek = None  # fetched again with the DEK: it may have changed or gone too
        if self._kek is None:
            self._kek = _kek(self.spec, self._registry, create=False)
        dek = _dek(self.spec, self._registry, self._kek, version)
        if dek is None:
            raise EncryptionKeyError(
                f"no DEK version {version} of subject {self.spec.subject!r} under KEK {self.spec.kek_name!r}"
                f" ({self.spec.algorithm}){copy_note(self._registry)}"
            )
        made = cryptor(self.spec.algorithm, self._key_material(self._kek, dek))
        self._cryptors[version] = (made, self._expiry(dek, now))
        if len(self._cryptors) > self._capacity:
            self._cryptors.popitem(last=False)
        return made

    def _expiry(self, dek: Dek, now: int) -> int:
        """When a DEK fetched `now` leaves the cache: after the TTL, or when the DEK expires if
        that comes first (one that has already expired, read for old records, keeps the TTL)."""
        expiry = now + self._ttl_ms
        if self.spec.rotated and dek.ts is not None:
            expires = dek.ts + self.spec.expiry_days * MILLIS_IN_DAY
            if expires > now:
                expiry = min(expiry, expires)
        return expiry

    def _key_material(self, kek: Kek, dek: Dek) -> bytes:
        if dek.key_material:  # a shared KEK: the registry unwrapped it
            return base64.b64decode(dek.key_material)
        if not dek.encrypted_key_material:
            raise EncryptionKeyError(f"DEK version {dek.version} of KEK {kek.name!r} holds no key material")
        wrapped = base64.b64decode(dek.encrypted_key_material)
        return _wrapping(kek, self._config, self._drivers, "unwrap", wrapped)


def _kek(spec: KeySpec, registry: DekRegistry, *, create: bool) -> Kek:
    """The rule's KEK; on WRITE registered from the rule's KMS type and key id when missing. A KEK
    whose KMS differs from the one the rule names is an error, as in the reference."""
    try:
        kek = registry.get_kek(spec.kek_name, context=spec.context)
    except RegistryError as e:
        if not _not_found(e):
            raise EncryptionKeyError(f"could not get KEK {spec.kek_name!r}: {e}") from e
        absent = f"no KEK named {spec.kek_name!r} for subject {spec.subject!r} in the DEK registry"
        if not create:
            raise EncryptionKeyError(f"{absent}{copy_note(registry)}") from e
        if not spec.kms_type or not spec.kms_key_id:
            missing = "encrypt.kms.type" if not spec.kms_type else "encrypt.kms.key.id"
            raise EncryptionKeyError(f"{absent} and no {missing} to create it") from e
        try:
            kek = registry.register_kek(spec.kek_name, spec.kms_type, spec.kms_key_id, context=spec.context)
        except RegistryError as conflict:
            if conflict.error_code != DEK_ALREADY_EXISTS and conflict.status != 409:
                raise EncryptionKeyError(
                    f"could not register KEK {spec.kek_name!r}: {conflict}"
                ) from conflict
            kek = registry.get_kek(spec.kek_name, context=spec.context)
    mismatch = _mismatch(spec, kek)
    if mismatch is not None:
        raise EncryptionKeyError(mismatch)
    return kek


def _mismatch(spec: KeySpec, kek: Kek) -> str | None:
    """How the KEK's KMS differs from the one the rule names, if it does."""
    if spec.kms_type and kek.kms_type != spec.kms_type:
        return f"KEK {kek.name!r} has kms type {kek.kms_type!r}, the rule names {spec.kms_type!r}"
    if spec.kms_key_id and kek.kms_key_id != spec.kms_key_id:
        return f"KEK {kek.name!r} has kms key id {kek.kms_key_id!r}, the rule names {spec.kms_key_id!r}"
    return None


def _dek(spec: KeySpec, registry: DekRegistry, kek: Kek, version: int) -> Dek | None:
    try:
        dek = registry.get_dek(kek.name, spec.subject, spec.algorithm, version)
    except RegistryError as e:
        if _not_found(e):
            return None
        raise EncryptionKeyError(
            f"could not get the DEK of subject {spec.subject!r} under KEK {kek.name!r}: {e}"
        ) from e
    return dek if dek.encrypted_key_material or dek.key_material else None


def _wrapping(
    kek: Kek, config: Mapping[str, str], drivers: Iterable[KmsDriver], doing: str, data: bytes
) -> bytes:
    """`data` wrapped (or unwrapped) by the KEK, trying its KMS key id, then each alternate one."""
    settings = {**config, **kek.kms_props}
    alternates = kek.kms_props.get(ALTERNATE_KMS_KEY_IDS) or config.get(ALTERNATE_KMS_KEY_IDS) or ""
    key_ids = [kek.kms_key_id, *(key_id.strip() for key_id in alternates.split(",") if key_id.strip())]
    failures: list[str] = []
    for key_id in key_ids:
        try:
            aead = find_driver(kek.kms_type, drivers).new_aead(settings, key_id)
            if doing == "wrap":
                return aead.encrypt(data, EMPTY_AAD)
            return aead.decrypt(data, EMPTY_AAD)
        except KmsError as e:
            failures.append(str(e))
        except Exception as e:  # a KMS's own failure (wrong KEK: an authentication tag mismatch)
            failure = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            if type(e).__name__ == "InvalidTag":
                failure += " (wrong KMS secret or KEK?)"
            failures.append(failure)
    raise EncryptionKeyError(
        f"could not {doing} a DEK with KEK {kek.name!r} ({kek.kms_type}): {'; '.join(failures)}"
    )


def _not_found(error: RegistryError) -> bool:
    return error.status == 404 or error.error_code == KEY_NOT_FOUND


def dek_ttl_ms(seconds: float) -> int:
    """A DEK cache's time to live in milliseconds, from seconds (more than 0)."""
    if not seconds > 0:
        raise ValueError(f"dek_cache_ttl_s must be more than 0 seconds, not {seconds!r}")
    return max(1, round(seconds * 1000))


def now_millis() -> int:
    """The time, in epoch milliseconds: DEK timestamps' unit."""
    return int(time.time() * 1000)
