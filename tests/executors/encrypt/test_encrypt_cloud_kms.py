"""ENCRYPT through a cloud KMS driver end to end on Spark: the `hcvault` driver, found through its
entry point on the driver and in the Python workers alike, wraps and unwraps the DEK with real hvac
over real HTTP against a fake Vault transit engine served on loopback (tests/support/fake_vault.py). A
loopback server rather than a patched SDK because the workers are other processes: only a
network endpoint reaches them. The other drivers' KMS calls are proven in
tests/executors/encrypt/test_kms_drivers.py.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from encrypt_oracle import SUBJECT, contract_payload
from fake_vault import TOKEN, FakeVault, serving

from contracts import DataContract, LocalRegistry, Schema
from executors.encrypt.kms_vault import VaultKmsDriver

SCHEMA = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": ["null", "string"], "confluent:tags": ["PII"]},
        {"name": "card", "type": "bytes", "confluent:tags": ["PII"]},
    ],
}
ROWS = [("Ada", "123-45-6789", b"\x00\x01\xfe"), ("Bob", None, b""), ("Çé", "ünï ✓", bytes(range(40)))]


@pytest.fixture(scope="module")
def vault() -> Iterator[tuple[FakeVault, str]]:
    fake = FakeVault()
    with serving(fake) as url:
        yield fake, url


@pytest.mark.parametrize("algorithm", ["AES256_GCM", "AES256_SIV"])
def test_encrypt_rule_round_trips_through_vault_transit(
    spark: Any, vault: tuple[FakeVault, str], algorithm: str
) -> None:
    fake, url = vault
    key_id = f"{url}/transit/keys/people-{algorithm.lower()}"
    params = {
        "encrypt.kek.name": f"vault-{algorithm}",
        "encrypt.kms.type": "hcvault",
        "encrypt.kms.key.id": key_id,
        "encrypt.dek.algorithm": algorithm,
    }
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(contract_payload(SCHEMA, params)))
    contract = DataContract(registry, SUBJECT, rule_config={"token.id": TOKEN})
    df = spark.createDataFrame(ROWS, "name string, ssn string, card binary")
    frames = contract.serialize(df).select("value")
    assert all(b"123-45-6789" not in bytes(row["value"]) for row in frames.collect())

    decoded = contract.deserialize(frames, key_col=None).collect()
    assert sorted((r["name"], r["ssn"], bytes(r["card"])) for r in decoded) == sorted(ROWS)
    # The DEK is stored as Vault wrapped it, and unwraps through the driver to a Tink key.
    dek = registry.get_dek(f"vault-{algorithm}", SUBJECT, algorithm, 1)
    wrapped = base64.b64decode(dek.encrypted_key_material or "")
    assert wrapped.startswith(b"vault:v1:")
    assert VaultKmsDriver().new_aead({"token.id": TOKEN}, key_id).decrypt(wrapped, b"")
    transit = f"/v1/transit/encrypt/people-{algorithm.lower()}"
    assert [s.path for s in fake.seen].count(transit) == 1
    assert any(s.path == transit.replace("encrypt", "decrypt") for s in fake.seen)
