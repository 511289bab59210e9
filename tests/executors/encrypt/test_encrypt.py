"""ENCRYPT's parts without Spark: Tink-compatible ciphers, the local KMS, the DEK registries
(LocalRegistry in memory and on disk, SchemaRegistryClient over the REST API), rule config and
rule params checked at compile time."""

from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from registry_server import running_registry

from contracts import LocalRegistry, Schema, SchemaRegistryClient
from contracts.codes import DEK_ALREADY_EXISTS, KEY_NOT_FOUND
from contracts.errors import ContractError, RegistryError
from contracts.planning import loader
from contracts.registry.dek import DekRegistry
from executors.config import RuleConfig
from executors.encrypt import EncryptExecutor, LocalKmsDriver
from executors.encrypt.cryptor import KeyMaterialError, cryptor, generate_key_material, parse_key

ALGORITHMS = ["AES128_GCM", "AES256_GCM", "AES256_SIV"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_ciphertexts_and_keys_interoperate_with_tink(algorithm: str) -> None:
    from confluent_kafka.schema_registry.rules.encryption.dek_registry.dek_registry_client import DekAlgorithm
    from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import Cryptor

    tink = Cryptor(DekAlgorithm(algorithm))
    theirs = tink.generate_key()
    ours = generate_key_material(algorithm)
    for material in (theirs, ours):
        mine = cryptor(algorithm, material)
        for plaintext in (b"", b"x", bytes(range(256)) * 3):
            assert tink.decrypt(material, mine.encrypt(plaintext), b"") == plaintext
            assert mine.decrypt(tink.encrypt(material, plaintext, b"")) == plaintext
            if algorithm == "AES256_SIV":
                assert mine.encrypt(plaintext) == tink.encrypt(material, plaintext, b"")


def test_key_material_of_the_wrong_shape_is_refused_without_quoting_it() -> None:
    material = generate_key_material("AES256_GCM")
    with pytest.raises(KeyMaterialError) as caught:
        parse_key("AES128_GCM", material)
    assert material.hex() not in str(caught.value)
    with pytest.raises(KeyMaterialError):
        parse_key("AES256_GCM", material[:-1])
    with pytest.raises(KeyMaterialError):
        parse_key("AES256_GCM", b"\x08\x01" + material)  # version 1


def test_local_kms_matches_the_reference_local_kms() -> None:
    from confluent_kafka.schema_registry.rules.encryption.localkms.local_client import LocalKmsClient

    theirs = LocalKmsClient("a secret").get_aead("local-kms://k")
    ours = LocalKmsDriver().new_aead({"secret": "a secret"}, "k")
    assert ours.decrypt(theirs.encrypt(b"dek", b""), b"") == b"dek"
    assert theirs.decrypt(ours.encrypt(b"dek", b""), b"") == b"dek"
    assert "a secret" not in repr(ours)


def test_local_kms_takes_its_secret_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_SECRET", "from env")
    wrapped = LocalKmsDriver().new_aead({}, "k").encrypt(b"dek", b"")
    assert LocalKmsDriver().new_aead({"secret": "from env"}, "k").decrypt(wrapped, b"") == b"dek"
    monkeypatch.delenv("LOCAL_SECRET")
    with pytest.raises(Exception, match="needs a secret"):
        LocalKmsDriver().new_aead({}, "k")


def test_rule_config_never_prints_its_values() -> None:
    config = RuleConfig({"secret": "hunter2", "other": "x"})
    assert "hunter2" not in repr(config) and "hunter2" not in str(config)
    assert config["secret"] == "hunter2" and dict(config) == {"secret": "hunter2", "other": "x"}
    assert pickle.loads(pickle.dumps(config)) == config
    with pytest.raises(TypeError):
        RuleConfig({"n": 1})  # type: ignore[dict-item]


def _exercise(registry: Any) -> None:
    """The DekRegistry contract: create and get, identical creates answered, conflicts 40972,
    missing keys 40470, the newest version by -1."""
    assert isinstance(registry, DekRegistry)
    with pytest.raises(RegistryError) as missing:
        registry.get_kek("k")
    assert missing.value.error_code == KEY_NOT_FOUND
    kek = registry.register_kek("k", "local-kms", "id1")
    assert (kek.name, kek.kms_type, kek.kms_key_id, kek.shared) == ("k", "local-kms", "id1", False)
    assert registry.register_kek("k", "local-kms", "id1").kms_key_id == "id1"
    with pytest.raises(RegistryError) as conflict:
        registry.register_kek("k", "local-kms", "other")
    assert conflict.value.error_code == DEK_ALREADY_EXISTS
    assert registry.get_kek("k").kms_key_id == "id1"
    with pytest.raises(RegistryError) as no_dek:
        registry.get_dek("k", "s-value", "AES256_SIV", -1)
    assert no_dek.value.error_code == KEY_NOT_FOUND
    first = registry.register_dek("k", "s-value", "d3JhcHBlZDE=", "AES256_SIV", 1)
    registry.register_dek("k", "s-value", "d3JhcHBlZDI=", "AES256_SIV", 2)
    assert (first.version, first.algorithm, first.encrypted_key_material) == (1, "AES256_SIV", "d3JhcHBlZDE=")
    assert registry.get_dek("k", "s-value", "AES256_SIV", -1).encrypted_key_material == "d3JhcHBlZDI="
    assert registry.get_dek("k", "s-value", "AES256_SIV", 1).ts is not None
    with pytest.raises(RegistryError) as other_algorithm:
        registry.get_dek("k", "s-value", "AES256_GCM", 1)
    assert other_algorithm.value.error_code == KEY_NOT_FOUND
    with pytest.raises(RegistryError) as clash:
        registry.register_dek("k", "s-value", "b3RoZXI=", "AES256_SIV", 1)
    assert clash.value.error_code == DEK_ALREADY_EXISTS


def test_local_registry_in_memory_is_a_dek_registry() -> None:
    registry = LocalRegistry()
    _exercise(registry)
    copy = pickle.loads(pickle.dumps(registry))
    assert copy.get_dek("k", "s-value", "AES256_SIV", 2).encrypted_key_material == "d3JhcHBlZDI="


def test_local_registry_keeps_only_wrapped_deks_on_disk(tmp_path: Path) -> None:
    _exercise(LocalRegistry(tmp_path))
    reopened = LocalRegistry(tmp_path)
    assert reopened.get_dek("k", "s-value", "AES256_SIV", -1).version == 2
    assert reopened.get_subjects() == []  # the DEK registry's directory is no subject
    with pytest.raises(RegistryError, match="only wrapped DEKs"):
        reopened.register_dek("k", "s-value", None, "AES256_SIV", 3)
    stored = [path.read_text() for path in (tmp_path / ".dek-registry").rglob("*.json")]
    assert len(stored) == 3 and not any(
        "keyMaterial" in text.replace("encryptedKeyMaterial", "") for text in stored
    )


def test_schema_registry_client_speaks_the_dek_registry_api() -> None:
    with running_registry(LocalRegistry()) as server:
        client = SchemaRegistryClient(server.url)
        _exercise(client)
        assert server.count("GET", "/dek-registry/v1/keks/k/deks/s-value/versions/-1") >= 1
        assert server.count("POST", "/dek-registry/v1/keks") >= 1


def _context(registry: Any, params: dict[str, str], mode: str = "WRITE", config: Any = None) -> Any:
    schema = {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}
    rule = {"name": "enc", "kind": "TRANSFORM", "mode": "WRITEREAD", "type": "ENCRYPT", "params": params}
    payload = {"schemaType": "AVRO", "schema": json.dumps(schema)}
    registry.register_schema("r-value", Schema.from_dict({**payload, "ruleSet": {"domainRules": [rule]}}))
    version = loader.load_version(registry, registry.get_latest_version("r-value"))
    from contracts.model import RuleMode

    (rule_obj,) = version.schema.rules.domain_rules
    return loader.rule_context(version, RuleMode(mode), rule_obj, None, registry, RuleConfig(config or {}))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "encrypt.kek.name"),
        ({"encrypt.kek.name": "k", "encrypt.dek.algorithm": "AES512"}, "unknown encrypt.dek.algorithm"),
        ({"encrypt.kek.name": "k", "encrypt.dek.expiry.days": "-1"}, "encrypt.dek.expiry.days"),
        ({"encrypt.kek.name": "k", "encrypt.dek.expiry.days": "soon"}, "encrypt.dek.expiry.days"),
    ],
)
def test_bad_params_fail_at_compile(params: dict[str, str], message: str) -> None:
    with pytest.raises(ContractError, match=message):
        EncryptExecutor().compile(_context(LocalRegistry(), params))


