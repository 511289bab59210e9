"""The two JSON Schema decode paths agree (docs/semantics.md §8.11): `deserialize` with Spark's
`from_json` (SPARK_CONTRACTS_JSON_PATH=jvm) and with the Python decoder (=python) give the same
rows, the same DLQ records and the same errors, on random schemas and records and on hostile
frames."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import decode_paths
import pytest
from decode_paths import ROWS, SUBJECT, path_chosen, plan_names
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from json_strategies import SCALARS, nullable, objects, values

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.engine import jvm_json
from contracts.errors import ContractError
from contracts.formats.json_schema import layouts, native, parse_json_schema
from contracts.formats.wire import VALUE_SCHEMA_ID_HEADER, encode_frame, encode_prefix

ROWS_WITH_HEADERS = f"{ROWS}, headers array<struct<key: string, value: binary>>"


def json_path(path: str) -> contextlib.AbstractContextManager[None]:
    """SPARK_CONTRACTS_JSON_PATH set to `path` for the calls made inside."""
    return path_chosen(jvm_json.PATH_ENV, path)


def reads_with_from_json(df: Any) -> bool:
    """Whether the query parses with `from_json`."""
    return plan_names(df, "from_json")


def both_paths(
    spark: Any, tmp: Path, registry: LocalRegistry, rows: list[tuple[Any, ...]], *args: Any, **kw: Any
) -> Any:
    """`decode_paths.both_paths` for this decoder's variable and function."""
    return decode_paths.both_paths(spark, tmp, registry, rows, jvm_json.PATH_ENV, "from_json", *args, **kw)


ORDER: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0, "exclusiveMaximum": 1e6},
        "customer": {"type": "string", "minLength": 2, "maxLength": 12},
        "ssn": {"type": "string", "pattern": "^[0-9]{3}-?[0-9]+$"},
        "country": {"enum": ["NO", "SE", "DK"]},
        "amount": {"type": "number", "minimum": -0.5, "maximum": 1000},
        "paid": {"type": "boolean", "const": True},
        "note": {"oneOf": [{"type": "null", "title": "Not included"}, {"type": "string"}]},
        "lines": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": ["integer", "null"], "maximum": 99},
        },
        "address": {"$ref": "#/definitions/Address"},
    },
    "required": ["id", "customer", "country", "lines"],
    "additionalProperties": False,
    "definitions": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
            "required": ["city"],
        }
    },
}
GOOD = {
    "id": 7,
    "customer": "ann ☃",
    "ssn": "123-456",
    "country": "NO",
    "amount": 12.5,
    "paid": True,
    "note": "fragile",
    "lines": [1, None, 3],
    "address": {"city": "Oslo", "zip": 150},
}


def compact(record: Any, schema: dict[str, Any]) -> bytes:
    """The record as `to_json` writes it: compact, properties in the schema's order, no nulls."""
    return json.dumps(ordered(record, schema, schema), separators=(",", ":"), ensure_ascii=False).encode()


def ordered(value: Any, node: dict[str, Any], root: dict[str, Any]) -> Any:
    if "$ref" in node:
        return ordered(value, root["definitions"][node["$ref"].rsplit("/", 1)[1]], root)
    if "oneOf" in node:
        return ordered(value, node["oneOf"][-1], root)
    if isinstance(value, dict) and "properties" in node:
        props = node["properties"]
        return {k: ordered(value[k], props[k], root) for k in props if value.get(k) is not None}
    if isinstance(value, list) and "items" in node:
        return [ordered(item, node["items"], root) for item in value]
    return value


