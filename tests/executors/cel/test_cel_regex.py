"""CEL `matches()` never hangs a task or overflows the JVM's stack: Java gets only patterns it matches
in linear time with a bounded stack (rewritten where that is exact), RE2 in Python decides the
rest, and the answers are RE2's (docs/semantics.md §3.7)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import re2
from deadline import within
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.avro import parse_schema, struct_type
from contracts.formats.regex import MAX_WIDTH, NotInJava, compiled, java_form, refusal
from executors.cel.compiler.expressions import compile_expression

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


# Patterns java.util.regex, as translated, matches in linear time with a bounded stack, each with a
# 100k-character text it matches and one it does not (the difference at the very end, after all the
# repetitions): untranslated, Java recursed once per repetition of most of them, and backtracked
# without bound on others.
NATIVE_CASES: list[tuple[str, str, str]] = [
    (r"^([A-Za-z0-9]|[-_])+$", "a-_9", "!"),  # the pattern that shut a SparkContext down
    (r"^(a|b)*$", "ab", "c"),
    (r"^(?:a|b)*?$", "ab", "c"),
    (r"^(a|b|😀)+$", "a😀b", "c"),
    (r"^(?:ab)*$", "ab", "a"),
    (r"^[^a-c]{2,}$", "😀d", "a"),
    (r"(a|b){1,100}$", "ab", "c"),
    (r"(a|b)*c$", "ab", "c"),  # 173 s on 100k characters before: it searches as `c$`
    (r"^(ab|cd)*$", "abcd", "a"),
    (r"^(a+b)*$", "aab", "a"),
    (r"^(?:.b)*$", "😀bab", "a"),
    (r"^(a|bc){1,1000}", "abc", ""),
    (r"^((a|b)(c|d))*$", "acbd", "a"),
    (r"^(?:(?:ab|c){2})+$", "abc", "a"),
    (r"^.*\.csv$", "a.csv", "."),  # the one greedy repetition: a bounded rest after it
    (r"^[a-z]+@[a-z]+\.com$", "ab", "@x.com!"),
]
# Patterns Java would backtrack on without bound (or recurse on per repetition): RE2 decides them.
PYTHON_CASES: list[tuple[str, str, str]] = [
    (r"^(a?)+$", "a", "b"),
    (r"^.*.*.*.*.*.*=$", "ab", ""),
    (r"^\d+\d+\d+\d+\d+x$", "1", ""),
    (r"^(a+)+$", "a", "!"),
    (r"^(a|ab)*c$", "ab", ""),
    (r"x[^x]*y", "xa", ""),
    (r"^[a-z0-9.-]+\.[a-z]{2,}$", "a.", "!"),
    (r"^(?:[0-9]{3}-)+[0-9]*$", "123-", "x"),  # the digits after the group could start another
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
def test_a_pattern_java_matches_in_linear_time_is_translated(pattern: str, unit: str, tail: str) -> None:
    """Every repetition of a group is possessive: Java repeats it in a loop and never gives one back."""
    java = java_form(pattern)
    assert not re.search(r"\)(\*|\+|\?|\{[0-9]*,[0-9]*\})(?!\+)", java), java


@pytest.mark.parametrize(("pattern", "unit", "tail"), PYTHON_CASES)
def test_a_pattern_java_may_backtrack_on_is_left_to_re2(pattern: str, unit: str, tail: str) -> None:
    with pytest.raises(NotInJava):
        java_form(pattern)


@pytest.mark.parametrize(
    ("pattern", "java"),
    [
        (r"^([A-Za-z0-9]|[-_])+$", r"^[A-Za-z0-9\-_]++\z"),
        (r"(a|&)+", r"[a\&]"),  # joined members never form Java's && or a range; unanchored: one will do
        (r"^(-|a|z)+", r"^[\-az]"),  # unanchored at its end: one will do
        (r"^([0-9]|\d|\.)*$", r"^[0-90-9\.]*+\z"),
        (r"^(.)+$", r"^[^\n]++\z"),  # one alternative: the character itself, negated or not
        (r"^(a|.)+$", None),  # a negated class joins no union, and `a` is also `.`
        (r"a{,3}", r"a\{,3\}"),  # not a repetition in RE2: literal braces
        (r"x{2", r"x\{2"),
        (r"[a-b-c]", r"[a-b\-c]"),  # RE2: after a range, `-` is literal
        (r"[]-a]", r"[\]-a]"),
        (r"[\d-z]", r"[0-9\-z]"),
        (r"^(?:a|b){1,100}$", r"^[ab]{1,100}+\z"),
        (r"^(?:ab|c){1,50}$", r"^(?>ab|c){1,50}+\z"),
        (r"(?:ab|c)*", ""),  # a search for it always succeeds: at the start, with no repetition
        (r".{1,1000}", r"[^\n]"),
        (r"^[a-z]{1,1000}$", r"^[a-z]{1,1000}+\z"),
        (r"^(?:(?:ab){2}c)+$", r"^(?:(?:ab){2}c)++\z"),
        (r"^(?:[😀]b)+$", r"^(?:[\x{1f600}]b)++\z"),
        (r"^a*b*c*$", r"^a*+b*+c*+\z"),
        (r"^a*a$", r"^a*a\z"),  # the greedy one: it gives back a character for the rest
        (r"^a*ab*b$", None),  # two choices the next character does not decide
        (r"^(?:a*)*$", None),
        (r"a(b|c)d|e+f", r"a(?>b|c)d|ef"),
        (r"(?i)abc", None),
        (r"\bab", None),
        (r"a^b", None),  # an anchor inside
        (r"(^a|b)", None),
        (r"[a-z]+[0-9]+[a-z]+", None),  # [a-z][0-9]+[a-z] searched: tried again from every position
        (r"[a-z]{300}", None),  # 300 characters a search would try from every position
    ],
)
def test_translation(pattern: str, java: str | None) -> None:
    if java is None:
        with pytest.raises(NotInJava):
            java_form(pattern)
    else:
        assert java_form(pattern) == java


def test_a_long_or_deeply_nested_pattern_is_left_to_re2() -> None:
    assert java_form("^" + "a" * MAX_WIDTH * 4) == "^" + "a" * MAX_WIDTH * 4
    with pytest.raises(NotInJava, match="longer than"):
        java_form("^" + "a" * 5000)
    with pytest.raises(NotInJava, match="nested"):
        java_form("(" * 60 + "a" + ")" * 60)


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [
        (r"^(a{1,50}){1,50}$", "invalid repetition size: {1,50}"),  # Java reads it; RE2 caps repetition
        (r"a{1001}", "invalid repetition size"),
        (r"a*+", "bad repetition operator: *+"),  # Java's possessive
        (r"(?=a)b", "invalid perl operator: (?="),  # Java's lookahead
        (r"(?<=a)b", "invalid perl operator: (?<"),
        (r"(a)\1", r"invalid escape sequence: \1"),  # Java's backreference
        (r"a\Z", r"invalid escape sequence: \Z"),  # Java's end before a final line terminator
    ],
)
def test_a_pattern_re2_refuses_has_no_java_form_and_logs_nothing(
    pattern: str, refused: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(NotInJava, match=f"a pattern RE2 refuses \\({re.escape(refused)}"):
        java_form(pattern)
    _, err = capfd.readouterr()
    assert "re2" not in err.lower()


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
    r"^a*a$",
    r"^[ab]*b[a-c]$",
    r"a(b|c)d|e+f",
    r"^[a-z]+[0-9]+[a-z]+",
    r"^(?:ab|c){1,3}$",
    r"^.$",  # RE2's `.` is any character but \n; Java's excludes \r, \u0085, \u2028 and \u2029 too
    r"^a$",  # RE2's `$` is the end of the text; Java's also matches before a final line terminator
    r"\s",  # RE2's \s is [\t\n\f\r ]; Java's adds \x0B
    r"^\w+$",  # ASCII in both; Python's `re` would take é
    r"^\D\W\S$",
]
TEXT = st.text(alphabet="ab-_c.1\n\r\x0b\u2028é😀x{},^&]", max_size=10)


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


# What a task ran past 240 s (the first two) and for 173 s (the third) on before; each with text it
# does not match and text it does.
HANGING_CASES: list[tuple[str, str, str]] = [
    (r"^.*.*.*.*.*.*=$", "a" * 3000, "="),
    (r"^\d+\d+\d+\d+\d+x$", "1" * 5000, "x"),
    (r"(a|b)*c$", "ab" * 50_000, "c"),
]


def _checked(spark: Any, tmp_path: Path, patterns: list[str], texts: list[tuple[int, str]]) -> Any:
    """A contract with one DLQ condition per pattern (rule `p<i>` checks rows of kind i), its
    explain text, and the ids of the rows of `texts` ((kind, text)) that `apply` keeps."""
    rules = [
        _rule(f"p{i}", f"message.kind == {i}", [(i, f"message.text.matches({cel_string(p)})")])
        for i, p in enumerate(patterns)
    ]
    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(TEXTS), "ruleSet": {"domainRules": rules}})
    )
    contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / "dlq"))
    df = spark.createDataFrame(
        [(n, kind, text) for n, (kind, text) in enumerate(texts)], "id long, kind int, text string"
    )
    result = contract.apply(df)
    kept = within(120, lambda: sorted(row["id"] for row in result.valid.select("id").collect()), spark)
    reasons = {row["id"]: row["_contract"]["reason"] for row in result.rejected.collect()}
    return contract.explain("WRITE").splitlines()[1:], kept, reasons


@pytest.mark.one_pass
def test_patterns_java_backtracked_on_for_minutes_finish_with_re2s_answers(
    spark: Any, tmp_path: Path
) -> None:
    texts = [(kind, text + tail) for kind, (_, text, end) in enumerate(HANGING_CASES) for tail in ("", end)]
    explained, kept, _ = _checked(spark, tmp_path, [case[0] for case in HANGING_CASES], texts)
    assert kept == [n for n, (kind, text) in enumerate(texts) if re2.search(HANGING_CASES[kind][0], text)]
    assert kept == [1, 3, 5]
    assert (
        "(python); no native form for matches() with a pattern java.util.regex may backtrack" in explained[0]
    )
    assert "`.*` is followed by text it can also match" in explained[0]
    assert "`\\d+` is followed by text it can also match" in explained[1]
    assert explained[2].endswith("(native)")


# Patterns whose meaning RE2 and Java differ on, or that one of them refuses: each rule gives RE2's
# answer (native or not), and a pattern RE2 refuses fails each record as in the reference.
DIFFERING: list[tuple[str, list[str]]] = [
    (r"^a$", ["a", "a\n"]),  # Java's `$` also before a final line terminator
    (r"^.$", ["\r", "\u2028", "\n"]),  # Java's `.` excludes \r and \u2028
    (r"^\s$", ["\x0b", " "]),  # Java's \s has \x0B
    (r"^\w$", ["é", "_"]),
    (r"^[a-c&&[b]]$", ["a", "&", "b"]),  # Java: an intersection; RE2: the characters a-c, &, [, b
    (r"^[[:alpha:]]$", ["a", ":"]),  # RE2: a POSIX class; Java: the characters [:alph
    (r"^\QA.\E$", ["A.", "Ab"]),  # literal in both, left to RE2
    (r"^\pL$", ["é", "1"]),
    (r"(?i)^a$", ["A"]),
    (r"^a{,2}$", ["a{,2}", "aa"]),  # RE2: literal braces
    (r"^(a{1,50}){1,50}$", ["aaa"]),  # RE2 refuses; Java would match
    (r"a*+", ["a"]),  # Java's possessive; RE2 refuses
    (r"(?=a)a", ["a"]),  # Java's lookahead; RE2 refuses
    (r"a\Z", ["a"]),  # Java's \Z; RE2 refuses
]


@pytest.mark.one_pass
def test_where_re2_and_java_differ_every_rule_answers_as_re2(spark: Any, tmp_path: Path) -> None:
    texts = [(kind, text) for kind, (_, examples) in enumerate(DIFFERING) for text in examples]
    explained, kept, reasons = _checked(spark, tmp_path, [case[0] for case in DIFFERING], texts)
    expected = []
    for n, (kind, text) in enumerate(texts):
        pattern = DIFFERING[kind][0]
        refused = refusal(pattern)
        if refused is not None:
            assert reasons[n] == f"match error: {refused.encode()!r}", reasons[n]  # cel-python's text
        elif compiled(pattern).search(text):
            expected.append(n)
    assert kept == expected
    for line, (pattern, _) in zip(explained, DIFFERING, strict=True):
        refused = refusal(pattern)
        assert (refused is not None) is (f"matches() with a pattern RE2 refuses ({refused})" in line), line