def test_write_creates_the_kek_and_a_wrapped_dek_once() -> None:
    registry = LocalRegistry()
    params = {"encrypt.kek.name": "k", "encrypt.kms.type": "local-kms", "encrypt.kms.key.id": "id"}
    ctx = _context(registry, params, config={"secret": "pw"})
    step = EncryptExecutor().compile(ctx)
    dek = registry.get_dek("k", "r-value", "AES256_GCM", -1)
    assert dek.version == 1 and dek.key_material is None
    wrapped = base64.b64decode(dek.encrypted_key_material or "")
    material = LocalKmsDriver().new_aead({"secret": "pw"}, "id").decrypt(wrapped, b"")
    assert len(parse_key("AES256_GCM", material)) == 32
    EncryptExecutor().compile(ctx)
    assert registry.get_dek("k", "r-value", "AES256_GCM", -1).version == 1
    assert "pw" not in repr(step) and "pw" not in repr(ctx)
    evaluate = pickle.loads(pickle.dumps(step.factory))()
    (outcome,) = evaluate([{"s": "plain"}])
    assert outcome.passed and outcome.record["s"] != "plain"


def test_write_without_a_secret_fails_every_record_with_the_reason() -> None:
    params = {"encrypt.kek.name": "k", "encrypt.kms.type": "local-kms", "encrypt.kms.key.id": "id"}
    step = EncryptExecutor().compile(_context(LocalRegistry(), params))
    (outcome,) = step.factory()([{"s": "plain"}])
    assert not outcome.passed and "needs a secret" in (outcome.reason or "")
    assert outcome.record == {"s": "plain"}


