"""The reference's encryption as an oracle: confluent-kafka 2.16.1's Avro (or JSON, or Protobuf)
serializer and deserializer with its FieldEncryptionExecutor (ENCRYPT) or EncryptionExecutor
(ENCRYPT_PAYLOAD), LocalKmsDriver and mock DEK registry.

KEKs and DEKs move between its mock DEK registry and one of ours only in their stored form
(the KEK's KMS coordinates, the DEK wrapped), as two clients of one registry would share them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

SUBJECT = "people-value"
TOPIC = "people"
SECRET = "parity-secret"
"""The local KMS secret every test using the oracle gives it: Tink keeps the reference's KMS clients
process-wide, and the first local-kms client registered serves every `local-kms://` key after it,
so another secret would wrap and unwrap with this one's KEK."""


class ReferenceEncryption:
    """The reference's serdes over one registered contract (schema id 1) and one local KMS secret;
    `whole_payload` runs ENCRYPT_PAYLOAD encoding rules instead of ENCRYPT field rules. A Protobuf
    contract's serdes read and write instances of `message_class` (the payload's schema then the
    serialized FileDescriptorProto the reference asks the registry for)."""

    def __init__(
        self,
        payload: Mapping[str, Any],
        secret: str,
        clock_millis: int | None = None,
        whole_payload: bool = False,
        message_class: Any = None,
    ) -> None:
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
        from confluent_kafka.schema_registry.rule_registry import RuleRegistry
        from confluent_kafka.schema_registry.rules.encryption.encrypt_executor import (
            Clock,
            EncryptionExecutor,
            FieldEncryptionExecutor,
        )
        from confluent_kafka.schema_registry.rules.encryption.localkms.local_driver import LocalKmsDriver

        LocalKmsDriver.register()

        class _Fixed(Clock):
            def now(self) -> int:
                return clock_millis if clock_millis is not None else super().now()

        self.client = SchemaRegistryClient.new_client({"url": f"mock://{id(self)}"})
        assert self.client.register_schema(SUBJECT, Schema.from_dict(dict(payload))) == 1
        rules = RuleRegistry()
        self.executor = EncryptionExecutor(_Fixed()) if whole_payload else FieldEncryptionExecutor(_Fixed())
        rules.register_executor(self.executor)
        conf = {"secret": secret}
        json_schema = payload.get("schemaType") == "JSON"
        write_conf = {"auto.register.schemas": False, "use.latest.version": True}
        if payload.get("schemaType") == "PROTOBUF":
            self.serializer = ProtobufSerializer(
                message_class, self.client, conf=write_conf, rule_conf=conf, rule_registry=rules
            )
            self.deserializer = ProtobufDeserializer(
                message_class, {"use.latest.version": True}, self.client, rule_conf=conf, rule_registry=rules
            )
        else:
            serializer, deserializer = (
                (JSONSerializer, JSONDeserializer) if json_schema else (AvroSerializer, AvroDeserializer)
            )
            # The JSON serdes take the schema text first (None: the registry's latest).
            schema_text: tuple[None, ...] = (None,) if json_schema else ()
            self.serializer = serializer(
                *schema_text,
                schema_registry_client=self.client,
                conf=write_conf,
                rule_conf=conf,
                rule_registry=rules,
            )
            self.deserializer = deserializer(
                *schema_text,
                schema_registry_client=self.client,
                conf={"use.latest.version": True},
                rule_conf=conf,
                rule_registry=rules,
            )
        assert self.deks is not None  # the serdes configured the executor, which made its client

    def serialize(self, record: Any) -> bytes:
        from confluent_kafka.serialization import MessageField, SerializationContext

        # A deep copy: the reference's walk encrypts nested records (and messages) in place.
        value = copy.deepcopy(record if hasattr(record, "SerializeToString") else dict(record))
        data = self.serializer(value, SerializationContext(TOPIC, MessageField.VALUE))
        assert data is not None
        return data

    def deserialize(self, data: bytes) -> Any:
        from confluent_kafka.serialization import MessageField, SerializationContext

        return self.deserializer(data, SerializationContext(TOPIC, MessageField.VALUE))

    @property
    def deks(self) -> Any:
        """The reference executor's own (mock) DEK registry client."""
        field_level = getattr(self.executor, "executor", None)
        return (field_level or self.executor).client

    def export_keys(self, registry: Any) -> None:
        """Copy the reference's KEKs and wrapped DEKs into `registry` (a DekRegistry of ours)."""
        for kek_id, kek in self.deks._kek_cache.keks.items():
            registry.register_kek(
                kek.name, kek.kms_type, kek.kms_key_id, bool(kek.shared), context=kek_id.context
            )
        for dek in self.deks._dek_cache.deks.values():
            registry.register_dek(
                dek.kek_name, dek.subject, dek.encrypted_key_material, str(dek.algorithm), dek.version
            )

    def import_keys(self, registry: Any, kek_name: str, algorithm: str, versions: range) -> None:
        """Copy our KEK and these wrapped DEK versions into the reference's mock DEK registry."""
        from confluent_kafka.schema_registry.rules.encryption.dek_registry.dek_registry_client import (
            DekAlgorithm,
        )

        kek = registry.get_kek(kek_name)
        self.deks.register_kek(kek.name, kek.kms_type, kek.kms_key_id, kek.shared)
        for version in versions:
            dek = registry.get_dek(kek_name, SUBJECT, algorithm, version)
            self.deks.register_dek(
                kek_name, SUBJECT, dek.encrypted_key_material, DekAlgorithm(algorithm), version
            )


