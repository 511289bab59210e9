"""The built-in actions NONE, ERROR and DLQ (docs/semantics.md §2.4, §7)."""

from __future__ import annotations

from dataclasses import dataclass

from actions.dlq.sink import DlqError, validate_topic
from actions.protocol import ActionContext, ActionPlan, Effect
from contracts.errors import ContractError

DLQ_TOPIC = "dlq.topic"


@dataclass(frozen=True)
class NoneAction:
    """Do nothing: processing continues with the next rule."""

    name: str = "NONE"

    def plan(self, ctx: ActionContext) -> ActionPlan:
        return ActionPlan(self.name, Effect.CONTINUE)


@dataclass(frozen=True)
class ErrorAction:
    """Fail the Spark job when the row is computed, naming subject, version, rule and mode."""

    name: str = "ERROR"

    def plan(self, ctx: ActionContext) -> ActionPlan:
        return ActionPlan(self.name, Effect.FAIL)


@dataclass(frozen=True)
class DlqAction:
    """Send the row to its dead-letter topic and drop it from the main output.

    The topic is this action's own `topic`, else the rule's `dlq.topic` param, else the target
    version's metadata property `dlq.topic`; with none, or one Kafka would refuse, the contract
    cannot run.
    """

    topic: str | None = None
    name: str = "DLQ"

    def plan(self, ctx: ActionContext) -> ActionPlan:
        for topic, position in (
            (self.topic, "DlqAction.topic"),
            (ctx.rule.params.get(DLQ_TOPIC), f"params.{DLQ_TOPIC}"),
            (ctx.properties.get(DLQ_TOPIC), f"metadata.properties.{DLQ_TOPIC}"),
        ):
            if topic:
                topic = checked_topic(
                    topic, position, subject=ctx.subject, version=ctx.version, rule=ctx.rule.name
                )
                return ActionPlan(self.name, Effect.REJECT, topic=topic)
        raise ContractError(
            "DLQ action has no topic: set the rule param 'dlq.topic', the metadata property"
            " 'dlq.topic', or DlqAction(topic=...)",
            subject=ctx.subject,
            version=ctx.version,
            rule=ctx.rule.name,
            position=f"params.{DLQ_TOPIC}",
        )


def checked_topic(
    topic: str, position: str, *, subject: str | None, version: int | None, rule: str | None = None
) -> str:
    """`topic` if Kafka accepts it as a topic name, else a ContractError naming the rule and where
    the topic was set: a bad name fails the contract at load, not the job at its first rejected row."""
    try:
        return validate_topic(topic)
    except DlqError as e:
        raise ContractError(str(e), subject=subject, version=version, rule=rule, position=position) from e
