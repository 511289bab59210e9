"""The ENCRYPT rule type: field-level encryption with DEKs from the DEK registry (docs/semantics.md §11)."""

from __future__ import annotations

from executors.encrypt.executor import EncryptExecutor
from executors.encrypt.kms import KMS_GROUP, Aead, KmsDriver, KmsError
from executors.encrypt.localkms import LocalKmsDriver

__all__ = ["KMS_GROUP", "Aead", "EncryptExecutor", "KmsDriver", "KmsError", "LocalKmsDriver"]
