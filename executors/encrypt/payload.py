"""The ENCRYPT_PAYLOAD executor: the whole serialized body encrypted, as confluent-kafka's
EncryptionExecutor does it in a version's `encodingRules` (docs/semantics.md §11.5).

It runs on bytes, not records: WRITE encrypts the body the format wrote (the wire prefix or
schema id header stays in clear), READ decrypts the payload before the format reads it. Keys,
algorithms and the rotated-DEK version prefix are those of ENCRYPT (`compile_keys`, `KeyRing`);
each worker unwraps a DEK once, and no key material is in the plan, a reason or a repr.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.model import RuleMode
from contracts.registry.dek import DekRegistry
from executors.encrypt.envelope import split_version, with_version
from executors.encrypt.executor import compile_keys
from executors.encrypt.keys import (
    DEFAULT_TTL_MS,
    EncryptionKeyError,
    KeyRing,
    KeySpec,
    dek_ttl_ms,
    now_millis,
)
from executors.encrypt.kms import KmsDriver
from executors.encrypt.localkms import LocalKmsDriver
from executors.protocol import BatchEvaluator, BatchStep, Outcome, RuleContext, Step

RULE_TYPE = "ENCRYPT_PAYLOAD"


class EncryptPayloadExecutor:
    """Compiles ENCRYPT_PAYLOAD rules; `kms_drivers`, `clock` and `dek_cache_ttl_s` as for
    EncryptExecutor."""

    type = RULE_TYPE

    def __init__(
        self, kms_drivers: Iterable[KmsDriver] = (), clock: Any = None, dek_cache_ttl_s: float = 300.0
    ) -> None:
        self.kms_drivers = (*kms_drivers, LocalKmsDriver())
        self.clock = clock or now_millis
        self.dek_ttl_ms = dek_ttl_ms(dek_cache_ttl_s)

    def __repr__(self) -> str:
        return f"EncryptPayloadExecutor(kms_drivers={[d.kms_type for d in self.kms_drivers]})"

    def compile(self, ctx: RuleContext) -> Step:
        keys = compile_keys(ctx, self.type, self.kms_drivers, self.clock)
        batch = PayloadBatch(
            keys.spec,
            ctx.mode,
            keys.registry,
            ctx.rule_config,
            self.kms_drivers,
            keys.write_version,
            keys.failure,
            self.clock,
            self.dek_ttl_ms,
        )
        return BatchStep(batch, why_not_native="runs on serialized bytes, outside Spark's expressions")


@dataclass(frozen=True)
class PayloadBatch:
    """Picklable factory of one ENCRYPT_PAYLOAD rule's evaluator: names and versions only."""

    spec: KeySpec
    mode: RuleMode
    registry: DekRegistry = field(repr=False)
    config: Mapping[str, str] = field(repr=False)
    drivers: tuple[KmsDriver, ...] = field(repr=False)
    write_version: int | None = None
    failure: str | None = None
    clock: Any = field(default=None, repr=False)
    dek_ttl_ms: int = DEFAULT_TTL_MS

    def __call__(self) -> BatchEvaluator:
        keys = KeyRing(
            self.spec,
            self.registry,
            self.config,
            self.drivers,
            ttl_ms=self.dek_ttl_ms,
            now_millis_fn=self.clock,
        )
        return _Evaluator(self, keys)


class _Evaluator:
    def __init__(self, batch: PayloadBatch, keys: KeyRing) -> None:
        self.batch = batch
        self.keys = keys
        self._one = self._encrypt if batch.mode is RuleMode.WRITE else self._decrypt

    def __call__(self, payloads: Sequence[Any]) -> Sequence[Outcome]:
        return [self._checked(payload) for payload in payloads]

    def _checked(self, payload: Any) -> Outcome:
        if self.batch.failure is not None:
            return Outcome(False, payload, self.batch.failure)
        if not isinstance(payload, bytes | bytearray):
            # The reference fails the same way: a domain rule receives a record, not bytes.
            return Outcome(
                False, payload, f"{RULE_TYPE} runs on serialized payloads: put it in encodingRules"
            )
        return self._one(bytes(payload))

    def _encrypt(self, body: bytes) -> Outcome:
        version = self.batch.write_version
        assert version is not None
        try:
            ciphertext = self.keys.cryptor(version).encrypt(body)
        except EncryptionKeyError as e:
            return Outcome(False, body, f"{RULE_TYPE} cannot encrypt the payload: {e}")
        except Exception as e:
            return Outcome(False, body, f"{RULE_TYPE} cannot encrypt the payload: {type(e).__name__}")
        return Outcome(True, with_version(version, ciphertext) if self.batch.spec.rotated else ciphertext)

    def _decrypt(self, payload: bytes) -> Outcome:
        where = f"{RULE_TYPE} cannot decrypt the payload"
        version, data = 1, payload
        if self.batch.spec.rotated:
            split = split_version(payload)
            if split is None:
                return Outcome(False, payload, f"{where}: no DEK version in it")
            version, data = split
        try:
            return Outcome(True, self.keys.cryptor(version).decrypt(data))
        except EncryptionKeyError as e:
            return Outcome(False, payload, f"{where}: {e}")
        except Exception as e:
            reason = (
                "wrong key or tampered ciphertext" if type(e).__name__ == "InvalidTag" else type(e).__name__
            )
            return Outcome(False, payload, f"{where} with DEK version {version}: {reason}")
