"""Encoding rules on the serialized payload (docs/semantics.md §11.5), run inside the encode and
decode passes: WRITE after the format wrote the body, READ before it reads it. The wire prefix
(or schema id header) is never part of the payload.

Each rule runs on one payload at a time, with its evaluator built once per worker. An action
that rejects or fails the row raises `PayloadRefused` with what the pass records (the row's
status, or the message the job fails with); a READ rule that failed and whose action continues
leaves a payload the format cannot read, which makes the record undecodable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.engine.python_pass import act, evaluator_for
from contracts.errors import ContractError, SerializationError
from contracts.model import RuleKind, RuleMode
from contracts.planning.plan import Plan


class PayloadRefused(Exception):
    """A payload an encoding rule's action took out of the flow: the row's `_contract` status (a
    DLQ rejection), or the message its ERROR action fails the job with."""

    def __init__(self, status: dict[str, Any] | None, failure: str | None) -> None:
        super().__init__(failure or (status or {}).get("reason"))
        self.status = status
        self.failure = failure


@dataclass(frozen=True)
class PayloadRules:
    """One version's encoding rules in one direction, planned with their actions."""

    plan: Plan

    def __post_init__(self) -> None:
        for copy in self.plan.copies:
            raise ContractError(
                f"action {copy.action.name!r} sends copies to topic {copy.action.topic!r}, which"
                " encoding rules cannot do",
                subject=self.plan.subject,
                version=self.plan.version,
                rule=copy.rule.rule.name,
                position="onFailure/onSuccess",
            )

    def __bool__(self) -> bool:
        return bool(self.plan.rules)

    def apply(self, payload: bytes) -> bytes:
        """`payload` through each rule in order. Raises PayloadRefused when an action rejects the
        row or fails the job, SerializationError when a READ rule failed and the row goes on (its
        payload cannot be read); a WRITE rule that failed and goes on leaves the payload as it was,
        as the reference does."""
        for rule in self.plan.rules:
            if rule.step is None:
                passed, result, reason = False, payload, rule.missing_executor_reason
            else:
                outcome = evaluator_for(self.plan.plan_id, rule)([payload])[0]
                passed, result, reason = outcome.passed, outcome.record, outcome.reason
            status, failure = act(rule, payload, passed, reason)
            if status is not None or failure is not None:
                raise PayloadRefused(status, failure)
            if not passed:
                if self.plan.mode is RuleMode.READ:
                    why = reason or rule.failure_reason()
                    raise SerializationError(f"encoding rule {rule.rule.name!r} failed: {why}")
                if rule.step is None:
                    return payload  # the reference stops at a rule without executor
                continue
            if rule.rule.kind is RuleKind.TRANSFORM:
                if not isinstance(result, bytes | bytearray):
                    raise SerializationError(
                        f"encoding rule {rule.rule.name!r} gave a {type(result).__name__}, not bytes"
                    )
                payload = bytes(result)
        return payload