def hostile_rows(schema_id: int, guid: uuid.UUID) -> list[tuple[Any, ...]]:
    """Frames from_json reads as the Python decoder does, and frames where it must not decide."""
    good = compact(GOOD, ORDER)
    spaced = json.dumps(ordered({**GOOD, "customer": "ann"}, ORDER, ORDER)).encode()
    bodies: list[bytes] = [
        good,
        compact({**GOOD, "note": None, "ssn": "123456", "address": None, "amount": -0.5}, ORDER),
        json.dumps(GOOD).encode(),  # valid, but spaced: the Python decoder reads it
        json.dumps({**GOOD, "note": None}, separators=(",", ":")).encode(),  # an explicit null
        good.replace(b'"id":7', b'"id":7.0'),  # 1.0 is an integer to jsonschema
        good.replace(b'"customer":"ann \xe2\x98\x83"', b'"customer":1234'),  # a number for a string
        good.replace(b'"id":7', b'"id":99999999999999999999999'),  # beyond a long
        good[:-1] + b',"extra":1}',  # additionalProperties false
        good[:-1] + b',"id":8}',  # a duplicate key
        good + b" trailing",
        good + b"{}",
        good[:-5],  # truncated
        good.replace(b"ann", b"a\xffn"),  # not UTF-8
        b"\xef\xbb\xbf" + good,  # a BOM
        b"[" + good + b"]",
        b"null",
        b"",
        b"{}",
        good.replace(b'"amount":12.5', b'"amount":"NaN"'),
        good.replace(b'"amount":12.5', b'"amount":NaN'),
        good.replace(b"123-456", b"12-3456"),  # pattern
        good.replace(b"123-456", b"123-456\\n"),  # `$` before a final newline: Python's `re` alone matches
        good.replace(b"123-456", b"123-456\\r"),  # `$` before a \r: Java's alone matches
        good.replace(b'"NO"', b'"US"'),  # enum
        good.replace(b'"id":7', b'"id":1000000'),  # exclusiveMaximum
        good.replace(b"[1,null,3]", b"[1,100]"),  # maximum of an item
        good.replace(b"[1,null,3]", b"[]"),  # minItems
        good.replace(b'"paid":true', b'"paid":false'),  # const
        good.replace(b'"city":"Oslo",', b""),  # required in a nested object
        good.replace(b'"customer":"ann \xe2\x98\x83",', b""),  # required
        good.replace(b'"ann \xe2\x98\x83"', b'"\xf0\x9d\x84\x9e"'),  # one code point: minLength 2
        spaced,  # json.dumps's default layout of an ASCII record: from_json's record
        spaced.replace(b'"id": 7', b'"id":  7'),  # two spaces: the Python decoder reads it
        spaced.replace(b'"city": "Oslo"', b'"city": "Oslo", "city": "Bergen"'),  # a duplicate key
        spaced.replace(b'"note": "fragile"', b'"note": null'),  # an explicit null
        spaced[:-1] + b', "extra": 1}',  # additionalProperties false
        spaced.replace(b'"fragile"', b'"a, \\"b\\": c"'),  # separators inside a string
    ]
    frames: list[bytes | None] = [encode_frame(schema_id, b) for b in bodies]
    frames += [
        encode_frame(guid, good),
        encode_frame(999, good),  # unknown id
        b"\x07" + encode_frame(schema_id, good)[1:],  # wrong magic byte
        None,  # a tombstone
    ]
    return [(f"k{i}".encode(), frame, "orders", 0, i) for i, frame in enumerate(frames)]


def test_the_jvm_path_decodes_records_and_hostile_frames_as_the_python_decoder_does(
    spark: Any, tmp_path: Path
) -> None:
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(ORDER), schema_type="JSON"))
    guid = uuid.UUID(registry.get_version(SUBJECT, 1).guid)
    result = both_paths(spark, tmp_path, registry, hostile_rows(schema_id, guid))
    python, jvm = result["python"], result["jvm"]
    assert jvm[2] and not python[2]
    assert jvm[:2] == python[:2]
    # Valid: 2 compact, spaced, explicit null, 7.0, a duplicate key (the last wins), NaN (Python's
    # json reads it), the V1 frame, the tombstone, and 5 of json.dumps's layout. Not \n before `$`:
    # patterns are RE2's, whose `$` is the end of the text (docs/semantics.md §3.7).
    assert len(python[0]) == 14
    reasons = [dict(headers)["__rule.exception"].decode() for _, _, headers in python[1]]
    assert len(reasons) == 27
    assert any("Additional properties" in reason for reason in reasons)
    assert any("utf-8" in reason for reason in reasons)


def test_a_row_naming_its_schema_in_a_header_keeps_the_python_decoder(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(ORDER), schema_type="JSON"))
    good = compact(GOOD, ORDER)
    header = [(VALUE_SCHEMA_ID_HEADER, encode_prefix(schema_id))]
    rows = [
        (b"k0", encode_frame(schema_id, good), "t", 0, 0, None),
        (b"k1", good, "t", 0, 1, header),
        (b"k2", good[:-1] + b',"x":1}', "t", 0, 2, header),
    ]
    result = both_paths(spark, tmp_path, registry, rows, ROWS_WITH_HEADERS)
    assert result["jvm"][2]
    assert result["jvm"][:2] == result["python"][:2]
    assert (len(result["python"][0]), len(result["python"][1])) == (2, 1)