KMS_PARAMS = {"encrypt.kek.name": "kek1", "encrypt.kms.type": "local-kms", "encrypt.kms.key.id": "key1"}
"""The KEK most tests encrypt with: `kek1`, on local-kms key `key1` (created on the first WRITE)."""


def encrypt_rule(
    algorithm: str | None = None,
    params: Mapping[str, str] = KMS_PARAMS,
    *,
    payload: bool = False,
    mode: str = "WRITEREAD",
    **fields: Any,
) -> dict[str, Any]:
    """A registry rule: ENCRYPT on the PII tag (`encryptPII`), or with `payload` ENCRYPT_PAYLOAD
    (`encryptPayload`, no tags), with `params` and the DEK `algorithm` (None: the default);
    `fields` add to the rule or replace its own (`onFailure`, `name`, `tags`, …)."""
    chosen = {**params, **({"encrypt.dek.algorithm": algorithm} if algorithm else {})}
    if payload:
        rule: dict[str, Any] = {"name": "encryptPayload", "type": "ENCRYPT_PAYLOAD"}
    else:
        rule = {"name": "encryptPII", "type": "ENCRYPT", "tags": ["PII"]}
    return {**rule, "kind": "TRANSFORM", "mode": mode, "params": chosen, **fields}


def contract_payload(
    schema: Mapping[str, Any], params: Mapping[str, str], mode: str = "WRITEREAD"
) -> dict[str, Any]:
    """A registry payload: `schema` with one ENCRYPT rule on the PII tag."""
    return {
        "schemaType": "AVRO",
        "schema": json.dumps(schema),
        "ruleSet": {"domainRules": [encrypt_rule(params=params, mode=mode)]},
    }


def rule_evaluator(
    registry: Any, mode: Any, executor: Any, secret: str, subject: str = SUBJECT, encoding: bool = False
) -> Any:
    """The evaluator `executor` compiles, as the engine does, for the one domain (or `encoding`)
    rule of `subject`'s latest version in `registry`, in `mode`, with the local KMS `secret`."""
    from contracts.planning import loader
    from executors.config import RuleConfig

    version = loader.load_version(registry, registry.get_latest_version(subject))
    rules = version.schema.rules
    (rule,) = rules.encoding_rules if encoding else rules.domain_rules
    ctx = loader.rule_context(version, mode, rule, None, registry, RuleConfig({"secret": secret}))
    return executor.compile(ctx).factory()
