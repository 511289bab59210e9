"""Runs a migration chain over decoded records and projects the result onto the target schema.

The migrated record is projected as Java's client re-decodes it: extra fields dropped, a missing
field takes its default; a missing field without one, a value the target cannot hold, or a
TRANSFORM result that is no record at all makes the record undecodable, naming the rule that
made it (docs/semantics.md §6.4, §6.5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contracts.engine import python_pass
from contracts.errors import SerializationError
from contracts.formats.protocol import SchemaFormat
from contracts.model import RuleKind
from contracts.planning.plan import Plan, PlannedRule

_SHOWN_LENGTH = 80
"""How much of a rule's non-record result an error shows."""


@dataclass(frozen=True)
class Unreadable:
    """What a migration made of a record that is no record (a TRANSFORM returned a number, a
    string, a list): why, naming the rule. Later rules do not receive it; `project` raises its
    reason, so the record is undecodable (docs/semantics.md §6.5)."""

    reason: str


def migrate(
    plans: tuple[Plan, ...],
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    unreadable: Mapping[int, str] | None = None,
) -> list[PlannedRule | None]:
    """Run the migration plans over records in place: a DLQ rejection sets a row's status, an
    ERROR action its failure (the message the job fails with, see planner.raise_failures); a
    rule without executor fails each record, and each rule fails the rows in `unreadable`, whose
    records could not be read, with their reason; a TRANSFORM result that is not a record
    replaces the record with an `Unreadable`. Returns, per record, the last TRANSFORM that made it
    (None: no rule changed it), for `project` to name."""
    made_by: list[PlannedRule | None] = [None] * len(records)
    for plan in plans:
        for rule in plan.rules:
            rows = [i for i, record in enumerate(records) if not isinstance(record, Unreadable)]
            passed = _run(plan, rule, rows, records, statuses, failures, unreadable or {})
            if rule.rule.kind is not RuleKind.TRANSFORM:
                continue
            for i in (row for row, ok in zip(rows, passed, strict=True) if ok):
                made_by[i] = rule
                if not isinstance(records[i], Mapping):
                    records[i] = Unreadable(f"{_named(rule)} returned {_shown(records[i])}, not a record")
    return made_by


def _run(
    plan: Plan,
    rule: PlannedRule,
    rows: list[int],
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    unreadable: Mapping[int, str],
) -> list[bool | None]:
    """One rule over the records at `rows` (those still valid), in place: each one's outcome.
    Rows in `unreadable` fail the rule with their reason, unevaluated."""
    sub_records = [records[i] for i in rows]
    sub_statuses = [statuses[i] for i in rows]
    sub_failures = [failures[i] for i in rows]
    if rule.step is None:
        passed: list[bool | None] = [None] * len(rows)
        for j, status in enumerate(sub_statuses):
            if status is None and sub_failures[j] is None:
                reason = rule.missing_executor_reason
                sub_statuses[j], sub_failures[j] = python_pass.act(rule, sub_records[j], False, reason)
                passed[j] = False
    else:
        evaluator = python_pass.evaluator_for(plan.plan_id, rule)
        sub_unreadable = {j: unreadable[i] for j, i in enumerate(rows) if i in unreadable}
        passed, _ = python_pass.run_rule(
            rule, evaluator, sub_records, sub_statuses, sub_failures, unreadable=sub_unreadable
        )
    for j, i in enumerate(rows):
        records[i], statuses[i], failures[i] = sub_records[j], sub_statuses[j], sub_failures[j]
    return passed


def _named(rule: PlannedRule) -> str:
    ctx = rule.ctx
    where = f"on subject {ctx.subject!r} version {ctx.version}"
    return f"migration rule {rule.rule.name!r} in {ctx.mode.value} {where}"


def made_by_text(rule: PlannedRule | None) -> str:
    """What a projection error adds to name the rule whose result it read ("" for none)."""
    return "" if rule is None else f" (the result of {_named(rule)})"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_LENGTH else text[: _SHOWN_LENGTH - 3] + "..."


def project(value: Any, schema: Any, schema_format: SchemaFormat, made_by: PlannedRule | None = None) -> Any:
    """A migrated value read as a record of the target `schema` by its format (for Avro: missing
    fields take their defaults, JSON-view values become Avro values, as Java reads the migrated
    JSON with the target schema); what cannot be is a SerializationError naming `made_by`, the
    rule whose result it was."""
    if isinstance(value, Unreadable):
        raise SerializationError(value.reason)
    try:
        return schema_format.project(value, schema)
    except SerializationError as e:
        raise SerializationError(f"{e}{made_by_text(made_by)}") from e
