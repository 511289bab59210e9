"""`explain()` tells what the engine decided: how each rule runs and why, what a CEL_FIELD rule
touches, the rules that do not run, and a migration from an older version."""

from __future__ import annotations

import json
from typing import Any

from contracts import DataContract, LocalRegistry, Schema

SUBJECT = "users-value"
USER: dict[str, Any] = {
    "type": "record",
    "name": "User",
    "namespace": "acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "age", "type": "int"},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
    ],
}


def rule(name: str, expr: str, kind: str = "CONDITION", type_: str = "CEL", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "type": type_, "mode": "WRITE", "expr": expr, **extra}


def contract(registry: LocalRegistry, rules: list[dict[str, Any]]) -> DataContract:
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(USER), "ruleSet": {"domainRules": rules}})
    )
    return DataContract(registry, SUBJECT)


def test_explain_says_how_each_rule_runs_what_it_touches_and_what_does_not_run() -> None:
    explained = contract(
        LocalRegistry(),
        [
            rule("adult", "message.age >= 18"),
            rule("off", "false", disabled=True),
            rule("maskSsn", "name == 'ssn' ; 'xxx'", "TRANSFORM", "CEL_FIELD", tags=["PII"]),
            rule("maskAgain", "name == 'ssn' ; 'yyy'", "TRANSFORM", "CEL_FIELD", tags=["PII"]),
            rule("dates", "name == 'born' ; value", "TRANSFORM", "CEL_FIELD"),
            rule("someSum", "$sum([1, 2]) > 0", type_="JSONATA"),
            rule("upper", "$uppercase(ssn) = ssn", type_="JSONATA"),
        ],
    ).explain()
    lines = explained.splitlines()
    assert lines[1].endswith("(native)") and "adult" in lines[1]
    assert lines[2].endswith("(native); touches acme.User.ssn"), lines[2]
    assert "dates" in lines[3] and lines[3].endswith(
        "(python); no native form for a visited date value;"
        " touches every field its guard accepts, decided per record"
    ), lines[3]
    assert "someSum" in lines[4] and "(python); no native form for " in lines[4]
    assert "upper" in lines[5] and lines[5].endswith("(python); no native form for $uppercase")
    assert lines[6:] == ["  not run: off (disabled)", "  not run: maskAgain (superseded by rule 'maskSsn')"]


def test_a_cel_field_rule_whose_guard_no_field_passes_touches_no_field() -> None:
    explained = contract(
        LocalRegistry(), [rule("none", "name == 'missing' ; 'x'", "TRANSFORM", "CEL_FIELD")]
    ).explain()
    assert explained.splitlines()[1].endswith("(native); touches no field")


def test_explain_of_a_migration_from_an_older_version() -> None:
    registry = LocalRegistry()
    contract(registry, [])
    later = {**USER, "fields": [*USER["fields"], {"name": "tier", "type": "int", "default": 0}]}
    upgrade = {**rule("addTier", "$merge([$, {'tier': 1}])", "TRANSFORM", "JSONATA"), "mode": "UPGRADE"}
    payload = {
        "schema": json.dumps(later),
        "metadata": {"properties": {"major": "2"}},
        "ruleSet": {"migrationRules": [upgrade]},
    }
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    target = DataContract(registry, SUBJECT)
    assert target.explain("READ", writer_version=1).splitlines() == [
        f"Migration of subject {SUBJECT!r} from version 1 to 2, run as Spark expressions:",
        f"  Plan UPGRADE for subject {SUBJECT!r} version 2:",
        "    1. addTier [JSONATA TRANSFORM, mode UPGRADE] on success NONE, on failure ERROR (native)",
        f"Plan READ for subject {SUBJECT!r} version 2: no rules",
    ]
    assert target.explain("READ", writer_version=2) == target.explain("READ")
    older = DataContract(registry, SUBJECT, version=1)
    assert older.explain("READ", writer_version=2).splitlines()[0] == (
        f"Migration of subject {SUBJECT!r} from version 2 to 1: no migration rules"
    )
