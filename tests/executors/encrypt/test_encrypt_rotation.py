"""The DEK version a WRITE encrypts with is judged per batch on the worker (docs/semantics.md §11.2):
with `encrypt.dek.expiry.days`, an evaluator built once keeps encrypting with the plan's DEK until
it expires, then with a new version it registers, as the reference does per record; ENCRYPT and
ENCRYPT_PAYLOAD alike. The clock is a fake one, moved by hand: nothing sleeps."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import KMS_PARAMS, encrypt_rule, rule_evaluator

from contracts import LocalRegistry, Schema
from contracts.errors import RegistryError
from contracts.model import RuleMode
from executors.encrypt import EncryptExecutor, EncryptPayloadExecutor
from executors.encrypt.keys import now_millis

SUBJECT = "r-value"
DAY_MS = 86_400_000
ROTATED = {**KMS_PARAMS, "encrypt.dek.expiry.days": "1"}


class _Clock:
    """Epoch milliseconds that move only when told."""

    def __init__(self) -> None:
        self.now = now_millis()

    def __call__(self) -> int:
        return self.now


class _RefusingNewDeks(LocalRegistry):
    """A registry that cannot register DEKs while `refusing` (a registry that is down for writes)."""

    refusing = False

    def register_dek(self, *args: Any, **kwargs: Any) -> Any:
        if self.refusing:
            raise RegistryError("the registry is read-only today", status=503)
        return super().register_dek(*args, **kwargs)


def _evaluators(registry: LocalRegistry, clock: _Clock, payload: bool) -> tuple[Any, Any]:
    """The WRITE and READ evaluators of an ENCRYPT (or ENCRYPT_PAYLOAD) rule with a one-day DEK
    expiry, compiled on `registry` as the engine compiles them."""
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "s", "type": "string", "confluent:tags": ["PII"]}],
    }
    rules = {"encodingRules" if payload else "domainRules": [encrypt_rule(params=ROTATED, payload=payload)]}
    registry.register_schema(SUBJECT, Schema.from_dict({"schema": json.dumps(schema), "ruleSet": rules}))
    executor = (EncryptPayloadExecutor if payload else EncryptExecutor)(clock=clock)
    return (
        rule_evaluator(registry, RuleMode.WRITE, executor, "pw", SUBJECT, encoding=payload),
        rule_evaluator(registry, RuleMode.READ, executor, "pw", SUBJECT, encoding=payload),
    )


def _dek_version(value: Any) -> int:
    """The DEK version a rotated ciphertext starts with (a field's base64, or a payload's bytes)."""
    data = base64.b64decode(value["s"]) if isinstance(value, dict) else value
    assert data[0] == 0
    return int.from_bytes(data[1:5], "big")


def _batch(evaluate: Callable[[Any], Any], payload: bool, n: int) -> list[Any]:
    records = [f"v{i}".encode() if payload else {"s": f"v{i}"} for i in range(n)]
    outcomes = evaluate(records)
    assert all(o.passed for o in outcomes), [o.reason for o in outcomes]
    return [o.record for o in outcomes]


@pytest.mark.parametrize("payload", [False, True], ids=["ENCRYPT", "ENCRYPT_PAYLOAD"])
def test_a_long_lived_evaluator_rotates_its_dek_once_it_expires(tmp_path: Path, payload: bool) -> None:
    registry, clock = LocalRegistry(tmp_path), _Clock()
    write, read = _evaluators(registry, clock, payload)

    first = _batch(write, payload, 3)
    clock.now += DAY_MS  # a day on: not yet older than one day
    same = _batch(write, payload, 2)
    clock.now += DAY_MS  # two days on: expired
    rotated = _batch(write, payload, 2)
    after = _batch(write, payload, 2)

    assert [_dek_version(v) for v in first + same + rotated + after] == [1] * 5 + [2] * 4
    assert (
        registry.get_dek("kek1", SUBJECT, "AES256_GCM", -1).version == 2
    )  # one new version, not one a batch
    plain = [f"v{i}".encode() if payload else {"s": f"v{i}"} for i in (0, 1, 2, 0, 1, 0, 1, 0, 1)]
    assert [o.record for o in read(first + same + rotated + after)] == plain


def test_a_registry_in_memory_keeps_the_plans_dek() -> None:
    """Each task has its own copy of a registry in memory: a DEK made there would be lost."""
    registry, clock = LocalRegistry(), _Clock()
    write, _ = _evaluators(registry, clock, payload=False)
    clock.now += 3 * DAY_MS
    assert [_dek_version(v) for v in _batch(write, False, 2)] == [1, 1]
    assert registry.get_dek("kek1", SUBJECT, "AES256_GCM", -1).version == 1


def test_a_dek_that_cannot_be_renewed_fails_the_batch_and_is_tried_again(tmp_path: Path) -> None:
    registry, clock = _RefusingNewDeks(tmp_path), _Clock()
    write, _ = _evaluators(registry, clock, payload=False)
    registry.refusing = True
    clock.now += 2 * DAY_MS

    (failed,) = write([{"s": "secret"}])

    assert not failed.passed and failed.record == {"s": "secret"}
    assert failed.reason.startswith(
        "ENCRYPT cannot get a DEK to encrypt with: could not register DEK version 2"
    )
    registry.refusing = False
    assert [_dek_version(v) for v in _batch(write, False, 1)] == [2]
