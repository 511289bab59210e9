"""What a contract refuses at load, before anything runs: references, DLQ topics, actions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from dataframe_users import SUBJECT, USER, make_contract, register, rule

from actions.builtin import DlqAction
from actions.dlq.local_topic import LocalTopicSink
from actions.protocol import ActionContext, ActionPlan, Effect
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError


def test_an_unresolvable_reference_fails_at_load_naming_subject_and_version(sink: LocalTopicSink) -> None:
    registry = LocalRegistry()
    registry.register_schema("address-value", Schema.from_dict({"schema": json.dumps(USER)}))
    payload = {
        "schema": json.dumps({**USER, "name": "Holder"}),
        "references": [{"name": "com.acme.User", "subject": "address-value", "version": 1}],
    }
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    registry.delete_subject("address-value")
    registry.delete_subject("address-value", permanent=True)
    with pytest.raises(ContractError, match="cannot be resolved") as caught:
        DataContract(registry, SUBJECT, dlq_sink=sink)
    assert (caught.value.subject, caught.value.version) == (SUBJECT, 1)


def test_dlq_without_a_topic_fails_at_load(sink: LocalTopicSink) -> None:
    with pytest.raises(ContractError, match="DLQ action has no topic") as caught:
        make_contract(sink, [rule("positiveAge", "message.age > 0", onFailure="DLQ")])
    assert (caught.value.subject, caught.value.version, caught.value.rule) == (SUBJECT, 1, "positiveAge")


@pytest.mark.parametrize("topic", ["../../etc", "a b", "..", "x" * 250])
def test_an_invalid_dlq_topic_param_fails_at_load(sink: LocalTopicSink, topic: str) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": topic})]
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        make_contract(sink, rules)
    error = caught.value
    assert (error.subject, error.version, error.rule, error.position) == (
        SUBJECT,
        1,
        "positiveAge",
        "params.dlq.topic",
    )


def test_an_invalid_dlq_topic_in_the_metadata_fails_at_load(sink: LocalTopicSink) -> None:
    registry = LocalRegistry()
    register(registry, [rule("positiveAge", "message.age > 0", onFailure="DLQ")], **{"dlq.topic": "a/b"})
    with pytest.raises(ContractError, match="DLQ topic may contain only") as caught:
        DataContract(registry, SUBJECT, dlq_sink=sink)
    assert (caught.value.rule, caught.value.position) == ("positiveAge", "metadata.properties.dlq.topic")


def test_an_invalid_dlq_topic_given_through_the_api_fails_at_load(sink: LocalTopicSink) -> None:
    rules = [rule("positiveAge", "message.age > 0", onFailure="DLQ", params={"dlq.topic": "fine"})]
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        make_contract(sink, rules, actions=[DlqAction(topic="../up")])
    assert (caught.value.rule, caught.value.position) == ("positiveAge", "DlqAction.topic")

    @dataclass(frozen=True)
    class Quarantine:
        name: str = "QUARANTINE"

        def plan(self, ctx: ActionContext) -> ActionPlan:
            return ActionPlan(self.name, Effect.REJECT, topic="quarantine/today")

    rules = [rule("positiveAge", "message.age > 0", onFailure="QUARANTINE")]
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        make_contract(sink, rules, actions=[Quarantine()])
    assert (caught.value.subject, caught.value.version, caught.value.rule) == (SUBJECT, 1, "positiveAge")
    assert caught.value.position == "actions.QUARANTINE.topic"


def test_an_invalid_decode_dlq_topic_fails_before_anything_runs(sink: LocalTopicSink, spark: Any) -> None:
    contract = make_contract(sink, [])
    frames = spark.createDataFrame([(b"\x00",)], "value binary")
    with pytest.raises(ContractError, match="DLQ topic") as caught:
        contract.deserialize(frames, on_decode_error="DLQ", decode_dlq_topic="../undecodable")
    assert (caught.value.subject, caught.value.position) == (SUBJECT, "decode_dlq_topic")
