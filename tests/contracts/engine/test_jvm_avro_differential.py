"""The two Avro decode paths agree (docs/semantics.md §8.10): `deserialize` with spark-avro's
`from_avro` (SPARK_CONTRACTS_AVRO_PATH=jvm) and with fastavro (=python) give the same rows, the same
DLQ records and the same errors, on random schemas and records and on hostile frames."""

from __future__ import annotations

import contextlib
import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

import decode_paths
import fastavro
import pytest
from decode_paths import ROWS, SUBJECT, path_chosen, plan_names
from encrypt_oracle import KMS_PARAMS, encrypt_rule
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from read_counter import ReadCounter
from test_serde_properties import schemas_with_records

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.engine import jvm_avro
from contracts.formats.avro import parse_schema
from contracts.formats.wire import VALUE_SCHEMA_ID_HEADER, encode_frame, encode_prefix

ROWS_WITH_HEADERS = f"{ROWS}, headers array<struct<key: string, value: binary>>"


def avro_path(path: str) -> contextlib.AbstractContextManager[None]:
    """SPARK_CONTRACTS_AVRO_PATH set to `path` for the calls made inside."""
    return path_chosen(jvm_avro.PATH_ENV, path)


def reads_with_from_avro(df: Any) -> bool:
    """Whether the query decodes with spark-avro."""
    return plan_names(df, "from_avro")


def both_paths(
    spark: Any, tmp: Path, registry: LocalRegistry, rows: list[tuple[Any, ...]], *args: Any, **kw: Any
) -> Any:
    """`decode_paths.both_paths` for this decoder's variable and function."""
    return decode_paths.both_paths(spark, tmp, registry, rows, jvm_avro.PATH_ENV, "from_avro", *args, **kw)


RICH = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "note", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "total", "type": "long"},
        {"name": "paid", "type": "boolean"},
        {"name": "weight", "type": "float"},
        {"name": "ratio", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SENT"]}},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 3}},
        {"name": "coupon", "type": ["null", "string"]},
        {"name": "either", "type": ["int", "string", "State"]},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}],
            },
        },
        {"name": "previous", "type": ["null", "Address"]},
        {"name": "lines", "type": {"type": "array", "items": "string"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {
            "name": "fee",
            "type": {
                "type": "fixed",
                "name": "Fee",
                "size": 8,
                "logicalType": "decimal",
                "precision": 10,
                "scale": 3,
            },
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "atMicros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    ],
}
OPTIONAL = {
    "type": "record",
    "name": "Maybe",
    "fields": [
        {"name": "a", "type": ["null", "int"], "default": None},
        {"name": "b", "type": ["null", "string"], "default": None},
    ],
}


def body(record: dict[str, Any], schema: Any) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record)
    return buffer.getvalue()


def rich_record(i: int) -> dict[str, Any]:
    import datetime
    import decimal

    utc = datetime.timezone.utc
    return {
        "note": f"order {i} ☃",
        "qty": i,
        "total": -(2**40) * i,
        "paid": i % 2 == 0,
        "weight": 1.5 * i,
        "ratio": float("nan") if i == 2 else i / 3,
        "blob": bytes([i, 0, 255]),
        "state": ["NEW", "PAID", "SENT"][i % 3],
        "tag": b"abc",
        "coupon": None if i % 2 else f"C{i}",
        "either": ("shop.State", "SENT") if i == 1 else (i if i % 2 == 0 else "text"),
        "address": {"city": "Oslo", "zip": None if i == 1 else 150 + i},
        "previous": None if i % 2 else {"city": "Bergen", "zip": 5000},
        "lines": [f"l{n}" for n in range(i)],
        "amount": decimal.Decimal(f"{i}12.34"),
        "fee": decimal.Decimal("-1.250"),
        "at": datetime.datetime(2024, 2, 29, 12, 0, i, 123000, tzinfo=utc),
        "atMicros": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
        "local": datetime.datetime(2030, 1, 1, 8, 30),
        "day": datetime.date(1, 1, 1) if i == 3 else datetime.date(9999, 12, 31),
    }


def hostile_rows(schema_id: int, guid: Any, parsed: Any) -> list[tuple[Any, ...]]:
    """Valid frames (V0 and V1) and frames each decoder must refuse the same way."""
    good = [body(rich_record(i), parsed) for i in range(4)]
    bad_utf8 = body({**rich_record(0), "note": "ab"}, parsed).replace(b"\x04ab", b"\x04\xff\xfe", 1)
    day = fastavro_int(2932896)  # 9999-12-31, the last field of rich_record(0)
    assert good[0].endswith(day)
    far_day = good[0][: -len(day)] + fastavro_int(3_000_000)  # a year Python's dates do not hold
    frames: list[bytes | None] = [
        encode_frame(schema_id, good[0]),
        encode_frame(schema_id, good[1]),
        encode_frame(guid, good[2]),
        encode_frame(schema_id, good[3] + b"trailing bytes"),
        encode_frame(schema_id, good[1][:-3]),  # truncated
        encode_frame(schema_id, b""),
        b"\x07" + encode_frame(schema_id, good[0])[1:],  # wrong magic byte
        encode_frame(999, good[0]),  # unknown id
        encode_frame(schema_id, bad_utf8),
        encode_frame(schema_id, far_day),
        b"\x00\x00",  # shorter than a prefix
        None,  # a tombstone
    ]
    return [(f"k{i}".encode(), frame, "orders", 0, i) for i, frame in enumerate(frames)]


def fastavro_int(n: int) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, "int", n)
    return buffer.getvalue()


