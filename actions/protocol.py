"""The action protocol: what happens to a record after a rule passed or failed (docs/semantics.md §2.4).

Actions are decided when the plan is built, so the engine can run them natively: NONE continues,
ERROR fails the Spark job, DLQ rejects the row to a dead-letter topic. A custom action may:
- continue with a `topic`: a copy of the record goes to that topic through the DLQ sink, once per
  record per run (the routing pass's idempotent writers deliver it, however often Spark computes
  the result), and processing continues;
- run a Python `callback` for each record it fires on; processing then continues, and an exception
  it raises fails the job (never swallowed). The callback runs each time Spark computes the rows:
  three actions on one result call it three times per record.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from contracts.model import Rule, RuleMode


class Effect(str, enum.Enum):
    """What the engine does with the record once the action ran."""

    CONTINUE = "CONTINUE"
    FAIL = "FAIL"
    REJECT = "REJECT"


@dataclass(frozen=True)
class ActionContext:
    """The rule an action runs for, where it is registered, and the target version's metadata."""

    rule: Rule
    subject: str
    version: int
    mode: RuleMode
    properties: Mapping[str, str] = field(default_factory=dict)


class RecordCallback(Protocol):
    """A custom action's per-record work: the record (Avro-shaped) and the failure reason, if any."""

    def __call__(self, ctx: ActionContext, record: Any, reason: str | None) -> None: ...


@dataclass(frozen=True)
class ActionPlan:
    """An action resolved for one rule: its name, effect, topic and optional per-record callback.

    `topic` is where a REJECT sends the record, and where a CONTINUE sends a copy of it."""

    name: str
    effect: Effect
    topic: str | None = None
    callback: RecordCallback | None = None


@runtime_checkable
class Action(Protocol):
    """An action looked up by name (NONE, ERROR, DLQ or custom)."""

    name: str

    def plan(self, ctx: ActionContext) -> ActionPlan:
        """Resolve this action for one rule at plan time; raise ContractError if it cannot run."""
        ...
