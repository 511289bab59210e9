"""`spark-contracts lint`: every problem of a directory or a registry subject, with its subject,
version, rule and position."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_run import cli, write_version
from cli_users import EXAMPLES, RULES, SUBJECT, cel, contract_payload
from registry_server import RegistryServer

from contracts import Schema

# -- lint ------------------------------------------------------------------------------------


def test_lint_of_a_clean_directory_exits_zero() -> None:
    ran = cli("lint", str(EXAMPLES))
    assert (ran.status, ran.out) == (0, "")
    assert "no problems" in ran.err


def test_lint_reports_every_problem_with_subject_version_rule_and_position(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    write_version(
        root,
        "a-value",
        1,
        contract_payload(
            [
                cel("syntax", "message.age >= "),
                cel("missingField", "message.nope == 1"),
                {"name": "badKind", "kind": "MAYBE", "type": "CEL", "expr": "true"},
                cel("badMode", "true", mode="SOMETIMES"),
                cel("unknownType", "true", type="NOPE"),
                cel("jsonata", "$merge([", type="JSONATA"),
                cel("noTopic", "true", onFailure="DLQ"),
                cel("fine", "message.age >= 0"),
            ]
        ),
    )
    write_version(root, "a-value", 2, '{"schema": ')
    write_version(root, "a-value", 3, "null")
    write_version(root, "b-value", 1, {"schema": json.dumps({"type": "record", "name": "B", "fields": 3})})
    (root / "b-value" / "notes.json").write_text("{}")

    ran = cli("lint", str(root))

    assert ran.status == 1
    lines = ran.out.splitlines()
    expected = [
        "subject=a-value version=1 rule=syntax position=1:13: CEL syntax error",
        "subject=a-value version=1 rule=missingField position=1:9: the expression reads field 'nope'",
        "subject=a-value version=1 rule=badKind position=kind: unknown kind 'MAYBE'",
        "subject=a-value version=1 rule=badMode position=mode: unknown mode 'SOMETIMES'",
        "subject=a-value version=1 rule=unknownType position=type: no executor for rule type 'NOPE'",
        "subject=a-value version=1 rule=jsonata position=8: invalid JSONata expression",
        "subject=a-value version=1 rule=noTopic position=params.dlq.topic: DLQ action has no topic",
        f"{root / 'a-value' / '2.json'}: subject=a-value version=2 rule=- position=-: malformed JSON",
        "subject=a-value version=3 rule=- position=-: a version file must hold a JSON object",
        "subject=b-value version=1 rule=- position=schema: Invalid schema",
        f"{root / 'b-value' / 'notes.json'}: subject=b-value version=- rule=- position=-: unexpected file",
    ]
    for start in expected:
        assert sum(start in line for line in lines) == 1, (start, lines)
    assert len(lines) == len(expected)
    assert not any("rule=fine" in line for line in lines)
    assert f"{len(expected)} problem(s)" in ran.err


def test_lint_reports_a_dlq_topic_kafka_would_refuse(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    escape = cel("escape", "true", onFailure="DLQ", params={"dlq.topic": "../../etc"})
    write_version(root, SUBJECT, 1, contract_payload([escape]))

    ran = cli("lint", str(root))

    assert ran.status == 1
    [line] = ran.out.splitlines()
    assert f"subject={SUBJECT} version=1 rule=escape position=params.dlq.topic: DLQ topic " in line
    assert "'../../etc'" in line


def test_lint_reports_deep_expressions_and_calls_outside_the_environment_with_the_other_problems(
    tmp_path: Path,
) -> None:
    root = tmp_path / "contracts"
    field_rule = {"kind": "CONDITION", "type": "CEL_FIELD", "mode": "WRITE"}
    write_version(
        root,
        "a-value",
        1,
        contract_payload(
            [
                cel("deep", "(" * 300 + "message.age" + ")" * 300 + " > 0"),
                cel("negations", "message.age > 0 ; " + "!" * 300 + "true"),
                cel("unknownFunction", "message.name.substring(1) == 'a'"),
                {"name": "fieldArity", **field_rule, "expr": "typeName == 'STRING' ; size(value, 1) > 0"},
                cel("missingField", "message.nope == 1"),
                cel("fine", "message.age >= 0 && message.name.size() > 0"),
            ]
        ),
    )

    ran = cli("lint", str(root))

    assert ran.status == 1
    lines = ran.out.splitlines()
    expected = [
        ("rule=deep position=1:", "nests more than 250 levels deep"),
        ("rule=negations position=1:", "nests more than 250 levels deep"),
        ("rule=unknownFunction position=1:14:", "undeclared function substring()"),
        ("rule=fieldArity position=1:24:", "size() takes 1 argument, not 2"),
        ("rule=missingField position=1:9:", "the expression reads field 'nope'"),
    ]
    for where, reason in expected:
        assert sum(where in line and reason in line for line in lines) == 1, (where, lines)
    assert len(lines) == len(expected)
    assert all(len(line) < 300 for line in lines)


def test_lint_of_a_registry_subject_compiles_its_registered_rules(server: RegistryServer) -> None:

    server.registry.register_schema(SUBJECT, Schema.from_dict(contract_payload(RULES)))
    broken = [*RULES, cel("broken", "message.agee > 1")]
    server.registry.register_schema(SUBJECT, Schema.from_dict(contract_payload(broken)))

    ran = cli("lint", "--registry", server.url, "--subject", SUBJECT)

    assert ran.status == 1
    assert ran.out.splitlines() == [
        f"subject={SUBJECT} version=2 rule=broken position=1:9: the expression reads field 'agee',"
        " which the schema lacks"
    ]
    assert cli("lint", "--registry", server.url, "--subject", "nobody-value").status == 1


def test_lint_says_when_enable_at_leaves_a_rule_set_to_the_server(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    payload = contract_payload(RULES)
    payload["ruleSet"]["enableAt"] = "SERVER"
    path = write_version(root, SUBJECT, 1, payload)
    ran = cli("lint", str(root))
    assert ran.status == 0, "a rule set left to the server is a note, not a problem"
    assert ran.out.splitlines() == [
        f"{path}: subject={SUBJECT} version=1 rule=- position=enableAt: note: ruleSet.enableAt is"
        " 'SERVER': clients skip this rule set, so the engine runs none of its 3 rules"
    ]
    assert "lint: no problems" in ran.err


def test_lint_compiles_a_migration_rule_against_the_record_it_receives(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    item = {
        "type": "record",
        "name": "Item",
        "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "int"}],
    }
    renamed = {**item, "fields": [item["fields"][0], {"name": "quantity", "type": "int"}]}
    write_version(
        root, "items-value", 1, {"schema": json.dumps(item), "metadata": {"properties": {"major": "1"}}}
    )
    rules = [
        cel("typo", "message.quantity > 0", mode="UPGRADE"),
        cel("positive", "message.qty > 0", mode="UPDOWN", onFailure="ERROR,NONE"),
        cel("qtyUp", "{'id': message.id, 'quantity': message.qty}", kind="TRANSFORM", mode="UPGRADE"),
        cel("qtyDown", "{'id': message.id, 'qty': message.quantity}", kind="TRANSFORM", mode="DOWNGRADE"),
        cel("checked", "message.quantity > 0", mode="UPGRADE"),
    ]
    payload = {"schema": json.dumps(renamed), "metadata": {"properties": {"major": "2"}}}
    path = write_version(root, "items-value", 2, {**payload, "ruleSet": {"migrationRules": rules}})
    (root / "items-value" / "config.json").write_text(json.dumps({"compatibilityGroup": "major"}))
    ran = cli("lint", str(root))
    assert ran.out.splitlines() == [
        f"{path}: subject=items-value version=2 rule=typo position=1:9: the expression reads field"
        " 'quantity', which the schema lacks (in UPGRADE the rule receives records of version 1)"
    ]


def test_lint_wants_a_directory_or_a_registry_not_both(users_dir: Path) -> None:
    ran = cli("lint", str(users_dir), "--registry", "http://127.0.0.1:1")
    assert ran.status == 2
    assert "not both" in ran.err


def test_examples_directory_is_left_untouched_by_lint(tmp_path: Path) -> None:
    copy = tmp_path / "registry"
    shutil.copytree(EXAMPLES, copy)
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert cli("lint", str(copy)).status == 0
    assert {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