def test_the_jvm_path_decodes_rich_records_and_hostile_frames_as_fastavro_does(
    spark: Any, tmp_path: Path
) -> None:
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(RICH)))
    guid = registry.get_version(SUBJECT, 1).guid
    parsed = parse_schema(json.dumps(RICH))
    rows = hostile_rows(schema_id, uuid.UUID(guid), parsed)
    result = both_paths(spark, tmp_path, registry, rows)
    python, jvm = result["python"], result["jvm"]
    assert jvm[2] and not python[2]
    assert jvm[:2] == python[:2]
    assert len(python[0]) == 5  # 4 good frames (one with trailing bytes) and the tombstone
    reasons = [dict(headers)["__rule.exception"].decode() for _, _, headers in python[1]]
    assert len(reasons) == 7
    assert any("utf-8" in reason for reason in reasons)
    assert any("magic byte" in reason for reason in reasons)


def test_a_row_naming_its_schema_in_a_header_and_records_of_nulls_agree(spark: Any, tmp_path: Path) -> None:
    """A schema of optional fields: a body PERMISSIVE reads as nulls is judged by fastavro (a record
    of nulls is one; a truncated body is not); a schema id header sends its row to fastavro."""
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(OPTIONAL)))
    parsed = parse_schema(json.dumps(OPTIONAL))
    nulls = body({"a": None, "b": None}, parsed)
    some = body({"a": 7, "b": "x"}, parsed)
    header = [(VALUE_SCHEMA_ID_HEADER, encode_prefix(schema_id))]
    rows = [
        (b"k0", encode_frame(schema_id, nulls), "t", 0, 0, None),
        (b"k1", encode_frame(schema_id, some), "t", 0, 1, []),
        (b"k2", encode_frame(schema_id, some[:-1]), "t", 0, 2, None),
        (b"k3", encode_frame(schema_id, b"\x02"), "t", 0, 3, None),  # a's branch, no int
        (b"k4", some, "t", 0, 4, header),
        (b"k5", encode_frame(schema_id, b"\x04"), "t", 0, 5, None),  # no branch 2
    ]
    result = both_paths(spark, tmp_path, registry, rows, ROWS_WITH_HEADERS)
    assert result["jvm"][2]
    assert result["jvm"][:2] == result["python"][:2]
    assert len(result["python"][0]) == 3
    assert len(result["python"][1]) == 3


