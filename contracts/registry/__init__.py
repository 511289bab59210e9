"""Schema registries: one protocol, an HTTP client for Confluent's REST API and an embedded local one."""

from __future__ import annotations

from contracts.registry.dek import Dek, DekRegistry, Kek
from contracts.registry.http import SchemaRegistryClient
from contracts.registry.local import LocalRegistry
from contracts.registry.protocol import Registry

__all__ = ["Dek", "DekRegistry", "Kek", "LocalRegistry", "Registry", "SchemaRegistryClient"]
