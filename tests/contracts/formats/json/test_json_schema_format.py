"""The JSON schema type: Spark types of JSON Schema records, Arrow both ways, bodies, validation."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from contracts import formats
from contracts.errors import ContractError
from contracts.formats.avro import arrow_type
from contracts.formats.json_schema import JsonSchemaFormat, parse_json_schema
from contracts.formats.protocol import Reference

ORDER: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string", "minLength": 1},
        "email": {"type": ["string", "null"]},
        "amount": {"type": "number", "minimum": 0},
        "paid": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"$ref": "#/definitions/Address"},
        "extras": {"type": "object", "additionalProperties": {"type": "integer"}},
        "status": {"enum": ["NEW", "PAID"]},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    },
    "required": ["id", "customer", "amount"],
    "definitions": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["city"],
        }
    },
}
JSON = JsonSchemaFormat()


def parsed(schema: dict[str, Any]) -> Any:
    return JSON.parse(json.dumps(schema), ())


def test_the_json_format_is_registered() -> None:
    assert isinstance(formats.get("json"), JsonSchemaFormat)
    assert "JSON" in formats.known()


OPTIONAL = {"presence": "in_document"}
"""An optional property's presence: a null is its absence (docs/semantics.md §3.6)."""
OPTIONAL_OR_NULL = {"presence": "in_document_or_null"}
"""One accepting null: a null is its own unless the record's `_absent` lists it."""


def test_records_have_the_spark_type_the_schema_implies() -> None:
    assert JSON.spark_type(parsed(ORDER)) == T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("customer", T.StringType(), False),
            T.StructField("email", T.StringType(), True, OPTIONAL_OR_NULL),
            T.StructField("amount", T.DoubleType(), False),
            T.StructField("paid", T.BooleanType(), True, OPTIONAL),
            T.StructField("tags", T.ArrayType(T.StringType(), False), True, OPTIONAL),
            T.StructField(
                "address",
                T.StructType(
                    [
                        T.StructField("city", T.StringType(), False),
                        T.StructField("zip", T.StringType(), True, OPTIONAL),
                    ]
                ),
                True,
                OPTIONAL,
            ),
            T.StructField("extras", T.MapType(T.StringType(), T.LongType(), False), True, OPTIONAL),
            T.StructField("status", T.StringType(), True, OPTIONAL),
            T.StructField("note", T.StringType(), True, OPTIONAL_OR_NULL),
            # Which of the nulls of `email` and `note` are absent properties.
            T.StructField("_absent", T.ArrayType(T.StringType(), False), True, {"presence.absent": True}),
        ]
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string"}, "must be an object with properties, not string"),
        (
            {"type": "object", "properties": {"x": {}}},
            "a value of any type at #/properties/x has no Spark type",
        ),
        (
            {"type": "object", "properties": {"x": {"type": ["string", "integer"]}}},
            "a value of string and integer at #/properties/x",
        ),
        (
            {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
            "2 alternatives that are not null",
        ),
        (
            {
                "type": "object",
                "properties": {"next": {"$ref": "#/definitions/Node"}},
                "definitions": {
                    "Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}
                },
            },
            "the recursive $ref '#/definitions/Node'",
        ),
        ({"type": "object", "properties": {"x": {"$ref": "other.json"}}}, "outside this schema"),
        ({"type": "object", "properties": {"x": {"type": "strnig"}}}, "not a valid JSON Schema"),
    ],
)
def test_a_schema_without_a_spark_type_is_refused_saying_where(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ContractError, match=None) as refused:
        parsed(schema)
    assert message in str(refused.value)


def test_a_schema_that_is_not_json_is_refused() -> None:
    with pytest.raises(ContractError, match="the schema is not JSON"):
        JSON.parse("{not json", ())


