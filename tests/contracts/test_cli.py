"""The `spark-contracts` command line: lint, apply (Parquet, JSON lines, wire format), push and pull."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from registry_server import RegistryServer, running_registry

from actions.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, RegistryError
from contracts._cli_progress import Progress
from contracts.cli import run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "registry"
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


@dataclass(frozen=True)
class Ran:
    """One CLI run: its exit status and what it printed."""

    status: int
    out: str
    err: str


def cli(*argv: str, spark: Any = None) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), spark=spark, stdout=out, stderr=err)
    return Ran(status, out.getvalue(), err.getvalue())


def write_version(root: Path, subject: str, version: int, payload: Any) -> Path:
    path = root / subject / f"{version}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


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
    assert rejected.value == frames[1]  # on READ the DLQ gets the bytes as they arrived (SEMANTICS.md §7)
    assert summary_row(ran.out, "validEmail") == ["validEmail", "READ", "2", "1", "NONE=2", "DLQ=1"]
    assert f"DLQ bad-emails: 1 rows -> {dlq_dir}/bad-emails" in ran.out
    assert "READ rules of users-value version 1" in ran.err


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
