"""The PROTOBUF format without Spark: parsing with protoc, the Spark type (spark-protobuf's
conventions), records, message indexes, hostile bodies, the JSON view and pickling."""

from __future__ import annotations

import datetime
import pickle
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from contracts import formats
from contracts.errors import ContractError
from contracts.formats.arrow_types import arrow_type as spark_arrow_type
from contracts.formats.protobuf import CEL_DIFFERS_KEY, ProtobufFormat
from contracts.formats.protobuf.indexes import read_indexes, write_indexes
from contracts.formats.protobuf.values import Unsigned, from_spark
from contracts.formats.protocol import Reference

FORMAT = ProtobufFormat()
ORDER = """syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
message Order {
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  Status status = 4;
  repeated string tags = 5;
  map<string, int32> counts = 6;
  Address address = 7;
  google.protobuf.Timestamp at = 8;
  google.protobuf.StringValue note = 9;
  uint64 big = 10;
  oneof pay { string card = 11; string iban = 12; }
  optional int32 priority = 13;
  bytes blob = 14;
  uint32 small = 15;
  sint32 delta = 16;
  float ratio = 17;
  google.protobuf.Duration wait = 18;
  repeated Address stops = 19;
  message Address { string city = 1; }
  enum Status { NEW = 0; PAID = 1; }
}
message Refund { int64 order_id = 1; message Reason { string text = 1; } }
"""
RECORD: dict[str, Any] = {
    "id": 7,
    "customer": "ann",
    "amount": 12.5,
    "status": 1,
    "tags": ["a", "b"],
    "counts": {"x": 1},
    "address": {"city": "Oslo"},
    "at": datetime.datetime(2024, 5, 1, 12, 30, 0, 250000, tzinfo=datetime.timezone.utc),
    "note": "hi",
    "big": 2**64 - 1,
    "iban": "NO93",
    "blob": b"\x00\xff",
    "small": 2**32 - 1,
    "delta": -3,
    "ratio": 0.5,
    "wait": datetime.timedelta(seconds=90),
    "stops": [{"city": "Bergen"}],
}


@pytest.fixture(scope="module")
def order() -> Any:
    return FORMAT.parse(ORDER, ())


def test_the_format_is_registered_for_protobuf() -> None:
    assert isinstance(formats.get("protobuf"), ProtobufFormat)
    assert "PROTOBUF" in formats.known()


UNLESS_DEFAULT = {"presence": "not_default"}
"""A scalar without presence: present unless it holds its default."""


def test_the_spark_type_follows_spark_protobuf(order: Any) -> None:
    struct = FORMAT.spark_type(order)
    types = {field.name: field.dataType for field in struct.fields}
    assert types == {
        "id": T.LongType(),
        "customer": T.StringType(),
        "amount": T.DoubleType(),
        "status": T.StringType(),
        "tags": T.ArrayType(T.StringType(), False),
        "counts": T.MapType(T.StringType(), T.IntegerType(), True),
        "address": T.StructType([T.StructField("city", T.StringType(), False, UNLESS_DEFAULT)]),
        "at": T.TimestampType(),
        "note": T.StringType(),
        "big": T.DecimalType(20, 0),
        "card": T.StringType(),
        "iban": T.StringType(),
        "priority": T.IntegerType(),
        "blob": T.BinaryType(),
        "small": T.LongType(),
        "delta": T.IntegerType(),
        "ratio": T.FloatType(),
        "wait": T.DayTimeIntervalType(),
        "stops": T.ArrayType(
            T.StructType([T.StructField("city", T.StringType(), False, UNLESS_DEFAULT)]), False
        ),
    }
    nullable = {field.name for field in struct.fields if field.nullable}
    assert nullable == {"address", "at", "note", "card", "iban", "priority", "wait"}  # those with presence
    # How CEL's has() finds each present (docs/semantics.md §3.6): HasField, else not the default.
    presence = {field.name: field.metadata["presence"] for field in struct.fields}
    assert {name for name, kind in presence.items() if kind == "set"} == {"address", "at", "note", "wait"}
    with_default = {name for name, kind in presence.items() if kind == "set_or_default"}
    assert with_default == {"card", "iban", "priority"}
    assert {name for name, kind in presence.items() if kind == "non_empty"} == {"tags", "counts", "stops"}


def test_the_parsed_schema_pickles_small_and_rebuilds_its_pool(order: Any) -> None:
    shipped = pickle.dumps(order)
    assert len(shipped) < 20_000
    back = pickle.loads(shipped)
    assert back == order and back.message().full_name == "acme.Order"


