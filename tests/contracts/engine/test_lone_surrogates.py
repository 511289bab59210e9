"""Text no Spark string holds, on every format's path (docs/semantics.md §8.6): a JSON escape of a
lone surrogate (`"\\ud800"`), a proto2 string of bytes that are not UTF-8, an Avro string of a
surrogate's bytes. One such record is one undecodable record, routed with its reason; the job
and the other records go on, and a reason quoting such text carries it escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_jvm_avro_differential
import test_jvm_json_differential
from decode_paths import SUBJECT

from contracts import LocalRegistry, Schema
from contracts.errors import SerializationError
from contracts.formats.arrow_text import lone_surrogate, printable
from contracts.formats.json_schema import JsonSchemaFormat
from contracts.formats.protobuf import ProtobufFormat
from contracts.formats.wire import encode_frame

OBJECT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
BODIES = {
    "valid": b'{"name":"ann","labels":{"k":"v"},"tags":["a"]}',
    "a pair": b'{"name":"smile \\ud83d\\ude00","labels":{},"tags":[]}',
    "a value": b'{"name":"x\\ud800","labels":{},"tags":[]}',
    "a low half": b'{"name":"\\udc00","labels":{},"tags":[]}',
    "a map key": b'{"name":"ann","labels":{"\\ud800":"v"},"tags":[]}',
    "a map value": b'{"name":"ann","labels":{"k":"\\udbff"},"tags":[]}',
    "an item": b'{"name":"ann","labels":{},"tags":["a","\\ud800\\ud800"]}',
}
REFUSED = {
    "a value": "the record's value at /name is a string holding a lone surrogate, U+D800",
    "a low half": "the record's value at /name is a string holding a lone surrogate, U+DC00",
    "a map key": "the record's value at /labels/\\ud800 is a string holding a lone surrogate, U+D800",
    "a map value": "the record's value at /labels/k is a string holding a lone surrogate, U+DBFF",
    "an item": "the record's value at /tags/1 is a string holding a lone surrogate, U+D800",
}


def test_lone_surrogate_finds_the_first_and_says_where_escaped() -> None:
    assert lone_surrogate("plain ✓ 😀") is None
    why = lone_surrogate("0123456789\udfffabc")
    assert why is not None and why.encode("utf-8")
    assert why.startswith("a string holding a lone surrogate, U+DFFF, which is not Unicode text")
    assert why.endswith("(at character 10: '23456789\\udfffabc')")
    assert printable("a\ud800b") == "a\\ud800b" and printable("plain") == "plain"


@pytest.mark.parametrize("case", sorted(BODIES))
def test_the_json_decoder_refuses_a_lone_surrogate_anywhere_spark_would_hold_it(case: str) -> None:
    parsed = JsonSchemaFormat().parse(json.dumps(OBJECT), ())
    if case not in REFUSED:
        record = JsonSchemaFormat().decode(BODIES[case], parsed, None)
        assert lone_surrogate(json.dumps(record, ensure_ascii=False)) is None
        return
    with pytest.raises(ValueError) as refused:
        JsonSchemaFormat().decode(BODIES[case], parsed, None)
    assert str(refused.value).startswith(REFUSED[case])
    assert str(refused.value).encode("utf-8")


def test_a_transform_result_or_a_migrated_record_holding_one_does_not_fit() -> None:
    parsed = JsonSchemaFormat().parse(json.dumps(OBJECT), ())
    record = {"name": "\ud800", "labels": {}, "tags": []}
    with pytest.raises(ValueError, match="lone surrogate"):
        JsonSchemaFormat().conform(record, parsed)
    with pytest.raises(SerializationError, match="lone surrogate"):
        JsonSchemaFormat().project(record, parsed)


def test_a_json_validation_message_quoting_one_is_escaped() -> None:
    strict = {**OBJECT, "additionalProperties": False}
    parsed = JsonSchemaFormat().parse(json.dumps(strict), ())
    with pytest.raises(ValueError) as refused:
        JsonSchemaFormat().decode(b'{"\\ud800x":1}', parsed, None)
    assert "\\ud800x" in str(refused.value) and str(refused.value).encode("utf-8")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"\x0a\x03\xed\xa0\x80", "acme.Person.name"),
        (b"\x12\x02\xc3\x28", "acme.Person.tags"),
        (b"\x1a\x07\x08\x01\x12\x03\xed\xb0\x80", "acme.Person.LabelsEntry.value"),
    ],
)
def test_a_proto2_string_that_is_not_utf8_makes_the_body_undecodable(body: bytes, field: str) -> None:
    """The runtime hands a proto2 string field's bytes over unchecked, as bytes; proto3 refuses them."""
    text = "package acme; message Person { optional string name = 1; repeated string tags = 2;"
    text += " map<int32, string> labels = 3; }"
    proto2 = ProtobufFormat().parse(f'syntax = "proto2"; {text}', ())
    assert ProtobufFormat().decode(b"\x00\x0a\x02ok", proto2, None)["name"] == "ok"
    with pytest.raises(ValueError, match=f"^{field} holds a string that is not valid UTF-8"):
        ProtobufFormat().decode(b"\x00" + body, proto2, None)
    proto3 = ProtobufFormat().parse(f'syntax = "proto3"; {text.replace("optional ", "")}', ())
    with pytest.raises(ValueError, match="bad UTF-8"):
        ProtobufFormat().decode(b"\x00" + body, proto3, None)


