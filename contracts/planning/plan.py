"""The plan: which rules run, in which order, with which actions (docs/semantics.md §2).

A plan is data: the ordered compiled rules of one contract version in one mode, each with its
actions resolved, grouped into runs (consecutive native rules; consecutive Python work sharing one
pass). `contracts.engine.runner` applies it to a DataFrame.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actions.dlq.redaction import Redaction
from actions.protocol import ActionContext, ActionPlan, Effect
from contracts.errors import RuleError
from contracts.formats.arrow_text import printable
from contracts.model import Rule, RuleKind, RuleMode
from executors.protocol import BatchStep, RuleContext, Step, condition_failure_message

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class PlannedRule:
    """One rule of a plan: its context, compiled step and the actions resolved for this direction.

    `step` is None when no executor handles the rule's type: the rule then fails for every record
    and the rules after it are skipped (docs/semantics.md §2.1).
    """

    index: int
    ctx: RuleContext
    step: Step | None
    on_success: ActionPlan
    on_failure: ActionPlan
    redaction: Redaction | None = field(default=None, repr=False)
    """What the rule's reasons redact: the values of the fields the version's ENCRYPT rules tag,
    which the records it evaluates may hold in plaintext (docs/semantics.md §11.4)."""

    @property
    def rule(self) -> Rule:
        return self.ctx.rule

    @property
    def native(self) -> bool:
        """True when the rule is evaluated by Spark expressions (a missing executor is a constant failure)."""
        return not isinstance(self.step, BatchStep)

    @property
    def has_callbacks(self) -> bool:
        """Whether a custom action needs a Python pass after this rule."""
        return self.on_success.callback is not None or self.on_failure.callback is not None

    @property
    def missing_executor_reason(self) -> str:
        return f"Could not find rule executor of type {self.rule.type}"

    def unhandled(self) -> str:
        """One line naming this rule, which no executor handles, and what it does to every record
        (docs/semantics.md §2.1)."""
        ctx = self.ctx
        failure = self.on_failure.name + (f" -> {self.on_failure.topic}" if self.on_failure.topic else "")
        return (
            f"subject={ctx.subject} version={ctx.version} rule={self.rule.name} type={self.rule.type}:"
            f" no executor handles this rule type, so in {ctx.mode.value} it fails every record"
            f" (on failure: {failure}) and the rules after it are skipped"
        )

    def failure_reason(self) -> str:
        """The reason a native failure reports (Python steps carry their own evaluation error)."""
        if self.step is None:
            return self.missing_executor_reason
        if self.rule.kind is RuleKind.CONDITION:
            return condition_failure_message(self.rule)
        return f"Rule failed: {self.rule.name}"

    def reason_text(self, record: Any, text: str | None) -> str | None:
        """A reason (or cause) the rule's evaluation gave for `record`, as a DLQ record and an error
        carry it: the values of `record`'s fields ENCRYPT rules tag redacted (§11.4), and lone
        surrogates escaped, since a value or an expression may put one there that no UTF-8 text
        holds (docs/semantics.md §8.6)."""
        if text is None:
            return None
        if self.redaction is not None:
            text = self.redaction.scrub(record, text)
        return printable(text)

    def error_message(self, reason: str, cause: str | None = None) -> str:
        """The text an ERROR action fails the job with: a first line naming subject, version, rule,
        mode and reason, the same wherever the rule ran (Spark appends its SQLSTATE on the next
        line), then the cause, when Python knows one (an executor's traceback)."""
        ctx = self.ctx
        error = RuleError(
            reason, subject=ctx.subject, version=ctx.version, rule=self.rule.name, mode=ctx.mode.value
        )
        return f"{error}\n{cause or ''}"

    def status(self, action: ActionPlan, reason: str | None) -> dict[str, Any]:
        """The `_contract` value for a row this rule rejected."""
        ctx = self.ctx
        return {
            "rule": self.rule.name,
            "mode": ctx.mode.value,
            "action": action.name,
            "reason": reason,
            "topic": action.topic,
            "subject": ctx.subject,
            "version": ctx.version,
        }

    def describe(self) -> str:
        how = "native" if self.native else "python"
        if self.has_callbacks:
            how += ", custom action in python"
        if self.step is None:
            how = "no executor: fails every record, later rules skipped"
        notes = [] if self.step is None else [self.step.explain]
        if isinstance(self.step, BatchStep):
            notes.insert(0, self.step.why_not_native)
        said = "".join(f"; {note}" for note in notes if note)
        failure = self.on_failure.name
        if self.on_failure.topic:
            failure += f" -> {self.on_failure.topic}"
        return (
            f"{self.index + 1}. {self.rule.name} [{self.rule.type} {self.rule.kind.value}, mode"
            f" {self.ctx.mode.value}] on success {self.on_success.name}, on failure {failure} ({how}){said}"
        )


@dataclass(frozen=True)
class CopyAction:
    """A CONTINUE action with a topic: the routing pass sends a copy of each record `rule` gave the
    outcome `passed` to `action.topic`, and the record goes on."""

    rule: PlannedRule
    passed: bool
    action: ActionPlan

    def reason(self) -> str | None:
        """The `__rule.exception` header of a copy: the rule's failure reason when it failed."""
        return None if self.passed else self.rule.failure_reason()


@dataclass(frozen=True)
class SkippedRuleSet:
    """Rules a plan leaves out because their rule set's `enableAt` is not for clients."""

    enable_at: str | None
    rules: tuple[str, ...]

    def describe(self) -> str:
        return (
            f"the rule set's enableAt is {self.enable_at!r}: a client skips all {len(self.rules)} of its"
            f" rules ({', '.join(self.rules)})"
        )


@dataclass(frozen=True)
class Plan:
    """The ordered rules one contract version runs in one mode, ready to apply to a DataFrame."""

    subject: str
    version: int
    mode: RuleMode
    record_type: StructType
    rules: tuple[PlannedRule, ...]
    plan_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    skipped: SkippedRuleSet | None = None
    left_out: tuple[tuple[str, str], ...] = ()
    """Rules written for this mode that do not run, by name, with why (disabled, superseded)."""

    def explain(self) -> str:
        header = f"Plan {self.mode.value} for subject {self.subject!r} version {self.version}"
        if self.skipped is not None:
            return f"{header}: no rules, {self.skipped.describe()}"
        not_run = [f"  not run: {name} ({why})" for name, why in self.left_out]
        if not self.rules:
            return "\n".join([f"{header}: no rules", *not_run])
        return "\n".join([f"{header}:", *(f"  {rule.describe()}" for rule in self.rules), *not_run])

    def __repr__(self) -> str:
        return self.explain()

    @property
    def can_reject(self) -> bool:
        """Whether any rule's action can send a row to a dead-letter topic."""
        actions = (action for rule in self.rules for action in (rule.on_success, rule.on_failure))
        return any(action.effect is Effect.REJECT for action in actions)

    @property
    def has_transforms(self) -> bool:
        return has_transforms(self.rules)

    @property
    def copies(self) -> tuple[CopyAction, ...]:
        """The actions that send a copy of the record to a topic and continue, with when they fire."""
        return tuple(
            CopyAction(rule, passed, action)
            for rule in self.rules
            for passed, action in ((True, rule.on_success), (False, rule.on_failure))
            if action.effect is Effect.CONTINUE and action.topic is not None
        )

    @property
    def runnable(self) -> bool:
        """Whether every rule's step may run as compiled (none was compiled read-only in a form
        that must not run: `BatchStep.runnable`)."""
        return all(rule.step is None or rule.step.runnable for rule in self.rules)

    @property
    def all_native(self) -> bool:
        """Whether every rule runs as Spark expressions, with no Python pass (no rule run in
        Python, no custom action callback)."""
        return all(native for native, _ in self.operations())

    def groups(self) -> list[tuple[bool, list[PlannedRule]]]:
        """The operations grouped into runs: (True, native rules) or (False, one Python pass's rules)."""
        return [
            (native, [rule for _, rule in group])
            for native, group in itertools.groupby(self.operations(), key=lambda op: op[0])
        ]

    def operations(self) -> list[tuple[bool, PlannedRule]]:
        """(native?, rule) in order: native rules with custom actions get a Python pass after them,
        so consecutive Python work shares one mapInArrow pass."""
        operations: list[tuple[bool, PlannedRule]] = []
        for rule in self.rules:
            if rule.native:
                operations.append((True, rule))
                if rule.has_callbacks:
                    operations.append((False, rule))
            else:
                operations.append((False, rule))
        return operations


def build_plan(
    subject: str,
    version: int,
    mode: RuleMode,
    record_type: StructType,
    rules: Sequence[tuple[RuleContext, Step | None]],
    resolve_action: Any,
    skipped: SkippedRuleSet | None = None,
    left_out: Sequence[tuple[str, str]] = (),
    redaction: Redaction | None = None,
) -> Plan:
    """Resolve each rule's actions and truncate after a rule without executor (docs/semantics.md §2.1);
    `skipped` names the rules the rule set's `enableAt` leaves out and `left_out` the disabled and
    superseded ones, for `explain`; `redaction` is what every rule's reasons redact."""
    planned: list[PlannedRule] = []
    for index, (ctx, step) in enumerate(rules):
        action_ctx = ActionContext(ctx.rule, subject, version, mode, ctx.properties)
        planned.append(
            PlannedRule(
                index=index,
                ctx=ctx,
                step=step,
                on_success=resolve_action(ctx.rule.action_for(mode, outcome_failed=False), action_ctx),
                on_failure=resolve_action(ctx.rule.action_for(mode, outcome_failed=True), action_ctx),
                redaction=redaction,
            )
        )
        if step is None:
            break
    return Plan(
        subject, version, mode, record_type, tuple(planned), skipped=skipped, left_out=tuple(left_out)
    )


def has_transforms(rules: Sequence[PlannedRule]) -> bool:
    return any(rule.rule.kind is RuleKind.TRANSFORM for rule in rules)


def native_transforms(group: tuple[bool, list[PlannedRule]]) -> bool:
    """Whether a group of `Plan.groups` is a run of native rules holding a transform."""
    native, rules = group
    return native and has_transforms(rules)
