"""Registry fixtures: a loopback Confluent-compatible REST server with an in-memory registry behind it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from registry_server import RegistryServer, TlsFiles, make_tls_files, running_registry

from contracts.errors import RegistryError
from contracts.model import RegisteredSchema, Schema
from contracts.registry import Registry


class _FakeRegistry:
    """Stand-in until LocalRegistry lands."""

    def __init__(self) -> None:
        self.subjects: dict[str, list[RegisteredSchema]] = {}
        self.ids: dict[str, int] = {}
        self.schemas: dict[int, Schema] = {}
        self.config: dict[str | None, dict[str, Any]] = {None: {"compatibility": "BACKWARD"}}

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        key = json.dumps(schema.to_dict(), sort_keys=True)
        for found in self.subjects.get(subject, []):
            if json.dumps(found.schema.to_dict(), sort_keys=True) == key:
                return found.schema_id
        schema_id = self.ids.setdefault(key, len(self.ids) + 1)
        self.schemas[schema_id] = schema
        versions = self.subjects.setdefault(subject, [])
        versions.append(RegisteredSchema(schema_id, schema, subject, len(versions) + 1))
        return schema_id

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        for found in self._versions(subject):
            if found.schema == schema:
                return found
        raise RegistryError("Schema not found", status=404, error_code=40403)

    def get_schema(self, schema_id: int) -> Schema:
        if schema_id not in self.schemas:
            raise RegistryError(f"Schema {schema_id} not found", status=404, error_code=40403)
        return self.schemas[schema_id]

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        versions = self._versions(subject)
        if version == "latest":
            return versions[-1]
        for found in versions:
            if found.version == version:
                return found
        raise RegistryError(f"Version {version} not found.", status=404, error_code=40402)

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        return self._versions(subject)[-1]

    def get_latest_with_metadata(self, subject: str, metadata: dict[str, str]) -> RegisteredSchema:
        for found in reversed(self._versions(subject)):
            if metadata.items() <= found.schema.properties.items():
                return found
        raise RegistryError("Schema not found", status=404, error_code=40403)

    def get_versions(self, subject: str) -> list[int]:
        return [found.version for found in self._versions(subject)]

    def get_subjects(self) -> list[str]:
        return sorted(self.subjects)

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        versions = self.get_versions(subject)
        del self.subjects[subject]
        return versions

    def get_config(self, subject: str | None = None) -> dict[str, Any]:
        return {**self.config[None], **self.config.get(subject, {})}

    def set_config(self, subject: str | None = None, **config: Any) -> dict[str, Any]:
        self.config.setdefault(subject, {}).update(config)
        return self.get_config(subject)

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        self.get_version(subject, version)
        return True

    def _versions(self, subject: str) -> list[RegisteredSchema]:
        if subject not in self.subjects:
            raise RegistryError(f"Subject '{subject}' not found.", status=404, error_code=40401)
        return self.subjects[subject]


@pytest.fixture
def make_registry() -> Callable[[], Registry]:
    """Makes a fresh, empty in-memory registry (to serve with `running_registry`, say with auth)."""
    return _FakeRegistry


@pytest.fixture
def registry_server(make_registry: Callable[[], Registry]) -> Iterator[RegistryServer]:
    """A running loopback registry server (fresh and empty per test); use `.url`, `.inject`, `.count`."""
    with running_registry(make_registry()) as server:
        yield server


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA and the certificates it signed, for HTTPS and mutual-TLS tests."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))
