"""LocalRegistry's DEK registry: KEKs and wrapped DEKs, in memory or as JSON files on disk.

On disk they live under `<root>/.dek-registry/` (hidden, so never taken for a subject)::

    keks/<context>/<kek name>.json                      one KEK
    deks/<kek name>/<subject>/<algorithm>/<version>.json one DEK version, wrapped

Names are written as subject directories are (`layout.directory_name`); the default context is
`.`. Only wrapped key material (`encryptedKeyMaterial`) is ever stored: a DEK without it is
refused, since generating one would need the KEK's KMS (docs/semantics.md §11).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from contracts.codes import INVALID_SCHEMA
from contracts.errors import ContractError, RegistryError
from contracts.registry.dek import (
    DEFAULT_ALGORITHM,
    LATEST,
    Dek,
    Kek,
    already_exists,
    check_algorithm,
    dek_not_found,
    kek_not_found,
)
from contracts.registry.layout import MAX_ID, directory_name, json_files, read_json, write_json

DEK_DIRECTORY = ".dek-registry"
_VERSION_FILE = re.compile(r"[1-9][0-9]{0,9}\.json")
_DEFAULT_CONTEXT = "."
T = TypeVar("T")


@dataclass
class _Memory:
    keks: dict[tuple[str, str], Kek] = field(default_factory=dict)
    deks: dict[tuple[str, str, str], dict[int, Dek]] = field(default_factory=dict)


class LocalDekStore:
    """The KEKs and DEKs of one LocalRegistry; `exclusive` is the registry's lock for changes."""

    def __init__(self, root: Path | None, exclusive: Callable[[], AbstractContextManager[None]]) -> None:
        self._root = None if root is None else root / DEK_DIRECTORY
        self._exclusive = exclusive
        self._memory = _Memory()

    def __getstate__(self) -> dict[str, object]:
        return {"root": self._root, "memory": self._memory if self._root is None else _Memory()}

    def __setstate__(self, state: dict[str, object]) -> None:
        self._root = state["root"]  # type: ignore[assignment]
        self._memory = state["memory"]  # type: ignore[assignment]

    def bind(self, exclusive: Callable[[], AbstractContextManager[None]]) -> None:
        """Use the (unpickled) registry's lock."""
        self._exclusive = exclusive

    def register_kek(
        self,
        name: str,
        kms_type: str,
        kms_key_id: str,
        shared: bool = False,
        kms_props: Mapping[str, str] | None = None,
        doc: str | None = None,
        context: str | None = None,
    ) -> Kek:
        if not name or not kms_type or not kms_key_id:
            raise _invalid("a KEK needs a name, a kmsType and a kmsKeyId")
        kek = Kek(name, kms_type, kms_key_id, dict(kms_props or {}), doc, shared, _now())
        with self._exclusive():
            existing = self._kek(name, context)
            if existing is not None:
                if _same_kek(existing, kek):
                    return existing
                raise already_exists(f"Key '{name}'")
            self._put_kek(kek, context)
        return kek

    def get_kek(self, name: str, deleted: bool = False, context: str | None = None) -> Kek:
        kek = self._kek(name, context)
        if kek is None:
            raise kek_not_found(name)
        return kek

    def register_dek(
        self,
        kek_name: str,
        subject: str,
        encrypted_key_material: str | None,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
    ) -> Dek:
        algorithm = _algorithm(algorithm)
        if not isinstance(version, int) or not 1 <= version <= MAX_ID:
            raise _invalid(f"a DEK version is from 1 to {MAX_ID}, not {version!r}")
        if not encrypted_key_material:
            raise _invalid(
                "LocalRegistry stores only wrapped DEKs: give encryptedKeyMaterial (a shared KEK, "
                "whose DEKs the registry generates, needs a registry with access to the KMS)"
            )
        dek = Dek(kek_name, subject, version, algorithm, encrypted_key_material, ts=_now())
        with self._exclusive():
            self.get_kek(kek_name)
            existing = None
            if version in self._version_numbers(kek_name, subject, algorithm):
                existing = self._dek(kek_name, subject, algorithm, version)
            if existing is not None:
                if existing.encrypted_key_material == encrypted_key_material:
                    return existing
                raise already_exists(f"DEK version {version} of subject '{subject}' under key '{kek_name}'")
            self._put_dek(dek)
        return dek

    def get_dek(
        self,
        kek_name: str,
        subject: str,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
        deleted: bool = False,
    ) -> Dek:
        algorithm = _algorithm(algorithm)
        self.get_kek(kek_name)
        numbers = self._version_numbers(kek_name, subject, algorithm)
        number = max(numbers, default=None) if version == LATEST else version
        if number is None or number not in numbers:
            raise dek_not_found(kek_name, subject, algorithm, version)
        return self._dek(kek_name, subject, algorithm, number)

    # -- storage -----------------------------------------------------------------------------

    def _kek(self, name: str, context: str | None) -> Kek | None:
        if self._root is None:
            return self._memory.keks.get((context or _DEFAULT_CONTEXT, name))
        path = self._kek_file(name, context)
        if not path.is_file():
            return None
        return _parsed(path, Kek.from_dict)

    def _put_kek(self, kek: Kek, context: str | None) -> None:
        if self._root is None:
            self._memory.keks[(context or _DEFAULT_CONTEXT, kek.name)] = kek
        else:
            write_json(self._kek_file(kek.name, context), kek.to_dict())

    def _version_numbers(self, kek_name: str, subject: str, algorithm: str) -> set[int]:
        """The DEK versions stored, by their file names alone: a file that cannot be read fails
        only the lookups of its own version."""
        if self._root is None:
            return set(self._memory.deks.get((kek_name, subject, algorithm), {}))
        directory = self._dek_directory(kek_name, subject, algorithm)
        if not directory.is_dir():
            return set()
        return {int(path.stem) for path, _ in json_files(directory) if _VERSION_FILE.fullmatch(path.name)}

    def _dek(self, kek_name: str, subject: str, algorithm: str, version: int) -> Dek:
        if self._root is None:
            return self._memory.deks[(kek_name, subject, algorithm)][version]
        path = self._dek_directory(kek_name, subject, algorithm) / f"{version}.json"
        dek = _parsed(path, Dek.from_dict)
        if dek.version != version:
            raise RegistryError(f"cannot read {path}: it holds DEK version {dek.version}", status=500)
        return dek

    def _put_dek(self, dek: Dek) -> None:
        if self._root is None:
            self._memory.deks.setdefault((dek.kek_name, dek.subject, dek.algorithm), {})[dek.version] = dek
        else:
            directory = self._dek_directory(dek.kek_name, dek.subject, dek.algorithm)
            write_json(directory / f"{dek.version}.json", dek.to_dict())

    def _kek_file(self, name: str, context: str | None) -> Path:
        assert self._root is not None
        context_name = directory_name(context or _DEFAULT_CONTEXT)
        return self._root / "keks" / context_name / f"{directory_name(name)}.json"

    def _dek_directory(self, kek_name: str, subject: str, algorithm: str) -> Path:
        assert self._root is not None
        return self._root / "deks" / directory_name(kek_name) / directory_name(subject) / algorithm


def _same_kek(one: Kek, other: Kek) -> bool:
    return (one.kms_type, one.kms_key_id, dict(one.kms_props), one.shared) == (
        other.kms_type,
        other.kms_key_id,
        dict(other.kms_props),
        other.shared,
    )


def _algorithm(algorithm: str) -> str:
    try:
        return check_algorithm(str(algorithm))
    except ValueError as error:
        raise _invalid(str(error)) from error


def _parsed(path: Path, parse: Callable[[Any], T]) -> T:
    """A stored KEK or DEK; a file that is not one (unreadable, not JSON, missing fields) is a
    RegistryError naming it, as a registry's backend error: the rules using the key fail their
    records with it, and the contract still loads (docs/semantics.md §11.2)."""
    try:
        payload = read_json(path, None, None)
    except ContractError as error:
        raise RegistryError(f"cannot read {path}: {error.__cause__ or error}", status=500) from error
    try:
        return parse(payload)
    except (TypeError, ValueError, AttributeError) as error:
        raise RegistryError(f"cannot read {path}: {error}", status=500) from error


def _invalid(message: str) -> RegistryError:
    return RegistryError(message, status=422, error_code=INVALID_SCHEMA)


def _now() -> int:
    return int(time.time() * 1000)