def reasons(dlq: list[Any]) -> list[str]:
    return sorted(dict(headers)["__rule.exception"].decode() for _, _, headers in dlq)


@pytest.mark.one_pass
@pytest.mark.parametrize("with_map", [False, True])
def test_both_json_decode_paths_route_each_such_frame_alone(
    spark: Any, tmp_path: Path, with_map: bool
) -> None:
    """Without a map the JVM path parses with from_json, which trusts none of these bodies (their
    escapes are not its own layout) and leaves them to the Python decoder; with one, the Python
    decoder reads them all."""
    labels = {"type": "object", "properties": {"k": {"type": "string"}}}
    schema = OBJECT if with_map else {**OBJECT, "properties": {**OBJECT["properties"], "labels": labels}}
    cases = sorted(BODIES) if with_map else sorted(case for case in BODIES if case != "a map key")
    refused = {case: REFUSED[case] for case in cases if case in REFUSED}
    registry = LocalRegistry()
    schema_id = registry.register_schema(
        SUBJECT, Schema.from_dict({"schemaType": "JSON", "schema": json.dumps(schema)})
    )
    rows = [(case.encode(), encode_frame(schema_id, BODIES[case]), "t", 0, i) for i, case in enumerate(cases)]
    result = test_jvm_json_differential.both_paths(spark, tmp_path, registry, rows)
    python, jvm = result["python"], result["jvm"]
    assert jvm[2] is not with_map
    assert jvm[:2] == python[:2]
    assert len(python[0]) == len(cases) - len(refused)
    assert {key for key, _, _ in python[1]} == {case.encode() for case in refused}
    for reason, case in zip(reasons(python[1]), sorted(refused, key=lambda c: refused[c]), strict=True):
        assert refused[case] in reason


@pytest.mark.one_pass
def test_both_avro_decode_paths_route_a_string_of_a_surrogates_bytes(spark: Any, tmp_path: Path) -> None:
    schema = {"type": "record", "name": "Person", "fields": [{"name": "name", "type": "string"}]}
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(schema)))
    bodies = [b"\x06ann", b"\x06\xed\xa0\x80", b"\x0c\xf0\x9f\x98\x80ok"]
    rows = [(b"k%d" % i, encode_frame(schema_id, body), "t", 0, i) for i, body in enumerate(bodies)]
    result = test_jvm_avro_differential.both_paths(spark, tmp_path, registry, rows)
    python, jvm = result["python"], result["jvm"]
    assert jvm[2] and jvm[:2] == python[:2]
    assert len(python[0]) == 2
    assert [key for key, _, _ in python[1]] == [b"k1"]
    assert "can't decode byte 0xed" in reasons(python[1])[0]


