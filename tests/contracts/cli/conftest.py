"""Fixtures of the CLI tests: the users contract in a directory, a registry server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import write_version
from cli_users import RULES, SUBJECT, contract_payload
from registry_server import RegistryServer, running_registry

from contracts import LocalRegistry


@pytest.fixture
def users_dir(tmp_path: Path) -> Path:
    root = tmp_path / "contracts"
    write_version(root, SUBJECT, 1, contract_payload(RULES))
    return root


@pytest.fixture
def server() -> Iterator[RegistryServer]:
    with running_registry(LocalRegistry()) as running:
        yield running
