"""DLQ topics read as DataFrames: every record as Spark reads the files, headers decoded, and the JSON
value read back into the record exactly as it was rejected (docs/semantics.md §7)."""

from __future__ import annotations

import datetime
import json
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from actions.dlq.local_topic import LocalTopicSink
from actions.dlq.sink import DlqRecord
from contracts import ContractError, DataContract, LocalRegistry, Schema, decode_dlq, formats
from contracts.formats.avro.dlq_value import read_dlq_value
from contracts.formats.avro.types import parse_schema
from contracts.formats.protocol import ParsedSchema

UTC = datetime.timezone.utc
A_LONG = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}


def _avro(schema: dict[str, Any]) -> ParsedSchema:
    """An Avro schema parsed, with its format: what reads a DLQ value back."""

    class Parsed:
        schema_format = formats.get("AVRO")
        parsed = parse_schema(json.dumps(schema))

    return Parsed()


EVERY_TYPE = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "flag", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "raw", "type": "bytes"},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 2}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "time_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "time_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "wide", "type": ["int", "long"]},
        {"name": "chunks", "type": {"type": "array", "items": "bytes"}},
        {"name": "prices", "type": {"type": "map", "values": ["null", "Digest"]}},
        {
            "name": "card",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Card",
                    "fields": [
                        {"name": "number", "type": "string"},
                        {"name": "expires", "type": {"type": "int", "logicalType": "date"}},
                    ],
                },
            ],
        },
        {"name": "cards", "type": {"type": "array", "items": "Card"}},
    ],
}

ROWS = [
    {
        "id": 1,
        "small": -7,
        "flag": True,
        "ratio": 0.5,
        "score": math.nan,
        "note": "naïve ✓",
        "raw": bytes(range(256)),
        "digest": b"\x00\xff",
        "amount": Decimal("-1234567.89"),
        "day": datetime.date(1969, 12, 31),
        "at": datetime.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
        "at_ms": datetime.datetime(2024, 1, 1, 0, 0, 0, 5000, tzinfo=UTC),
        "local": datetime.datetime(2024, 6, 1, 12, 30),
        "time_ms": 45_296_789,
        "time_us": 86_399_999_999,
        "uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
        "status": "PAID",
        "wide": 2**40,
        "chunks": [b"", b"\x80\x81"],
        "prices": {"a": b"\x01\x02", "b": None},
        "card": {"number": "4111 1111", "expires": datetime.date(2030, 1, 31)},
        "cards": [{"number": "x", "expires": datetime.date(1970, 1, 1)}],
    },
    {
        "id": 2,
        "small": 0,
        "flag": False,
        "ratio": -math.inf,
        "score": 1e300,
        "note": None,
        "raw": b"",
        "digest": b"ab",
        "amount": Decimal("0.00"),
        "day": datetime.date(2024, 2, 29),
        "at": datetime.datetime(1960, 1, 1, tzinfo=UTC),
        "at_ms": datetime.datetime(1970, 1, 1, tzinfo=UTC),
        "local": datetime.datetime(1970, 1, 1),
        "time_ms": 0,
        "time_us": 1,
        "uid": "00000000-0000-0000-0000-000000000000",
        "status": "NEW",
        "wide": -1,
        "chunks": [],
        "prices": {},
        "card": None,
        "cards": [],
    },
]


def _contract(tmp_path: Path, schema: dict[str, Any]) -> tuple[DataContract, LocalTopicSink]:
    rule = {
        "name": "noPayments",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.id < 0",
        "onFailure": "DLQ",
        "params": {"dlq.topic": "bad-payments"},
    }
    registry = LocalRegistry()
    payload = {"schema": json.dumps(schema), "ruleSet": {"domainRules": [rule]}}
    registry.register_schema("payments-value", Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    return DataContract(registry, "payments-value", dlq_sink=sink), sink


def _same(left: Any, right: Any) -> bool:
    """Equality where NaN equals NaN."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def _plain(value: Any) -> Any:
    """A collected Row as dicts and lists, timestamps as aware UTC datetimes."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def test_a_rejected_record_of_every_avro_type_reads_back_as_it_was_written(
    spark: Any, tmp_path: Path
) -> None:
    contract, sink = _contract(tmp_path, EVERY_TYPE)
    df = spark.createDataFrame(ROWS, contract.spark_schema)
    df = df.withColumn("key", df.id.cast("string"))
    assert contract.write(df).count() == 0
    dlq = sink.read_df(spark, "bad-payments", contract)
    rows = {row.record.id: row for row in dlq.collect()}
    expected = {row.id: row for row in df.collect()}
    assert rows.keys() == {1, 2}
    for number, row in rows.items():
        original = _plain(expected[number]).copy()
        original.pop("key")
        assert _same(_plain(row.record), original), (number, _plain(row.record), original)
        assert row.key == str(number).encode()
        assert row.topic == "bad-payments"
        assert (row.rule, row.mode, row.subject, row.source_topic) == (
            "noPayments",
            "WRITE",
            "payments-value",
            None,
        )
        assert row.reason == "Rule expr failed: message.id < 0"
        assert [h.key for h in row.headers] == [
            "__rule.name",
            "__rule.mode",
            "__rule.subject",
            "__rule.topic",
            "__rule.exception",
        ]
        assert json.loads(row.value)["id"] == number
        # The writer id ends with the task's partition and, where it differs, the input partition
        # (on Spark Connect, rows made on the driver all come from input partition 0); the rejected
        # rows' branch follows the valid rows' two partitions (docs/semantics.md §7.5).
        assert re.search(r"\.0000[0-3](p0000[01])?$", row.writer), row.writer
        assert row.timestamp is not None
    assert dlq.count() == sink.count("bad-payments") == 2


