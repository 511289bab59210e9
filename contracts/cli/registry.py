"""The CLI's registry argument: an http(s) URL is a Schema Registry, else a LocalRegistry directory."""

from __future__ import annotations

from contracts.errors import RegistryError
from contracts.registry import LocalRegistry, Registry, SchemaRegistryClient


def is_url(spec: str) -> bool:
    """Whether `spec` names a REST registry (one URL, or several comma-separated for failover)."""
    return spec.split(",", 1)[0].strip().lower().startswith(("http://", "https://"))


def open_registry(spec: str, *, must_exist: bool = True) -> Registry:
    """The registry `spec` names. Credentials go in the URL (`https://key:secret@host`), as the
    client accepts them; a directory must already exist unless `must_exist` is False, so a typo
    does not silently create an empty registry."""
    try:
        return SchemaRegistryClient(spec) if is_url(spec) else LocalRegistry(spec, create=not must_exist)
    except ValueError as e:
        # A URL the client refuses ('http://'), a directory LocalRegistry cannot read: the
        # client's message names what is wrong and leaves any credential out.
        raise RegistryError(str(e)) from e
