"""The registry protocol that SchemaRegistryClient and LocalRegistry both satisfy (docs/semantics.md §9.6)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from contracts.model import RegisteredSchema, Schema


@runtime_checkable
class Registry(Protocol):
    """Everything the engine needs from a schema registry; the rest of the code depends only on this."""

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        """Register `schema` under `subject` (a new version unless already there); return its id."""
        ...

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        """Find the version of `subject` holding exactly `schema`; RegistryError 40403 if none."""
        ...

    def get_schema(self, schema_id: int) -> Schema:
        """The schema with this global id; RegistryError 40403 if unknown."""
        ...

    def get_schema_by_guid(self, guid: str) -> Schema:
        """The schema with this GUID (a UUID string, as Confluent Schema Registry 8 gives every
        schema); RegistryError 40403 if unknown."""
        ...

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        """One version of a subject (a number or "latest")."""
        ...

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The newest version of a subject."""
        ...

    def get_latest_with_metadata(self, subject: str, metadata: dict[str, str]) -> RegisteredSchema:
        """The newest version whose metadata properties include every given key/value pair."""
        ...

    def get_versions(self, subject: str) -> list[int]:
        """The version numbers of a subject, ascending."""
        ...

    def get_subjects(self) -> list[str]:
        """Every subject with at least one version."""
        ...

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Delete a subject; returns the versions deleted."""
        ...

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> int:
        """Delete one version of a subject (soft, or permanent after a soft delete); returns its number."""
        ...

    def get_config(self, subject: str | None = None, default_to_global: bool = True) -> dict[str, Any]:
        """The config (compatibility, compatibilityGroup, default/override metadata and ruleSet);
        with `default_to_global=False` only what was set on the subject itself ({} if nothing)."""
        ...

    def set_config(self, subject: str | None = None, **config: Any) -> dict[str, Any]:
        """Update config keys (camelCase names as the REST API uses); returns the new config."""
        ...

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        """Whether `schema` could be registered under `subject` given its compatibility config."""
        ...
