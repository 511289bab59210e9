"""The ENCRYPT executor: field-level encryption of tagged string and bytes fields (docs/semantics.md §11).

WRITE encrypts, READ decrypts (a WRITEREAD rule does each in its mode), as confluent-kafka's
FieldEncryptionExecutor: a string field carries the base64 of the ciphertext, a bytes field the
ciphertext itself; with `encrypt.dek.expiry.days` the ciphertext starts with a zero byte and the
DEK's version (4 bytes, big-endian). The rule runs as a batch step: a worker fetches and unwraps
each DEK once (`keys.KeyRing`) and, on WRITE, keeps the DEK version it encrypts with current
(`rotation.WriteKeys`); its plan and repr hold names and versions, never key material.
"""

from __future__ import annotations

import base64
import binascii
import functools
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.errors import ContractError
from contracts.formats.fields import FieldWalking, WalkedField, field_walking
from contracts.formats.protocol import swaps_keep_schema
from contracts.model import Rule, RuleMode
from contracts.registry import LocalRegistry
from contracts.registry.dek import DEFAULT_ALGORITHM, DEK_ALGORITHMS, DekRegistry
from executors.encrypt.cryptor import Cryptor
from executors.encrypt.envelope import split_version, with_version
from executors.encrypt.keys import (
    DEFAULT_TTL_MS,
    EncryptionKeyError,
    KeyRing,
    KeySpec,
    dek_ttl_ms,
    kek_problem,
    now_millis,
)
from executors.encrypt.kms import KmsDriver
from executors.encrypt.localkms import LocalKmsDriver
from executors.encrypt.rotation import WriteDek, WriteKeys, write_dek
from executors.protocol import BatchEvaluator, BatchStep, Outcome, RuleContext, Step, same_tag_transforms

KEK_NAME = "encrypt.kek.name"
KMS_TYPE = "encrypt.kms.type"
KMS_KEY_ID = "encrypt.kms.key.id"
DEK_ALGORITHM = "encrypt.dek.algorithm"
DEK_EXPIRY_DAYS = "encrypt.dek.expiry.days"

# A string field's ciphertext from its base64: binascii's strict mode is base64.b64decode(value,
# validate=True) without its Python-level wrapper, on Python 3.11 and later (3.10 has no strict mode).
if sys.version_info >= (3, 11):
    _from_base64 = functools.partial(binascii.a2b_base64, strict_mode=True)
else:
    _from_base64 = functools.partial(base64.b64decode, validate=True)


class EncryptExecutor:
    """Compiles ENCRYPT rules. `kms_drivers` adds KMS types beyond local-kms and the installed
    entry points; `clock` (epoch milliseconds) judges DEK expiry; a worker keeps an unwrapped DEK
    for at most `dek_cache_ttl_s` seconds (and not past its expiry) before fetching it again, and
    on WRITE asks for the DEK version to encrypt with as often (with `encrypt.dek.expiry.days`),
    both judged at the start of each Arrow batch (a batch uses one cipher per DEK version)."""

    type = "ENCRYPT"

    def __init__(
        self, kms_drivers: Iterable[KmsDriver] = (), clock: Any = None, dek_cache_ttl_s: float = 300.0
    ) -> None:
        # local-kms is built in; drivers given here come first, installed ones after (kms.py).
        self.kms_drivers = (*kms_drivers, LocalKmsDriver())
        self.clock = clock or now_millis
        self.dek_ttl_ms = dek_ttl_ms(dek_cache_ttl_s)

    def supersedes(self, rule: Rule, other: Rule) -> bool:
        return same_tag_transforms(rule, other)

    def __repr__(self) -> str:
        return f"EncryptExecutor(kms_drivers={[d.kms_type for d in self.kms_drivers]})"

    def compile(self, ctx: RuleContext) -> Step:
        walking = field_walking(ctx.schema_format)
        if walking is None:
            # Tagged fields are found by the format's field walk (the reference's, for Avro, JSON, Protobuf).
            raise ContractError(
                f"ENCRYPT rules on {ctx.schema_format.schema_type} records are not supported: its format"
                " has no field walk (contracts.formats.fields.FieldWalking)",
                position="type",
            )
        keys = compile_keys(ctx, self.type, self.kms_drivers, self.clock, self.dek_ttl_ms)
        batch = EncryptBatch(
            keys.for_workers(ctx.rule_config, self.kms_drivers, self.clock, self.dek_ttl_ms),
            ctx.mode,
            frozenset(ctx.rule.tags),
            ctx.schema,
            walking,
            dict(ctx.metadata_tags),
        )
        # Only string and bytes leaves change, in kind: where that keeps a record valid, no second check.
        keeps = swaps_keep_schema(ctx.schema_format)
        return BatchStep(batch, keeps_schema=keeps, runnable=keys.runnable)


