"""spark-data-contracts: Confluent Schema Registry data-contract rules, executed on Spark DataFrames."""

from __future__ import annotations

from contracts.errors import ContractError, DataContractError, RegistryError, RuleError, SerializationError
from contracts.model import (
    Metadata,
    RegisteredSchema,
    Rule,
    RuleKind,
    RuleMode,
    RuleSet,
    Schema,
    SchemaReference,
)
from contracts.registry import LocalRegistry, Registry, SchemaRegistryClient

__all__ = [
    "ContractError",
    "DataContractError",
    "LocalRegistry",
    "Metadata",
    "RegisteredSchema",
    "Registry",
    "RegistryError",
    "Rule",
    "RuleError",
    "RuleKind",
    "RuleMode",
    "RuleSet",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SerializationError",
]
