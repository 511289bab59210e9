"""`spark-contracts lint` of ENCRYPT and ENCRYPT_PAYLOAD contracts compiles their rules read-only:
the KEK is looked up where the registry has one, no KEK or DEK is ever created, and a rule that
could not have its KEK is reported: on WRITE, and on READ for a READ rule (which nothing creates
a KEK for); a KEK on a KMS type no driver serves, in either mode."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import KMS_PARAMS, encrypt_rule

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
KEK_ONLY = {"encrypt.kek.name": "kek1"}


def _payload(params: dict[str, str] = KMS_PARAMS, mode: str = "WRITEREAD") -> dict[str, Any]:
    """ENCRYPT on the PII field and ENCRYPT_PAYLOAD on the body, both with `params` and `mode`."""
    return {
        "schemaType": "AVRO",
        "schema": json.dumps(SCHEMA),
        "ruleSet": {
            "domainRules": [encrypt_rule(params=params, mode=mode)],
            "encodingRules": [encrypt_rule(params=params, payload=True, mode=mode, name="encryptBody")],
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
    LocalRegistry(root, create=True).register_schema(SUBJECT, Schema.from_dict(_payload()))
    assert _lint(root) == (0, "")
    _no_keys(LocalRegistry(root))
    assert not (root / ".dek-registry").exists()


def test_lint_reads_the_kek_the_directory_holds(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    registry = LocalRegistry(root, create=True)
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(KEK_ONLY)))
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
    registry = LocalRegistry(root, create=True)
    registry.register_schema(SUBJECT, Schema.from_dict(_payload()))
    registry.register_kek("kek1", "local-kms", "another-key")
    status, out = _lint(root)
    assert status == 1
    assert "KEK 'kek1' has kms key id 'another-key', the rule names 'key1'" in out


def test_lint_of_a_registry_creates_no_key() -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_payload()))
    assert lint_registry(registry) == []
    _no_keys(registry)


@pytest.mark.parametrize("params", [KMS_PARAMS, KEK_ONLY], ids=["with a KMS", "without"])
def test_lint_reports_a_read_rule_whose_kek_is_missing_and_creates_none(
    tmp_path: Path, params: dict[str, str]
) -> None:
    """A READ rule creates no KEK, whatever KMS it names: without one it could decrypt nothing."""
    root = tmp_path / "contracts"
    registry = LocalRegistry(root, create=True)
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(params, mode="READ")))

    status, out = _lint(root)

    assert status == 1
    reason = "no KEK 'kek1' in the DEK registry to decrypt with: the rule would fail every record"
    for rule in ("encryptPII", "encryptBody"):
        assert f"subject={SUBJECT} version=1 rule={rule} position=params.encrypt.kek.name: {reason}" in out
    _no_keys(LocalRegistry(root))
    registry.register_kek("kek1", "local-kms", "key1")
    assert _lint(root) == (0, "")


@pytest.mark.parametrize("mode", ["READ", "WRITEREAD"])
def test_lint_reports_a_kek_no_kms_driver_serves(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "contracts"
    registry = LocalRegistry(root, create=True)
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(KEK_ONLY, mode=mode)))
    registry.register_kek("kek1", "acme-kms", "key1")

    status, out = _lint(root)

    assert status == 1
    reason = "KEK 'kek1' cannot be used: no KMS driver for kms type 'acme-kms' (known: "
    assert f"subject={SUBJECT} version=1 rule=encryptPII position=params.encrypt.kek.name: {reason}" in out
    assert len(out.splitlines()) == 2  # one line a rule, WRITE and READ alike
