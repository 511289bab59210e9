"""`spark-contracts lint` of ENCRYPT and ENCRYPT_PAYLOAD contracts compiles their rules read-only:
the KEK is looked up where the registry has one, no KEK or DEK is ever created, and a rule that
could not have its KEK on WRITE is reported."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from contracts import LocalRegistry, RegistryError, Schema
from contracts.cli.lint import lint_registry
from contracts.cli.main import run

SUBJECT = "people-value"
SCHEMA = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    ],
}
KMS = {"encrypt.kms.type": "local-kms", "encrypt.kms.key.id": "key1"}


def _payload(**params: str) -> dict[str, Any]:
    """ENCRYPT on the PII field and ENCRYPT_PAYLOAD on the body, both with `params`."""
    base = {"kind": "TRANSFORM", "mode": "WRITEREAD", "params": {"encrypt.kek.name": "kek1", **params}}
    return {
        "schemaType": "AVRO",
        "schema": json.dumps(SCHEMA),
        "ruleSet": {
            "domainRules": [{"name": "encryptPII", "type": "ENCRYPT", "tags": ["PII"], **base}],
            "encodingRules": [{"name": "encryptBody", "type": "ENCRYPT_PAYLOAD", **base}],
        },
    }


def _lint(root: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(["lint", str(root)], stdout=out, stderr=err)
    return status, out.getvalue()


def _no_keys(registry: LocalRegistry) -> None:
    with pytest.raises(RegistryError):
        registry.get_kek("kek1")
    with pytest.raises(RegistryError):
        registry.get_dek("kek1", SUBJECT, "AES256_GCM", 1)


def test_lint_of_an_encrypt_contract_reports_nothing_and_creates_no_key(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    LocalRegistry(root).register_schema(SUBJECT, Schema.from_dict(_payload(**KMS)))
    assert _lint(root) == (0, "")
    _no_keys(LocalRegistry(root))
    assert not (root / ".dek-registry").exists()


def test_lint_reads_the_kek_the_directory_holds(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    registry = LocalRegistry(root)
    registry.register_schema(SUBJECT, Schema.from_dict(_payload()))
    status, out = _lint(root)
    assert status == 1
    reason = "no KEK 'kek1' in the DEK registry and no encrypt.kms.type to create it"
    assert f"rule=encryptPII position=params.encrypt.kek.name: {reason}" in out
    assert f"rule=encryptBody position=params.encrypt.kek.name: {reason}" in out
    registry.register_kek("kek1", "local-kms", "key1")
    assert _lint(root) == (0, "")
    with pytest.raises(RegistryError):
        LocalRegistry(root).get_dek("kek1", SUBJECT, "AES256_GCM", 1)


def test_lint_reports_a_kek_of_another_kms_key(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    registry = LocalRegistry(root)
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(**KMS)))
    registry.register_kek("kek1", "local-kms", "another-key")
    status, out = _lint(root)
    assert status == 1
    assert "KEK 'kek1' has kms key id 'another-key', the rule names 'key1'" in out


def test_lint_of_a_registry_creates_no_key() -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(**KMS)))
    assert lint_registry(registry) == []
    _no_keys(registry)