@pytest.mark.one_pass
def test_a_proto2_frame_whose_string_is_not_utf8_is_routed_alone(spark: Any, tmp_path: Path) -> None:
    from actions.dlq.local_topic import LocalTopicSink
    from contracts import DataContract

    text = 'syntax = "proto2"; package acme; message Person { optional string name = 1; }'
    registry = LocalRegistry()
    schema_id = registry.register_schema(
        SUBJECT, Schema.from_dict({"schemaType": "PROTOBUF", "schema": text})
    )
    frames = [
        encode_frame(schema_id, b"\x00\x0a\x02ok"),
        encode_frame(schema_id, b"\x00\x0a\x03\xed\xa0\x80"),
    ]
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    rows = spark.createDataFrame([(b"k%d" % i, f) for i, f in enumerate(frames)], "key binary, value binary")
    read = contract.deserialize(rows, on_decode_error="DLQ", decode_dlq_topic="bad").collect()
    assert [row["name"] for row in read] == ["ok"]
    [record] = sink.read("bad")
    assert record.key == b"k1"
    reason = dict(record.headers)["__rule.exception"].decode()
    assert "acme.Person.name holds a string that is not valid UTF-8" in reason


@pytest.mark.one_pass
def test_a_rule_reason_holding_one_reaches_the_dlq_escaped(spark: Any, tmp_path: Path) -> None:
    """A JSONata `$error` whose message an expression spelled with a lone surrogate: the record
    fails the rule and its DLQ record carries the reason with the surrogate escaped."""
    from actions.dlq.local_topic import LocalTopicSink
    from contracts import DataContract

    rule = {
        "name": "refuseBob",
        "kind": "CONDITION",
        "type": "JSONATA",
        "mode": "WRITE",
        "expr": 'name = "bob" ? $error("no \\ud800 " & name) : true',
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad"},
    }
    schema = {"type": "record", "name": "Person", "fields": [{"name": "name", "type": "string"}]}
    registry = LocalRegistry()
    registry.register_schema(
        SUBJECT, Schema.from_dict({"schema": json.dumps(schema), "ruleSet": {"domainRules": [rule]}})
    )
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    written = contract.write(spark.createDataFrame([("ann",), ("bob",)], "name string")).collect()
    assert [row["name"] for row in written] == ["ann"]
    [record] = sink.read("bad")
    assert "no \\ud800 bob" in dict(record.headers)["__rule.exception"].decode()


@pytest.mark.one_pass
def test_a_header_key_that_is_not_utf8_reaches_the_dlq_as_text(spark: Any, tmp_path: Path) -> None:
    """Kafka header keys are text; a DataFrame may hold any bytes in one. The DLQ record keeps the
    header with U+FFFD for each such byte, and the schema id header is still found in its row."""
    from actions.dlq.local_topic import LocalTopicSink
    from contracts import DataContract
    from contracts.formats.wire import VALUE_SCHEMA_ID_HEADER, encode_prefix

    registry = LocalRegistry()
    schema_id = registry.register_schema(
        SUBJECT, Schema.from_dict({"schemaType": "JSON", "schema": json.dumps(OBJECT)})
    )
    sink = LocalTopicSink(tmp_path / "dlq")
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    framed = encode_frame(schema_id, b"[1]").hex()
    header = f"named_struct('key', '{VALUE_SCHEMA_ID_HEADER}', 'value', X'{encode_prefix(schema_id).hex()}')"
    rows = spark.sql(
        f"SELECT X'{framed}' AS value, array(named_struct('key', CAST(X'FF41' AS STRING), 'value', X'01'))"
        f" AS headers, 't' AS topic UNION ALL SELECT X'5b325d', array({header},"
        " named_struct('key', CAST(X'FF42' AS STRING), 'value', X'02')), 't'"
    )
    assert contract.deserialize(rows, on_decode_error="DLQ", decode_dlq_topic="bad").collect() == []
    got = sorted(
        (record.headers[:2], dict(record.headers)["__rule.exception"]) for record in sink.read("bad")
    )
    assert [headers for headers, _ in got] == [
        ((VALUE_SCHEMA_ID_HEADER, encode_prefix(schema_id)), ("\ufffdB", b"\x02")),
        (("\ufffdA", b"\x01"), ("__rule.name", b"deserialize")),
    ]
    assert all(b"is not of type 'object'" in reason for _, reason in got)
