"""Registry fixtures: a loopback Confluent-compatible REST server over an in-memory LocalRegistry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from registry_server import RegistryServer, TlsFiles, make_tls_files, running_registry

from contracts.registry.local import LocalRegistry


@pytest.fixture
def registry_server() -> Iterator[RegistryServer]:
    """A running loopback registry server, fresh and empty per test: `.url`, `.inject`, `.count`."""
    with running_registry(LocalRegistry()) as server:
        yield server


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA and the certificates it signed, for HTTPS and mutual-TLS tests."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))
