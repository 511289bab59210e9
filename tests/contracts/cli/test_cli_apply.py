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


def test_a_transform_result_that_does_not_fit_is_one_line_with_its_cause(spark: Any, tmp_path: Path) -> None:
    stringly = {
        "name": "stringly",
        "kind": "TRANSFORM",
        "type": "JSONATA",
        "mode": "WRITE",
        "expr": "$merge([$, {'age': $string(age)}])",
    }
    registry = registry_with(tmp_path / "contracts", [stringly])
    source = jsonl(tmp_path / "people.jsonl", [{"name": "ann", "age": 20}])

    ran = cli(
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE",
        "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"),
        "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
    )  # fmt: skip

    assert ran.status == 1
    *_, last = ran.err.splitlines()
    assert last == (
        "spark-contracts apply: SparkRuntimeException: [USER_RAISED_EXCEPTION] SerializationError: the"
        " result of TRANSFORM rule 'stringly' (WRITE) does not match the schema of subject 'people-value'"
        " version 1: Person.age is <20> of type <class 'str'> expected int SQLSTATE: P0001"
    )


def apply_argv(registry: Path, *argv: str) -> list[str]:
    return ["apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "WRITE", *argv]


@pytest.fixture
def adults(tmp_path: Path) -> Path:
    """A registry whose contract sends minors to the `minors` DLQ topic (a native rule)."""
    return registry_with(tmp_path / "contracts", [adult_rule("CEL")])


def test_unreadable_lines_go_to_their_dlq_topic_with_the_line_as_value(
    spark: Any, adults: Path, tmp_path: Path
) -> None:
    from actions.dlq.local_topic import LocalTopicSink

    source = tmp_path / "people.jsonl"
    lines = ['{"name": "ann", "age": 30}', '{"name": "bob", "age": ', '{"name": "cy", "age": "old"}']
    source.write_text("\n".join([*lines, '{"name": "dee", "age": 9}']) + "\n")
    dlq = tmp_path / "dlq"
    argv = apply_argv(adults, "--input", str(source), "--format", "json", "--unreadable-dlq", "bad-lines")
    argv += ["--dlq-dir", str(dlq)]

    dry = cli(*argv, "--dry-run", spark=spark)
    ran = cli(*argv, "--output", str(tmp_path / "out"), spark=spark)

    assert dry.status == 0, dry.err
    assert "DLQ bad-lines: 2 rows (dry run: not written)" in dry.out
    assert ran.status == 0, ran.err
    assert (
        "valid rows: 1 ->" in ran.out
        and "DLQ minors: 1 rows" in ran.out
        and "DLQ bad-lines: 2 rows" in ran.out
    )
    routed = LocalTopicSink(dlq).read("bad-lines")
    assert sorted(record.value for record in routed) == sorted(line.encode() for line in lines[1:])
    headers = dict(routed[0].headers)
    assert (headers["__rule.name"], headers["__rule.mode"], headers["__rule.subject"]) == (
        b"read",
        b"WRITE",
        SUBJECT.encode(),
    )
    assert (
        headers["__rule.exception"] == b"malformed JSON line: it does not parse as a record of the contract"
    )


def test_csv_input_a_table_and_a_file_named_like_a_glob(spark: Any, adults: Path, tmp_path: Path) -> None:
    csv = tmp_path / "people[1].csv"
    csv.write_text("name,age\nann,30\nbob,12\n")
    (tmp_path / "people1.csv").write_text("name,age\nglob,40\n")  # what Spark's glob would read instead
    spark.createDataFrame([("cy", 50)], "name string, age int").createOrReplaceTempView("first_hour_people")

    from_csv = cli(*apply_argv(adults, "--input", str(csv), "--format", "csv", "--dry-run"), spark=spark)
    from_table = cli(*apply_argv(adults, "--table", "first_hour_people", "--dry-run"), spark=spark)

    assert from_csv.status == 0, from_csv.err
    assert "valid rows: 1 (dry run: not written)" in from_csv.out and "DLQ minors: 1 rows" in from_csv.out
    assert '{"name":"bob","age":12}' in from_csv.out
    assert from_table.status == 0, from_table.err
    assert "valid rows: 1 (dry run: not written)" in from_table.out
    assert "on table first_hour_people" in from_table.err


def test_output_mode_appends_to_or_overwrites_an_existing_output(
    spark: Any, adults: Path, tmp_path: Path
) -> None:
    source = jsonl(tmp_path / "people.jsonl", [{"name": "ann", "age": 30}, {"name": "bo", "age": 40}])
    output = tmp_path / "out"
    argv = apply_argv(adults, "--input", str(source), "--format", "json", "--output", str(output))
    argv += ["--dlq-dir", str(tmp_path / "dlq")]

    first = cli(*argv, spark=spark)
    again = cli(*argv, "--output-mode", "append", spark=spark)

    assert (first.status, again.status) == (0, 0), again.err
    assert "valid rows: 2 ->" in again.out  # this run's rows, not the output's
    assert spark.read.parquet(str(output)).count() == 4
    replaced = cli(*argv, "--output-mode", "overwrite", spark=spark)
    assert replaced.status == 0 and spark.read.parquet(str(output)).count() == 2


def test_frames_that_do_not_decode_go_to_the_unreadable_dlq_topic(spark: Any, tmp_path: Path) -> None:
    import io

    import fastavro

    from actions.dlq.local_topic import LocalTopicSink
    from contracts import LocalRegistry
    from contracts.formats.wire import encode_frame

    registry = registry_with(tmp_path / "contracts", [])
    schema_id = LocalRegistry(registry).get_latest_version(SUBJECT).schema_id
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(PERSON), {"name": "ann", "age": 30})
    frames = [(encode_frame(schema_id, body.getvalue()),), (b"\x00\x00\x00\x00\x63garbage",)]
    source = tmp_path / "frames"
    spark.createDataFrame(frames, "value binary").write.parquet(str(source))

    ran = cli(
        "apply", "--registry", str(registry), "--subject", SUBJECT, "--mode", "READ", "--input", str(source),
        "--format", "avro-parquet", "--unreadable-dlq", "undecodable", "--output", str(tmp_path / "out"),
        "--dlq-dir", str(tmp_path / "dlq"), spark=spark,
    )  # fmt: skip

    assert ran.status == 0, ran.err
    assert "valid rows: 1 ->" in ran.out and "DLQ undecodable: 1 rows" in ran.out
    [routed] = LocalTopicSink(tmp_path / "dlq").read("undecodable")
    assert routed.value == b"\x00\x00\x00\x00\x63garbage"


