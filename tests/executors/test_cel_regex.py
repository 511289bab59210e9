"""CEL `matches()` never overflows the JVM's stack: Java gets only patterns it matches with a bounded
stack (rewritten where that is exact), RE2 in Python decides the rest, and the answers are RE2's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.avro import parse_schema, struct_type
from executors.cel._compiler import compile_expression
from executors.cel._native_regex import MAX_FRAMES, translate_re2
from executors.cel._native_types import NotNativeCel

LONG = 100_000
SUBJECT = "texts-value"
TEXTS = {
    "type": "record",
    "name": "Text",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "kind", "type": "int"},
        {"name": "text", "type": "string"},
    ],
}
RECORD_TYPE = struct_type(parse_schema(TEXTS))


def cel_string(text: str) -> str:
    """`text` as a single-quoted CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def long_text(unit: str, tail: str = "") -> str:
    return (unit * (LONG // len(unit) + 1))[:LONG] + tail


# Constructs java.util.regex matches by recursing once per repetition, each with a 100k-character
# text it matches and one it does not (the difference at the very end, after all the repetitions).
NATIVE_CASES: list[tuple[str, str, str]] = [
    (r"^([A-Za-z0-9]|[-_])+$", "a-_9", "!"),  # the pattern that shut a SparkContext down
    (r"^(a|b)*$", "ab", "c"),
    (r"^(?:a|b)*?$", "ab", "c"),
    (r"^(a|b|😀)+$", "a😀b", "c"),
    (r"^(?:ab)*$", "ab", "a"),
    (r"^(?:[0-9]{3}-)+[0-9]*$", "123-", "x"),
    (r"^[^a-c]{2,}$", "😀d", "a"),
    (r"(a|b){1,100}$", "ab", "c"),
]
PYTHON_CASES: list[tuple[str, str, str]] = [
    (r"^(ab|cd)*$", "abcd", "a"),
    (r"^(a+b)*$", "aab", "a"),
    (r"^(?:.b)*$", "😀bab", "a"),
    (r"^(a?)+$", "a", "b"),
    (r"^(a|bc){1,1000}", "abc", ""),
    (r"^((a|b)(c|d))*$", "acbd", "a"),
    (r"^(?:(?:ab|c){2})+$", "abc", "a"),
]
VALIDATOR_CASES: list[tuple[str, str]] = [
    ("isEmail", long_text("a") + "@example.com"),
    ("isEmail", long_text("a.") + "@example.com"),
    ("isEmail", "a@" + long_text("a.") + "com"),
    ("isHostname", long_text("a.") + "com"),
    ("isHostname", long_text("a-")),
    ("isIpv4", long_text("1.")),
]


@pytest.mark.parametrize(("pattern", "unit", "tail"), NATIVE_CASES)
def test_repetition_java_would_recurse_on_is_rewritten_or_bounded(pattern: str, unit: str, tail: str) -> None:
    java = translate_re2(pattern)
    assert "|" not in java  # each alternation of single characters became one class


@pytest.mark.parametrize(("pattern", "unit", "tail"), PYTHON_CASES)
def test_repetition_recursing_per_repetition_is_left_to_re2(pattern: str, unit: str, tail: str) -> None:
    with pytest.raises(NotNativeCel):
        translate_re2(pattern)


@pytest.mark.parametrize(
    ("pattern", "java"),
    [
        (r"^([A-Za-z0-9]|[-_])+$", r"^[A-Za-z0-9\-_]+\z"),
        (r"(a|&)+", r"[a\&]+"),  # joined members never form Java's && or a range
        (r"(-|a|z)+", r"[\-az]+"),
        (r"([0-9]|\d|\.)*", r"[0-90-9\.]*"),
        (r"(.)+", r"[^\n]+"),  # one alternative: the character itself, negated or not
        (r"(a|.)+", None),  # a negated class joins no union
        (r"a{,3}", r"a\{,3\}"),  # not a repetition in RE2: literal braces
        (r"x{2", r"x\{2"),
        (r"[a-b-c]", r"[a-b\-c]"),  # RE2: after a range, `-` is literal
        (r"[]-a]", r"[\]-a]"),
        (r"[\d-z]", r"[0-9\-z]"),
        (r"^(?:a|b){1,100}", r"^[ab]{1,100}"),
        (r"(?:ab|c){1,50}", r"(?:ab|c){1,50}"),
        (r"(?:ab|c){1,500}", None),  # bounded, but 500 levels deep
        (r"(?:ab|c)*", None),
        (r".{1,1000}", None),  # a greedy count over 1- or 2-unit characters recurses where widths change
        (r"[a-z]{1,1000}", r"[a-z]{1,1000}"),
        (r"(?:(?:ab){2}c)+", r"(?:(?:ab){2}c)+"),
        (r"(?:[😀]b)+", None),  # a supplementary character: not one width
        (r"(?i)abc", None),
        (r"\bab", None),
    ],
)
def test_translation(pattern: str, java: str | None) -> None:
    if java is None:
        with pytest.raises(NotNativeCel):
            translate_re2(pattern)
    else:
        assert translate_re2(pattern) == java


def test_a_long_pattern_is_left_to_re2() -> None:
    assert translate_re2("a" * (MAX_FRAMES // 2)) == "a" * (MAX_FRAMES // 2)
    with pytest.raises(NotNativeCel):
        translate_re2("a" * MAX_FRAMES * 2)
    with pytest.raises(NotNativeCel):
        translate_re2("(" * 60 + "a" + ")" * 60)


DIFFERENTIAL_PATTERNS = [
    *(case[0] for case in NATIVE_CASES),
    r"(a|b)+",
    r"^(-|_|a)*b",
    r"[a-b-c]+",
    r"[]-a]",
    r"[\d-]+$",
    r"^x{,3}",
    r"a{2",
    r"^(?:ab){2,}",
    r"(?:a[.x])*?b",
    r"^[^\n]{2,4}$",
    r"(a|\.)+\z",
    r"\Aa|b\z",
    r"^(a)(b)?c*$",
    r"[\^&]",
    r"(\^|&)+",
    r"ab{0}c",
    r"()b",
]
TEXT = st.text(alphabet="ab-_c.1\n😀x{},^&]", max_size=10)


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(texts=st.lists(TEXT, min_size=120, max_size=120))
def test_translated_patterns_match_as_re2_does(spark: Any, texts: list[str]) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(i, 0, t) for i, t in enumerate(texts)], "id long, kind int, text string")
    record = F.struct(*[F.col(name) for name in df.columns])
    columns = []
    for i, pattern in enumerate(DIFFERENTIAL_PATTERNS):
        _, build = compile_expression(f"message.text.matches({cel_string(pattern)})", RECORD_TYPE)
        columns.append(build(record).value.alias(f"m{i}"))
    rows = df.select("text", *columns).collect()
    problems = [
        f"{pattern!r} on {row['text']!r}: java {row[f'm{i}']}"
        for row in rows
        for i, pattern in enumerate(DIFFERENTIAL_PATTERNS)
        if row[f"m{i}"] != (re2.search(pattern, row["text"]) is not None)
    ]
    assert not problems, "\n".join(problems[:20])


def _rule(name: str, guard: str, cases: list[tuple[int, str]]) -> dict[str, Any]:
    """A condition on the rows its guard selects: true when the check of the row's `kind` holds."""
    checks = " || ".join(f"(message.kind == {kind} && {check})" for kind, check in cases)
    return {
        "name": name,
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": f"{guard} ; {checks}",
        "onFailure": "DLQ",
        "params": {"dlq.topic": f"unmatched-{name}"},
    }


def _long_rows() -> tuple[list[tuple[int, int, str]], list[dict[str, Any]], set[int]]:
    """Rows of 100k-character texts, a native and a Python rule over them, and the ids RE2 passes.

    Rows of kind below `first_python` are the native rule's (guarded to them), the rest the Python
    rule's, so each row meets exactly one check.
    """
    rows: list[tuple[int, int, str]] = []
    expected: set[int] = set()
    native: list[tuple[int, str]] = []
    python: list[tuple[int, str]] = []
    for name, text in VALIDATOR_CASES:
        native.append((len(rows), f"message.text.{name}()"))
        rows.append((len(rows), len(rows), text))  # every one of these is too long to be valid
    patterns = [(native, case) for case in NATIVE_CASES] + [(python, case) for case in PYTHON_CASES]
    for kind, (checks, (pattern, unit, tail)) in enumerate(patterns, start=len(rows)):
        checks.append((kind, f"message.text.matches({cel_string(pattern)})"))
        for text in (long_text(unit), long_text(unit, tail)):
            if re2.search(pattern, text):
                expected.add(len(rows))
            rows.append((len(rows), kind, text))
    first_python = python[0][0]
    rules = [
        _rule("native", f"message.kind < {first_python}", native),
        _rule("python", f"message.kind >= {first_python}", python),
    ]
    return rows, rules, expected


def test_matches_on_100k_character_texts_gives_re2s_answers_and_spark_survives(
    spark: Any, tmp_path: Path
) -> None:
    rows, rules, expected = _long_rows()
    registry = LocalRegistry()
    payload = {"schema": json.dumps(TEXTS), "ruleSet": {"domainRules": rules}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    explained = contract.explain("WRITE").splitlines()
    assert explained[1].endswith("(native)") and "(python); no native form for " in explained[2]
    df = spark.createDataFrame(rows, "id long, kind int, text string")

    result = contract.apply(df)
    assert sorted(row["id"] for row in result.valid.select("id").collect()) == sorted(expected)
    rejected = {row["id"]: row["_contract"]["rule"] for row in result.rejected.collect()}
    assert set(rejected) == set(range(len(rows))) - expected
    assert set(rejected.values()) == {"native", "python"}
    assert contract.write(df).count() == len(expected)
    dead = len(sink.read("unmatched-native")) + len(sink.read("unmatched-python"))
    assert dead == len(rows) - len(expected)
    assert spark.range(3).count() == 3  # the session is still alive


def test_a_cel_field_rule_matching_100k_character_values_survives(spark: Any, tmp_path: Path) -> None:
    rule = {
        "name": "slugs",
        "kind": "CONDITION",
        "type": "CEL_FIELD",
        "mode": "WRITE",
        "expr": "typeName == 'STRING' ; value.matches('^([A-Za-z0-9]|[-_])+$')",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-slugs"},
    }
    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(TEXTS), "ruleSet": {"domainRules": [rule]}})
    )
    contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / "dlq"))
    assert contract.explain("WRITE").endswith("(native); touches Text.text")
    df = spark.createDataFrame(
        [(0, 0, long_text("a-_9")), (1, 0, long_text("a-_9", "!"))], "id long, kind int, text string"
    )
    result = contract.apply(df)
    assert [row["id"] for row in result.valid.collect()] == [0]
    assert [row["id"] for row in result.rejected.collect()] == [1]
    assert spark.range(3).count() == 3
