"""Confluent Schema Registry error codes by name: the `error_code` of a RegistryError.

The HTTP client reports the registry's own codes; the local registry answers with the same codes
for the same situations, so callers test `error.error_code` against these names on either.
"""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMA_VERSION_SOFT_DELETED = 40406
SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_CONFIG_NOT_FOUND = 40408
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_SUBJECT = 42208
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
FORWARDING_ERROR = 50003
KEY_NOT_FOUND = 40470
"""The DEK registry's: no KEK, or no DEK, by that name/version."""
DEK_ALREADY_EXISTS = 40972
"""The DEK registry's: a KEK or DEK version is already there (and differs)."""

NOT_REGISTERED = frozenset({SUBJECT_NOT_FOUND, SCHEMA_NOT_FOUND})
"""The codes that say a subject or schema is not in the registry (as opposed to an outage)."""