def test_a_reference_is_bundled_and_its_refs_made_local() -> None:
    address = {
        "$id": "https://acme.example/address.json",
        "type": "object",
        "properties": {"city": {"$ref": "#/definitions/City"}},
        "definitions": {"City": {"type": "string"}},
    }
    order = {"type": "object", "properties": {"ship": {"$ref": "https://acme.example/address.json"}}}
    parsed = JSON.parse(json.dumps(order), [Reference("address", json.dumps(address))])
    assert parsed.document["properties"]["ship"] == {"$ref": "#/$defs/__reference_0"}
    bundled = parsed.document["$defs"]["__reference_0"]
    assert "$id" not in bundled
    assert bundled["properties"]["city"] == {"$ref": "#/$defs/__reference_0/definitions/City"}
    assert parsed.struct_type().simpleString() == "struct<ship:struct<city:string>>"


def record() -> dict[str, Any]:
    return {
        "id": 7,
        "customer": "ann",
        "email": None,
        "amount": 12.5,
        "tags": ["a", "b"],
        "address": {"city": "Oslo"},
        "extras": {"k": 1},
        "status": "NEW",
    }


def test_records_go_to_arrow_and_back_unchanged() -> None:
    schema = parsed(ORDER)
    record_type = arrow_type(JSON.spark_type(schema))
    column = JSON.to_struct([record(), None], schema, record_type)
    assert column.type == record_type
    assert column.to_pylist()[0]["_absent"] == ["/note"]  # email is null, note absent
    read = JSON.read_struct(column, schema)
    assert read.records == [record(), None]
    assert read.unreadable == {}


def test_a_string_that_is_not_utf8_is_read_replaced_and_reported() -> None:
    schema = parsed({"type": "object", "properties": {"name": {"type": "string"}}})
    raw = pa.array([{"name": b"ok"}, {"name": b"bad\xff"}], pa.struct([("name", pa.binary())]))
    column = raw.cast(pa.struct([("name", pa.string())]), safe=False)
    read = JSON.read_struct(column, schema)
    assert read.records == [{"name": "ok"}, {"name": "bad\ufffd"}]
    assert list(read.unreadable) == [1] and "not valid UTF-8" in read.unreadable[1]


def test_bodies_are_compact_utf8_json_and_validated_both_ways() -> None:
    schema = parsed(ORDER)
    body = JSON.encode({"id": 1, "customer": "åsa", "amount": 2}, schema)
    assert body == '{"id":1,"customer":"åsa","amount":2}'.encode()
    assert JSON.decode(body, schema, None) == {"id": 1, "customer": "åsa", "amount": 2}
    with pytest.raises(ValueError, match=r"at /amount: -1 is less than the minimum of 0"):
        JSON.encode({"id": 1, "customer": "x", "amount": -1}, schema)
    with pytest.raises(ValueError, match="'customer' is a required property"):
        JSON.decode(b'{"id": 1, "amount": 3}', schema, None)
    with pytest.raises(ValueError):
        JSON.decode(b"{not json", schema, None)


def test_conform_validates_a_transform_result() -> None:
    schema = parsed(ORDER)
    assert JSON.conform(record(), schema) == record()
    with pytest.raises(ValueError, match=r"at /status: 'LOST' is not one of \['NEW', 'PAID'\]"):
        JSON.conform({**record(), "status": "LOST"}, schema)


def test_parsed_schemas_pickle_for_the_workers() -> None:
    import pickle

    schema = parse_json_schema(json.dumps(ORDER))
    assert pickle.loads(pickle.dumps(schema)) == schema