def test_the_jvm_decode_reads_its_source_once(spark: Any, tmp_path: Path) -> None:
    """Frames from_avro decodes and frames left to fastavro (an unknown id) come from one scan."""
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(OPTIONAL)))
    some = body({"a": 7, "b": "x"}, parse_schema(json.dumps(OPTIONAL)))
    frames = [encode_frame(schema_id, some), encode_frame(999, some)] * 2
    rows = [(b"k%d" % i, frame, "t", 0, i) for i, frame in enumerate(frames)]
    marks = tmp_path / "reads"
    marks.mkdir()
    source = spark.createDataFrame(rows, ROWS).repartition(2)
    counted = source.mapInArrow(ReadCounter(str(marks)), source.schema)
    with avro_path("jvm"):
        contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / "dlq"))
        decoded = contract.deserialize(counted, on_decode_error="DLQ", decode_dlq_topic="bad")
        assert reads_with_from_avro(decoded)
        assert decoded.count() == 2
    assert len(list(marks.iterdir())) == 2  # one read per source partition


@pytest.mark.parametrize("frame", ["truncated", "bad utf-8"])
def test_an_undecodable_frame_fails_the_job_with_the_same_message_on_both_paths(
    spark: Any, tmp_path: Path, frame: str
) -> None:
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(json.dumps(RICH)))
    parsed = parse_schema(json.dumps(RICH))
    good = body(rich_record(1), parsed)
    value = good[:-2] if frame == "truncated" else good.replace(b"order 1", b"order \xff", 1)
    assert value != good
    rows = [(b"k", encode_frame(schema_id, value), "orders", 3, 17)]
    messages = {}
    for path in ("python", "jvm"):
        with avro_path(path):
            contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / path))
            with pytest.raises(Exception, match="partition 3, offset 17") as caught:
                contract.deserialize(spark.createDataFrame(rows, ROWS)).collect()
        found = re.search(r"cannot deserialize the record[^\n]*", str(caught.value))
        assert found is not None
        messages[path] = found.group(0)
    assert messages["jvm"] == messages["python"]


def test_forcing_the_jvm_path_without_spark_avro_is_refused_and_unknown_paths_too() -> None:
    with avro_path("sideways"), pytest.raises(Exception, match="must be one of auto, jvm, python"):
        jvm_avro.chosen_path()
    with avro_path("PYTHON"):
        assert jvm_avro.chosen_path() == "python"


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    case=schemas_with_records(),
    cuts=st.lists(
        st.tuples(st.sampled_from(["keep", "cut", "trail"]), st.integers(0, 40)), min_size=8, max_size=8
    ),
)
def test_random_schemas_records_and_mutations_decode_alike_on_both_paths(
    spark: Any, tmp_path_factory: Any, case: tuple[str, list[dict[str, Any]]], cuts: list[tuple[str, int]]
) -> None:
    text, records = case
    parsed = parse_schema(text)
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(text))
    rows = []
    for i, (record, (kind, n)) in enumerate(zip(records, cuts, strict=False)):
        data = body(record, parsed)
        data = (
            data[: n % (len(data) + 1)]
            if kind == "cut"
            else data + bytes(range(n))
            if kind == "trail"
            else data
        )
        rows.append((f"k{i}".encode(), encode_frame(schema_id, data), "random", 1, i))
    result = both_paths(spark, tmp_path_factory.mktemp("paths"), registry, rows)
    assert result["jvm"][:2] == result["python"][:2]
    event("decoded by from_avro" if result["jvm"][2] else "left to fastavro (a map, uuid or time)")


PLAIN = {
    "type": "record",
    "name": "Plain",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "nick", "type": ["null", "string"]},
        {"name": "score", "type": ["double", "null"]},
        {"name": "ratio", "type": "float"},
        {"name": "on", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "home",
            "type": ["null", {"type": "record", "name": "Home", "fields": [{"name": "n", "type": "int"}]}],
        },
    ],
}
PLAIN_ROWS = "id bigint, name string, nick string, score double, ratio float, on boolean, raw binary,"
PLAIN_ROWS += " tags array<string>, home struct<n: int>, key string"