@dataclass(frozen=True)
class CompiledKeys:
    """What compiling an encryption rule decided about its keys: the spec, the DEK registry, the
    DEK a WRITE encrypts with first and whether workers may replace it once stale (`renews`), or
    why it has none (each record then fails with it)."""

    spec: KeySpec
    registry: DekRegistry = field(repr=False)
    write_dek: WriteDek | None = None
    failure: str | None = None
    renews: bool = False
    runnable: bool = True
    """False when compiled read-only for a WRITE: no DEK was looked for (BatchStep.runnable)."""

    def for_workers(
        self, config: Mapping[str, str], drivers: tuple[KmsDriver, ...], clock: Any, ttl_ms: int
    ) -> WorkerKeys:
        """What a worker needs to open these keys itself, with the rule config and KMS drivers."""
        return WorkerKeys(
            self.spec,
            self.registry,
            config,
            drivers,
            self.write_dek,
            self.failure,
            clock,
            ttl_ms,
            self.renews,
        )


def compile_keys(
    ctx: RuleContext, rule_type: str, drivers: tuple[KmsDriver, ...], clock: Any, ttl_ms: int
) -> CompiledKeys:
    """The keys of an ENCRYPT or ENCRYPT_PAYLOAD rule: its params checked, and on WRITE its DEK
    found or created (docs/semantics.md §11.2)."""
    spec = _spec(ctx, rule_type)
    registry = ctx.registry
    if not isinstance(registry, DekRegistry):
        raise ContractError(
            f"{rule_type} needs a registry with a DEK registry; {type(registry).__name__} has none",
            position="registry",
        )
    writing = ctx.mode is RuleMode.WRITE
    # Checked by lint: on READ only for a READ rule, a WRITEREAD rule's WRITE making its KEK.
    if ctx.lint and (writing or ctx.rule.mode is RuleMode.READ):
        problem = kek_problem(spec, registry, drivers, reading=not writing)
        if problem is not None:
            raise ContractError(f"{problem}: the rule would fail every record", position=f"params.{KEK_NAME}")
    if not writing:
        return CompiledKeys(spec, registry)
    if ctx.read_only:
        failure = f"{rule_type} was compiled to be checked, not run"
        return CompiledKeys(spec, registry, failure=failure, runnable=False)
    try:
        first = write_dek(spec, registry, ctx.rule_config, drivers, clock, ttl_ms)
    except EncryptionKeyError as e:
        return CompiledKeys(spec, registry, failure=cannot_get_dek(rule_type, e))
    # A registry in memory is copied into each task: a DEK a worker made there would be lost.
    in_memory = isinstance(registry, LocalRegistry) and registry.path is None
    return CompiledKeys(spec, registry, first, renews=spec.rotated and not in_memory)


def cannot_get_dek(rule_type: str, error: EncryptionKeyError) -> str:
    """Why a WRITE has no DEK to encrypt with, for each record it fails."""
    return f"{rule_type} cannot get a DEK to encrypt with: {error}"


@dataclass(frozen=True)
class WorkerKeys:
    """Picklable keys of one ENCRYPT or ENCRYPT_PAYLOAD rule for its workers: key names and versions,
    the registry and the rule config (whose values never print); each worker unwraps the DEKs itself.
    `failure` is why a WRITE has no DEK (each record then fails with it)."""

    spec: KeySpec
    registry: DekRegistry = field(repr=False)
    config: Mapping[str, str] = field(repr=False)
    drivers: tuple[KmsDriver, ...] = field(repr=False)
    write_dek: WriteDek | None = None
    failure: str | None = None
    clock: Any = field(default=None, repr=False)
    dek_ttl_ms: int = DEFAULT_TTL_MS
    renews: bool = False

    def open(self) -> tuple[KeyRing, WriteKeys | None]:
        """A worker's keys for a rule's evaluator: its KeyRing, and on WRITE (when the plan has a DEK
        for it) its WriteKeys."""
        clock = self.clock or now_millis
        spec, registry, config, drivers = self.spec, self.registry, self.config, self.drivers
        ttl_ms = self.dek_ttl_ms
        keys = KeyRing(spec, registry, config, drivers, ttl_ms=ttl_ms, now_millis_fn=clock)
        if self.write_dek is None:
            return keys, None
        renew = None
        if self.renews:
            renew = functools.partial(write_dek, spec, registry, config, drivers, clock, ttl_ms)
        return keys, WriteKeys(self.write_dek, clock, renew)


@dataclass(frozen=True)
class EncryptBatch:
    """Picklable factory of one ENCRYPT rule's evaluator: its keys for workers, the schema and the
    tags it encrypts."""

    keys: WorkerKeys
    mode: RuleMode
    tags: frozenset[str]
    schema: Any = field(repr=False)
    schema_format: FieldWalking = field(repr=False)
    metadata_tags: Mapping[str, tuple[str, ...]] = field(repr=False)

    def __call__(self) -> BatchEvaluator:
        return _Evaluator(self, *self.keys.open())


class _FieldFailure(Exception):
    """One field could not be encrypted or decrypted: the reason names the field."""


