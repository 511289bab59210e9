"""Rule parameters fall back to the schema's metadata properties (docs/semantics.md §1.2), as the
reference's `get_parameter` looks them up: an ENCRYPT rule whose KEK, KMS, DEK algorithm and
expiry are given on the metadata only encrypts as the reference does with them (each side reads
the other's records), a `dlq.topic` and JSONata bounds there count, and a rule param wins."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from encrypt_oracle import SECRET, SUBJECT, ReferenceEncryption, encrypt_rule, rule_evaluator

from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError
from contracts.formats.wire import encode_prefix
from contracts.model import RuleMode
from contracts.planning import loader
from executors.encrypt import EncryptExecutor
from executors.jsonata.executor import bounds

pytestmark = pytest.mark.one_pass

SCHEMA = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    ],
}
ON_METADATA = {
    "encrypt.kek.name": "kek-meta",
    "encrypt.kms.type": "local-kms",
    "encrypt.kms.key.id": "key-meta",
    "encrypt.dek.algorithm": "AES256_SIV",
    "encrypt.dek.expiry.days": "30",
}
RECORD = {"name": "Ada", "ssn": "123-45-6789"}


def _payload(params: dict[str, str], properties: dict[str, str]) -> dict[str, Any]:
    return {
        "schemaType": "AVRO",
        "schema": json.dumps(SCHEMA),
        "metadata": {"properties": properties},
        "ruleSet": {"domainRules": [encrypt_rule(params=params)]},
    }


def _frame(record: dict[str, Any]) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(SCHEMA), record)
    return encode_prefix(1) + body.getvalue()


def _body(frame: bytes) -> dict[str, Any]:
    return fastavro.schemaless_reader(io.BytesIO(frame[5:]), fastavro.parse_schema(SCHEMA), None)


def test_encrypt_params_on_the_metadata_only_are_the_references() -> None:
    payload = _payload({}, ON_METADATA)
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    write = rule_evaluator(registry, RuleMode.WRITE, EncryptExecutor(), SECRET)
    (written,) = write([dict(RECORD)])
    assert written.passed, written.reason
    assert registry.get_kek("kek-meta").kms_key_id == "key-meta"
    dek = registry.get_dek("kek-meta", SUBJECT, "AES256_SIV", 1)
    assert dek.version == 1
    reference = ReferenceEncryption(payload, SECRET)
    reference.import_keys(registry, "kek-meta", "AES256_SIV", range(1, 2))
    # The reference reads our record (a DEK version prefix: the expiry came from the metadata too)…
    assert reference.deserialize(_frame(written.record)) == RECORD
    # …and AES-SIV is deterministic: it writes the same ciphertext, which we read back.
    assert _body(reference.serialize(RECORD))["ssn"] == written.record["ssn"]
    read = rule_evaluator(registry, RuleMode.READ, EncryptExecutor(), SECRET)
    (plain,) = read([written.record])
    assert plain.record == RECORD


def test_a_rule_param_wins_over_the_metadata() -> None:
    registry = LocalRegistry()
    params = {"encrypt.kek.name": "kek-rule", "encrypt.dek.algorithm": "AES128_GCM"}
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(params, ON_METADATA)))
    version = loader.load_version(registry, registry.get_latest_version(SUBJECT))
    (rule,) = version.schema.rules.domain_rules
    ctx = loader.rule_context(version, RuleMode.WRITE, rule)
    assert ctx.params["encrypt.kek.name"] == "kek-rule"
    assert ctx.params["encrypt.dek.algorithm"] == "AES128_GCM"
    assert ctx.params["encrypt.kms.key.id"] == "key-meta"


def test_dlq_topic_and_jsonata_bounds_on_the_metadata() -> None:
    registry = LocalRegistry()
    rule = {"name": "shape", "kind": "CONDITION", "type": "JSONATA", "expr": "name != ''", "onFailure": "DLQ"}
    properties = {"dlq.topic": "people-dlq", "jsonata.timeout.ms": "25", "jsonata.max.depth": "7"}
    payload = {"schema": json.dumps(SCHEMA), "metadata": {"properties": properties}}
    registry.register_schema(SUBJECT, Schema.from_dict({**payload, "ruleSet": {"domainRules": [rule]}}))
    contract = DataContract(registry, SUBJECT)
    (planned,) = contract.plan("WRITE").rules
    assert planned.on_failure.topic == "people-dlq"
    assert (bounds(planned.ctx.params).timeout_ms, bounds(planned.ctx.params).max_depth) == (25, 7)
    bad = {**payload, "metadata": {"properties": {**properties, "jsonata.max.depth": "deep"}}}
    registry.register_schema("bad-value", Schema.from_dict({**bad, "ruleSet": {"domainRules": [rule]}}))
    with pytest.raises(ContractError, match=r"jsonata\.max\.depth must be a positive integer"):
        DataContract(registry, "bad-value")