def test_a_json_value_longer_than_the_readers_limit_is_named_as_such(
    spark: Any, adults: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader is given the limit (Spark's own is 20 million characters: a valid 64 MiB line read
    as malformed); a smaller one here proves the same path without writing 64 MiB."""
    from contracts.cli import inputs

    monkeypatch.setattr(inputs, "MAX_JSON_STRING", 1000)
    under = jsonl(tmp_path / "under.jsonl", [{"name": "n" * 999, "age": 30}])
    over = jsonl(tmp_path / "over.jsonl", [{"name": "n" * 1001, "age": 30}])

    accepted = cli(*apply_argv(adults, "--input", str(under), "--format", "json", "--dry-run"), spark=spark)
    refused = cli(*apply_argv(adults, "--input", str(over), "--format", "json", "--dry-run"), spark=spark)

    assert accepted.status == 0, accepted.err
    assert refused.status == 1
    assert (
        f"JSON line longer than the 1000-character limit of one value, or malformed, in {over}:"
        in refused.err
    )


@pytest.mark.one_pass  # the command's own process and session
def test_a_failing_run_prints_only_its_own_lines_not_sparks_or_its_workers(
    adults: Path, tmp_path: Path
) -> None:
    """No start-up lines, no log, no worker traceback (a daemon's BrokenPipeError) on stderr."""
    from cli_run import python_m_cli

    erroring = {**adult_rule("JSONATA"), "onFailure": "ERROR"}
    registry = registry_with(tmp_path / "erroring", [erroring])
    source = jsonl(tmp_path / "people.jsonl", [{"name": "kid", "age": 9}] * 50)
    argv = apply_argv(registry, "--input", str(source), "--format", "json", "--output", str(tmp_path / "out"))

    ran = python_m_cli(*argv, "--dlq-dir", str(tmp_path / "dlq"), cwd=tmp_path, timeout=300)

    assert ran.returncode == 1
    lines = ran.stderr.splitlines()
    assert [line.split(" (run ")[0] for line in lines[:2]] == [
        f"WRITE rules of {SUBJECT} version 1 on {source}",
        f"WRITE rules of {SUBJECT} version 1 on {source}",
    ]
    assert lines[2].startswith("spark-contracts apply: DLQ records this run committed are under run id")
    assert lines[3].startswith(
        "spark-contracts apply: SparkRuntimeException: [USER_RAISED_EXCEPTION] Rule 'adult'"
    )
    assert len(lines) == 4, ran.stderr
