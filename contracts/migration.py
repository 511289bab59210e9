"""Migrations between versions of a subject: which rules run, and the record they leave (SEMANTICS.md §6).

W < T: for each consecutive pair (P, N) from the writer version W up to the target T, N's
UPGRADE/UPDOWN migration rules, in order. W > T: for each pair from the newest down, N's
DOWNGRADE/UPDOWN migration rules in reverse order. Every version in between must exist. The
migrated record is then projected onto the target schema as Java's client re-decodes it: extra
fields dropped, a missing field takes its default, a missing field without one is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts import _batch
from contracts._avro_json import from_json_view
from contracts.errors import ContractError, SerializationError
from contracts.loader import ContractVersion, compile_rules, migration_rules_for
from contracts.model import Rule, RuleKind, RuleMode
from contracts.planner import Plan, build_plan

Resolver = Callable[[str, Any], Any]


def migration_steps(
    versions: Mapping[int, ContractVersion], writer: int, target: int
) -> list[tuple[ContractVersion, RuleMode, list[Rule]]]:
    """The (version whose rules run, direction, rules in running order) from `writer` to `target`."""
    low, high = sorted((writer, target))
    missing = [v for v in range(low, high + 1) if v not in versions]
    if missing:
        subject = next(iter(versions.values())).subject if versions else None
        raise ContractError(
            f"cannot migrate from version {writer} to {target}: versions {missing} do not exist",
            subject=subject,
            version=target,
        )
    mode = RuleMode.UPGRADE if writer < target else RuleMode.DOWNGRADE
    newer_versions = range(low + 1, high + 1)
    steps = []
    for newer in newer_versions if mode is RuleMode.UPGRADE else reversed(newer_versions):
        version = versions[newer]
        rules = migration_rules_for(version, mode)
        if rules:
            steps.append((version, mode, rules))
    return steps


def migration_plans(
    versions: Mapping[int, ContractVersion],
    writer: int,
    target: int,
    executors: Any,
    resolve_action: Resolver,
) -> tuple[Plan, ...]:
    """One compiled plan per migration step, in running order, each rule compiled against the
    record it receives (`received_records`)."""
    plans = []
    steps = migration_steps(versions, writer, target)
    for (version, mode, rules), received in zip(
        steps, received_records(versions, writer, steps), strict=True
    ):
        compiled = []
        for rule, record in zip(rules, received, strict=True):
            compiled.extend(compile_rules(version, mode, [rule], executors, record=record))
        where = (version.subject, version.version, mode, received[0].spark_type)
        plans.append(build_plan(*where, compiled, resolve_action))
    return tuple(plans)


def received_records(
    versions: Mapping[int, ContractVersion],
    writer: int,
    steps: list[tuple[ContractVersion, RuleMode, list[Rule]]],
) -> list[list[ContractVersion]]:
    """For each rule of each step, the version whose record it receives: the writer's at first;
    after a TRANSFORM, the version the step migrates to (its own on UPGRADE, the one below on
    DOWNGRADE), as a transform's result is that version's record. A step of conditions only, or
    a version without rules, hands on the record it received."""
    record = versions[writer]
    received = []
    for version, mode, rules in steps:
        result = version if mode is RuleMode.UPGRADE else versions[version.version - 1]
        step_records = []
        for rule in rules:
            step_records.append(record)
            if rule.kind is RuleKind.TRANSFORM:
                record = result
        received.append(step_records)
    return received


def migrate(
    plans: tuple[Plan, ...],
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    unreadable: Mapping[int, str] | None = None,
) -> None:
    """Run the migration plans over records in place: a DLQ rejection sets a row's status, an
    ERROR action its failure (the message the job fails with, see planner.raise_failures); a
    rule without executor fails each record, and each rule fails the rows in `unreadable`, whose
    records could not be read, with their reason."""
    for plan in plans:
        for rule in plan.rules:
            if rule.step is None:
                for i, status in enumerate(statuses):
                    if status is None and failures[i] is None:
                        reason = rule.missing_executor_reason
                        statuses[i], failures[i] = _batch.act(rule, records[i], False, reason)
                continue
            evaluator = _batch.evaluator_for(plan.plan_id, rule)
            _batch.run_rule(rule, evaluator, records, statuses, failures, unreadable=unreadable)


def missing_field_message(name: str) -> str:
    return f"migrated record has no field {name!r} and the target schema gives it no default"


def project(value: Any, schema: Any) -> Any:
    """A migrated value read as the target schema: records keep the target's fields, taking
    defaults for missing ones; a missing field without default is a SerializationError. Values in
    JSONata's JSON view (and defaults, which are JSON too) become the target's Avro values, as Java
    reads the migrated JSON with the target schema; one that cannot is a SerializationError."""
    projected = _project(value, schema)
    try:
        return from_json_view(projected, schema)
    except SerializationError as e:
        raise SerializationError(f"migrated record: {e}") from e


def _project(value: Any, schema: Any) -> Any:
    if isinstance(schema, dict) and schema.get("type") == "record" and isinstance(value, Mapping):
        out = {}
        for field in schema["fields"]:
            name = field["name"]
            if name in value:
                out[name] = _project(value[name], field["type"])
            elif "default" in field:
                out[name] = field["default"]
            else:
                raise SerializationError(missing_field_message(name))
        return out
    if isinstance(schema, list):
        records = [branch for branch in schema if isinstance(branch, dict) and branch.get("type") == "record"]
        if len(records) == 1 and isinstance(value, Mapping):
            return _project(value, records[0])
    if isinstance(schema, dict) and schema.get("type") == "array" and isinstance(value, list):
        return [_project(item, schema["items"]) for item in value]
    if isinstance(schema, dict) and schema.get("type") == "map" and isinstance(value, Mapping):
        return {key: _project(item, schema["values"]) for key, item in value.items()}
    return value
