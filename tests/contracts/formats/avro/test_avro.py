"""Avro ↔ Spark: the spark-avro type mapping, the CEL_FIELD field walk, and value round trips."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

import fastavro
import fastavro.validation
import pyarrow as pa
import pytest
from avro_strategies import fastavro_round_trip, schemas_and_records
from deadline import within
from hypothesis import HealthCheck, given, settings
from hypothesis_profiles import examples
from pyspark.sql import Row
from pyspark.sql import types as T

from contracts.errors import ContractError, SerializationError
from contracts.formats.avro import (
    arrow_schema,
    arrow_to_records,
    avro_to_spark_value,
    chooses_union_branches,
    parse_schema,
    read_struct,
    records_to_arrow,
    records_to_struct,
    spark_to_avro_value,
    spark_type,
    struct_type,
    type_name,
)


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


def _doubling(depth: int) -> str:
    """Records R1..R<depth>, each with two fields of the record before it (its name the second time)."""
    schema: Any = {"type": "record", "name": "R0", "fields": [{"name": "x", "type": ["null", "int"]}]}
    for level in range(1, depth + 1):
        fields = [{"name": "a", "type": schema}, {"name": "b", "type": ["null", f"R{level - 1}"]}]
        schema = {"type": "record", "name": f"R{level}", "fields": fields}
    return json.dumps(schema)


def test_a_record_type_used_twice_at_every_level_converts_once_per_type() -> None:
    # 2^depth copies of R0: each record type converted once (a depth of 16 took 10 s, 18 a minute).
    dtype = struct_type(parse_schema(_doubling(12)))
    assert dtype["a"].dataType is dtype["b"].dataType
    leaf = dtype
    for _ in range(12):
        leaf = leaf["b"].dataType
    assert leaf.fieldNames() == ["x"] and leaf["x"].metadata["avro.fullName"] == "R0.x"


def test_a_type_expanding_beyond_the_bound_is_a_contract_error_naming_its_record() -> None:
    parsed = parse_schema(_doubling(40))
    with pytest.raises(ContractError, match="'R16' expands to 196606 Spark fields") as error:
        within(30, lambda: struct_type(parsed))
    assert "more than the 100000 allowed" in str(error.value)


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


ITEM = {
    "type": "record",
    "name": "Item",
    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": ["null", "int"]}],
}
ALL_TYPES = parse_schema(
    record(
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string", "confluent:tags": ["PII"]},
        {"name": "raw", "type": "bytes"},
        {"name": "n", "type": "null"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lts_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "lts_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}},
        {
            "name": "fdec",
            "type": {
                "type": "fixed",
                "name": "Money",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "maybe", "type": ["null", "string"]},
        {"name": "later", "type": ["long", "null"]},
        {"name": "either", "type": ["null", "string", "long", ITEM]},
        {"name": "num", "type": ["int", "long"]},
        {"name": "item", "type": "Item"},
        {"name": "items", "type": {"type": "array", "items": "Item"}},
        {"name": "sparse", "type": {"type": "array", "items": ["null", "double"]}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {
            "name": "byDay",
            "type": {"type": "map", "values": ["null", {"type": "int", "logicalType": "date"}]},
        },
        {"name": "nested", "type": {"type": "array", "items": {"type": "map", "values": "Color"}}},
        {"name": "opt_item", "type": ["null", "Item"]},
        name="Everything",
        namespace="com.acme",
    )
)

UTC = datetime.timezone.utc


def everything(n: int) -> dict[str, Any]:
    """A record of ALL_TYPES as fastavro reads it; `n` varies the values and which branches are set."""
    odd = n % 2 == 1
    item = {"sku": f"sku-{n}", "qty": None if odd else n}
    return {
        "b": odd,
        "i": -(2**31) + n,
        "l": 2**62 + n,
        "f": 1.5 + n,
        "d": -2.25e300 / (n + 1),
        "s": f"straße {n} ☃",
        "raw": bytes([n % 256, 0, 255]),
        "n": None,
        "fx": b"\x00\x01\x02" + bytes([n % 256]),
        "e": "GREEN" if odd else "RED",
        "day": datetime.date(1969, 12, 31) + datetime.timedelta(days=n),
        "tms": datetime.time(23, 59, 59, 999000),
        "tus": datetime.time(0, 0, 0, n),
        "ts_ms": datetime.datetime(1960, 2, 29, 12, 30, 1, 5000, tzinfo=UTC) + datetime.timedelta(days=n),
        "ts_us": datetime.datetime(2038, 1, 19, 3, 14, 8, n, tzinfo=UTC),
        "lts_ms": datetime.datetime(2024, 3, 10, 2, 30, 0, 123000),
        "lts_us": datetime.datetime(1900, 1, 1, 0, 0, 0, n),
        "dec": decimal.Decimal("-1234567.891") + n,
        "fdec": decimal.Decimal("0.01") * n,
        "id": uuid.UUID(int=n),
        "maybe": None if odd else "here",
        "later": n if odd else None,
        "either": [None, "text", 7 + n, item][n % 4],
        "num": 2**40 if odd else n,
        "item": item,
        "items": [item, {"sku": "", "qty": 0}][: n % 3],
        "sparse": [1.0, None, -0.5],
        "counts": {"a": 1, "b": n} if odd else {},
        "byDay": {"x": None, "y": datetime.date(2000, 1, 1)},
        "nested": [{"k": "RED"}, {}],
        "opt_item": None if odd else item,
    }


RECORDS = [everything(n) for n in range(8)]


def test_the_sample_records_are_valid_avro_that_fastavro_reads_back_unchanged() -> None:
    assert fastavro_round_trip(RECORDS, ALL_TYPES) == RECORDS


def test_records_survive_spark_rows_and_a_dataframe(spark: Any) -> None:
    struct = struct_type(ALL_TYPES)
    df = spark.createDataFrame([avro_to_spark_value(r, ALL_TYPES) for r in RECORDS], struct)
    assert [spark_to_avro_value(row, ALL_TYPES) for row in df.collect()] == RECORDS


def test_spark_sees_spark_avro_values(spark: Any) -> None:
    struct = struct_type(ALL_TYPES)
    df = spark.createDataFrame([avro_to_spark_value(r, ALL_TYPES) for r in RECORDS[:4]], struct)
    seen = df.selectExpr(
        "tms",
        "tus",
        "CAST(ts_ms AS STRING) AS ts_ms",
        "CAST(lts_ms AS STRING) AS lts_ms",
        "CAST(day AS STRING) AS day",
        "either.member0 AS text",
        "either.member1 AS long",
        "either.member2.sku AS sku",
        "num",
        "counts['b'] AS b",
        "CAST(id AS STRING) AS id",
    ).collect()
    assert [tuple(row) for row in seen] == [
        (
            86_399_999,
            0,
            "1960-02-29 12:30:01.005",
            "2024-03-10 02:30:00.123",
            "1969-12-31",
            None,
            None,
            None,
            0,
            None,
            str(uuid.UUID(int=0)),
        ),
        (
            86_399_999,
            1,
            "1960-03-01 12:30:01.005",
            "2024-03-10 02:30:00.123",
            "1970-01-01",
            "text",
            None,
            None,
            2**40,
            1,
            str(uuid.UUID(int=1)),
        ),
        (
            86_399_999,
            2,
            "1960-03-02 12:30:01.005",
            "2024-03-10 02:30:00.123",
            "1970-01-02",
            None,
            9,
            None,
            2,
            None,
            str(uuid.UUID(int=2)),
        ),
        (
            86_399_999,
            3,
            "1960-03-03 12:30:01.005",
            "2024-03-10 02:30:00.123",
            "1970-01-03",
            None,
            None,
            "sku-3",
            2**40,
            3,
            str(uuid.UUID(int=3)),
        ),
    ]
    assert df.where("either IS NULL").count() == 1


def through_arrow(spark: Any, records: list[dict[str, Any]], schema: Any) -> Any:
    """A DataFrame made by mapInArrow from the records' RecordBatch, then re-encoded on the workers."""
    struct = struct_type(schema)
    batch = records_to_arrow(records, schema)
    df = spark.range(0, 1, 1, 1).mapInArrow(lambda _: iter([batch]), struct)

    def reencode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for each in batches:
            yield records_to_arrow(arrow_to_records(each, schema), schema)

    return df.mapInArrow(reencode, struct)