def test_an_undecodable_frame_fails_the_job_with_the_same_message_on_both_paths(
    spark: Any, tmp_path: Path
) -> None:
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(ORDER), schema_type="JSON"))
    body = compact(GOOD, ORDER)[:-1] + b',"x":1}'
    rows = [(b"k", encode_frame(schema_id, body), "orders", 3, 17)]
    messages = {}
    for path in ("python", "jvm"):
        with json_path(path):
            contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / path))
            with pytest.raises(Exception, match="partition 3, offset 17") as caught:
                contract.deserialize(spark.createDataFrame(rows, ROWS)).collect()
        found = re.search(r"cannot deserialize the record[^\n]*", str(caught.value))
        assert found is not None
        messages[path] = found.group(0)
    assert messages["jvm"] == messages["python"]


def test_a_body_is_trusted_only_in_to_json_s_or_json_dumps_s_layout_of_its_own_record(spark: Any) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark_type = T.StructType(
        [
            T.StructField("a", T.LongType()),
            T.StructField("s", T.StringType()),
            T.StructField(
                "n",
                T.StructType(
                    [T.StructField("x", T.DoubleType()), T.StructField("l", T.ArrayType(T.LongType()))]
                ),
            ),
        ]
    )
    record = {"a": 1, "s": 'p, "q": r', "n": {"x": 2.5, "l": [3, None]}}
    texts = {
        json.dumps(record, separators=(",", ":")): True,
        json.dumps(record): True,
        json.dumps({**record, "n": {"l": []}}): True,
        json.dumps({"a": 1}): True,
        json.dumps({"a": 1, "s": None}): False,  # an explicit null
        '{"a": 1, "a": 2}': False,  # a duplicate key
        json.dumps(record, separators=(",", ": ")): False,  # mixed layouts
        json.dumps(record, indent=1): False,
        json.dumps({**record, "s": "é"}): False,  # ensure_ascii's escape: to_json writes é
        json.dumps({**record, "a": 1.0}): False,
        json.dumps({**record, "z": 1}): False,
        json.dumps(record) + " ": False,
    }
    rows = spark.createDataFrame([(t,) for t in texts], "text string")
    parsed = F.from_json("text", spark_type, {"mode": "PERMISSIVE"})
    trusted = rows.select("text", layouts.written_from(parsed, spark_type, F.col("text")).alias("ok"))
    assert {row.text: bool(row.ok) for row in trusted.collect()} == texts


