"""Encoding rules on the serialized payload (docs/semantics.md §11.5), run inside the encode and
decode passes: WRITE after the format wrote the body, READ before it reads it. The wire prefix
(or schema id header) is never part of the payload, nor are a Protobuf body's message indexes (the
reference keeps them with the schema id, in clear).

Each rule runs on one payload at a time, with its evaluator built once per worker. An action
that rejects or fails the row raises `PayloadRefused` with what the pass records (the row's
status, or the message the job fails with); a READ rule that failed and whose action continues
leaves a payload the format cannot read, which makes the record undecodable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.engine.python_pass import act, evaluator_for
from contracts.errors import SerializationError
from contracts.formats.protocol import SchemaFormat, clear_length
from contracts.model import RuleKind, RuleMode
from contracts.planning.plan import Plan
from executors.protocol import Outcome


def split_clear(schema_format: SchemaFormat, body: bytes) -> tuple[bytes, bytes]:
    """The body as the part encoding rules leave in clear and the payload they run on (a Protobuf
    body's message indexes, then the message's bytes; ValueError when the indexes are cut short)."""
    start = clear_length(schema_format, body)
    return body[:start], body[start:]


class PayloadRefused(Exception):
    """A payload an encoding rule's action took out of the flow: the row's `_contract` status (a
    DLQ rejection), or the message its ERROR action fails the job with."""

    def __init__(self, status: dict[str, Any] | None, failure: str | None) -> None:
        super().__init__(failure or (status or {}).get("reason"))
        self.status = status
        self.failure = failure


@dataclass(frozen=True)
class PayloadRules:
    """One version's encoding rules in one direction, planned with their actions (by the planner,
    which refuses copies), run on payloads."""

    plan: Plan

    def __bool__(self) -> bool:
        return bool(self.plan.rules)

    def apply(self, payload: bytes) -> bytes:
        """`payload` through each rule in order. Raises PayloadRefused when an action rejects the
        row or fails the job, SerializationError when a READ rule failed and the row goes on (its
        payload cannot be read)."""
        results, statuses, failures, unreadable = self.apply_all([payload])
        if statuses[0] is not None or failures[0] is not None:
            raise PayloadRefused(statuses[0], failures[0])
        if unreadable[0] is not None:
            raise SerializationError(unreadable[0])
        return results[0]

    def apply_all(
        self, payloads: list[bytes]
    ) -> tuple[list[bytes], list[dict[str, Any] | None], list[str | None], list[str | None]]:
        """Each payload through each rule in order, a rule evaluating every payload still going
        at once: the payloads, and per payload the status an action that rejected it set, the
        message an ERROR action fails the job with, and why a READ payload that a failed rule let
        go on cannot be read. A WRITE rule that failed and goes on leaves the payload as it was,
        as the reference does; one without executor also stops the rules after it."""
        results = list(payloads)
        count = len(results)
        statuses: list[dict[str, Any] | None] = [None] * count
        failures: list[str | None] = [None] * count
        unreadable: list[str | None] = [None] * count
        stopped: set[int] = set()
        for rule in self.plan.rules:
            active = [
                i
                for i in range(count)
                if statuses[i] is None and failures[i] is None and unreadable[i] is None and i not in stopped
            ]
            if not active:
                break
            if rule.step is None:
                outcomes = [Outcome(False, results[i], rule.missing_executor_reason) for i in active]
            else:
                outcomes = evaluator_for(self.plan.plan_id, rule)([results[i] for i in active])
            for i, outcome in zip(active, outcomes, strict=True):
                statuses[i], failures[i] = act(rule, results[i], outcome.passed, outcome.reason)
                if statuses[i] is not None or failures[i] is not None:
                    continue
                if not outcome.passed:
                    if self.plan.mode is RuleMode.READ:
                        why = outcome.reason or rule.failure_reason()
                        unreadable[i] = f"encoding rule {rule.rule.name!r} failed: {why}"
                    elif rule.step is None:
                        stopped.add(i)  # the reference stops at a rule without executor
                    continue
                if rule.rule.kind is RuleKind.TRANSFORM:
                    if not isinstance(outcome.record, bytes | bytearray):
                        raise SerializationError(
                            f"encoding rule {rule.rule.name!r} gave a {type(outcome.record).__name__},"
                            " not bytes"
                        )
                    results[i] = bytes(outcome.record)
        return results, statuses, failures, unreadable