def test_values_json_allows_but_spark_cannot_hold_are_refused_per_record() -> None:
    schema = parsed({"type": "object", "properties": {"id": {"type": "integer"}, "x": {"type": "number"}}})
    with pytest.raises(ValueError, match=r"value at /id, 100000000000000000000, does not fit a Spark long"):
        JSON.decode(b'{"id": 100000000000000000000}', schema, None)
    with pytest.raises(ValueError, match="does not fit a Spark double"):
        JSON.conform({"x": 10**400}, schema)
    # JSON Schema counts 1.0 as an integer: it goes to Spark as the long it stands for.
    column = JSON.to_struct(
        [JSON.decode(b'{"id": 1.0, "x": 2}', schema, None)], schema, arrow_type(JSON.spark_type(schema))
    )
    assert JSON.read_struct(column, schema).records == [{"id": 1, "x": 2.0}]


def test_a_validation_message_does_not_quote_a_huge_value_whole() -> None:
    schema = parsed({"type": "object", "properties": {"id": {"type": "integer"}}})
    with pytest.raises(ValueError) as refused:
        JSON.decode(b"[" * 400 + b"]" * 400, schema, None)
    assert len(str(refused.value)) < 300 and str(refused.value).endswith("…")


REGEX_SCHEMA = {
    "type": "object",
    "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}, "n": {"type": "integer"}},
    "patternProperties": {"^x(a|aa)+$": {"type": "integer"}},
}
REGEX_BODIES = {
    '{"s": "' + "a" * 41 + '!"}': "does not match '^(a+)+$'",  # Python's `re` ran past 300 s on it
    '{"s": "' + "a" * 41 + '"}': None,
    '{"s": "a", "x' + "a" * 5000 + '!": "not checked"}': None,
    '{"s": "a", "x' + "a" * 5000 + '": "text"}': "is not of type 'integer'",
    # fastjsonschema finds it invalid, and jsonschema, which says why, checks every keyword.
    '{"s": "' + "a" * 41 + '!", "n": "one"}': "does not match '^(a+)+$'",
}


@pytest.mark.parametrize("closed", [False, True])
def test_patterns_are_matched_by_re2_in_linear_time(closed: bool) -> None:
    """jsonschema's and fastjsonschema's `pattern`, `patternProperties` and `additionalProperties`
    match with RE2 (docs/semantics.md §1.5). Run in a process of its own, which a regression (a
    regex holding the interpreter) would hold."""
    from deadline import python_within

    schema = {**REGEX_SCHEMA, "additionalProperties": not closed}
    code = f"""
import json
from contracts.formats.json_schema import JsonSchemaFormat
parsed = JsonSchemaFormat().parse(json.dumps({schema!r}), ())
said = []
for body in {list(REGEX_BODIES)!r}:
    try:
        JsonSchemaFormat().decode(body.encode(), parsed, None)
        said.append(None)
    except ValueError as e:
        said.append(str(e))
print(json.dumps(said))
"""
    said = json.loads(python_within(60, code))
    for (body, expected), message in zip(REGEX_BODIES.items(), said, strict=True):
        if closed and expected is None and '"x' in body:  # a name no pattern covers: not allowed
            assert message is not None and message.startswith(
                "the record does not match its JSON Schema at /:"
            )
        elif expected is None:
            assert message is None, (body[:30], message)
        else:
            assert message is not None and expected in message, (body[:30], message)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"properties": {"s": {"pattern": "(?=a)"}}},
            r"the pattern '\(\?=a\)' at #/properties/s/pattern is not",
        ),
        ({"properties": {"s": {"allOf": [{"pattern": "(a)\\1"}]}}}, "#/properties/s/allOf/0/pattern"),
        ({"patternProperties": {"(?<=a)": {}}}, "at #/patternProperties/"),
        (
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "properties": {"s": {"type": "string"}},
                "patternProperties": {"^a": {}},
                "unevaluatedProperties": False,
            },
            "unevaluatedProperties next to patternProperties",
        ),
    ],
)
def test_a_pattern_re2_refuses_fails_the_contract_at_load(schema: dict[str, Any], message: str) -> None:
    document = {"type": "object", "properties": {"n": {"type": "integer"}}, **schema}
    with pytest.raises(ContractError, match=message):
        parse_json_schema(json.dumps(document))