@pytest.mark.parametrize(
    ("text", "references", "error"),
    [
        (
            'syntax = "proto3"; message Order { int64 id = 1 }',
            (),
            'invalid Protobuf schema: default.proto:1:49: Expected ";"',
        ),
        ('syntax = "proto3"; enum Only { A = 0; }', (), "declares no message type"),
        ('syntax = "proto3"; import "x.proto"; message A { X x = 1; }', (), "x.proto: File not found"),
        (
            'syntax = "proto3"; message A { int32 a = 1; }',
            (Reference("../up.proto", ""),),
            "reference name '../up.proto' is not a usable import path",
        ),
        (
            'syntax = "proto3"; message A { int32 a = 1; }',
            (Reference("/etc/up.proto", ""),),
            "not a usable import path",
        ),
        ('syntax = "proto3"; message A { A next = 1; int32 a = 2; }', (), "the recursive message A (A -> A)"),
        ('syntax = "proto3"; message A { B b = 1; } message B { }', (), "message B has no fields"),
        (
            'syntax = "proto3"; import "google/protobuf/struct.proto";'
            " message A { google.protobuf.Struct s = 1; }",
            (),
            "recursive message",
        ),
    ],
)
def test_schemas_without_records_are_refused_with_why(text: str, references: Any, error: str) -> None:
    with pytest.raises(ContractError) as refused:
        FORMAT.parse(text, references)
    assert error in refused.value.reason, refused.value.reason


def test_references_compile_by_import_path() -> None:
    money = Reference(
        "common/money.proto", 'syntax = "proto3"; package common; message Money { int64 units = 1; }'
    )
    parsed = FORMAT.parse(
        'syntax = "proto3"; import "common/money.proto"; message P { common.Money m = 1; }', (money,)
    )
    assert FORMAT.spark_type(parsed).simpleString() == "struct<m:struct<units:bigint>>"


def test_records_round_trip_through_bodies_and_spark(order: Any) -> None:
    body = FORMAT.encode(RECORD, order)
    assert body[:1] == b"\x00"  # the first message: the single index byte 0
    decoded = FORMAT.decode(body, order, None)
    assert decoded == RECORD
    assert isinstance(decoded["big"], Unsigned) and isinstance(decoded["small"], Unsigned)
    arrow_type = spark_arrow_type(FORMAT.spark_type(order))
    column = FORMAT.to_struct([decoded, None], order, arrow_type)
    spark_row = column.to_pylist()[0]
    assert spark_row["status"] == "PAID" and spark_row["big"] == Decimal(2**64 - 1)
    read = FORMAT.read_struct(column, order)
    assert read.records == [RECORD, None] and read.unreadable == {}


def test_unset_fields_read_as_the_reference_s_cel_sees_them(order: Any) -> None:
    record = FORMAT.decode(b"\x00", order, None)
    assert record["id"] == 0 and record["customer"] == "" and record["status"] == 0 and record["tags"] == []
    assert record["address"] is None and record["note"] is None and record["at"] is None
    assert "priority" not in record and "card" not in record and "iban" not in record  # unset oneof members


def test_an_enum_name_the_enum_lacks_makes_its_row_unreadable(order: Any) -> None:
    arrow_type = spark_arrow_type(FORMAT.spark_type(order))
    good = FORMAT.to_struct([RECORD], order, arrow_type).to_pylist()[0]
    column = pa.array([good, {**good, "status": "LOST"}], type=arrow_type)
    read = FORMAT.read_struct(column, order)
    assert read.records[0] == RECORD and read.unreadable == {
        1: "acme.Order.status: 'LOST' is no value of enum acme.Order.Status"
    }


def test_conform_fills_defaults_and_names_what_does_not_fit(order: Any) -> None:
    conformed = FORMAT.conform({"id": 1, "customer": "bo"}, order)
    assert conformed["amount"] == 0.0 and conformed["address"] is None and conformed["customer"] == "bo"
    assert FORMAT.conform({"id": 1, "status": "PAID"}, order)["status"] == 1
    for bad, error in [
        ({"id": "one"}, "acme.Order.id"),
        ({"nope": 1}, "acme.Order has no field 'nope'"),
        ({"status": "LOST"}, "'LOST' is no value of enum acme.Order.Status"),
        ({"tags": "a"}, "acme.Order.tags is repeated"),
        ({"address": {"town": "x"}}, "acme.Order.address has no field 'town'"),
        ({"at": "2024-01-01"}, "acme.Order.at is a Timestamp"),
        ({"small": 2**32}, "acme.Order.small"),
    ]:
        with pytest.raises(ValueError) as refused:
            FORMAT.conform(bad, order)
        assert error in str(refused.value), str(refused.value)


def test_the_json_view_is_the_protobuf_json_mapping(order: Any) -> None:
    view = FORMAT.to_json_view(RECORD, order)
    assert view["id"] == "7" and view["status"] == "PAID" and view["blob"] == "AP8="
    assert (
        view["at"] == "2024-05-01T12:30:00.250Z"
        and view["wait"] == "90s"
        and view["address"] == {"city": "Oslo"}
    )
    assert FORMAT.from_json_view(view, order) == RECORD
    from contracts.errors import SerializationError

    with pytest.raises(SerializationError, match="protobuf JSON mapping"):
        FORMAT.from_json_view({"id": "x"}, order)