class _Evaluator:
    def __init__(self, batch: EncryptBatch, keys: KeyRing, writes: WriteKeys | None) -> None:
        self.batch = batch
        self.keys = keys
        self.writes = writes
        transform = self._write if batch.mode is RuleMode.WRITE else self._read
        self.walk = batch.schema_format.field_walk(batch.schema, batch.metadata_tags, batch.tags, transform)
        self._cryptors: dict[int, Cryptor] = {}
        self._version = 0
        self._rotated = batch.keys.spec.rotated

    def __call__(self, records: Sequence[Any]) -> Sequence[Outcome]:
        failure = self.batch.keys.failure
        if failure is None and self.writes is not None:
            try:
                self._version = self.writes.version()  # the batch's DEK version to encrypt with
            except EncryptionKeyError as e:
                failure = cannot_get_dek(EncryptExecutor.type, e)
        if failure is not None:
            return [Outcome(False, record, failure) for record in records]
        self._cryptors = {}  # each DEK version looked up in the key ring once per batch
        walk = self.walk
        outcomes = []
        for record in records:
            try:
                outcomes.append(Outcome(True, walk(record)))
            except _FieldFailure as e:
                outcomes.append(Outcome(False, record, str(e)))
        return outcomes

    def _write(self, field: WalkedField, value: Any) -> Any:
        if value is None:
            return None
        type_name = field.type_name
        if type_name not in ("STRING", "BYTES"):
            raise _FieldFailure(
                f"ENCRYPT cannot encrypt field {field.full_name!r}: type {type_name} is not supported"
            )
        version = self._version
        try:
            plaintext = value.encode("utf-8") if type_name == "STRING" else bytes(value)
            ciphertext = self._cryptor(version).encrypt(plaintext)
        except EncryptionKeyError as e:
            raise _FieldFailure(f"ENCRYPT cannot encrypt field {field.full_name!r}: {e}") from None
        except Exception as e:
            raise _FieldFailure(
                f"ENCRYPT cannot encrypt field {field.full_name!r}: {type(e).__name__}"
            ) from None
        if self._rotated:
            ciphertext = with_version(version, ciphertext)
        if type_name == "BYTES":
            return ciphertext
        return binascii.b2a_base64(ciphertext, newline=False).decode("ascii")  # base64.b64encode

    def _read(self, field: WalkedField, value: Any) -> Any:
        # Per value of every tagged field: the common case (a string, one DEK version) first.
        if value is None:
            return None
        type_name = field.type_name
        if type_name == "STRING":
            try:
                data = _from_base64(value)
            except (binascii.Error, ValueError):
                raise _FieldFailure(f"{_cannot_decrypt(field)}: the value is not base64") from None
        elif type_name == "BYTES":
            data = bytes(value)
        else:
            return value
        version = 1
        if self._rotated:
            split = split_version(data)
            if split is None:
                raise _FieldFailure(f"{_cannot_decrypt(field)}: no DEK version in the ciphertext")
            version, data = split
        try:
            plaintext = (self._cryptors.get(version) or self._cryptor(version)).decrypt(data)
        except EncryptionKeyError as e:
            raise _FieldFailure(f"{_cannot_decrypt(field)}: {e}") from None
        except Exception as e:
            reason = (
                "wrong key or tampered ciphertext" if type(e).__name__ == "InvalidTag" else type(e).__name__
            )
            raise _FieldFailure(f"{_cannot_decrypt(field)} with DEK version {version}: {reason}") from None
        if type_name == "BYTES":
            return plaintext
        try:
            return plaintext.decode("utf-8")
        except UnicodeDecodeError:
            raise _FieldFailure(f"{_cannot_decrypt(field)}: the plaintext is not UTF-8") from None

    def _cryptor(self, version: int) -> Cryptor:
        found = self._cryptors.get(version)
        if found is None:
            found = self._cryptors[version] = self.keys.cryptor(version)
        return found


def _cannot_decrypt(field: WalkedField) -> str:
    return f"ENCRYPT cannot decrypt field {field.full_name!r}"


def _spec(ctx: RuleContext, rule_type: str) -> KeySpec:
    params = ctx.params
    kek_name = params.get(KEK_NAME)
    if not kek_name:
        raise ContractError(f"{rule_type} needs the param {KEK_NAME}", position=f"params.{KEK_NAME}")
    algorithm = params.get(DEK_ALGORITHM) or DEFAULT_ALGORITHM
    if algorithm not in DEK_ALGORITHMS:
        raise ContractError(
            f"unknown {DEK_ALGORITHM} {algorithm!r} (known: {', '.join(DEK_ALGORITHMS)})",
            position=f"params.{DEK_ALGORITHM}",
        )
    expiry = params.get(DEK_EXPIRY_DAYS)
    try:
        days = int(expiry) if expiry is not None else 0
    except ValueError:
        days = -1
    if days < 0:
        raise ContractError(
            f"{DEK_EXPIRY_DAYS} must be a whole number of days, 0 or more, not {expiry!r}",
            position=f"params.{DEK_EXPIRY_DAYS}",
        )
    return KeySpec(
        kek_name, params.get(KMS_TYPE) or None, params.get(KMS_KEY_ID) or None, ctx.subject, algorithm, days
    )
