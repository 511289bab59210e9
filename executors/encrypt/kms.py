"""KMS drivers: how a KEK in a KMS wraps and unwraps DEKs, found by KMS type through entry points.

A driver is registered in the entry-point group `spark_data_contracts.kms` under its KMS type
(`encrypt.kms.type`, e.g. `local-kms`), or passed as `EncryptExecutor(kms_drivers=[...])`. It
makes an `Aead` for a key id from the rule config merged with the KEK's `kmsProps`, as the
reference's `KmsDriver.new_kms_client` does (docs/semantics.md §11).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any, Protocol, runtime_checkable

from contracts.errors import DataContractError
from contracts.plugins import KMS_GROUP, InstalledPlugins


class KmsError(DataContractError):
    """A KMS that cannot be reached, configured or asked to wrap or unwrap a DEK."""


@runtime_checkable
class Aead(Protocol):
    """Authenticated encryption with one KEK: wraps and unwraps DEKs."""

    def encrypt(self, plaintext: bytes, associated_data: bytes) -> bytes: ...

    def decrypt(self, ciphertext: bytes, associated_data: bytes) -> bytes: ...


@runtime_checkable
class KmsDriver(Protocol):
    """One KMS type: makes the Aead of a key id from configuration (secrets, credentials)."""

    kms_type: str

    def new_aead(self, config: Mapping[str, str], kms_key_id: str) -> Aead: ...


def import_sdk(module: str, kms_type: str, extra: str) -> Any:
    """A cloud driver's SDK module, imported when the driver is first used (so the engine runs
    without it); a missing SDK is a KmsError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise KmsError(
            f"the {kms_type} KMS driver needs {module!r}: pip install 'spark-data-contracts[{extra}]' ({e})"
        ) from e


def key_path(kms_key_id: str, kms_type: str) -> str:
    """A KEK's key id without its optional `<kms type>://` prefix (the reference joins the KMS type
    and the KEK's key id into that key URL; a key id given as the URL is the same key)."""
    prefix = f"{kms_type}://"
    path = kms_key_id[len(prefix) :] if kms_key_id.startswith(prefix) else kms_key_id
    if not path:
        raise KmsError(f"{kms_type} needs a kms key id, got {kms_key_id!r}")
    return path


def find_driver(kms_type: str, extra: Iterable[KmsDriver] = ()) -> KmsDriver:
    """The driver for `kms_type`: one given to the executor first, else the entry point's."""
    for driver in extra:
        if driver.kms_type == kms_type:
            return driver
    installed = _INSTALLED.find(kms_type)
    if installed is None:
        known = ", ".join(sorted({*_INSTALLED.names(), *(d.kms_type for d in extra)})) or "none"
        raise KmsError(f"no KMS driver for kms type {kms_type!r} (known: {known})")
    return installed


_INSTALLED: InstalledPlugins[KmsDriver] = InstalledPlugins(
    KMS_GROUP, attrgetter("kms_type"), error=lambda message: KmsError(f"KMS driver: {message}")
)
"""The drivers of the entry-point group (contracts.plugins), loaded once per process."""
