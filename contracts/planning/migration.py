"""The migration chain between two versions of a subject: which rules run, compiled (docs/semantics.md §6).

W < T: for each consecutive pair (P, N) from the writer version W up to the target T, N's
UPGRADE/UPDOWN migration rules, in order. W > T: for each pair from the newest down, N's
DOWNGRADE/UPDOWN migration rules in reverse order. Every version in between must exist. Each
rule is compiled against the record it receives (§6.2, §6.3); `contracts.engine.python_migration` runs
the plans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contracts.errors import ContractError
from contracts.model import Rule, RuleKind, RuleMode
from contracts.planning.loader import ContractVersion, compile_rules, migration_rules_for
from contracts.planning.plan import Plan, build_plan
from contracts.plugins import PluginRegistry
from executors.protocol import Executor

Resolver = Callable[[str, Any], Any]
_SHOWN_LENGTH = 80
"""How much of a rule's non-record result an error shows."""


def migration_steps(
    versions: Mapping[int, ContractVersion], writer: int, target: int, executors: PluginRegistry[Executor]
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
        rules = migration_rules_for(version, mode, executors)
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
    steps = migration_steps(versions, writer, target, executors)
    for (version, mode, rules), received in zip(
        steps, received_records(versions, writer, steps), strict=True
    ):
        compiled = []
        # Parameters fall back to the metadata of the version the step leads to (docs/semantics.md §1.2).
        leads_to = version if mode is RuleMode.UPGRADE else versions[version.version - 1]
        for rule, record in zip(rules, received, strict=True):
            compiled.extend(compile_rules(version, mode, [rule], executors, record=record, target=leads_to))
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
