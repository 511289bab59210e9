"""The DEK registry's REST calls (`/dek-registry/v1/keks…`) for SchemaRegistryClient.

Each function takes the client's `request(method, path, params=, body=)` and returns the model
object; an answer of the wrong shape is a RegistryError that never quotes plaintext key material.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts.errors import RegistryError
from contracts.registry.dek import DEFAULT_ALGORITHM, Dek, Kek, check_algorithm, redacted
from contracts.registry.http_urls import api_path

Request = Callable[..., Any]
_ROOT = ("dek-registry", "v1", "keks")


def register_kek(
    request: Request,
    name: str,
    kms_type: str,
    kms_key_id: str,
    shared: bool,
    kms_props: Mapping[str, str] | None,
    doc: str | None,
    context: str | None,
) -> Kek:
    body: dict[str, Any] = {"name": name, "kmsType": kms_type, "kmsKeyId": kms_key_id, "shared": shared}
    if kms_props:
        body["kmsProps"] = dict(kms_props)
    if doc is not None:
        body["doc"] = doc
    params = {"context": context} if context is not None else None
    answer = request("POST", api_path(*_ROOT), params=params, body=body)
    kek = _model("POST /dek-registry/v1/keks", answer, Kek.from_dict)
    _check("POST /dek-registry/v1/keks", {"KEK": (name, kek.name)})
    return kek


def get_kek(request: Request, name: str, deleted: bool, context: str | None) -> Kek:
    params = {"deleted": _flag(deleted)}
    if context is not None:
        params["context"] = context
    answer = request("GET", api_path(*_ROOT, name), params=params)
    kek = _model("GET /dek-registry/v1/keks/{name}", answer, Kek.from_dict)
    _check("GET /dek-registry/v1/keks/{name}", {"KEK": (name, kek.name)})
    return kek


def register_dek(
    request: Request,
    kek_name: str,
    subject: str,
    encrypted_key_material: str | None,
    algorithm: str,
    version: int,
) -> Dek:
    body: dict[str, Any] = {"subject": subject, "version": version, "algorithm": check_algorithm(algorithm)}
    if encrypted_key_material is not None:
        body["encryptedKeyMaterial"] = encrypted_key_material
    answer = request("POST", api_path(*_ROOT, kek_name, "deks", subject), body=body)
    call = "POST /dek-registry/v1/keks/{name}/deks/{subject}"
    dek = _model(call, answer, Dek.from_dict)
    _check(call, _dek_identity(dek, kek_name, subject, algorithm, version))
    return dek


def get_dek(
    request: Request,
    kek_name: str,
    subject: str,
    algorithm: str = DEFAULT_ALGORITHM,
    version: int = 1,
    deleted: bool = False,
) -> Dek:
    params = {"algorithm": check_algorithm(algorithm), "deleted": _flag(deleted)}
    path = api_path(*_ROOT, kek_name, "deks", subject, "versions", version)
    answer = request("GET", path, params=params)
    call = "GET /dek-registry/v1/keks/{name}/deks/{subject}/versions/{version}"
    dek = _model(call, answer, Dek.from_dict)
    _check(call, _dek_identity(dek, kek_name, subject, algorithm, None if version == -1 else version))
    return dek


def _dek_identity(
    dek: Dek, kek_name: str, subject: str, algorithm: str, version: int | None
) -> dict[str, tuple[Any, Any]]:
    """What a DEK answer must repeat of its request (`version` None: the newest, any number)."""
    pairs: dict[str, tuple[Any, Any]] = {
        "KEK": (kek_name, dek.kek_name),
        "subject": (subject, dek.subject),
        "algorithm": (algorithm, dek.algorithm),
    }
    if version is not None:
        pairs["version"] = (version, dek.version)
    return pairs


def _check(call: str, pairs: Mapping[str, tuple[Any, Any]]) -> None:
    """A key answer about another KEK, subject, algorithm or version than the one asked for is a
    RegistryError naming both: its key would encrypt or decrypt under the wrong name."""
    wrong = {label: pair for label, pair in pairs.items() if pair[0] != pair[1]}
    if wrong:
        asked = ", ".join(f"{label} {asked!r}" for label, (asked, _) in wrong.items())
        given = ", ".join(f"{label} {given!r}" for label, (_, given) in wrong.items())
        raise RegistryError(f"the schema registry answered {call} for {asked} with {given}")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _model(call: str, answer: Any, parse: Callable[[Mapping[str, Any]], Any]) -> Any:
    if isinstance(answer, Mapping):
        try:
            return parse(answer)
        except (TypeError, ValueError, AttributeError) as error:
            reason = f"{type(error).__name__}: {error}"
        else:  # pragma: no cover - parse returned
            reason = ""
    else:
        reason = "not an object"
    raise RegistryError(
        f"the schema registry answered {call} with {repr(redacted(answer))[:200]}; expected a valid answer"
        f" ({reason})"
    )
