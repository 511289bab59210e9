"""The ENCRYPT and ENCRYPT_PAYLOAD rule types: fields or whole payloads encrypted with DEKs from the
DEK registry (docs/semantics.md §11)."""

from __future__ import annotations

from executors.encrypt.executor import EncryptExecutor
from executors.encrypt.kms import KMS_GROUP, Aead, KmsDriver, KmsError
from executors.encrypt.localkms import LocalKmsDriver
from executors.encrypt.payload import EncryptPayloadExecutor

__all__ = [
    "KMS_GROUP",
    "Aead",
    "EncryptExecutor",
    "EncryptPayloadExecutor",
    "KmsDriver",
    "KmsError",
    "LocalKmsDriver",
]