@pytest.mark.parametrize(
    ("node", "why"),
    [
        ({"type": "integer", "multipleOf": 2}, "'multipleOf'"),
        ({"allOf": [{"type": "integer"}]}, "'allOf'"),
        ({"type": "string", "pattern": "^(a+)+$"}, "may backtrack on without bound"),
        ({"$ref": "#/definitions/N", "minimum": 1}, "sibling"),
        ({"oneOf": [{"type": "null"}, {"enum": ["a", None]}]}, "may accept null"),
        ({"type": "integer", "minimum": 2**70}, "beyond a long"),
    ],
)
def test_a_schema_with_a_keyword_not_compiled_keeps_the_python_decoder(node: Any, why: str) -> None:
    document = {"type": "object", "properties": {"n": node}, "definitions": {"N": {"type": "integer"}}}
    reason = native.inexact_reason(parse_json_schema(json.dumps(document)))
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    ("pattern", "native_"),
    [
        ("^[0-9]+$", True),
        ("^[A-Z]{2}-\\d{3,}(?:x|y)?$", True),
        ("^\\D", True),
        ("[^\\w]", True),
        ("a{,3}", True),  # literal braces in RE2
        ("[a-]", True),
        ("a.*b\\.c", False),  # unanchored, unbounded: Java would try it from every position
        ("^(a+)+$", False),  # Java would backtrack without bound
        ("(?i)^a", False),  # flags are not translated
        ("[[a]]", False),  # a class inside a class in Java
        ("(?=a)b", None),  # RE2 refuses these: the contract does not load
        ("a{3,1}", None),
        ("a**", None),
        ("(a", None),
    ],
)
def test_patterns_java_matches_as_re2_does_in_linear_time_are_compiled(
    pattern: str, native_: bool | None
) -> None:
    document = json.dumps({"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}})
    if native_ is None:
        with pytest.raises(ContractError, match=r"is not an RE2 pattern|is not a 'regex'"):
            parse_json_schema(document)
        return
    reason = native.inexact_reason(parse_json_schema(document))
    assert (reason is None) is native_, reason


def test_unknown_path_names_are_refused() -> None:
    with json_path("sideways"), pytest.raises(Exception, match="must be one of auto, jvm, python"):
        jvm_json.chosen_path()
    with json_path("JVM"):
        assert jvm_json.chosen_path() == "jvm"


def no_maps(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """json_strategies' containers but maps, which keep the Python decoder (`fallback_reason`)."""
    arrays = st.builds(lambda items: {"type": "array", "items": items}, nullable(children))
    return st.one_of(arrays, objects(children))


# Scalars with the keywords the JVM path compiles; json_strategies' values ignore them, so some
# records break them, which both paths must refuse alike.
CHECKED = st.one_of(
    SCALARS,
    st.sampled_from(
        [
            {"type": "string", "minLength": 1, "maxLength": 4},
            {"type": "string", "pattern": "^[a-c]*$"},
            {"type": "integer", "minimum": -5, "exclusiveMaximum": 2**40},
            {"type": "number", "maximum": 1.5, "exclusiveMinimum": -1e9},
            {"type": "integer", "enum": [0, 1, 2.0]},
            {"type": "boolean", "const": False},
        ]
    ),
)
SCHEMAS = objects(st.recursive(CHECKED, no_maps, max_leaves=6))


@st.composite
def schemas_and_records(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    schema = draw(SCHEMAS)
    return schema, draw(st.lists(values(schema), min_size=1, max_size=6))


MUTATIONS = ["compact", "compact", "spaced", "cut", "trail", "extra", "retype", "null"]


def mutated(record: dict[str, Any], schema: dict[str, Any], kind: str, n: int) -> bytes:
    """The record's body, as `to_json` would write it or changed by `kind`."""
    data = compact(record, schema)
    if kind == "spaced":
        return json.dumps(record).encode()
    if kind == "cut":
        return data[: n % (len(data) + 1)]
    if kind == "trail":
        return data + b" x"[: 1 + n % 2]
    if kind == "extra":
        return data[:-1] + (b',"zz":1}' if len(data) > 2 else b'"zz":1}')
    if kind == "retype":
        name = list(schema["properties"])[n % len(schema["properties"])]
        return json.dumps({**record, name: [n] if n % 2 else str(n)}, separators=(",", ":")).encode()
    if kind == "null":
        name = list(schema["properties"])[n % len(schema["properties"])]
        return json.dumps({**record, name: None}, separators=(",", ":")).encode()
    return data


@settings(
    max_examples=examples(3),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    case=schemas_and_records(),
    cuts=st.lists(st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 40)), min_size=6, max_size=6),
)
def test_random_schemas_records_and_mutations_decode_alike_on_both_paths(
    spark: Any,
    tmp_path_factory: Any,
    case: tuple[dict[str, Any], list[dict[str, Any]]],
    cuts: list[tuple[str, int]],
) -> None:
    schema, records = case
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(schema), schema_type="JSON"))
    rows = [
        (f"k{i}".encode(), encode_frame(schema_id, mutated(record, schema, kind, n)), "random", 1, i)
        for i, (record, (kind, n)) in enumerate(zip(records, cuts, strict=False))
    ]
    result = both_paths(spark, tmp_path_factory.mktemp("paths"), registry, rows)
    assert result["jvm"][:2] == result["python"][:2]
    assert result["jvm"][2]


@pytest.mark.one_pass
@pytest.mark.parametrize(
    ("pattern", "text", "jvm"),
    [
        ("^(a+)+$", "a" * 41, False),  # ran past 300 s at deserialize before: RE2 decides it in Python
        ("^(?:ab|cd)+$", "ab" * 50_000, True),  # from_json's rows are checked by Java, in linear time
    ],
)
def test_a_pattern_is_checked_in_linear_time_on_both_paths(
    spark: Any, tmp_path: Path, pattern: str, text: str, jvm: bool
) -> None:
    from deadline import within

    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(schema), "JSON"))
    bodies = [json.dumps({"s": s}, separators=(",", ":")).encode() for s in (text, text + "!")]
    rows = [(b"k%d" % i, encode_frame(schema_id, body), "t", 0, i) for i, body in enumerate(bodies)]
    result = within(120, lambda: both_paths(spark, tmp_path, registry, rows), spark)
    python, java = result["python"], result["jvm"]
    assert java[2] is jvm
    assert java[:2] == python[:2]
    assert len(python[0]) == 1 and [key for key, _, _ in python[1]] == [b"k1"]
    (_, _, headers) = python[1][0]
    assert "the record does not match its JSON Schema at /s:" in dict(headers)["__rule.exception"].decode()