def test_message_indexes_encode_as_confluent_writes_them() -> None:
    assert write_indexes([0]) == b"\x00"
    assert write_indexes([1]) == b"\x02\x02"
    assert write_indexes([1, 0]) == b"\x04\x02\x00"
    for indexes in ([0], [1], [1, 0], [3, 70, 2]):
        assert read_indexes(write_indexes(indexes) + b"rest") == (indexes, len(write_indexes(indexes)))


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "the body ends inside the message index count"),
        (b"\x04\x02", "the body ends inside message index 2 of 2"),
        (b"\x03", "message index count -2 is not between 0 and 100"),
        (b"\xfe\x03", "message index count 255 is not between 0 and 100"),
        (b"\xff" * 11, "longer than 10 bytes"),
        (b"\x02\x08", "message index 4 out of range: the file has 2 message type(s)"),
        (b"\x04\x02\x02", "message index 1 out of range: message acme.Refund has 1 message type(s)"),
        (b"\x02\x02", "name message acme.Refund; the contract's records are acme.Order"),
        (b"\x04\x00\x00", "name message acme.Order.CountsEntry; the contract's records are acme.Order"),
        (b"\x04\x00\x02", "name message acme.Order.Address; the contract's records are acme.Order"),
        (b"\x00\x0a\x05ab", "not a acme.Order message: Error parsing message"),
        (b"\x00\x08", "not a acme.Order message"),
    ],
)
def test_hostile_bodies_fail_with_why(order: Any, body: bytes, error: str) -> None:
    with pytest.raises(ValueError) as refused:
        FORMAT.decode(body, order, None)
    assert error in str(refused.value), str(refused.value)


def test_fields_whose_spark_value_is_not_what_cel_sees_are_marked(order: Any) -> None:
    marked = {field.name for field in FORMAT.spark_type(order).fields if field.metadata.get(CEL_DIFFERS_KEY)}
    assert marked == {"status", "big", "small"}
    nested = FORMAT.parse(
        'syntax = "proto3"; message P { Q q = 1; int64 id = 2; } message Q { uint32 n = 1; }', ()
    )
    assert [
        field.name for field in FORMAT.spark_type(nested).fields if field.metadata.get(CEL_DIFFERS_KEY)
    ] == ["q"]


def test_a_serialized_descriptor_in_base64_parses_as_its_text_does() -> None:
    import base64

    from google.protobuf import descriptor_pb2

    money = Reference(
        "common/money.proto", 'syntax = "proto3"; package common; message Money { int64 units = 1; }'
    )
    text = 'syntax = "proto3"; import "common/money.proto"; message P { common.Money m = 1; }'
    compiled = descriptor_pb2.FileDescriptorSet.FromString(FORMAT.parse(text, (money,)).descriptor_set)
    serialized = base64.b64encode(compiled.file[-1].SerializeToString()).decode("ascii")
    parsed = FORMAT.parse(serialized, (money,))
    assert parsed.text == serialized and parsed.message_name == "P"
    assert FORMAT.spark_type(parsed) == FORMAT.spark_type(FORMAT.parse(text, (money,)))
    with pytest.raises(ContractError, match=r"common/money\.proto: File not found"):
        FORMAT.parse(serialized, ())


def test_nulls_in_spark_read_as_unset_fields(order: Any) -> None:
    """A DataFrame may hold nulls where a field always has a value (nullability is not checked):
    they read as the field's default, as the serializer then writes it."""
    record = from_spark({}, order.message())
    assert record == FORMAT.decode(b"\x00", order, None)
    assert record["tags"] == [] and record["counts"] == {} and record["status"] == 0
    assert isinstance(record["big"], Unsigned) and record["address"] is None and "card" not in record


def test_without_the_protobuf_extra_a_schema_fails_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "grpc_tools", None)  # as if grpcio-tools were not installed
    with pytest.raises(ContractError, match=r"pip install 'spark-data-contracts\[protobuf\]'"):
        FORMAT.parse('syntax = "proto3"; message Uncompiled { int32 a = 1; }', ())


def test_a_serialized_descriptor_importing_outside_the_source_tree_is_refused() -> None:
    import base64

    from google.protobuf import descriptor_pb2

    hostile = descriptor_pb2.FileDescriptorProto(name="x.proto", dependency=['../../etc/passwd"; x'])
    with pytest.raises(ContractError, match="is not a usable import path"):
        FORMAT.parse(base64.b64encode(hostile.SerializeToString()).decode("ascii"), ())
