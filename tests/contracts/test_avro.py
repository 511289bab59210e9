"""Avro ↔ Spark: the spark-avro type mapping, the CEL_FIELD field walk, and value round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import types as T

from contracts.avro import avro_fields, parse_schema, spark_type, struct_type, type_name
from contracts.errors import ContractError


def record(*fields: dict[str, Any], name: str = "R", namespace: str | None = None) -> str:
    """A record schema's JSON text with the given fields."""
    schema: dict[str, Any] = {"type": "record", "name": name, "fields": list(fields)}
    if namespace:
        schema["namespace"] = namespace
    return json.dumps(schema)


def without_metadata(dtype: T.DataType) -> T.DataType:
    """The type with every StructField's metadata dropped, to compare shapes only."""
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, without_metadata(f.dataType), f.nullable) for f in dtype])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(without_metadata(dtype.elementType), dtype.containsNull)
    if isinstance(dtype, T.MapType):
        return T.MapType(dtype.keyType, without_metadata(dtype.valueType), dtype.valueContainsNull)
    return dtype


def field_type(avro_type: Any) -> tuple[T.DataType, bool]:
    """The Spark type and nullability of a one-field record's field."""
    struct = struct_type(parse_schema(record({"name": "f", "type": avro_type})))
    return without_metadata(struct["f"].dataType), struct["f"].nullable


@pytest.mark.parametrize(
    ("avro_type", "expected"),
    [
        ("null", (T.NullType(), True)),
        ("boolean", (T.BooleanType(), False)),
        ("int", (T.IntegerType(), False)),
        ("long", (T.LongType(), False)),
        ("float", (T.FloatType(), False)),
        ("double", (T.DoubleType(), False)),
        ("bytes", (T.BinaryType(), False)),
        ("string", (T.StringType(), False)),
        ({"type": "int"}, (T.IntegerType(), False)),
        ({"type": "fixed", "name": "F", "size": 4}, (T.BinaryType(), False)),
        ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, (T.StringType(), False)),
        ({"type": "int", "logicalType": "date"}, (T.DateType(), False)),
        ({"type": "int", "logicalType": "time-millis"}, (T.IntegerType(), False)),
        ({"type": "long", "logicalType": "time-micros"}, (T.LongType(), False)),
        ({"type": "long", "logicalType": "timestamp-millis"}, (T.TimestampType(), False)),
        ({"type": "long", "logicalType": "timestamp-micros"}, (T.TimestampType(), False)),
        ({"type": "long", "logicalType": "local-timestamp-millis"}, (T.TimestampNTZType(), False)),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, (T.TimestampNTZType(), False)),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            (T.DecimalType(9, 2), False),
        ),
        (
            {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4},
            (T.DecimalType(18, 4), False),
        ),
        ({"type": "string", "logicalType": "uuid"}, (T.StringType(), False)),
        ({"type": "string", "logicalType": "no-such-logical-type"}, (T.StringType(), False)),
        (["null", "string"], (T.StringType(), True)),
        (["string", "null"], (T.StringType(), True)),
        (["string"], (T.StringType(), False)),
        (["int", "long"], (T.LongType(), False)),
        (["float", "double", "null"], (T.DoubleType(), True)),
        (
            ["null", "string", "int"],
            (
                T.StructType(
                    [
                        T.StructField("member0", T.StringType(), True),
                        T.StructField("member1", T.IntegerType(), True),
                    ]
                ),
                True,
            ),
        ),
        (
            ["boolean", {"type": "array", "items": "long"}],
            (
                T.StructType(
                    [
                        T.StructField("member0", T.BooleanType(), True),
                        T.StructField("member1", T.ArrayType(T.LongType(), False), True),
                    ]
                ),
                False,
            ),
        ),
        ({"type": "array", "items": "string"}, (T.ArrayType(T.StringType(), False), False)),
        ({"type": "array", "items": ["null", "string"]}, (T.ArrayType(T.StringType(), True), False)),
        ({"type": "map", "values": "int"}, (T.MapType(T.StringType(), T.IntegerType(), False), False)),
        (
            {"type": "map", "values": ["int", "null"]},
            (T.MapType(T.StringType(), T.IntegerType(), True), False),
        ),
    ],
)
def test_each_avro_type_maps_to_the_spark_avro_type(
    avro_type: Any, expected: tuple[T.DataType, bool]
) -> None:
    assert field_type(avro_type) == expected


def test_a_date_and_timestamp_union_keeps_member_structs_rather_than_widening_to_long() -> None:
    dtype, _ = field_type(
        [{"type": "int", "logicalType": "date"}, {"type": "long", "logicalType": "timestamp-micros"}]
    )
    assert dtype == T.StructType(
        [T.StructField("member0", T.DateType(), True), T.StructField("member1", T.TimestampType(), True)]
    )


def test_nested_records_become_structs_and_named_types_can_be_reused() -> None:
    point = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "double"}]}
    struct = struct_type(
        parse_schema(record({"name": "a", "type": point}, {"name": "b", "type": ["null", "Point"]}))
    )
    point_struct = T.StructType([T.StructField("x", T.DoubleType(), False)])
    assert [(f.name, without_metadata(f.dataType), f.nullable) for f in struct.fields] == [
        ("a", point_struct, False),
        ("b", point_struct, True),
    ]


