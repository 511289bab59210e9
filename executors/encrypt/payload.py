"""The ENCRYPT_PAYLOAD executor: the whole serialized body encrypted, as confluent-kafka's
EncryptionExecutor does it in a version's `encodingRules` (docs/semantics.md §11.5).

It runs on bytes, not records: WRITE encrypts the body the format wrote (the wire prefix or
schema id header stays in clear), READ decrypts the payload before the format reads it. Keys,
algorithms and the rotated-DEK version prefix are those of ENCRYPT (`compile_keys`, `KeyRing`,
`WriteKeys`); each worker unwraps a DEK once, and no key material is in the plan, a reason or a repr.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.model import RuleMode
from executors.encrypt.cryptor import Cryptor
from executors.encrypt.envelope import split_version, with_version
from executors.encrypt.executor import WorkerKeys, cannot_get_dek, compile_keys
from executors.encrypt.keys import (
    EncryptionKeyError,
    KeyRing,
    dek_ttl_ms,
    now_millis,
)
from executors.encrypt.kms import KmsDriver
from executors.encrypt.localkms import LocalKmsDriver
from executors.encrypt.rotation import WriteKeys
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
        keys = compile_keys(ctx, self.type, self.kms_drivers, self.clock, self.dek_ttl_ms)
        batch = PayloadBatch(
            keys.for_workers(ctx.rule_config, self.kms_drivers, self.clock, self.dek_ttl_ms), ctx.mode
        )
        why = "runs on serialized bytes, outside Spark's expressions"
        return BatchStep(batch, why_not_native=why, runnable=keys.runnable)


@dataclass(frozen=True)
class PayloadBatch:
    """Picklable factory of one ENCRYPT_PAYLOAD rule's evaluator: names and versions only."""

    keys: WorkerKeys
    mode: RuleMode

    def __call__(self) -> BatchEvaluator:
        return _Evaluator(self, *self.keys.open())


class _Evaluator:
    def __init__(self, batch: PayloadBatch, keys: KeyRing, writes: WriteKeys | None) -> None:
        self.batch = batch
        self.keys = keys
        self.writes = writes
        self._one = self._encrypt if batch.mode is RuleMode.WRITE else self._decrypt
        self._cryptors: dict[int, Cryptor] = {}
        self._nonces: list[bytes | None] = []
        self._left = 0
        self._version = 0
        self._failure: str | None = None

    def __call__(self, payloads: Sequence[Any]) -> Sequence[Outcome]:
        self._cryptors = {}  # each DEK version looked up once per batch
        self._nonces = []  # the batch's AES-GCM nonces, drawn at the first payload
        self._left = len(payloads)
        self._failure = self.batch.keys.failure
        if self._failure is None and self.writes is not None:
            try:
                self._version = self.writes.version()  # the batch's DEK version to encrypt with
            except EncryptionKeyError as e:
                self._failure = cannot_get_dek(RULE_TYPE, e)
        return [self._checked(payload) for payload in payloads]

    def _checked(self, payload: Any) -> Outcome:
        if self._failure is not None:
            return Outcome(False, payload, self._failure)
        if not isinstance(payload, bytes | bytearray):
            # The reference fails the same way: a domain rule receives a record, not bytes.
            return Outcome(
                False, payload, f"{RULE_TYPE} runs on serialized payloads: put it in encodingRules"
            )
        return self._one(bytes(payload))

    def _cryptor(self, version: int) -> Cryptor:
        found = self._cryptors.get(version)
        if found is None:
            found = self._cryptors[version] = self.keys.cryptor(version)
        return found

    def _encrypt(self, body: bytes) -> Outcome:
        version = self._version
        try:
            cryptor = self._cryptor(version)
            if not self._nonces:
                self._nonces = cryptor.nonces(max(self._left, 1))
            self._left -= 1
            ciphertext = cryptor.encrypt(body, self._nonces.pop())
        except EncryptionKeyError as e:
            return Outcome(False, body, f"{RULE_TYPE} cannot encrypt the payload: {e}")
        except Exception as e:
            return Outcome(False, body, f"{RULE_TYPE} cannot encrypt the payload: {type(e).__name__}")
        return Outcome(
            True, with_version(version, ciphertext) if self.batch.keys.spec.rotated else ciphertext
        )

    def _decrypt(self, payload: bytes) -> Outcome:
        where = f"{RULE_TYPE} cannot decrypt the payload"
        version, data = 1, payload
        if self.batch.keys.spec.rotated:
            split = split_version(payload)
            if split is None:
                return Outcome(False, payload, f"{where}: no DEK version in it")
            version, data = split
        try:
            return Outcome(True, self._cryptor(version).decrypt(data))
        except EncryptionKeyError as e:
            return Outcome(False, payload, f"{where}: {e}")
        except Exception as e:
            reason = (
                "wrong key or tampered ciphertext" if type(e).__name__ == "InvalidTag" else type(e).__name__
            )
            return Outcome(False, payload, f"{where} with DEK version {version}: {reason}")
