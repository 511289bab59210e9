"""The DEK registry: key encryption keys (KEKs) and the data encryption keys (DEKs) they wrap.

ENCRYPT rules keep their DEKs in the registry's DEK registry (`/dek-registry/v1/keks…`), each
DEK wrapped by a KEK held in a KMS; only the wrapped form is ever stored or sent
(docs/semantics.md §11). The shapes and field names are Confluent's REST JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from contracts.codes import DEK_ALREADY_EXISTS, KEY_NOT_FOUND
from contracts.errors import RegistryError

DEK_ALGORITHMS = ("AES128_GCM", "AES256_GCM", "AES256_SIV")
"""The algorithms a DEK may have; AES256_GCM is the default."""
DEFAULT_ALGORITHM = "AES256_GCM"
LATEST = -1
"""The version that asks `get_dek` for a subject's newest DEK (the REST API's `-1`)."""


@dataclass(frozen=True)
class Kek:
    """A key encryption key: its name and where it lives in a KMS (type, key id, properties).

    `shared` KEKs let the registry itself wrap and unwrap DEKs (it needs access to the KMS)."""

    name: str
    kms_type: str
    kms_key_id: str
    kms_props: Mapping[str, str] = field(default_factory=dict)
    doc: str | None = None
    shared: bool = False
    ts: int | None = None
    deleted: bool = False

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "name": self.name,
            "kmsType": self.kms_type,
            "kmsKeyId": self.kms_key_id,
            "shared": self.shared,
        }
        if self.kms_props:
            payload["kmsProps"] = dict(self.kms_props)
        if self.doc is not None:
            payload["doc"] = self.doc
        if self.ts is not None:
            payload["ts"] = self.ts
        if self.deleted:
            payload["deleted"] = True
        return payload

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Kek:
        return cls(
            name=_text(data, "name"),
            kms_type=_text(data, "kmsType"),
            kms_key_id=_text(data, "kmsKeyId"),
            kms_props=_string_map(data, "kmsProps"),
            doc=_optional(data, "doc", str, "a string"),
            shared=_flag(data, "shared"),
            ts=_optional(data, "ts", int, "a number"),
            deleted=_flag(data, "deleted"),
        )


@dataclass(frozen=True)
class Dek:
    """One version of a subject's data encryption key, as the registry holds it.

    `encrypted_key_material` is the DEK wrapped by its KEK (base64). `key_material` (base64) is
    the plaintext key, which only a registry with a shared KEK returns; it never prints."""

    kek_name: str
    subject: str
    version: int
    algorithm: str = DEFAULT_ALGORITHM
    encrypted_key_material: str | None = None
    key_material: str | None = field(default=None, repr=False)
    ts: int | None = None
    deleted: bool = False

    def to_dict(self, *, with_key_material: bool = False) -> dict[str, Any]:
        """The REST JSON; the plaintext key only when asked (a registry answering for a shared KEK)."""
        payload: dict[str, Any] = {
            "kekName": self.kek_name,
            "subject": self.subject,
            "version": self.version,
            "algorithm": self.algorithm,
        }
        if self.encrypted_key_material is not None:
            payload["encryptedKeyMaterial"] = self.encrypted_key_material
        if with_key_material and self.key_material is not None:
            payload["keyMaterial"] = self.key_material
        if self.ts is not None:
            payload["ts"] = self.ts
        if self.deleted:
            payload["deleted"] = True
        return payload

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Dek:
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"a DEK version is a number, not {type(version).__name__}")
        return cls(
            kek_name=_text(data, "kekName"),
            subject=_text(data, "subject"),
            version=version,
            algorithm=check_algorithm(data.get("algorithm") or DEFAULT_ALGORITHM),
            encrypted_key_material=_optional(data, "encryptedKeyMaterial", str, "a string"),
            key_material=_optional(data, "keyMaterial", str, "a string"),
            ts=_optional(data, "ts", int, "a number"),
            deleted=_flag(data, "deleted"),
        )


@runtime_checkable
class DekRegistry(Protocol):
    """What ENCRYPT rules need from a registry's DEK registry; SchemaRegistryClient and LocalRegistry
    both provide it. A missing KEK or DEK is RegistryError 40470, a conflicting create 40972."""

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
        """Create a KEK (an identical one already there is returned as it is)."""
        ...

    def get_kek(self, name: str, deleted: bool = False, context: str | None = None) -> Kek:
        """The KEK called `name` (in the registry context `context`, None for the default)."""
        ...

    def register_dek(
        self,
        kek_name: str,
        subject: str,
        encrypted_key_material: str | None,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
    ) -> Dek:
        """Create version `version` of the subject's DEK under `kek_name`, given wrapped (base64);
        None asks a registry holding a shared KEK to generate it."""
        ...

    def get_dek(
        self,
        kek_name: str,
        subject: str,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
        deleted: bool = False,
    ) -> Dek:
        """One version of the subject's DEK; `LATEST` (-1) the newest."""
        ...


def check_algorithm(algorithm: object) -> str:
    if algorithm not in DEK_ALGORITHMS:
        raise ValueError(f"unknown DEK algorithm {algorithm!r} (known: {', '.join(DEK_ALGORITHMS)})")
    return str(algorithm)


def kek_not_found(name: str) -> RegistryError:
    return RegistryError(f"Key '{name}' not found.", status=404, error_code=KEY_NOT_FOUND)


def dek_not_found(kek_name: str, subject: str, algorithm: str, version: int) -> RegistryError:
    which = "the latest version" if version == LATEST else f"version {version}"
    return RegistryError(
        f"DEK of subject '{subject}' under key '{kek_name}' ({algorithm}, {which}) not found.",
        status=404,
        error_code=KEY_NOT_FOUND,
    )


def already_exists(what: str) -> RegistryError:
    return RegistryError(f"{what} already exists.", status=409, error_code=DEK_ALREADY_EXISTS)


def redacted(answer: Any) -> Any:
    """A registry answer fit for an error message: any plaintext `keyMaterial` blanked out."""
    if isinstance(answer, Mapping) and "keyMaterial" in answer:
        return {**answer, "keyMaterial": "<redacted>"}
    return answer


def _optional(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    """`data[key]` when it is of `kind`, None when absent or null; ValueError naming the key and
    the type it has (never the value: it may be key material)."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{key!r} must be {what}, not {type(value).__name__}")
    return value


def _flag(data: Mapping[str, Any], key: str) -> bool:
    """`data[key]` as a JSON boolean (false when absent): the string "false" is no false."""
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key!r} must be true or false, not {type(value).__name__}")
    return value


def _string_map(data: Mapping[str, Any], key: str) -> dict[str, str]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{key!r} must map strings to strings")
    return dict(value)


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} must be a non-empty string, not {value!r}")
    return value