def test_records_survive_arrow_batches_through_map_in_arrow(spark: Any) -> None:
    df = through_arrow(spark, RECORDS, ALL_TYPES)
    assert [spark_to_avro_value(row, ALL_TYPES) for row in df.collect()] == RECORDS


def test_the_arrow_schema_is_the_one_spark_gives_map_in_arrow(spark: Any) -> None:
    struct = struct_type(ALL_TYPES)
    df = spark.createDataFrame([avro_to_spark_value(r, ALL_TYPES) for r in RECORDS[:2]], struct)
    expected = records_to_arrow(RECORDS[:2], ALL_TYPES).schema

    def types_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for each in batches:
            yield pa.RecordBatch.from_pylist([{"t": str(each.schema.types)}])

    seen = df.mapInArrow(types_of, "t string").collect()
    assert {row.t for row in seen} <= {str(expected.types), str(pa.schema([]).types)}
    assert arrow_schema(struct) == expected


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schemas_and_records())
def test_random_records_survive_rows_dataframes_and_arrow(
    spark: Any, case: tuple[Any, list[dict[str, Any]]]
) -> None:
    schema, generated = case
    assert fastavro.validation.validate_many(generated, schema)
    # What a reader sees: fastavro's choice of union branch and float32 rounding applied once.
    records = fastavro_round_trip(generated, schema)
    assert fastavro_round_trip(records, schema) == records
    struct = struct_type(schema)
    rows = spark.createDataFrame([avro_to_spark_value(r, schema) for r in records], struct)
    assert [spark_to_avro_value(row, schema) for row in rows.collect()] == records
    assert [
        spark_to_avro_value(row, schema) for row in through_arrow(spark, records, schema).collect()
    ] == records


