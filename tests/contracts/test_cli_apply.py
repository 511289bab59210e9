"""`spark-contracts apply` as a new user meets it: dry runs over native and Python rules, and what
it does with its input (formats, tables, malformed lines, literal paths) and its output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import cli, write_version

SUBJECT = "people-value"
PERSON = {
    "type": "record",
    "name": "Person",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}


def adult_rule(rule_type: str) -> dict[str, Any]:
    """`age >= 18` with a DLQ, as a native CEL rule or as a JSONata rule (run in Python)."""
    expr = "message.age >= 18" if rule_type == "CEL" else "$number(age) >= 18 and $uppercase(name) != ''"
    return {
        "name": "adult",
        "kind": "CONDITION",
        "type": rule_type,
        "mode": "WRITE",
        "expr": expr,
        "onFailure": "DLQ",
        "params": {"dlq.topic": "minors"},
    }


def registry_with(root: Path, rules: list[dict[str, Any]]) -> Path:
    payload = {"schemaType": "AVRO", "schema": json.dumps(PERSON), "ruleSet": {"domainRules": rules}}
    write_version(root, SUBJECT, 1, payload)
    return root


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("rule_type", ["CEL", "JSONATA"])
@pytest.mark.parametrize("ages", [(30, 40), (30, 12)], ids=["all-valid", "some-rejected"])
def test_a_dry_run_counts_native_and_python_rules_whether_or_not_a_row_is_rejected(
    spark: Any, tmp_path: Path, rule_type: str, ages: tuple[int, int]
) -> None:
    registry = registry_with(tmp_path / "contracts", [adult_rule(rule_type)])
    source = jsonl(tmp_path / "people.jsonl", [{"name": f"p{age}", "age": age} for age in ages])

    ran = cli(
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--dry-run", spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    rejected = sum(age < 18 for age in ages)
    counts = f"adult  WRITE  {2 - rejected:>6}  {rejected:>6}"
    assert any(line.startswith(counts) for line in ran.out.splitlines()), ran.out
    assert f"valid rows: {2 - rejected} (dry run: not written)" in ran.out
    assert ("DLQ minors: 1 rows (dry run: not written)" in ran.out) == bool(rejected)
