"""`spark-contracts apply --dry-run` and `--max-rejected`: counting without writing, and failing on
too many rejects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import Ran, cli
from cli_users import SUBJECT

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
