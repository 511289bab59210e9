"""The `spark-contracts` command line: lint, apply (Parquet, JSON lines, wire format), push and pull."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_run import Ran, cli, python_m_cli, write_version
from encrypt_oracle import KMS_PARAMS, encrypt_rule
from registry_server import RegistryServer, running_registry

import contracts
from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, RegistryError, Schema
from contracts.cli.progress import Progress
from contracts.formats.wire import encode_frame

ROOT = Path(__file__).resolve().parents[3]
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


@pytest.fixture
def users_dir(tmp_path: Path) -> Path:
    root = tmp_path / "contracts"
    write_version(root, SUBJECT, 1, contract_payload(RULES))
    return root


@pytest.fixture
def server() -> Iterator[RegistryServer]:
    with running_registry(LocalRegistry()) as running:
        yield running


def test_python_m_contracts_cli_is_the_console_script(tmp_path: Path) -> None:
    clean = python_m_cli("lint", str(EXAMPLES), cwd=tmp_path)
    assert (clean.returncode, clean.stdout) == (0, "")
    assert clean.stderr == "lint: no problems\n"

    write_version(tmp_path / "contracts", SUBJECT, 1, contract_payload([cel("syntax", "message.age >= ")]))
    broken = python_m_cli("lint", str(tmp_path / "contracts"), cwd=tmp_path)
    assert broken.returncode == 1
    assert "rule=syntax position=1:13: CEL syntax error" in broken.stdout


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
    from contracts import Schema

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


# -- push and pull ---------------------------------------------------------------------------


def test_push_then_pull_round_trips_every_version(server: RegistryServer, tmp_path: Path) -> None:
    ran = cli("push", str(EXAMPLES), "--registry", server.url)
    assert ran.status == 0, ran.out
    assert ran.out.count(": registered (id ") == 3
    assert server.registry.get_versions("orders-value") == [1, 2, 3]
    # The subject's config.json (compatibilityGroup by major version) went first, or 3 would be refused.
    assert server.registry.get_config("orders-value")["compatibilityGroup"] == "application.major.version"

    again = cli("push", str(EXAMPLES), "--registry", server.url)
    assert again.status == 0
    assert again.out.count(": already registered as version ") == 3
    assert server.registry.get_versions("orders-value") == [1, 2, 3]

    pulled = tmp_path / "pulled"
    ran = cli("pull", "--registry", server.url, str(pulled))
    assert ran.status == 0, ran.out
    local = LocalRegistry(pulled)
    for version in (1, 2, 3):
        assert local.get_version("orders-value", version) == server.registry.get_version(
            "orders-value", version
        )
    assert cli("lint", str(pulled)).status == 0
    # The subject's own config came along (not the global one it falls back to): a pushed-back
    # copy would accept version 3 again.
    assert json.loads((pulled / "orders-value" / "config.json").read_text()) == json.loads(
        (EXAMPLES / "orders-value" / "config.json").read_text()
    )
    assert not (pulled / "config.json").exists()


def test_push_reports_an_incompatible_version_and_goes_on(server: RegistryServer, tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    required_phone = {**USER, "fields": [*USER["fields"], {"name": "phone", "type": "string"}]}
    optional_phone = {
        **USER,
        "fields": [*USER["fields"], {"name": "phone", "type": ["null", "string"], "default": None}],
    }
    write_version(root, SUBJECT, 1, contract_payload(RULES))
    write_version(root, SUBJECT, 2, contract_payload(RULES, required_phone))
    write_version(root, SUBJECT, 3, contract_payload(RULES, optional_phone))
    write_version(root, "other-value", 1, contract_payload([]))

    ran = cli("push", str(root), "--registry", server.url)

    assert ran.status == 1
    assert f"{SUBJECT} version 2: INCOMPATIBLE: " in ran.out
    assert "(status 409" in ran.out
    assert f"{SUBJECT} version 3: registered" in ran.out
    assert "other-value version 1: registered" in ran.out
    assert "push: 1 failed" in ran.out
    assert server.registry.get_versions(SUBJECT) == [1, 2]
    assert server.registry.get_version(SUBJECT, 2).schema.schema_str == json.dumps(optional_phone)


def test_pull_exports_the_chosen_subjects_and_the_versions_they_reference(
    server: RegistryServer, tmp_path: Path
) -> None:
    from contracts import Schema

    address = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
    server.registry.register_schema("address", Schema.from_dict({"schema": json.dumps(address)}))
    person = {"type": "record", "name": "Person", "fields": [{"name": "home", "type": "Address"}]}
    reference = {"name": "Address", "subject": "address", "version": 1}
    server.registry.register_schema(
        "person-value", Schema.from_dict({"schema": json.dumps(person), "references": [reference]})
    )
    server.registry.register_schema(SUBJECT, Schema.from_dict(contract_payload(RULES)))

    ran = cli("pull", "--registry", server.url, str(tmp_path / "out"), "--subject", "person-value")

    assert ran.status == 0, ran.out
    local = LocalRegistry(tmp_path / "out")
    assert local.get_subjects() == ["address", "person-value"]
    assert local.get_version("person-value", 1) == server.registry.get_version("person-value", 1)
    assert cli("pull", "--registry", server.url, str(tmp_path / "none"), "--subject", "x").status == 1


def test_pull_keeps_the_registrys_own_ids_and_guids(tmp_path: Path) -> None:
    """A GUID the remote gave (not what the text hashes to here) is written, so frames naming the
    schema by GUID resolve against the pulled directory as they do against the remote."""
    guid = "6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d"
    remote = tmp_path / "remote"
    write_version(remote, SUBJECT, 1, {**contract_payload(RULES), "id": 42, "guid": guid})
    with running_registry(LocalRegistry(remote)) as served:
        ran = cli("pull", "--registry", served.url, str(tmp_path / "out"))

    assert ran.status == 0, ran.out
    written = json.loads((tmp_path / "out" / SUBJECT / "1.json").read_text())
    assert (written["id"], written["guid"]) == (42, guid)
    assert LocalRegistry(tmp_path / "out").get_schema_by_guid(guid).schema_str == written["schema"]


@pytest.mark.parametrize("source", ["http", "directory"])
def test_pull_writes_subjects_named_like_paths_inside_the_directory(
    server: RegistryServer, tmp_path: Path, source: str
) -> None:
    from contracts import Schema

    registry = server.registry if source == "http" else LocalRegistry(tmp_path / "source", create=True)
    subjects = ["..", ".", "../x", ".events-value", "a/b", "config.json", "versions"]
    ids = {}
    for n, subject in enumerate(subjects):
        record = {"type": "record", "name": f"R{n}", "fields": [{"name": "a", "type": "int"}]}
        ids[subject] = registry.register_schema(subject, Schema.from_dict({"schema": json.dumps(record)}))
    registry.set_config(".", compatibility="NONE")
    container = tmp_path / "container"
    container.mkdir()

    url = server.url if source == "http" else str(tmp_path / "source")
    ran = cli("pull", "--registry", url, str(container / "out"))

    assert ran.status == 0, ran.out
    assert [path.name for path in container.iterdir()] == ["out"]
    local = LocalRegistry(container / "out")
    assert local.get_subjects() == sorted(subjects)
    assert {subject: local.get_latest_version(subject).schema_id for subject in subjects} == ids
    assert local.get_config(".", default_to_global=False) == {"compatibility": "NONE"}
    assert not (container / "out" / "config.json").exists()


def test_push_of_a_missing_directory_is_an_error_that_creates_nothing(
    server: RegistryServer, tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    ran = cli("push", str(missing), "--registry", server.url)
    assert ran.status == 1
    assert ran.err.count("\n") == 1 and str(missing) in ran.err and "does not exist" in ran.err
    assert "push: done" not in ran.out
    assert not missing.exists()
    assert server.count() == 0


# -- apply -----------------------------------------------------------------------------------


def dlq(root: Path, topic: str) -> list[dict[str, Any]]:
    return [
        {"value": json.loads(r.value or b"null"), "headers": dict(r.headers)}
        for r in LocalTopicSink(root).read(topic)
    ]


def summary_row(out: str, rule: str) -> list[str]:
    """The summary table's row for `rule`, cell by cell."""
    [row] = [line.split() for line in out.splitlines() if line.startswith(f"{rule} ")]
    return row