def union_schema(*branches: Any) -> Any:
    return parse_schema(record({"name": "u", "type": list(branches)}))


def test_a_union_value_goes_to_the_branch_fastavro_writes() -> None:
    small = {"type": "record", "name": "Small", "fields": [{"name": "a", "type": "int"}]}
    big = {
        "type": "record",
        "name": "Big",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": ["null", "int"], "default": None}],
    }
    schema = union_schema("null", "float", "string", "double", small, big)
    members = [avro_to_spark_value({"u": value}, schema)["u"] for value in (2.5, "x", {"a": 1, "b": 2}, None)]
    assert members == [
        {"member0": None, "member1": None, "member2": 2.5, "member3": None, "member4": None},
        {"member0": None, "member1": "x", "member2": None, "member3": None, "member4": None},
        {"member0": None, "member1": None, "member2": None, "member3": None, "member4": {"a": 1, "b": 2}},
        None,
    ]
    assert [spark_to_avro_value({"u": m}, schema)["u"] for m in members] == [2.5, "x", {"a": 1, "b": 2}, None]


def test_a_value_no_union_branch_accepts_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match="no branch"):
        avro_to_spark_value({"u": 1.5}, union_schema("string", "boolean"))


def test_time_of_day_types_are_spark_avro_ints_both_ways() -> None:
    schema = parse_schema(
        record(
            {"name": "ms", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "us", "type": {"type": "long", "logicalType": "time-micros"}},
        )
    )
    value = {"ms": datetime.time(1, 2, 3, 4000), "us": datetime.time(1, 2, 3, 5)}
    assert avro_to_spark_value(value, schema) == {"ms": 3_723_004, "us": 3_723_000_005}
    assert spark_to_avro_value({"ms": 3_723_004, "us": 3_723_000_005}, schema) == value


def test_rows_are_read_by_field_name_and_naive_timestamps_as_local_time() -> None:
    schema = parse_schema(
        record(
            {"name": "a", "type": "int"},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        )
    )
    local = datetime.datetime(2024, 5, 6, 7, 8, 9)
    converted = spark_to_avro_value(Row(t=local, a=1), schema)
    assert converted == {"a": 1, "t": local.astimezone(UTC)}
    assert converted["t"].tzinfo == UTC


def test_non_record_values_convert_and_have_no_arrow_batch() -> None:
    schema = parse_schema(json.dumps({"type": "array", "items": ["null", "string", "long"]}))
    assert avro_to_spark_value(["a", None, 3], schema) == [
        {"member0": "a", "member1": None},
        None,
        {"member0": None, "member1": 3},
    ]
    assert spark_to_avro_value([Row(member0="a", member1=None), None], schema) == ["a", None]
    with pytest.raises(SerializationError, match="record"):
        records_to_arrow([], schema)