def test_the_frame_is_read_by_spark_from_the_files_with_every_record_and_header(
    spark: Any, tmp_path: Path
) -> None:
    sink = LocalTopicSink(tmp_path / "dlq")
    records = [
        DlqRecord("t", None, None, (), 0),
        DlqRecord("t", b"\x00k", b"\xff\x00", (("dup", b"1"), ("__rule.name", b"a"), ("x", None)), 1),
        DlqRecord("t", b"k", b"{}", (("__rule.name", b"a"), ("__rule.name", b"b")), 2),
    ]
    for writer_id, chunk in (("r.00000", records[:2]), ("r.00001", records[2:])):
        with sink.open(writer_id) as writer:
            for r in chunk:
                writer.write(r)
    # A task still writing leaves a hidden temporary file, which is no record.
    (tmp_path / "dlq" / "t" / ".r.00002.abc.tmp").write_text("not json\n")
    rows = sorted(sink.read_df(spark, "t").collect(), key=lambda row: (row.writer, row.offset))
    assert [(row.writer, row.offset) for row in rows] == [("r.00000", 0), ("r.00000", 1), ("r.00001", 0)]
    assert [(row.key, row.value) for row in rows] == [(None, None), (b"\x00k", b"\xff\x00"), (b"k", b"{}")]
    assert [[(h.key, h.value) for h in row.headers] for row in rows] == [
        [(k, v) for k, v in r.headers] for r in records
    ]
    # The last `__rule.name` wins, as the reference reads it on a record replayed twice.
    assert [row.rule for row in rows] == [None, "a", "b"]
    assert [row.timestamp.replace(tzinfo=None) for row in rows] == [
        datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms) for ms in (0, 1, 2)
    ]


def test_an_unknown_topic_is_an_empty_frame_of_the_same_columns(spark: Any, tmp_path: Path) -> None:
    sink = LocalTopicSink(tmp_path / "dlq")
    empty = sink.read_df(spark, "nothing-here")
    assert empty.count() == 0
    written = LocalTopicSink(tmp_path / "other")
    with written.open("r.00000") as writer:
        writer.write(DlqRecord("t", b"k", b"v", (), 0))

    def shape(df: Any) -> list[tuple[str, Any]]:
        return [(field.name, field.dataType) for field in df.schema.fields]

    assert shape(empty) == shape(written.read_df(spark, "t"))


def test_a_corrupt_line_fails_the_read_instead_of_reading_as_nulls(spark: Any, tmp_path: Path) -> None:
    sink = LocalTopicSink(tmp_path / "dlq")
    with sink.open("r.00000") as writer:
        writer.write(DlqRecord("t", b"k", b"v", (), 0))
    with open(tmp_path / "dlq" / "t" / "r.00000.jsonl", "a", encoding="ascii") as file:
        file.write("{not json\n")
    with pytest.raises(Exception, match=r"(?i)malformed|FAILFAST"):
        sink.read_df(spark, "t").collect()


def test_wire_bytes_and_json_that_is_no_record_read_as_a_null_record(spark: Any, tmp_path: Path) -> None:
    sink = LocalTopicSink(tmp_path / "dlq")
    with sink.open("r.00000") as writer:
        writer.write(DlqRecord("t", None, b"\x00\x00\x00\x00\x01\x02", (), 0))
        writer.write(DlqRecord("t", None, b"42", (), 0))
    schema = _avro(A_LONG)
    rows = sink.read_df(spark, "t", schema=schema).collect()
    assert [row.record for row in rows] == [None, None]


def test_a_json_record_that_does_not_fit_the_schema_fails_the_read(spark: Any, tmp_path: Path) -> None:
    sink = LocalTopicSink(tmp_path / "dlq")
    with sink.open("r.00000") as writer:
        writer.write(DlqRecord("t", None, b'{"a": "not a number"}', (), 0))
    schema = _avro(A_LONG)
    with pytest.raises(Exception, match=r"(?i)malformed|FAILFAST|cannot parse"):
        sink.read_df(spark, "t", schema=schema).collect()


def test_a_union_of_several_types_cannot_be_read_back_and_says_where(spark: Any) -> None:
    """Builds Columns, so it needs a session (alone it had none: it passed only after another test)."""
    schema = parse_schema(
        json.dumps(
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "inner", "type": {"type": "array", "items": ["string", "bytes"]}}],
            }
        )
    )
    from pyspark.sql import functions as F

    with pytest.raises(ContractError, match=r"union.*inner\.\[\]"):
        read_dlq_value(F.col("value"), schema)


def test_decode_reads_a_kafka_shaped_dlq_as_a_local_one(spark: Any) -> None:
    """A DLQ topic read with Spark's Kafka source has the same key, value and headers columns."""
    kafka_like = spark.createDataFrame(
        [(b"k", b'{"a": 5}', "orders-dlq", [("__rule.name", b"positive"), ("__rule.mode", b"WRITE")])],
        "key binary, value binary, topic string, headers array<struct<key: string, value: binary>>",
    )
    schema = _avro(A_LONG)
    (row,) = decode_dlq(kafka_like, schema).collect()
    assert (row.rule, row.mode, row.reason, row.record.a) == ("positive", "WRITE", None, 5)