def test_named_types_from_referenced_schemas_resolve() -> None:
    address = record({"name": "street", "type": "string"}, name="Address", namespace="com.acme")
    schema = parse_schema(record({"name": "home", "type": "com.acme.Address"}), [address])
    assert without_metadata(struct_type(schema)["home"].dataType) == T.StructType(
        [T.StructField("street", T.StringType(), False)]
    )


def test_a_missing_reference_is_a_contract_error_naming_the_type() -> None:
    with pytest.raises(ContractError, match=r"com\.acme\.Address"):
        parse_schema(record({"name": "home", "type": "com.acme.Address"}))


@pytest.mark.parametrize(
    "schema",
    [
        record({"name": "next", "type": ["null", "Node"]}, name="Node"),
        record(
            {"name": "children", "type": {"type": "array", "items": "Tree"}},
            {"name": "meta", "type": {"type": "map", "values": "string"}},
            name="Tree",
        ),
    ],
)
def test_recursive_schemas_are_refused_with_a_contract_error(schema: str) -> None:
    parsed = parse_schema(schema)
    with pytest.raises(ContractError, match="recursive"):
        struct_type(parsed)
    with pytest.raises(ContractError, match="recursive"):
        list(avro_fields(parsed))


def test_a_decimal_wider_than_spark_allows_is_a_contract_error_at_its_field() -> None:
    with pytest.raises(ContractError) as error:
        field_type({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2})
    assert error.value.position == "f"


def test_a_non_record_top_level_has_a_value_type_but_no_struct() -> None:
    assert spark_type(parse_schema('"string"')) == (T.StringType(), False)
    assert spark_type(parse_schema('["null", {"type": "array", "items": "int"}]')) == (
        T.ArrayType(T.IntegerType(), False),
        True,
    )
    with pytest.raises(ContractError, match="record schema"):
        struct_type(parse_schema('"string"'))


def test_invalid_schema_text_is_a_contract_error() -> None:
    with pytest.raises(ContractError, match="invalid Avro schema"):
        parse_schema('{"type": "record", "name": "R"')


TAGGED = record(
    {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    {
        "name": "address",
        "type": [
            "null",
            {
                "type": "record",
                "name": "Address",
                "fields": [{"name": "zip", "type": "string", "confluent:tags": ["PII", "GEO"]}],
            },
        ],
    },
    {"name": "amount", "type": ["int", "string"]},
    {"name": "labels", "type": {"type": "array", "items": "string"}, "confluent:tags": ["META"]},
    name="User",
    namespace="com.acme",
)


def test_field_metadata_carries_tags_full_name_and_avro_type(spark: Any) -> None:
    struct = struct_type(parse_schema(TAGGED))
    df = spark.createDataFrame([], struct)
    metadata = {f.name: f.metadata for f in df.schema.fields}
    assert metadata["ssn"] == {
        "confluent:tags": ["PII"],
        "avro.fullName": "com.acme.User.ssn",
        "avro.type": "STRING",
    }
    assert metadata["address"] == {"avro.fullName": "com.acme.User.address", "avro.type": "RECORD"}
    assert metadata["amount"]["avro.type"] == "COMBINED"
    address = df.schema["address"].dataType
    assert address["zip"].metadata == {
        "confluent:tags": ["PII", "GEO"],
        "avro.fullName": "com.acme.Address.zip",
        "avro.type": "STRING",
    }


def test_the_field_walk_yields_path_full_name_type_name_and_tags() -> None:
    walked = [
        (f.path, f.name, f.full_name, f.type_name, f.tags, f.nullable)
        for f in avro_fields(parse_schema(TAGGED))
    ]
    assert walked == [
        (("ssn",), "ssn", "com.acme.User.ssn", "STRING", ("PII",), False),
        (("address",), "address", "com.acme.User.address", "RECORD", (), True),
        (("address", "zip"), "zip", "com.acme.Address.zip", "STRING", ("PII", "GEO"), False),
        (("amount",), "amount", "com.acme.User.amount", "COMBINED", (), False),
        (("labels",), "labels", "com.acme.User.labels", "ARRAY", ("META",), False),
    ]


def test_the_field_walk_enters_arrays_maps_and_union_members() -> None:
    item = {"type": "record", "name": "Item", "fields": [{"name": "sku", "type": "string"}]}
    schema = parse_schema(
        record(
            {"name": "items", "type": {"type": "array", "items": item}},
            {"name": "byId", "type": {"type": "map", "values": "Item"}},
            {"name": "either", "type": ["null", "string", "Item"]},
        )
    )
    walked = [(f.path, f.full_name) for f in avro_fields(schema)]
    assert walked == [
        (("items",), "R.items"),
        (("items", "[]", "sku"), "Item.sku"),
        (("byId",), "R.byId"),
        (("byId", "{}", "sku"), "Item.sku"),
        (("either",), "R.either"),
        (("either", "member1", "sku"), "Item.sku"),
    ]


@pytest.mark.parametrize(
    ("avro_type", "expected"),
    [
        ("string", "STRING"),
        (["null", "long"], "LONG"),
        (["null"], "NULL"),
        (["string", "long"], "COMBINED"),
        ({"type": "fixed", "name": "F", "size": 2}, "FIXED"),
        ({"type": "map", "values": "int"}, "MAP"),
        ({"type": "int", "logicalType": "date"}, "INT"),
        ({"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}, "BYTES"),
    ],
)
def test_type_names_are_confluents_field_types(avro_type: Any, expected: str) -> None:
    assert type_name(parse_schema(json.dumps(avro_type))) == expected