def test_a_record_missing_a_field_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match="'s'"):
        records_to_arrow(
            [{"i": 1}], parse_schema(record({"name": "i", "type": "int"}, {"name": "s", "type": "string"}))
        )


def test_arrow_batches_in_other_time_zones_and_large_types_are_normalized() -> None:
    schema = parse_schema(
        record(
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "opt", "type": ["null", ITEM]},
            {"name": "extra_is_ignored", "type": "int"},
        )
    )
    instant = datetime.datetime(2024, 1, 1, 12, tzinfo=UTC)
    batch = pa.RecordBatch.from_pydict(
        {
            "opt": pa.array(
                [{"sku": "a", "qty": 1}, None],
                pa.struct([pa.field("sku", pa.large_string(), False), pa.field("qty", pa.int32())]),
            ),
            "t": pa.array([instant, instant], pa.timestamp("us", tz="Asia/Kolkata")),
            "extra_is_ignored": pa.array([1, 2], pa.int32()),
            "other": pa.array(["x", "y"]),
        }
    )
    assert arrow_to_records(batch, schema) == [
        {"t": instant, "opt": {"sku": "a", "qty": 1}, "extra_is_ignored": 1},
        {"t": instant, "opt": None, "extra_is_ignored": 2},
    ]


def test_map_in_arrow_in_a_non_utc_session_keeps_instants(spark: Any) -> None:
    schema = parse_schema(
        record(
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        )
    )
    records = [
        {
            "t": datetime.datetime(2024, 7, 1, 23, 30, tzinfo=UTC),
            "local": datetime.datetime(2024, 7, 1, 23, 30),
        }
    ]
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        df = through_arrow(spark, records, schema)
        assert [tuple(r) for r in df.selectExpr("CAST(t AS STRING)", "CAST(local AS STRING)").collect()] == [
            ("2024-07-01 16:30:00", "2024-07-01 23:30:00")
        ]
        assert [spark_to_avro_value(row, schema) for row in df.collect()] == records
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_a_batch_with_a_null_where_avro_allows_none_is_a_serialization_error() -> None:
    schema = parse_schema(record({"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}}))
    batch = pa.RecordBatch.from_pydict({"t": pa.array([None], pa.timestamp("us", tz="UTC"))})
    with pytest.raises(SerializationError, match="does not hold"):
        arrow_to_records(batch, schema)


def test_lists_of_nulls_survive_the_cast_of_spark_arrow_batches(spark: Any) -> None:
    """pyarrow's cast of a nested list of nulls (Spark's `element` field names to ours) leaves the
    inner null child too short to read; hypothesis found it."""
    schema = parse_schema(
        {
            "type": "record",
            "name": "Rec1",
            "fields": [
                {"name": "f0", "type": {"type": "array", "items": {"type": "array", "items": "null"}}}
            ],
        }
    )
    for records in ([{"f0": [[None, None]]}], [{"f0": [[None], [None, None]]}, {"f0": []}]):
        rows = through_arrow(spark, records, schema).collect()
        assert [spark_to_avro_value(row, schema) for row in rows] == records


def test_a_writer_gets_each_union_value_in_the_branch_it_was_read_from() -> None:
    """fastavro writes {"f0": 1.5} in the map branch, but the value it reads back (scale 21) it would
    write in the record branch, whose decimal cannot hold it: named branches keep it in the map."""
    dec = {"logicalType": "decimal", "precision": 32, "scale": 21}
    fixed13 = {"type": "fixed", "size": 17, "logicalType": "decimal", "precision": 13, "scale": 9}
    union = [
        "int",
        {"type": "record", "name": "Box", "fields": [{"name": "f0", "type": {**fixed13, "name": "D"}}]},
        {"type": "map", "values": {"type": "bytes", **dec}},
    ]
    schema = parse_schema({"type": "record", "name": "R", "fields": [{"name": "u", "type": union}]})
    written = [{"u": {"f0": decimal.Decimal("1.5")}}, {"u": 7}, {"u": {"f0": decimal.Decimal("2.000000001")}}]
    records = fastavro_round_trip(written, schema)
    assert records[0]["u"] == {"f0": decimal.Decimal("1.500000000000000000000")}
    batch = records_to_arrow(records, schema)

    plain = arrow_to_records(batch, schema)
    with pytest.raises(ValueError, match="precision"):
        fastavro.schemaless_writer(io.BytesIO(), schema, plain[0])
    named = arrow_to_records(batch, schema, union_branches=True)
    assert named[0]["u"] == ("map", {"f0": decimal.Decimal("1.500000000000000000000")})
    assert named[1]["u"] == ("int", 7)
    assert fastavro_round_trip(named, schema) == records


def test_bytes_next_to_a_decimal_branch_go_to_the_bytes_branch() -> None:
    """fastavro's validate takes bytes for a decimal (its unscaled value); Spark cannot hold them
    in a decimal member, and a reader gets bytes only from the fixed branch."""
    union = [
        {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2},
        {"type": "fixed", "name": "F", "size": 2},
    ]
    schema = parse_schema({"type": "record", "name": "R", "fields": [{"name": "u", "type": union}]})
    batch = records_to_arrow([{"u": b"ab"}, {"u": decimal.Decimal("1.25")}], schema)
    assert batch.to_pylist() == [
        {"u": {"member0": None, "member1": b"ab"}},
        {"u": {"member0": decimal.Decimal("1.25"), "member1": None}},
    ]


def test_read_struct_reads_a_null_struct_as_no_record() -> None:
    """A row without a record (a tombstone, a row already rejected) is None, and no converter
    sees its null fields (a date's would fail)."""
    schema = parse_schema(
        record({"name": "n", "type": "string"}, {"name": "d", "type": {"type": "int", "logicalType": "date"}})
    )
    kind = pa.struct([pa.field("n", pa.string(), False), pa.field("d", pa.date32(), False)])
    column = pa.array([None, {"n": "a", "d": datetime.date(2024, 1, 2)}, None], type=kind)
    assert read_struct(column, schema).records == [None, {"n": "a", "d": datetime.date(2024, 1, 2)}, None]
    assert read_struct(pa.nulls(2, kind), schema).records == [None, None]
    records = [None, {"n": "b", "d": datetime.date(2024, 1, 3)}]
    assert records_to_struct(records, schema, kind).to_pylist() == records


def test_values_read_with_their_named_branches_convert_into_those_members() -> None:
    """fastavro's reader with return_named_type tags the values of named branches (in every union,
    ["null", Record] too); with union_branches they land in the member named, plain values (an
    unnamed branch, or data migrated in Python) by their Python type."""
    cat = {"type": "record", "name": "Cat", "fields": [{"name": "lives", "type": "int"}]}
    dog = {"type": "record", "name": "Dog", "fields": [{"name": "lives", "type": "int"}]}
    fields = [
        {"name": "pet", "type": [cat, dog]},
        {
            "name": "owner",
            "type": [
                "null",
                {"type": "record", "name": "Owner", "fields": [{"name": "n", "type": "string"}]},
            ],
        },
        {"name": "day", "type": [{"type": "int", "logicalType": "date"}, "long"]},
    ]
    schema = parse_schema({"type": "record", "name": "R", "fields": fields})
    written = [
        {"pet": ("Dog", {"lives": 1}), "owner": ("Owner", {"n": "ann"}), "day": ("long", 5)},
        {"pet": ("Cat", {"lives": 9}), "owner": None, "day": datetime.date(2022, 1, 8)},
    ]
    bodies = []
    for record in written:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema, record)
        bodies.append(body.getvalue())
    read = [
        fastavro.schemaless_reader(io.BytesIO(body), schema, None, return_named_type=True) for body in bodies
    ]
    assert read[0]["pet"] == ("Dog", {"lives": 1}) and read[0]["owner"] == ("Owner", {"n": "ann"})
    plain = [{"pet": {"lives": 1}, "owner": {"n": "ann"}, "day": 5}]
    assert chooses_union_branches(schema)
    rows = records_to_arrow([*read, *plain], schema, union_branches=True).to_pylist()
    assert [row["pet"] for row in rows] == [
        {"member0": None, "member1": {"lives": 1}},
        {"member0": {"lives": 9}, "member1": None},
        {"member0": {"lives": 1}, "member1": None},
    ]
    assert [row["owner"] for row in rows] == [{"n": "ann"}, None, {"n": "ann"}]
    assert [row["day"] for row in rows] == [
        {"member0": None, "member1": 5},
        {"member0": datetime.date(2022, 1, 8), "member1": None},
        {"member0": None, "member1": 5},
    ]
    assert not chooses_union_branches(parse_schema({"type": "record", "name": "S", "fields": fields[1:2]}))