def test_a_key_file_that_cannot_be_read_is_a_registry_error_naming_it(tmp_path: Path) -> None:
    """A corrupt KEK or DEK file is a backend error of the registry (500), naming the file; a
    corrupt DEK version fails the lookups of that version only (docs/semantics.md §11.2)."""
    registry = LocalRegistry(tmp_path)
    _exercise(registry)
    (second,) = (tmp_path / ".dek-registry" / "deks").rglob("2.json")
    second.write_text("{not json")
    assert registry.get_dek("k", "s-value", "AES256_SIV", 1).encrypted_key_material == "d3JhcHBlZDE="
    for version in (2, -1):
        with pytest.raises(RegistryError, match=r"cannot read .*/AES256_SIV/2\.json: Expecting") as caught:
            registry.get_dek("k", "s-value", "AES256_SIV", version)
        assert caught.value.status == 500
    second.write_text(json.dumps({**json.loads((second.parent / "1.json").read_text()), "version": 1}))
    with pytest.raises(RegistryError, match=r"2\.json: it holds DEK version 1"):
        registry.get_dek("k", "s-value", "AES256_SIV", 2)
    (kek,) = (tmp_path / ".dek-registry" / "keks").rglob("k.json")
    kek.write_bytes(b"\xff\xfe")
    with pytest.raises(RegistryError, match=r"cannot read .*/k\.json") as caught:
        registry.get_kek("k")
    assert caught.value.status == 500


@pytest.mark.parametrize("corrupt", ["kek", "dek"])
def test_a_key_file_that_cannot_be_read_fails_each_record_naming_it(tmp_path: Path, corrupt: str) -> None:
    """The rule compiles on WRITE and READ; each record it receives fails with the file named."""
    registry = LocalRegistry(tmp_path)
    params = {"encrypt.kek.name": "k", "encrypt.kms.type": "local-kms", "encrypt.kms.key.id": "id"}
    ctx = _context(registry, params, config={"secret": "pw"})
    (encrypted,) = EncryptExecutor().compile(ctx).factory()([{"s": "plain"}])
    name = "k.json" if corrupt == "kek" else "1.json"
    (path,) = (tmp_path / ".dek-registry" / f"{corrupt}s").rglob(name)
    path.write_text("")
    from contracts.model import RuleMode

    version = loader.load_version(registry, registry.get_latest_version("r-value"))
    (rule,) = version.schema.rules.domain_rules
    for mode, record in (("WRITE", {"s": "plain"}), ("READ", encrypted.record)):
        context = loader.rule_context(
            version, RuleMode(mode), rule, None, registry, RuleConfig({"secret": "pw"})
        )
        (outcome,) = EncryptExecutor().compile(context).factory()([record])
        assert not outcome.passed and outcome.record == record
        assert f"cannot read {path}: Expecting value" in (outcome.reason or ""), outcome.reason
