"""The contract model reads and writes the registry's JSON exactly and rejects contracts that cannot run."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contracts.errors import ContractError
from contracts.model import (
    Metadata,
    RegisteredSchema,
    Rule,
    RuleKind,
    RuleMode,
    RuleSet,
    Schema,
    merge_metadata,
    merge_rule_sets,
)

SEMANTICS_EXAMPLE: dict[str, Any] = {
    "schemaType": "AVRO",
    "schema": json.dumps(
        {
            "type": "record",
            "name": "User",
            "fields": [{"name": "ssn", "type": "string", "confluent:tags": ["PII"]}],
        }
    ),
    "metadata": {
        "properties": {"application.major.version": "1", "owner": "team-a"},
        "tags": {"User.ssn": ["PRIVATE"]},
    },
    "ruleSet": {
        "domainRules": [
            {
                "name": "checkSsnLen",
                "kind": "CONDITION",
                "type": "CEL",
                "mode": "WRITE",
                "expr": "size(message.ssn) == 9",
                "params": {"dlq.topic": "bad-users"},
                "onFailure": "DLQ",
            }
        ],
        "migrationRules": [],
    },
}

MIGRATION_EXAMPLE: dict[str, Any] = {
    "schema": '{"type":"record","name":"User","fields":[{"name":"socialSecurityNumber","type":"string"}]}',
    "metadata": {"properties": {"application.major.version": "2"}, "sensitive": ["owner"]},
    "ruleSet": {
        "migrationRules": [
            {
                "name": "renameSsn",
                "doc": "ssn became socialSecurityNumber in major 2",
                "kind": "TRANSFORM",
                "type": "JSONATA",
                "mode": "UPGRADE",
                "expr": "$merge([$sift($, function($v, $k) {$k != 'ssn'}),"
                " {'socialSecurityNumber': $.'ssn'}])",
                "tags": ["PII"],
                "params": {"jsonata.timeout.ms": "100"},
                "onSuccess": "NONE",
                "onFailure": "ERROR",
                "disabled": False,
            },
            {"name": "downgrade", "kind": "TRANSFORM", "type": "JSONATA", "mode": "DOWNGRADE", "expr": "$"},
        ],
        "encodingRules": [],
        "enableAt": "CLIENT",
    },
    "references": [{"name": "com.acme.Address", "subject": "address-value", "version": 2}],
    "futureKey": {"kept": True},
}


@pytest.mark.parametrize("payload", [SEMANTICS_EXAMPLE, MIGRATION_EXAMPLE], ids=["semantics", "migration"])
def test_schema_round_trips_exactly(payload: dict[str, Any]) -> None:
    original = copy.deepcopy(payload)
    assert Schema.from_dict(payload).to_dict() == original
    assert payload == original


def test_registered_schema_round_trips_with_id_subject_and_version() -> None:
    payload = {"subject": "users-value", "version": 3, "id": 17, **SEMANTICS_EXAMPLE}
    registered = RegisteredSchema.from_dict(payload)
    assert (registered.schema_id, registered.subject, registered.version) == (17, "users-value", 3)
    assert registered.to_dict() == payload
    assert "id" not in registered.schema.to_dict()


def test_defaults_are_those_of_the_registry() -> None:
    rule = Rule.from_dict({"name": "r", "type": "CEL", "expr": "true"})
    assert rule.kind is RuleKind.TRANSFORM
    assert rule.mode is RuleMode.WRITEREAD
    assert rule.to_dict() == {"name": "r", "type": "CEL", "expr": "true"}


def test_model_reads_values_and_unknown_keys() -> None:
    schema = Schema.from_dict(MIGRATION_EXAMPLE)
    rule = schema.rules.migration_rules[0]
    assert rule.tags == ("PII",)
    assert rule.params == {"jsonata.timeout.ms": "100"}
    assert rule.doc == "ssn became socialSecurityNumber in major 2"
    assert schema.rules.enable_at == "CLIENT"
    assert schema.rules.extra == {}
    assert schema.extra == {"futureKey": {"kept": True}}
    assert schema.properties == {"application.major.version": "2"}
    assert schema.references[0].subject == "address-value"


def test_code_built_model_writes_only_what_it_sets() -> None:
    rule = Rule("check", RuleKind.CONDITION, RuleMode.WRITE, "CEL", "message.a > 0", on_failure="DLQ")
    schema = Schema(
        '"string"', rule_set=RuleSet(domain_rules=(rule,)), metadata=Metadata(properties={"a": "b"})
    )
    assert schema.to_dict() == {
        "schema": '"string"',
        "metadata": {"properties": {"a": "b"}},
        "ruleSet": {
            "domainRules": [
                {
                    "name": "check",
                    "kind": "CONDITION",
                    "mode": "WRITE",
                    "type": "CEL",
                    "expr": "message.a > 0",
                    "onFailure": "DLQ",
                }
            ]
        },
    }
    assert Schema.from_dict(schema.to_dict()) == schema


def _rule(**changes: Any) -> dict[str, Any]:
    return {"name": "r1", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "true", **changes}


@pytest.mark.parametrize(
    ("rule", "position", "message"),
    [
        (_rule(kind="CHECK"), "kind", "unknown kind 'CHECK'"),
        (_rule(mode="write"), "mode", "unknown mode 'write'"),
        (_rule(type=""), "type", "no type"),
        ({"kind": "CONDITION", "type": "CEL"}, "name", "no name"),
        (_rule(onFailure="DLQ,NONE"), "onFailure", "action pair"),
        (_rule(onSuccess="NONE,NONE", mode="READ"), "onSuccess", "action pair"),
        (_rule(mode="UPGRADE"), "mode", "domain rule has migration mode UPGRADE"),
        (_rule(disabled="yes"), "disabled", "true or false"),
        (_rule(params={"a": 1}), "params", "strings to strings"),
        (_rule(tags="PII"), "tags", "list of strings"),
    ],
)
def test_invalid_domain_rules_name_subject_version_rule_and_field(
    rule: dict[str, Any], position: str, message: str
) -> None:
    payload = {"schema": '"string"', "ruleSet": {"domainRules": [rule]}}
    with pytest.raises(ContractError, match=message) as caught:
        Schema.from_dict(payload, subject="users-value", version=4)
    error = caught.value
    assert (error.subject, error.version, error.position) == ("users-value", 4, position)
    assert error.rule == rule.get("name")
    assert "users-value" in str(error)


def test_migration_rule_with_a_domain_mode_is_rejected() -> None:
    payload = {"schema": '"string"', "ruleSet": {"migrationRules": [_rule(mode="WRITE")]}}
    with pytest.raises(ContractError, match="migration rule has domain mode WRITE") as caught:
        Schema.from_dict(payload, subject="s", version=1)
    assert caught.value.rule == "r1"


def test_duplicate_rule_names_in_one_list_are_rejected() -> None:
    payload = {"schema": '"string"', "ruleSet": {"domainRules": [_rule(), _rule(expr="false")]}}
    with pytest.raises(ContractError, match="duplicate rule name 'r1'") as caught:
        Schema.from_dict(payload, subject="s", version=2)
    assert (caught.value.rule, caught.value.position) == ("r1", "domainRules")


def test_the_same_name_in_migration_and_domain_lists_is_allowed() -> None:
    payload = {
        "schema": '"string"',
        "ruleSet": {"domainRules": [_rule()], "migrationRules": [_rule(mode="UPGRADE", kind="TRANSFORM")]},
    }
    assert Schema.from_dict(payload).rules.domain_rules[0].name == "r1"


@pytest.mark.parametrize(
    ("mode", "phase", "runs"),
    [
        ("WRITEREAD", "WRITE", True),
        ("WRITEREAD", "READ", True),
        ("WRITEREAD", "UPGRADE", False),
        ("UPDOWN", "UPGRADE", True),
        ("UPDOWN", "DOWNGRADE", True),
        ("UPDOWN", "WRITE", False),
        ("WRITE", "WRITE", True),
        ("WRITE", "READ", False),
        ("READ", "READ", True),
        ("UPGRADE", "DOWNGRADE", False),
    ],
)
def test_mode_matching(mode: str, phase: str, runs: bool) -> None:
    assert RuleMode(mode).matches(RuleMode(phase)) is runs


@pytest.mark.parametrize(
    ("mode", "on_failure", "phase", "action"),
    [
        ("WRITE", None, "WRITE", "ERROR"),
        ("WRITE", "DLQ", "WRITE", "DLQ"),
        ("WRITEREAD", "DLQ,NONE", "WRITE", "DLQ"),
        ("WRITEREAD", "DLQ,NONE", "READ", "NONE"),
        ("UPDOWN", "ERROR,DLQ", "UPGRADE", "ERROR"),
        ("UPDOWN", "ERROR,DLQ", "DOWNGRADE", "DLQ"),
        # docs/semantics.md §2.3: split on the comma, not trimmed.
        ("WRITEREAD", "ERROR, NONE", "READ", " NONE"),
        ("WRITEREAD", "NONE", "READ", "NONE"),
    ],
)
def test_failure_action_per_direction(mode: str, on_failure: str | None, phase: str, action: str) -> None:
    rule = Rule("r", RuleKind.CONDITION, RuleMode(mode), "CEL", "true", on_failure=on_failure)
    assert rule.action_for(RuleMode(phase), outcome_failed=True) == action


def test_success_action_defaults_to_none() -> None:
    rule = Rule("r", RuleKind.CONDITION, RuleMode.WRITE, "CEL", "true")
    assert rule.action_for(RuleMode.WRITE, outcome_failed=False) == "NONE"
    assert (
        Rule("r", mode=RuleMode.WRITEREAD, type="CEL", on_success="NONE,DLQ").action_for(
            RuleMode.READ, outcome_failed=False
        )
        == "DLQ"
    )


def test_metadata_merge_later_layers_win() -> None:
    default = Metadata(properties={"owner": "a", "tier": "1"}, tags={"**.ssn": ("PII",)})
    own = Metadata(properties={"owner": "b"}, sensitive=("secret",))
    override = Metadata(properties={"tier": "0"})
    merged = merge_metadata(default, own, override)
    assert merged is not None
    assert merged.properties == {"owner": "b", "tier": "0"}
    assert merged.tags == {"**.ssn": ("PII",)}
    assert merged.sensitive == ("secret",)
    assert merge_metadata(None, None) is None


def test_rule_set_merge_replaces_rules_by_name() -> None:
    a = Rule("a", type="CEL", expr="1")
    b = Rule("b", type="CEL", expr="2")
    b2 = Rule("b", type="CEL", expr="3")
    c = Rule("c", type="CEL", expr="4")
    merged = merge_rule_sets(RuleSet(domain_rules=(a, b)), RuleSet(domain_rules=(b2, c)))
    assert merged is not None
    assert [(r.name, r.expr) for r in merged.domain_rules] == [("a", "1"), ("b", "3"), ("c", "4")]
    assert merge_rule_sets(None) is None


@pytest.mark.parametrize(
    ("enable_at", "runs_on_client"),
    [(None, True), ("ALL", True), ("CLIENT", True), ("SERVER", False), ("GATEWAY", False), ("NONE", False)],
)
def test_enable_at_says_whether_a_client_runs_the_rule_set(
    enable_at: str | None, runs_on_client: bool
) -> None:
    data: dict[str, Any] = {"domainRules": [_rule()]}
    if enable_at is not None:
        data["enableAt"] = enable_at
    rule_set = RuleSet.from_dict(data)
    assert rule_set.enable_at == enable_at
    assert rule_set.runs_on_client is runs_on_client
    assert rule_set.to_dict() == data
    assert RuleSet(enable_at="SERVER").to_dict() == {"enableAt": "SERVER"}


def test_enable_at_must_be_a_string() -> None:
    payload = {"schema": '"string"', "ruleSet": {"enableAt": 1}}
    with pytest.raises(ContractError, match="enableAt must be a string") as caught:
        Schema.from_dict(payload, subject="s", version=3)
    assert (caught.value.subject, caught.value.version, caught.value.position) == ("s", 3, "enableAt")


def test_rule_set_merge_keeps_the_latest_enable_at() -> None:
    rule = Rule("a", type="CEL", expr="1")
    merged = merge_rule_sets(RuleSet(enable_at="SERVER"), RuleSet(domain_rules=(rule,)))
    assert merged is not None and merged.enable_at == "SERVER"
    merged = merge_rule_sets(RuleSet(enable_at="SERVER"), RuleSet(enable_at="CLIENT"))
    assert merged is not None and merged.enable_at == "CLIENT"


def test_malformed_json_shapes_are_contract_errors() -> None:
    with pytest.raises(ContractError, match="no 'schema' string"):
        Schema.from_dict({"schemaType": "AVRO"}, subject="s", version=1)
    with pytest.raises(ContractError, match="ruleSet must be a JSON object"):
        Schema.from_dict({"schema": '"string"', "ruleSet": []})
    with pytest.raises(ContractError, match="domainRules must be a list"):
        Schema.from_dict({"schema": '"string"', "ruleSet": {"domainRules": {}}})
