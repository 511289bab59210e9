"""The users contract most CLI tests run: its schema and rules, as a registry directory holds them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actions.dlq.local_topic import LocalTopicSink

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "registry"
SUBJECT = "users-value"
USER = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "email", "type": "string"},
    ],
}
RULES = [
    {
        "name": "adult",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.age >= 18",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "minors"},
    },
    {
        "name": "named",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "size(message.name) > 0",
        "onFailure": "NONE",
    },
    {
        "name": "validEmail",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "READ",
        "expr": "message.email.isEmail()",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-emails"},
    },
]


def contract_payload(rules: list[dict[str, Any]], schema: dict[str, Any] = USER) -> dict[str, Any]:
    return {"schemaType": "AVRO", "schema": json.dumps(schema), "ruleSet": {"domainRules": rules}}


def cel(name: str, expr: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": expr, **fields}


def dlq(root: Path, topic: str) -> list[dict[str, Any]]:
    """The records of a local DLQ topic: each value parsed as JSON, its headers as a dict."""
    return [
        {"value": json.loads(r.value or b"null"), "headers": dict(r.headers)}
        for r in LocalTopicSink(root).read(topic)
    ]


def summary_row(out: str, rule: str) -> list[str]:
    """The summary table's row for `rule`, cell by cell."""
    [row] = [line.split() for line in out.splitlines() if line.startswith(f"{rule} ")]
    return row