def test_apply_write_on_parquet_writes_valid_rows_the_dlq_and_a_summary(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "users.parquet"
    rows = [("ann", 30, "ann@example.com"), ("bob", 12, "bob@example.com"), ("", 40, "x@example.com")]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "write",
        "--input", str(source), "--format", "parquet", "--output", str(output), "--dlq-dir", str(dlq_dir),
        spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    valid = spark.read.parquet(str(output)).orderBy("age").collect()
    assert [tuple(row) for row in valid] == [("ann", 30, "ann@example.com"), ("", 40, "x@example.com")]
    [rejected] = dlq(dlq_dir, "minors")
    assert rejected["value"] == {"name": "bob", "age": 12, "email": "bob@example.com"}
    assert rejected["headers"]["__rule.name"] == b"adult"
    assert ran.out.splitlines() == [
        "rule   mode   passed  failed  actions",
        "-----  -----  ------  ------  ------------",
        "adult  WRITE       2       1  NONE=2 DLQ=1",
        "named  WRITE       1       1  NONE=2",
        f"valid rows: 2 -> {output}",
        f"DLQ minors: 1 rows -> {dlq_dir}/minors",
    ]


def test_apply_read_on_json_lines_runs_the_read_rules(spark: Any, users_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "users.jsonl"
    lines = [
        {"name": "ann", "age": 30, "email": "ann@example.com"},
        {"name": "cy", "age": 9, "email": "nope"},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ",
        "--input", str(source), "--format", "json", "--output", str(output), "--dlq-dir", str(dlq_dir),
        spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    assert [row.name for row in spark.read.parquet(str(output)).collect()] == ["ann"]
    assert [r["value"]["name"] for r in dlq(dlq_dir, "bad-emails")] == ["cy"]
    assert summary_row(ran.out, "validEmail") == ["validEmail", "READ", "1", "1", "NONE=1", "DLQ=1"]


@pytest.fixture(scope="module")
def frames(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """Three records in Confluent wire format, written with the users contract's version 1."""
    root = tmp_path_factory.mktemp("frames")
    write_version(root / "registry", SUBJECT, 1, contract_payload(RULES))
    contract = DataContract(LocalRegistry(root / "registry"), SUBJECT, dlq_sink=LocalTopicSink(root / "dlq"))
    rows = [("ann", 30, "ann@example.com"), ("dee", 50, "not-an-email"), ("eve", 22, "eve@example.com")]
    df = spark.createDataFrame(
        [(*row, row[0]) for row in rows], "name string, age int, email string, key string"
    )
    return [bytes(row.value) for row in contract.serialize(df).orderBy("key").collect()]


@pytest.mark.parametrize("fmt", ["avro-parquet", "avro-json"])
def test_apply_on_wire_format_decodes_then_runs_the_read_rules(
    spark: Any, users_dir: Path, tmp_path: Path, frames: list[bytes], fmt: str
) -> None:
    source = tmp_path / "topic"
    if fmt == "avro-parquet":
        spark.createDataFrame([(f,) for f in frames], "value binary").write.parquet(str(source))
    else:
        source.write_text("".join(json.dumps({"value": base64.b64encode(f).decode()}) + "\n" for f in frames))
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ",
        "--input", str(source), "--format", fmt, "--output", str(output), "--dlq-dir", str(dlq_dir),
        spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    valid = spark.read.parquet(str(output)).orderBy("name").collect()
    assert [(row.name, row.age) for row in valid] == [("ann", 30), ("eve", 22)]
    [rejected] = LocalTopicSink(dlq_dir).read("bad-emails")
    assert (
        rejected.value == frames[1]
    )  # on READ the DLQ gets the bytes as they arrived (docs/semantics.md §7)
    assert summary_row(ran.out, "validEmail") == ["validEmail", "READ", "2", "1", "NONE=2", "DLQ=1"]
    assert f"DLQ bad-emails: 1 rows -> {dlq_dir}/bad-emails" in ran.out
    assert "READ rules of users-value version 1" in ran.err


def test_apply_decodes_framed_keys_with_the_key_subject_first(
    spark: Any, users_dir: Path, tmp_path: Path, frames: list[bytes]
) -> None:
    key_schema = {"type": "record", "name": "UserKey", "fields": [{"name": "id", "type": "string"}]}
    rule = cel(
        "knownId", "message.id != 'k-eve'", mode="READ", onFailure="DLQ", params={"dlq.topic": "bad-keys"}
    )
    registry = LocalRegistry(users_dir)  # registered after users-value, so its frames keep their id
    key_id = registry.register_schema("users-key", Schema.from_dict(contract_payload([rule], key_schema)))
    keys = [encode_frame(key_id, b"\x0a" + f"k-{name}".encode()) for name in ("ann", "dee", "eve")]
    source = tmp_path / "topic.jsonl"
    source.write_text(
        "".join(
            json.dumps({"key": base64.b64encode(k).decode(), "value": base64.b64encode(f).decode()}) + "\n"
            for k, f in zip(keys, frames, strict=True)
        )
    )
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ", "--input", str(source),
        "--format", "avro-json", "--key-subject", "users-key", "--output", str(output),
        "--dlq-dir", str(dlq_dir), spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    valid = spark.read.parquet(str(output)).collect()
    assert [(row.name, row.key.id) for row in valid] == [("ann", "k-ann")]
    assert [(r.key, r.value) for r in LocalTopicSink(dlq_dir).read("bad-keys")] == [(keys[2], frames[2])]
    assert "key rules of users-key:" in ran.out
    assert summary_row(ran.out, "knownId") == ["knownId", "READ", "2", "1", "NONE=2", "DLQ=1"]


def test_apply_takes_a_key_subject_with_wire_format_input_only(users_dir: Path) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ", "--input", "x",
        "--format", "json", "--key-subject", "users-key", "--output", "o",
    )  # fmt: skip
    assert ran.status == 2
    assert "--key-subject decodes framed keys: it takes avro-parquet or avro-json input" in ran.err


def test_apply_stops_with_the_rule_when_an_error_action_fires(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    payload = contract_payload([cel("mustBeOld", "message.age > 100")])
    write_version(users_dir, SUBJECT, 2, payload)
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ann", "age": 30, "email": "ann@example.com"}) + "\n")

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"),
        "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
    )  # fmt: skip

    assert ran.status == 1
    assert "mustBeOld" in ran.err
    assert "FAILED" in ran.err


def test_apply_fails_with_the_same_line_whether_the_rule_ran_natively_or_in_python(
    spark: Any, tmp_path: Path
) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ann", "age": 30, "email": "ann@example.com"}) + "\n")
    failures = []
    # The same rule name and doc; the second expression has no native form and runs in Python.
    for run_number, expr in enumerate(["message.age > 100", "format('%s', [message.name]) == 'nobody'"]):
        root = tmp_path / f"contracts{run_number}"
        write_version(root, SUBJECT, 1, contract_payload([cel("mustBeOld", expr, doc="too young")]))
        explained = DataContract(LocalRegistry(root), SUBJECT).explain()
        assert explained.endswith("(native)") if run_number == 0 else "(python); no native form" in explained
        ran = cli(
            "apply", "--registry", str(root), "--subject", SUBJECT, "--mode", "WRITE",
            "--input", str(source), "--format", "json", "--output", str(tmp_path / f"out{run_number}"),
            "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
        )  # fmt: skip
        assert ran.status == 1
        failures.append(ran.err.splitlines()[-1:])  # the error; the line before names the run id
    assert (
        failures[0]
        == failures[1]
        == [
            "spark-contracts apply: SparkRuntimeException: [USER_RAISED_EXCEPTION] Rule 'mustBeOld' failed in"
            " WRITE on subject 'users-value' version 1: too young"
        ]
    )


def test_a_failed_apply_rerun_under_its_run_id_leaves_exactly_its_dlq_records(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    adult = cel("adult", "message.age >= 18", onFailure="DLQ", params={"dlq.topic": "minors"})
    write_version(users_dir, SUBJECT, 2, contract_payload([adult, cel("named", "size(message.name) > 0")]))
    source = tmp_path / "users"
    source.mkdir()

    def users(path: str, *rows: tuple[str, int]) -> None:
        lines = [json.dumps({"name": name, "age": age, "email": f"{name}@example.com"}) for name, age in rows]
        (source / path).write_text("".join(line + "\n" for line in lines))

    users("a.jsonl", ("al", 10), ("bo", 11))
    users("b.jsonl", ("cy", 12), ("di", 40))
    users("c.jsonl", ("", 50))  # fails the ERROR rule `named`, in its own partition
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"
    argv = [
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(output), "--dlq-dir", str(dlq_dir),
    ]  # fmt: skip

    failed = cli(*argv, spark=spark)

    assert failed.status == 1
    assert "named" in failed.err
    [run_id] = re.findall(r"rerun with --run-id (\S+)", failed.err)

    users("c.jsonl", ("ed", 50))
    rerun = cli(*argv, "--run-id", run_id, spark=spark)

    assert rerun.status == 0, rerun.err
    assert sorted(row.name for row in spark.read.parquet(str(output)).collect()) == ["di", "ed"]
    assert sorted(r["value"]["name"] for r in dlq(dlq_dir, "minors")) == ["al", "bo", "cy"]
    assert f"DLQ minors: 3 rows -> {dlq_dir}/minors" in rerun.out
    assert cli(*argv, "--run-id", "not.a.name", spark=spark).status == 2


def test_apply_refuses_a_rule_no_executor_handles_unless_allowed(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    mystery = {"name": "mystery", "kind": "CONDITION", "type": "NOPE", "mode": "WRITE", "onFailure": "DLQ"}
    mystery["params"] = {"dlq.topic": "mysteries"}
    write_version(users_dir, SUBJECT, 2, contract_payload([mystery]))
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ann", "age": 30, "email": "ann@example.com"}) + "\n")
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"
    argv = [
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(output), "--dlq-dir", str(dlq_dir),
    ]  # fmt: skip
    warning = f"subject={SUBJECT} version=2 rule=mystery type=NOPE: no executor handles this rule type"

    refused = cli(*argv, spark=spark)

    assert refused.status == 1
    assert warning in refused.err
    assert "--allow-unknown-rule-types" in refused.err
    assert not output.exists() and not dlq_dir.exists()

    allowed = cli(*argv, "--allow-unknown-rule-types", spark=spark)

    assert allowed.status == 0, allowed.err
    assert warning in allowed.err
    assert spark.read.parquet(str(output)).count() == 0
    assert [r["value"]["name"] for r in dlq(dlq_dir, "mysteries")] == ["ann"]


def test_apply_of_wire_format_checks_the_migration_rules_too(users_dir: Path, tmp_path: Path) -> None:
    renamed = {**USER, "fields": [*USER["fields"][:2], {"name": "mail", "type": "string"}]}
    upgrade = {"name": "rename", "kind": "TRANSFORM", "type": "NOPE", "mode": "UPGRADE", "expr": "x"}
    payload = contract_payload([], renamed)
    payload["ruleSet"]["migrationRules"] = [upgrade]
    write_version(users_dir, SUBJECT, 2, payload)

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "READ",
        "--input", "x", "--format", "avro-json", "--output", str(tmp_path / "out"), spark=object(),
    )  # fmt: skip

    assert ran.status == 1
    assert f"subject={SUBJECT} version=2 rule=rename type=NOPE: no executor handles" in ran.err
    assert "in UPGRADE it fails every record (on failure: ERROR)" in ran.err


def test_apply_of_wire_format_wants_read_mode(users_dir: Path, tmp_path: Path) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", "x", "--format", "avro-json", "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert ran.status == 2
    assert "use --mode READ" in ran.err


def test_apply_reports_an_unknown_subject_without_starting_a_job(users_dir: Path, tmp_path: Path) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", "nobody-value", "--mode", "WRITE",
        "--input", "x", "--format", "json", "--output", str(tmp_path / "out"), spark=object(),
    )  # fmt: skip
    assert ran.status == 1
    assert "RegistryError" in ran.err
    assert "nobody-value" in ran.err


# -- user errors -----------------------------------------------------------------------------


def one_error_line(ran: Ran, command: str) -> str:
    """The one line a user error printed on stderr; no traceback anywhere."""
    assert ran.status == 1, ran
    assert "Traceback" not in ran.err and "\tat " not in ran.err, ran.err
    line = ran.err.splitlines()[-1]
    assert line.startswith(f"spark-contracts {command}: "), ran.err
    return line


def test_a_registry_url_without_a_host_is_one_line_and_debug_shows_the_traceback() -> None:
    ran = cli("lint", "--registry", "http://")
    line = one_error_line(ran, "lint")
    assert line.startswith("spark-contracts lint: RegistryError: ") and "'http://'" in line
    assert ran.err == line + "\n"

    debug = cli("lint", "--registry", "http://", "--debug")
    assert debug.status == 1
    assert "Traceback (most recent call last):" in debug.err
    assert debug.err.rstrip().endswith(line)


def test_an_unreachable_registry_is_one_line_on_stderr() -> None:
    ran = cli("lint", "--registry", "http://127.0.0.1:1")
    line = one_error_line(ran, "lint")
    assert "could not reach the schema registry at http://127.0.0.1:1" in line
    assert ran.err == line + "\n"  # the client's retry warnings only with --debug
    assert "failed (attempt 1 of " in cli("--debug", "lint", "--registry", "http://127.0.0.1:1").err


def test_a_version_file_that_is_not_a_number_is_a_lint_problem(tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    write_version(root, SUBJECT, 1, contract_payload(RULES))
    (root / SUBJECT / "\u00b2.json").write_text(json.dumps(contract_payload(RULES)))

    ran = cli("lint", str(root))

    assert ran.status == 1
    assert "Traceback" not in ran.err
    [problem] = ran.out.splitlines()
    assert f"subject={SUBJECT} version=- rule=- position=-: unexpected file '\u00b2.json'" in problem


def test_user_errors_through_python_m_are_one_line_without_traceback(tmp_path: Path) -> None:
    ran = python_m_cli("lint", "--registry", "http://", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (1, "")
    [line] = ran.stderr.splitlines()
    assert line.startswith("spark-contracts lint: RegistryError: ") and "'http://'" in line

    pushed = python_m_cli(
        "push", str(tmp_path / "nonexistent"), "--registry", str(tmp_path / "dest"), cwd=tmp_path
    )
    assert (pushed.returncode, pushed.stdout) == (1, "")
    [line] = pushed.stderr.splitlines()
    assert line.startswith("spark-contracts push: ") and "nonexistent" in line
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "dest").exists()

    debug = python_m_cli("lint", "--registry", "http://", "--debug", cwd=tmp_path)
    assert debug.returncode == 1
    assert "Traceback (most recent call last):" in debug.stderr


def test_apply_on_malformed_json_lines_is_one_line_naming_the_file(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "users.jsonl"
    source.write_text('{"name": "ann", "age": 30, "email": "ann@example.com"}\n{"name": oops\n')
    argv = [
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"),
        "--dlq-dir", str(tmp_path / "dlq"),
    ]  # fmt: skip

    ran = cli(*argv, spark=spark)
    line = one_error_line(ran, "apply")

    assert line == (
        "spark-contracts apply: SparkRuntimeException: [USER_RAISED_EXCEPTION] malformed JSON line in"
        f" {source}: '{{\"name\": oops'; --unreadable-dlq TOPIC sends each such JSON line to a DLQ topic"
        " instead SQLSTATE: P0001"
    )

    debug = cli(*argv, "--debug", spark=spark)
    assert debug.status == 1
    assert "Traceback (most recent call last):" in debug.err


def test_apply_on_a_missing_input_or_with_a_bad_registry_is_one_line(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    missing = one_error_line(
        cli(
            "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
            "--input", str(tmp_path / "nowhere.jsonl"), "--format", "json", "--output", str(tmp_path / "o"),
            "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
        ),
        "apply",
    )  # fmt: skip
    assert "nowhere.jsonl" in missing

    registry = one_error_line(
        cli(
            "apply", "--registry", str(tmp_path / "no-registry"), "--subject", SUBJECT, "--mode", "WRITE",
            "--input", "x", "--format", "json", "--output", str(tmp_path / "o"), spark=spark,
        ),
        "apply",
    )  # fmt: skip
    assert "no-registry" in registry


def test_a_rule_evaluated_in_python_that_fails_the_job_is_one_line_naming_it(
    spark: Any, users_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sized = {"name": "sized", "kind": "CONDITION", "type": "JSONATA", "mode": "WRITE"}
    sized["expr"] = "$count($split(email, '@')) = 2 and $uppercase(name) != name"
    write_version(users_dir, SUBJECT, 2, contract_payload([sized]))
    source = tmp_path / "users.jsonl"
    source.write_text(json.dumps({"name": "ANN", "age": 30, "email": "ann@example.com"}) + "\n")

    monkeypatch.chdir(tmp_path)

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"), spark=spark,
    )  # fmt: skip

    line = one_error_line(ran, "apply")
    assert "'sized'" in line and SUBJECT in line, line
    assert not (tmp_path / "dlq-topics").exists()  # no rule can reject a row: no DLQ directory


# -- the progress line -----------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    num_tasks: int
    num_completed_tasks: int


class FakeConnectSession:
    """What Progress needs of a Spark Connect session: progress handler (un)registration."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def registerProgressHandler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def removeProgressHandler(self, handler: Any) -> None:
        self.handlers.remove(handler)


def test_progress_redraws_a_spinner_with_connect_task_counts_on_a_terminal() -> None:
    stream = io.StringIO()
    session = FakeConnectSession()
    with Progress("WRITE rules", stream, session, interval=0.001, interactive=True) as progress:
        assert session.handlers == [progress]
        session.handlers[0](
            stages=[Stage(4, 1), Stage(2, 2)], inflight_tasks=1, operation_id="op", done=False
        )
        assert progress.status(1).startswith("/ WRITE rules  ")
        assert progress.status(1).endswith("s  tasks 3/6")
        deadline = time.monotonic() + 10
        while "tasks 3/6" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.001)
    assert session.handlers == []
    drawn = stream.getvalue()
    assert re.search(r"\r\x1b\[K[|/\-\\] WRITE rules  \d+\.\ds  tasks 3/6", drawn)
    assert re.search(r"\r\x1b\[KWRITE rules: done in \d+\.\ds\n$", drawn)


def test_progress_in_a_log_writes_only_the_start_and_the_outcome() -> None:
    stream = io.StringIO()
    with pytest.raises(RegistryError), Progress("READ rules", stream, interactive=False):
        raise RegistryError("boom")
    first, second = stream.getvalue().splitlines()
    assert first == "READ rules ..."
    assert second.startswith("READ rules: FAILED in ")


def test_examples_directory_is_left_untouched_by_lint(tmp_path: Path) -> None:
    copy = tmp_path / "registry"
    shutil.copytree(EXAMPLES, copy)
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert cli("lint", str(copy)).status == 0
    assert {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before


def test_apply_targets_the_latest_version_with_the_metadata_asked(spark: Any, tmp_path: Path) -> None:
    """`--use-latest-with-metadata KEY=VALUE` picks the version as Confluent's use.latest.with.metadata:
    here major 1 (version 1, whose rule rejects minors) over the newer major 2 (no rules)."""
    registry = tmp_path / "registry"
    major1 = {**contract_payload([cel("adult", "message.age >= 18", onFailure="DLQ",
                                      params={"dlq.topic": "minors"})]),
              "metadata": {"properties": {"major": "1"}}}  # fmt: skip
    write_version(registry, SUBJECT, 1, major1)
    write_version(registry, SUBJECT, 2, {**contract_payload([]), "metadata": {"properties": {"major": "2"}}})
    source = tmp_path / "users.parquet"
    rows = [("ann", 30, "ann@example.com"), ("bob", 12, "bob@example.com")]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))
    ran = cli(
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE",
        "--use-latest-with-metadata", "major=1",
        "--input", str(source), "--format", "parquet", "--output", str(tmp_path / "valid"),
        "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
    )  # fmt: skip
    assert ran.status == 0, ran.err
    assert [row.name for row in spark.read.parquet(str(tmp_path / "valid")).collect()] == ["ann"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--use-latest-with-metadata", "major"], "takes KEY=VALUE, not 'major'"),
        (["--use-latest-with-metadata", "major=1", "--version", "1"], "either --version or"),
    ],
)
def test_apply_refuses_metadata_it_cannot_use(
    users_dir: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", "x", "--format", "json", "--output", str(tmp_path / "out"), *extra,
    )  # fmt: skip
    assert ran.status == 2 and message in ran.err


# -- --version -------------------------------------------------------------------------------


def test_version_prints_the_package_version() -> None:
    ran = cli("--version")
    assert (ran.status, ran.out, ran.err) == (0, f"spark-contracts {contracts.__version__}\n", "")


# -- --executor and --action -----------------------------------------------------------------

MY_RULES = '''
"""Plugins a test loads with --executor and --action from the current directory."""

from actions.protocol import ActionPlan, Effect


class Shout:
    """Rule type SHOUT, one record at a time (so it runs in Spark's Python workers)."""

    type = "SHOUT"

    def transform(self, ctx, message):
        return message["name"].isupper()


class Quarantine:
    """Action QUARANTINE: the row goes to the DLQ topic `quarantine`."""

    name = "QUARANTINE"

    def plan(self, ctx):
        return ActionPlan(self.name, Effect.REJECT, topic="quarantine")


quarantine = Quarantine()


class NeedsArgs:
    type = "NEEDS"

    def __init__(self, level):
        self.level = level
'''
LOUD = {"name": "loud", "kind": "CONDITION", "type": "SHOUT", "mode": "WRITE", "onFailure": "QUARANTINE"}


@pytest.fixture
def my_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory holds `my_rules.py` (plugins) and `broken_rules.py` (fails to import),
    importable only once the CLI puts the current directory on sys.path."""
    from pyspark import cloudpickle

    (tmp_path / "my_rules.py").write_text(MY_RULES)
    (tmp_path / "broken_rules.py").write_text('raise RuntimeError("boom")\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", ".")])
    yield tmp_path
    module = sys.modules.pop("my_rules", None)
    if module is not None and "my_rules" in cloudpickle.list_registry_pickle_by_value():
        cloudpickle.unregister_pickle_by_value(module)


def test_apply_runs_an_executor_and_an_action_loaded_from_the_current_directory(
    spark: Any, my_rules: Path
) -> None:
    registry, output, dlq_dir = my_rules / "registry", my_rules / "valid", my_rules / "dlq"
    adult = cel("adult", "message.age >= 18", onFailure="DLQ", params={"dlq.topic": "minors"})
    write_version(registry, SUBJECT, 1, contract_payload([adult, LOUD]))
    source = my_rules / "users.parquet"
    rows = [("ANN", 30, "ann@example.com"), ("bob", 40, "bob@example.com"), ("CY", 9, "cy@example.com")]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))
    argv = [
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "parquet", "--output", str(output), "--dlq-dir", str(dlq_dir),
    ]  # fmt: skip

    without = cli(*argv, spark=spark)
    assert without.status == 1 and "unknown action 'QUARANTINE'" in without.err

    plugins = ["--executor", "my_rules:Shout", "--action", "my_rules:quarantine"]
    dry = cli(*argv, *plugins, "--dry-run", spark=spark)  # the rule in Python: counts observed

    assert dry.status == 0, dry.err
    table, _, rest = dry.out.partition("valid rows: 1 (dry run: not written)\n")
    assert summary_row(table, "loud") == ["loud", "WRITE", "1", "1", "NONE=1", "QUARANTINE=1"]
    assert "DLQ quarantine: 1 rows (dry run: not written)" in rest
    assert not output.exists() and not dlq_dir.exists()

    ran = cli(*argv, *plugins, spark=spark)

    assert ran.status == 0, ran.err
    assert [row.name for row in spark.read.parquet(str(output)).collect()] == ["ANN"]
    assert [r["value"]["name"] for r in dlq(dlq_dir, "minors")] == ["CY"]
    assert [(r["value"]["name"], r["headers"]["__rule.name"]) for r in dlq(dlq_dir, "quarantine")] == [
        ("bob", b"loud")
    ]
    assert summary_row(ran.out, "loud") == ["loud", "WRITE", "1", "1", "NONE=1", "QUARANTINE=1"]


def test_dlq_replay_takes_the_same_plugin_flags(spark: Any, my_rules: Path) -> None:
    registry, output, dlq_dir = my_rules / "registry", my_rules / "replayed", my_rules / "dlq"
    write_version(registry, SUBJECT, 1, contract_payload([LOUD]))
    source = my_rules / "users.jsonl"
    source.write_text(json.dumps({"name": "bob", "age": 40, "email": "bob@example.com"}) + "\n")
    plugins = ["--executor", "my_rules:Shout", "--action", "my_rules:Quarantine"]
    applied = cli(
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE", "--input",
        str(source), "--format", "json", "--output", str(my_rules / "valid"), "--dlq-dir", str(dlq_dir),
        *plugins, spark=spark,
    )  # fmt: skip
    assert applied.status == 0, applied.err
    argv = ["dlq", "replay", "quarantine", "--registry", str(registry), "--subject", SUBJECT]
    argv += ["--output", str(output), "--dlq-dir", str(dlq_dir)]

    without = cli(*argv, spark=spark)
    assert without.status == 1 and "unknown action 'QUARANTINE'" in without.err

    replayed = cli(*argv, *plugins, spark=spark)  # past `loud`, the rule the record failed

    assert replayed.status == 0, replayed.err
    assert [row.name for row in spark.read.parquet(str(output)).collect()] == ["bob"]


@pytest.mark.parametrize("command", ["apply", "dlq replay"])
@pytest.mark.parametrize(
    ("flag", "spec", "problem"),
    [
        (
            "--executor",
            "no_such_module:Shout",
            "cannot import 'no_such_module': ModuleNotFoundError: No module",
        ),
        ("--action", "broken_rules:Quarantine", "cannot import 'broken_rules': RuntimeError: boom"),
        ("--executor", "my_rules:Whisper", "module 'my_rules' has no attribute 'Whisper'"),
        ("--executor", "my_rules", "expected MODULE:ATTR"),
        ("--executor", "my_rules:NeedsArgs", "cannot instantiate NeedsArgs without arguments: TypeError:"),
        ("--executor", "my_rules:quarantine", "quarantine is not an executor: it needs a str `type`"),
        ("--action", "my_rules:Shout", "Shout is not an action: it needs a str `name` and `plan(ctx)`"),
    ],
)
def test_a_plugin_that_does_not_load_is_a_usage_error_naming_the_flag_and_value(
    my_rules: Path, users_dir: Path, command: str, flag: str, spec: str, problem: str
) -> None:
    common = ["--registry", str(users_dir), "--subject", SUBJECT, "--output", "out", flag, spec]
    if command == "apply":
        argv = ["apply", "--mode", "WRITE", "--input", "x", "--format", "json", *common]
    else:
        argv = ["dlq", "replay", "minors", *common]

    ran = cli(*argv, spark=object())

    assert ran.status == 2
    [line] = ran.err.splitlines()
    assert line.startswith(f"spark-contracts {command.split()[0]}: error: {flag} {spec}: {problem}"), line


def test_debug_shows_the_traceback_of_a_plugin_that_does_not_import(my_rules: Path, users_dir: Path) -> None:
    ran = cli(
        "apply", "--debug", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", "x", "--format", "json", "--output", "out", "--action", "broken_rules:A", spark=object(),
    )  # fmt: skip
    assert ran.status == 2
    assert "Traceback" in ran.err and 'broken_rules.py", line 1' in ran.err
    assert ran.err.splitlines()[-1].startswith("spark-contracts apply: error: --action broken_rules:A: ")


# -- --dry-run -------------------------------------------------------------------------------


def test_apply_dry_run_reports_the_counts_and_a_sample_of_rejected_rows_and_writes_nothing(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "users.parquet"
    rows = [
        ("ann", 30, "ann@example.com"),
        ("bob", 12, "bob@example.com"),
        ("", 40, "x@example.com"),
        ("cy", 9, "cy@example.com"),
    ]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))
    output, dlq_dir = tmp_path / "valid", tmp_path / "dlq"
    argv = [
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "parquet", "--dlq-dir", str(dlq_dir), "--dry-run",
    ]  # fmt: skip

    ran = cli(*argv, "--output", str(output), "--sample", "1", spark=spark)

    assert ran.status == 0, ran.err
    assert not output.exists() and not dlq_dir.exists()
    lines = ran.out.splitlines()
    assert lines[:7] == [
        "rule   mode   passed  failed  actions",
        "-----  -----  ------  ------  ------------",
        "adult  WRITE       2       2  NONE=2 DLQ=2",
        "named  WRITE       1       1  NONE=2",
        "valid rows: 2 (dry run: not written)",
        "DLQ minors: 2 rows (dry run: not written)",
        "rejected rows, a sample of 1:",
    ]
    assert lines[7].split() == ["rule", "topic", "row", "reason"]
    [sample] = lines[9:]
    rule, topic, row, reason = sample.split(maxsplit=3)
    assert (rule, topic, reason) == ("adult", "minors", "Rule expr failed: message.age >= 18")
    assert json.loads(row) in [
        {"name": n, "age": a, "email": f"{n}@example.com"} for n, a in (("bob", 12), ("cy", 9))
    ]
    assert "dry run of the WRITE rules of users-value version 1" in ran.err

    default = cli(*argv, spark=spark)  # --output may be left out; five rejected rows at most

    assert default.status == 0, default.err
    shown = default.out.splitlines()[default.out.splitlines().index("rejected rows, a sample of 2:") + 3 :]
    assert sorted(json.loads(line.split()[2])["name"] for line in shown) == ["bob", "cy"]
    assert not dlq_dir.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--format", "avro-json", "--mode", "READ", "--dry-run"], "--dry-run takes record input"),
        (["--format", "json", "--mode", "WRITE", "--sample", "3", "--output", "o"], "--sample goes with"),
        (["--format", "json", "--mode", "WRITE"], "--output is required, unless --dry-run"),
    ],
)
def test_apply_dry_run_usage_errors(users_dir: Path, extra: list[str], message: str) -> None:
    ran = cli("apply", "--registry", str(users_dir), "--subject", SUBJECT, "--input", "x", *extra)
    assert ran.status == 2
    [line] = ran.err.splitlines()
    assert line.startswith("spark-contracts apply: error: ") and message in line


# -- --max-rejected --------------------------------------------------------------------------


def test_apply_fails_when_more_rows_are_rejected_than_max_rejected_allows(
    spark: Any, users_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "users.parquet"
    rows = [("ann", 30, "ann@example.com"), ("bob", 12, "bob@example.com"), ("", 40, "x@example.com")]
    spark.createDataFrame(rows, "name string, age int, email string").write.parquet(str(source))

    def apply(name: str, *extra: str) -> Ran:
        return cli(
            "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE",
            "--input", str(source), "--format", "parquet", "--output", str(tmp_path / name),
            "--dlq-dir", str(tmp_path / f"{name}-dlq"), *extra, spark=spark,
        )  # fmt: skip

    over = apply("over", "--max-rejected", "0")
    assert over.status == 1
    assert over.err.splitlines()[-1].startswith(
        "spark-contracts apply: error: 1 rows rejected, more than --max-rejected 0 allows (run "
    )
    assert "DLQ minors: 1 rows" in over.out  # the run itself went through: written, then judged
    assert spark.read.parquet(str(tmp_path / "over")).count() == 2

    assert apply("within", "--max-rejected", "34%").status == 0  # 1 of 3 is 33.3%

    dry = apply("dry", "--max-rejected", "33%", "--dry-run")
    assert dry.status == 1
    assert dry.err.splitlines()[-1] == (
        "spark-contracts apply: error: 1 of 3 rows rejected (33.33%), more than --max-rejected 33% allows"
        " (a dry run: nothing was written)"
    )
    assert not (tmp_path / "dry").exists()


@pytest.mark.parametrize("value", ["abc", "150%", "-1", "1.5", "%", "nan%"])
def test_max_rejected_that_does_not_parse_is_a_usage_error(users_dir: Path, value: str) -> None:
    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE", "--input", "x",
        "--format", "json", "--output", "o", "--max-rejected", value, spark=object(),
    )  # fmt: skip
    assert ran.status == 2
    assert "argument --max-rejected: " in ran.err.splitlines()[-1] and repr(value) in ran.err


# -- --rule-config-file and --rule-config-env ------------------------------------------------

PEOPLE = "people-value"
PERSON = {
    "type": "record",
    "name": "Person",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    ],
}
ENCRYPT_PII = encrypt_rule(
    params={**KMS_PARAMS, "encrypt.kek.name": "people-kek", "encrypt.kms.key.id": "people-key"}
)
KMS_SECRET = "kms-secret-7f3e9a1c"
OTHER_SECRET = "other-secret-55d20b8e"
PEOPLE_ROWS = [("ann", 30, "111-22-3333"), ("cy", 9, "444-55-6666")]
RULE_CONFIG_ENV = "PEOPLE_RULE_CONFIG"


@pytest.fixture
def people_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry directory holding an ENCRYPT contract on local-kms (its DEKs go under it); no
    $LOCAL_SECRET, so the secret can only come from the rule config."""
    monkeypatch.delenv("LOCAL_SECRET", raising=False)
    root = tmp_path / "people"
    write_version(root, PEOPLE, 1, contract_payload([ENCRYPT_PII], PERSON))
    return root


def secret_file(path: Path, secret: str = KMS_SECRET) -> Path:
    path.write_text(json.dumps({"secret": secret}))
    return path


def people_jsonl(path: Path) -> Path:
    lines = [json.dumps({"name": name, "age": age, "ssn": ssn}) + "\n" for name, age, ssn in PEOPLE_ROWS]
    path.write_text("".join(lines))
    return path


def people_frames(spark: Any, people_dir: Path, path: Path) -> Path:
    """The people in Confluent frames, their ssn encrypted under KMS_SECRET, as Parquet."""
    contract = DataContract(LocalRegistry(people_dir), PEOPLE, rule_config={"secret": KMS_SECRET})
    frames = contract.serialize(spark.createDataFrame(PEOPLE_ROWS, "name string, age int, ssn string"))
    frames.write.parquet(str(path))
    return path


def people(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    return [(r.name, r.age, r.ssn) for r in spark.read.parquet(str(path)).orderBy("name").collect()]


def test_apply_takes_the_rule_config_from_a_file_or_the_environment(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, encrypted, decrypted = people_jsonl(tmp_path / "people.jsonl"), tmp_path / "enc", tmp_path / "dec"
    write = ["apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "WRITE", "--input",
             str(source), "--format", "json", "--dlq-dir", str(tmp_path / "dlq")]  # fmt: skip

    without = cli(*write, "--output", str(tmp_path / "none"), spark=spark)
    assert without.status == 1 and "local-kms needs a secret" in without.err

    config = secret_file(tmp_path / "rc.json")
    ran = cli(*write, "--output", str(encrypted), "--rule-config-file", str(config), spark=spark)

    assert ran.status == 0, ran.err
    written = people(spark, encrypted)
    assert [(name, age) for name, age, _ in written] == [(name, age) for name, age, _ in PEOPLE_ROWS]
    assert all(ssn != plain for (_, _, ssn), (_, _, plain) in zip(written, PEOPLE_ROWS, strict=True))
    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": KMS_SECRET}))

    read = cli(
        "apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "READ", "--input",
        str(encrypted), "--format", "parquet", "--output", str(decrypted), "--dlq-dir", str(tmp_path / "dlq"),
        "--rule-config-env", RULE_CONFIG_ENV, spark=spark,
    )  # fmt: skip

    assert read.status == 0, read.err
    assert people(spark, decrypted) == PEOPLE_ROWS


def test_apply_of_wire_format_takes_the_environments_keys_over_the_files(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = people_frames(spark, people_dir, tmp_path / "frames")
    stale = secret_file(tmp_path / "stale.json", OTHER_SECRET)
    read = ["apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "READ", "--input",
            str(frames), "--format", "avro-parquet", "--dlq-dir", str(tmp_path / "dlq"),
            "--rule-config-file", str(stale)]  # fmt: skip

    wrong = cli(*read, "--output", str(tmp_path / "wrong"), spark=spark)
    assert wrong.status == 1 and "ENCRYPT cannot decrypt field 'Person.ssn'" in wrong.err

    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": KMS_SECRET}))
    ran = cli(*read, "--output", str(tmp_path / "dec"), "--rule-config-env", RULE_CONFIG_ENV, spark=spark)

    assert ran.status == 0, ran.err
    assert people(spark, tmp_path / "dec") == PEOPLE_ROWS


def test_dlq_replay_takes_the_rule_config_too(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adult = cel("adult", "message.age >= 18", onFailure="DLQ", params={"dlq.topic": "minors"})
    write_version(people_dir, PEOPLE, 1, contract_payload([adult, ENCRYPT_PII], PERSON))
    dlq_dir, config = tmp_path / "dlq", tmp_path / "rc.json"
    # Replayable: the DLQ keeps the encrypted fields' plaintext instead of "<REDACTED>".
    config.write_text(json.dumps({"secret": KMS_SECRET, "dlq.redact.rule.types": ""}))
    applied = cli(
        "apply", "--registry", str(people_dir), "--subject", PEOPLE, "--mode", "WRITE", "--input",
        str(people_jsonl(tmp_path / "people.jsonl")), "--format", "json", "--output", str(tmp_path / "valid"),
        "--dlq-dir", str(dlq_dir), "--rule-config-file", str(config), spark=spark,
    )  # fmt: skip
    assert applied.status == 0, applied.err
    replay = ["dlq", "replay", "minors", "--registry", str(people_dir), "--subject", PEOPLE,
              "--dlq-dir", str(dlq_dir), "--output", str(tmp_path / "replayed")]  # fmt: skip

    without = cli(*replay, spark=spark)
    assert without.status == 1 and "local-kms needs a secret" in without.err
    # The failed replay took the record: it says how to finish it, its run id.
    (run_id,) = re.findall(r"rerun with --run-id (\w+) to replay the same records", without.err)

    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": KMS_SECRET}))
    ran = cli(*replay, "--run-id", run_id, "--rule-config-env", RULE_CONFIG_ENV, spark=spark)

    assert ran.status == 0, ran.err
    [(name, age, ssn)] = people(spark, tmp_path / "replayed")  # past `adult`, then encrypted
    assert (name, age) == ("cy", 9) and ssn != "444-55-6666"
    reader = DataContract(LocalRegistry(people_dir), PEOPLE, rule_config={"secret": KMS_SECRET})
    replayed = spark.read.parquet(str(tmp_path / "replayed")).select("name", "age", "ssn")
    assert [row.ssn for row in reader.read(replayed).collect()] == ["444-55-6666"]


@pytest.mark.parametrize("command", ["apply", "dlq replay"])
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read it: No such file or directory"),
        (b"\xff" + KMS_SECRET.encode(), "is not UTF-8 text"),
        (f'{{"secret": "{KMS_SECRET}"'.encode(), "not JSON (Expecting ',' delimiter at line 1 column"),
        (json.dumps([KMS_SECRET]).encode(), "must hold a JSON object of strings, not an array"),
        (json.dumps({"secret": KMS_SECRET, "n": 8}).encode(), "value of 'n' must be a string, not a number"),
        (json.dumps({"secret": KMS_SECRET, "on": None}).encode(), "value of 'on' must be a string, not null"),
    ],
)  # fmt: skip
def test_a_rule_config_file_that_cannot_be_used_is_a_usage_error_naming_it(
    users_dir: Path, tmp_path: Path, command: str, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "rule-config.json"
    if content is not None:
        path.write_bytes(content)
    common = [
        "--registry",
        str(users_dir),
        "--subject",
        SUBJECT,
        "--output",
        "out",
        "--rule-config-file",
        str(path),
    ]
    if command == "apply":
        argv = ["apply", "--mode", "WRITE", "--input", "x", "--format", "json", *common]
    else:
        argv = ["dlq", "replay", "minors", *common]

    for debug in ([], ["--debug"]):
        ran = cli(*debug, *argv, spark=object())

        assert ran.status == 2
        *traceback, line = ran.err.splitlines()
        assert line.startswith(f"spark-contracts {command.split()[0]}: error: --rule-config-file {path}: ")
        assert problem in line, line
        assert bool(traceback) == bool(debug)
        assert KMS_SECRET not in ran.out + ran.err


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, f"the environment variable {RULE_CONFIG_ENV} is not set"),
        (KMS_SECRET, "not JSON (Expecting value at line 1 column 1)"),
        (json.dumps({"secret": [KMS_SECRET]}), "the value of 'secret' must be a string, not an array"),
    ],
)
def test_a_rule_config_variable_that_cannot_be_used_is_a_usage_error_naming_it(
    users_dir: Path, monkeypatch: pytest.MonkeyPatch, value: str | None, problem: str
) -> None:
    monkeypatch.delenv(RULE_CONFIG_ENV, raising=False)
    if value is not None:
        monkeypatch.setenv(RULE_CONFIG_ENV, value)

    ran = cli(
        "apply", "--registry", str(users_dir), "--subject", SUBJECT, "--mode", "WRITE", "--input", "x",
        "--format", "json", "--output", "out", "--rule-config-env", RULE_CONFIG_ENV, spark=object(),
    )  # fmt: skip

    assert ran.status == 2
    [line] = ran.err.splitlines()
    assert line == f"spark-contracts apply: error: --rule-config-env {RULE_CONFIG_ENV}: {problem}"
    assert KMS_SECRET not in ran.out + ran.err


@pytest.mark.one_pass  # what it checks is the same on any session; its last command runs classic
def test_rule_config_values_are_never_printed_even_with_debug_or_on_failure(
    spark: Any, people_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not on the command's streams, and, run as its own process with Spark's log on, not by
    Spark, its workers or the registry client either."""
    secrets = (KMS_SECRET, OTHER_SECRET)
    frames = people_frames(spark, people_dir, tmp_path / "frames")
    common = ["--debug", "apply", "--registry", str(people_dir), "--subject", PEOPLE, "--dlq-dir",
              str(tmp_path / "dlq")]  # fmt: skip
    source, config = people_jsonl(tmp_path / "people.jsonl"), secret_file(tmp_path / "rc.json")
    written = cli(
        *common, "--mode", "WRITE", "--input", str(source), "--format", "json", "--output",
        str(tmp_path / "enc"), "--rule-config-file", str(config), spark=spark,
    )  # fmt: skip
    assert written.status == 0, written.err
    monkeypatch.setenv(RULE_CONFIG_ENV, json.dumps({"secret": OTHER_SECRET}))
    wrong_secret = [*common, "--mode", "READ", "--input", str(frames), "--format", "avro-parquet",
                    "--rule-config-env", RULE_CONFIG_ENV]  # fmt: skip
    failed = cli(*wrong_secret, "--output", str(tmp_path / "dec"), spark=spark)
    assert failed.status == 1 and "Traceback" in failed.err
    assert "ENCRYPT cannot decrypt field 'Person.ssn'" in failed.err.splitlines()[-1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"secret": KMS_SECRET, "retries": 3}))
    refused = cli(
        *common, "--mode", "WRITE", "--input", "x", "--format", "json", "--output", "out",
        "--rule-config-file", str(bad), spark=spark,
    )  # fmt: skip
    assert refused.status == 2 and "Traceback" in refused.err
    monkeypatch.setenv("SPARK_LOG_LEVEL", "INFO")
    for connect in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):  # the command's own classic session
        monkeypatch.delenv(connect, raising=False)
    process = python_m_cli(*wrong_secret, "--output", str(tmp_path / "dec2"), cwd=tmp_path)
    assert process.returncode == 1, process.stderr[-2000:]
    assert "ERROR Executor: Exception in task" in process.stderr  # Spark's own log of the failure
    assert "ENCRYPT cannot decrypt field 'Person.ssn'" in process.stderr.splitlines()[-1]

    for out, err in [(ran.out, ran.err) for ran in (written, failed, refused)] + [
        (process.stdout, process.stderr)
    ]:
        for secret in secrets:
            assert secret not in out + err
