"""spark-data-contracts: Confluent Schema Registry data-contract rules, executed on Spark DataFrames."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.errors import (
    ContractError,
    ContractWarning,
    DataContractError,
    RegistryError,
    RuleError,
    SerializationError,
)
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
from contracts.registry.dek import Dek, DekRegistry, Kek

__version__ = "0.2.0"
"""The project's version (the package's too: pyproject.toml reads it from here); see CHANGELOG.md."""

__all__ = [
    "ActionContext",
    "ActionPlan",
    "ContractError",
    "ContractWarning",
    "DataContract",
    "DataContractError",
    "Dek",
    "DekRegistry",
    "DlqAction",
    "DlqError",
    "DlqRecord",
    "DlqSink",
    "Effect",
    "EncryptExecutor",
    "ErrorAction",
    "KafkaTopicSink",
    "Kek",
    "KmsDriver",
    "LocalKmsDriver",
    "LocalRegistry",
    "LocalTopicSink",
    "Metadata",
    "NoneAction",
    "RegisteredSchema",
    "Registry",
    "RegistryError",
    "Rule",
    "RuleCounts",
    "RuleError",
    "RuleKind",
    "RuleMetrics",
    "RuleMode",
    "RuleResult",
    "RuleSet",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SerializationError",
    "SubjectNameStrategy",
    "decode_dlq",
    "metrics_of",
    "remap_schema_ids",
]

# The engine and the actions import contracts' model and errors, so their public names are
# resolved on first use rather than at import time (an eager import would be circular); type
# checkers read the same names from the TYPE_CHECKING imports below.
if TYPE_CHECKING:
    from actions.builtin import DlqAction, ErrorAction, NoneAction
    from actions.dlq.frame import decode_dlq
    from actions.dlq.kafka_topic import KafkaTopicSink
    from actions.dlq.local_topic import LocalTopicSink
    from actions.dlq.sink import DlqError, DlqRecord, DlqSink
    from actions.protocol import ActionContext, ActionPlan, Effect
    from contracts.contract import DataContract, RuleResult
    from contracts.formats.wire import SubjectNameStrategy
    from contracts.metrics import RuleCounts, RuleMetrics, metrics_of
    from contracts.remap import remap_schema_ids
    from executors.encrypt import EncryptExecutor, KmsDriver, LocalKmsDriver

_LAZY = {
    "DataContract": "contracts.contract",
    "RuleCounts": "contracts.metrics",
    "RuleMetrics": "contracts.metrics",
    "metrics_of": "contracts.metrics",
    "RuleResult": "contracts.contract",
    "ActionContext": "actions.protocol",
    "ActionPlan": "actions.protocol",
    "Effect": "actions.protocol",
    "DlqAction": "actions.builtin",
    "ErrorAction": "actions.builtin",
    "NoneAction": "actions.builtin",
    "LocalTopicSink": "actions.dlq.local_topic",
    "KafkaTopicSink": "actions.dlq.kafka_topic",
    "DlqError": "actions.dlq.sink",
    "DlqRecord": "actions.dlq.sink",
    "DlqSink": "actions.dlq.sink",
    "decode_dlq": "actions.dlq.frame",
    "remap_schema_ids": "contracts.remap",
    "SubjectNameStrategy": "contracts.formats.wire",
    "EncryptExecutor": "executors.encrypt",
    "KmsDriver": "executors.encrypt",
    "LocalKmsDriver": "executors.encrypt",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'contracts' has no attribute {name!r}")