def serialized(
    spark: Any, tmp: Path, rows: list[tuple[Any, ...]], schema: Any = PLAIN, encoding: Any = None
) -> dict[str, Any]:
    """serialize on each path (with the `encoding` rule on the payload): its frames by key, and
    whether to_avro wrote them."""
    registry = LocalRegistry()
    rules = {"ruleSet": {"encodingRules": [encoding]}} if encoding else {}
    registry.register_schema(SUBJECT, Schema.from_dict({"schema": json.dumps(schema), **rules}))
    out = {}
    for path in ("python", "jvm"):
        with avro_path(path):
            contract = DataContract(
                registry, SUBJECT, dlq_sink=LocalTopicSink(tmp / path), rule_config={"secret": "s3cret"}
            )
            framed = contract.serialize(spark.createDataFrame(rows, PLAIN_ROWS))
            jvm = reads_with_to_avro(framed)
            out[path] = ({row["key"]: bytes(row["value"]) for row in framed.collect()}, jvm)
    return out


def reads_with_to_avro(df: Any) -> bool:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)  # the analyzed plan: Spark may fold from_avro over local data away
    return "to_avro" in out.getvalue()


def test_the_jvm_path_writes_fastavros_bytes(spark: Any, tmp_path: Path) -> None:
    rows = [
        (1, "ann ☃", None, 1.5, 0.1, True, b"\x00\xff", ["a", "𝄞"], {"n": 3}, "k1"),
        (-(2**63), "", "nick", None, float("nan"), False, b"", [], None, "k2"),
        (2**63 - 1, "nul\x00", "", float("-inf"), -0.0, True, bytes(300), ["x"] * 70, {"n": -1}, "k3"),
    ]
    result = serialized(spark, tmp_path, rows)
    assert result["jvm"][1] and not result["python"][1]
    assert result["jvm"][0] == result["python"][0]
    assert len(result["jvm"][0]) == 3


def test_the_jvm_path_writes_the_bodies_encoding_rules_seal(spark: Any, tmp_path: Path) -> None:
    # AES256_SIV is deterministic: the same frames on both paths.
    rule = encrypt_rule("AES256_SIV", KMS_PARAMS, payload=True, mode="WRITE", name="seal")
    rows = [
        (1, "ann ☃", None, 1.5, 0.1, True, b"\x00\xff", ["a", "𝄞"], {"n": 3}, "k1"),
        (2, "bob", "b", None, 0.5, False, b"", [], None, "k2"),
    ]
    result = serialized(spark, tmp_path, rows, encoding=rule)
    assert result["jvm"][1] and not result["python"][1]
    assert result["jvm"][0] == result["python"][0]
    assert set(result["jvm"][0]) == {"k1", "k2"}
    for frame in result["jvm"][0].values():
        assert frame.startswith(encode_prefix(1)) and b"bob" not in frame  # sealed, the id in clear


@pytest.mark.parametrize("bad", ["null name", "null tag", "bad utf-8"])
def test_a_record_fastavro_refuses_fails_serialize_with_the_same_message_on_both_paths(
    spark: Any, tmp_path: Path, bad: str
) -> None:
    from pyspark.sql import functions as F

    good = (1, "ann", None, 1.5, 0.5, True, b"", ["a"], None)
    record = {
        "null name": (1, None, *good[2:]),
        "null tag": (*good[:7], ["a", None], None),
        "bad utf-8": good,
    }[bad]
    messages = {}
    for path in ("python", "jvm"):
        registry = LocalRegistry()
        registry.register_schema(SUBJECT, Schema(json.dumps(PLAIN)))
        with avro_path(path):
            contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / path))
            df = spark.createDataFrame([(*good, "k0"), (*record, "k1")], PLAIN_ROWS)
            if bad == "bad utf-8":
                name = F.when(F.col("key") == "k1", F.unhex(F.lit("61FF62")).cast("string"))
                df = df.withColumn("name", name.otherwise(F.col("name")))
            with pytest.raises(Exception) as caught:
                contract.serialize(df).collect()
        found = re.search(
            r"SerializationError: (record cannot be encoded|the record at key)[^\n]*", str(caught.value)
        )
        assert found is not None, str(caught.value)[:2000]
        messages[path] = found.group(0)
    assert messages["jvm"] == messages["python"]
