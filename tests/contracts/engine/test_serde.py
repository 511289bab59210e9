"""Wire format on DataFrames and migrations across major versions (docs/semantics.md §6, §8)."""

from __future__ import annotations

import datetime
import decimal
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from pyspark.sql import Row
from pyspark.sql import functions as F

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError
from contracts.formats.wire import encode_frame

SUBJECT = "users-value"
MAX_ZERO_SIZE_ITEMS = 1_000_000  # docs/guide.md: the most items of zero-size types one record may declare
MAJOR = "application.major.version"


def _record(fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": "User", "namespace": "com.acme", "fields": fields}


V1 = _record([{"name": "name", "type": "string"}, {"name": "ssn", "type": "string"}])
V2 = _record([*V1["fields"], {"name": "age", "type": "int", "default": 0}])
V3 = _record(
    [{"name": "name", "type": "string"}, {"name": "socialSecurityNumber", "type": "string"}, V2["fields"][2]]
)
V4 = _record(
    [
        {"name": "fullName", "type": "string"},
        {"name": "socialSecurityNumber", "type": "string"},
        V2["fields"][2],
    ]
)


def _rename(name: str, old: str, new: str, mode: str) -> dict[str, Any]:
    expr = f"$merge([$sift($, function($v, $k) {{$k != '{old}'}}), {{'{new}': $.'{old}'}}])"
    return {"name": name, "kind": "TRANSFORM", "type": "JSONATA", "mode": mode, "expr": expr}


VERSIONS = [
    (V1, "1", []),
    (V2, "1", []),
    (V3, "2", [_rename("ssnUp", "ssn", "socialSecurityNumber", "UPGRADE"),
               _rename("ssnDown", "socialSecurityNumber", "ssn", "DOWNGRADE")]),
    (V4, "3", [_rename("nameUp", "name", "fullName", "UPGRADE"),
               _rename("nameDown", "fullName", "name", "DOWNGRADE")]),
]  # fmt: skip

WRITTEN = {
    1: {"name": "ann", "ssn": "111"},
    2: {"name": "bob", "ssn": "222", "age": 42},
    3: {"name": "cy", "socialSecurityNumber": "333", "age": 7},
    4: {"fullName": "di", "socialSecurityNumber": "444", "age": 19},
}


@pytest.fixture
def registry() -> LocalRegistry:
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibilityGroup=MAJOR)
    for schema, major, migrations in VERSIONS:
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {MAJOR: major}},
            "ruleSet": {"migrationRules": migrations},
        }
        registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return registry


@pytest.fixture
def sink(tmp_path: Path) -> LocalTopicSink:
    return LocalTopicSink(tmp_path / "dlq")


def frame(registry: LocalRegistry, version: int, record: dict[str, Any]) -> bytes:
    registered = registry.get_version(SUBJECT, version)
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(json.loads(registered.schema.schema_str)), record)
    return encode_frame(registered.schema_id, body.getvalue())


def topic_rows(spark: Any, registry: LocalRegistry) -> Any:
    rows = [
        (None, frame(registry, version, record), "users", 0, offset)
        for offset, (version, record) in enumerate(sorted(WRITTEN.items()))
    ]
    return spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")


BAD_FRAMES = [
    b"\x02\x00\x00\x00\x01abc",  # wrong magic byte
    b"\x00\x00\x00",  # shorter than the header
    b"\x00\x00\x00\x03\xe7",  # unknown schema id 999
    b"\x00\x00\x00\x00\x01\x10",  # truncated body: a string of 8 bytes announced, none given
]


def test_undecodable_records_go_to_the_decode_dlq_and_nothing_is_lost(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    good = [frame(registry, 2, WRITTEN[2])]
    rows = [(b"k%d" % i, value, "users", 0, i) for i, value in enumerate([*good, *BAD_FRAMES])]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")
    reader = DataContract(registry, SUBJECT, version=2, dlq_sink=sink)
    decoded = reader.deserialize(
        df, key_col="key", on_decode_error="DLQ", decode_dlq_topic="users-undecodable"
    )
    assert decoded.count() == 1
    records = sink.read("users-undecodable")
    assert len(records) == len(BAD_FRAMES)
    assert sorted(record.value for record in records) == sorted(BAD_FRAMES)
    assert sorted(record.key for record in records) == [b"k1", b"k2", b"k3", b"k4"]
    reasons = [dict(record.headers)["__rule.exception"].decode() for record in records]
    assert any("magic byte" in reason for reason in reasons)
    assert any("999" in reason for reason in reasons)


def test_an_undecodable_record_fails_the_job_by_default_naming_its_offset(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    df = spark.createDataFrame(
        [(None, BAD_FRAMES[0], "users", 3, 17)],
        "key binary, value binary, topic string, partition int, offset long",
    )
    reader = DataContract(registry, SUBJECT, version=2, dlq_sink=sink)
    with pytest.raises(Exception, match="partition 3, offset 17") as caught:
        reader.deserialize(df).collect()
    assert "magic byte" in str(caught.value)


def test_serialize_then_deserialize_round_trips(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    contract = DataContract(registry, SUBJECT, version=3, dlq_sink=sink)
    df = spark.createDataFrame(
        [("ann", "111", 5), ("bob", "222", 6)], "name string, socialSecurityNumber string, age int"
    )
    framed = contract.serialize(df)
    assert framed.columns == ["value"]
    values = [row.value for row in framed.collect()]
    assert all(value[:5] == b"\x00" + contract.schema_id.to_bytes(4, "big") for value in values)
    back = contract.deserialize(framed)
    assert sorted(tuple(row) for row in back.collect()) == [("ann", "111", 5), ("bob", "222", 6)]


def test_a_union_value_decodes_into_the_branch_it_was_written_in(spark: Any, sink: LocalTopicSink) -> None:
    """A producer that writes bytes in a fixed branch next to a decimal one (fastavro itself would
    pick the decimal for them): each record lands in its own member and serializes back as written."""
    payment = {
        "type": "record",
        "name": "Payment",
        "fields": [
            {
                "name": "amount",
                "type": [
                    {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
                    {"type": "fixed", "name": "Raw", "size": 2},
                ],
            }
        ],
    }
    registry = LocalRegistry()
    schema_id = registry.register_schema("payments-value", Schema(json.dumps(payment)))
    # Branch index (zigzag varint), then the value: 1 → fixed b"ab"; 0 → bytes of unscaled 12345.
    bodies = [b"\x02ab", b"\x00\x04" + (12345).to_bytes(2, "big", signed=True)]
    df = spark.createDataFrame([(encode_frame(schema_id, body),) for body in bodies], "value binary")
    contract = DataContract(registry, "payments-value", dlq_sink=sink)
    decoded = contract.deserialize(df)
    members = [(row.amount.member0, row.amount.member1) for row in decoded.collect()]
    assert sorted(members, key=repr) == [(decimal.Decimal("123.45"), None), (None, b"ab")]
    again = sorted(bytes(row.value)[5:] for row in contract.serialize(decoded).collect())
    assert again == sorted(bodies)


def _shape(major: int, record: dict[str, Any]) -> dict[str, Any]:
    """A written record (any version) as a reader of `major` must see it, with age's default."""
    age = record.get("age", 0)
    name = record.get("name", record.get("fullName"))
    ssn = record.get("ssn", record.get("socialSecurityNumber"))
    if major == 1:
        return {"name": name, "ssn": ssn, "age": age}
    if major == 2:
        return {"name": name, "socialSecurityNumber": ssn, "age": age}
    return {"fullName": name, "socialSecurityNumber": ssn, "age": age}


@pytest.mark.parametrize("major", [1, 2, 3])
def test_readers_pinned_to_each_major_receive_every_record_in_their_shape(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink, major: int
) -> None:
    reader = DataContract(registry, SUBJECT, use_latest_with_metadata={MAJOR: str(major)}, dlq_sink=sink)
    assert reader.version == {1: 2, 2: 3, 3: 4}[major]
    decoded = reader.deserialize(topic_rows(spark, registry))
    assert decoded.columns[:3] == list(_shape(major, WRITTEN[1]))
    assert decoded.columns[3:] == ["key", "topic", "partition", "offset"]
    got = {row["offset"]: {name: row[name] for name in decoded.columns[:3]} for row in decoded.collect()}
    expected = {offset: _shape(major, WRITTEN[v]) for offset, v in enumerate(sorted(WRITTEN))}
    assert got == expected
    assert sink.topics() == []


def test_read_migrates_an_already_decoded_dataframe_and_passes_other_columns(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    latest = DataContract(registry, SUBJECT, dlq_sink=sink)
    df = spark.createDataFrame(
        [("ann", "111", "a"), ("bob", "222", "b")], "name string, ssn string, tag string"
    )
    migrated = latest.read(df, writer_version=1)
    assert migrated.columns == ["fullName", "socialSecurityNumber", "age", "tag"]
    assert sorted(tuple(row) for row in migrated.collect()) == [
        ("ann", "111", 0, "a"),
        ("bob", "222", 0, "b"),
    ]


def test_a_failing_migration_rule_follows_its_action(spark: Any, tmp_path: Path) -> None:
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibilityGroup=MAJOR)
    bad_upgrade = {**_rename("ssnUp", "ssn", "socialSecurityNumber", "UPGRADE"), "expr": "$number('x')"}
    bad_upgrade.update(onFailure="DLQ", params={"dlq.topic": "users-migration"})
    for schema, major, migrations in [(V2, "1", []), (V3, "2", [bad_upgrade])]:
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {MAJOR: major}},
            "ruleSet": {"migrationRules": migrations},
        }
        registry.register_schema(SUBJECT, Schema.from_dict(payload))
    sink = LocalTopicSink(tmp_path / "dlq")
    reader = DataContract(registry, SUBJECT, version=2, dlq_sink=sink)
    rows = [(None, frame(registry, 1, WRITTEN[2]), "users", 0, 0)]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")
    assert reader.deserialize(df).count() == 0
    (record,) = sink.read("users-migration")
    headers = dict(record.headers)
    assert record.value == rows[0][1]
    assert (headers["__rule.name"], headers["__rule.mode"]) == (b"ssnUp", b"UPGRADE")


def test_a_deleted_intermediate_version_fails_only_the_records_whose_migration_crosses_it(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    rows = topic_rows(spark, registry)
    assert registry.delete_version(SUBJECT, 2) == 2
    reader = DataContract(registry, SUBJECT, version=3, dlq_sink=sink)
    decoded = reader.deserialize(rows, on_decode_error="DLQ", decode_dlq_topic="bad")
    # Version 1's records must pass through the deleted version 2, whose own records fail too (it
    # cannot be loaded); records of versions 3 and 4 (downgraded) arrive.
    assert sorted(row["offset"] for row in decoded.collect()) == [2, 3]
    reasons = sorted(dict(record.headers)["__rule.exception"].decode() for record in sink.read("bad"))
    assert len(reasons) == 2
    assert "cannot migrate from version 1 to 3" in reasons[0] and "Version 2 not found" in reasons[0]
    with pytest.raises(ContractError, match="cannot migrate from version 1 to 3"):
        reader.read(spark.createDataFrame([("ann", "111")], "name string, ssn string"), writer_version=1)


def _zigzag(n: int) -> bytes:
    """An Avro long: zigzag, then base-128 varint."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_frames_declaring_more_items_or_bytes_than_they_hold_are_undecodable(
    spark: Any, sink: LocalTopicSink
) -> None:
    """A few bytes that declare 2^40 nulls, a string or map larger than the body, or more
    zero-size items than the documented maximum go to the decode DLQ, fast and without memory
    blow-up; a frame at the maximum decodes."""
    schema = {
        "type": "record",
        "name": "Bag",
        "fields": [
            {"name": "nulls", "type": {"type": "array", "items": "null"}},
            {
                "name": "empties",
                "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}},
            },
            {"name": "flags", "type": {"type": "map", "values": "null"}},
            {"name": "label", "type": "string"},
        ],
    }
    registry = LocalRegistry()
    schema_id = registry.register_schema("bags-value", Schema(json.dumps(schema)))
    rest = b"\x00\x00\x02x"  # no empties, no flags, label "x"
    bodies = {
        "nulls 2^40": _zigzag(2**40) + b"\x00" + rest,
        "nulls over the maximum": _zigzag(MAX_ZERO_SIZE_ITEMS + 1) + b"\x00" + rest,
        "nulls and empties over the maximum together": _zigzag(MAX_ZERO_SIZE_ITEMS // 2 + 1)
        + b"\x00"
        + _zigzag(MAX_ZERO_SIZE_ITEMS // 2)
        + b"\x00\x00\x02x",
        "empties in a negative block": b"\x00" + _zigzag(-(2**40)) + _zigzag(0) + b"\x00\x00\x02x",
        "flags 2^40": b"\x00\x00" + _zigzag(2**40) + b"\x02a\x00\x02x",
        "label 2^40 bytes": b"\x00\x00\x00" + _zigzag(2**40) + b"x",
        "label of negative size": b"\x00\x00\x00" + _zigzag(-3) + b"x",
    }
    at_maximum = _zigzag(MAX_ZERO_SIZE_ITEMS) + b"\x00" + rest
    rows = [(name, encode_frame(schema_id, body)) for name, body in [*bodies.items(), ("ok", at_maximum)]]
    df = spark.createDataFrame(rows, "key string, value binary")
    contract = DataContract(registry, "bags-value", dlq_sink=sink)
    decoded = contract.deserialize(df, key_col="key", on_decode_error="DLQ", decode_dlq_topic="bags-bad")
    (ok,) = decoded.select("key", F.size("nulls").alias("n"), "label").collect()
    assert (ok.key, ok.n, ok.label) == ("ok", MAX_ZERO_SIZE_ITEMS, "x")
    reasons = {
        record.key.decode(): dict(record.headers)["__rule.exception"].decode()
        for record in sink.read("bags-bad")
    }
    assert set(reasons) == set(bodies)
    for name in ("nulls 2^40", "nulls over the maximum", "nulls and empties over the maximum together"):
        assert f"at most {MAX_ZERO_SIZE_ITEMS}" in reasons[name], reasons[name]


def _branch(index: int, value: bytes) -> bytes:
    return _zigzag(index) + value


@pytest.mark.parametrize(
    ("union", "bodies", "members"),
    [
        pytest.param(
            ["string", {"type": "enum", "name": "Letter", "symbols": ["A", "B"]}],
            [_branch(0, b"\x02A"), _branch(1, _zigzag(0))],
            [("A", None), (None, "A")],
            id="string next to enum",
        ),
        pytest.param(
            [{"type": "int", "logicalType": "date"}, "long"],
            [_branch(0, _zigzag(19000)), _branch(1, _zigzag(5))],
            [(datetime.date(2022, 1, 8), None), (None, 5)],
            id="long next to date",
        ),
        pytest.param(
            [
                {"type": "record", "name": "Cat", "fields": [{"name": "lives", "type": "int"}]},
                {"type": "record", "name": "Dog", "fields": [{"name": "lives", "type": "int"}]},
            ],
            [_branch(0, _zigzag(9)), _branch(1, _zigzag(1))],
            [(Row(lives=9), None), (None, Row(lives=1))],
            id="two records of one shape",
        ),
    ],
)
def test_a_union_value_lands_in_the_member_it_was_written_in(
    spark: Any, sink: LocalTopicSink, union: list[Any], bodies: list[bytes], members: list[tuple[Any, Any]]
) -> None:
    """fastavro returns plain values; the branch a value was written in is known only from the
    bytes, so it must be kept, not guessed from the value. Each serializes back byte for byte."""
    schema = {"type": "record", "name": "Holder", "fields": [{"name": "u", "type": union}]}
    registry = LocalRegistry()
    schema_id = registry.register_schema("holders-value", Schema(json.dumps(schema)))
    df = spark.createDataFrame(
        [(i, encode_frame(schema_id, body)) for i, body in enumerate(bodies)], "i int, value binary"
    )
    contract = DataContract(registry, "holders-value", dlq_sink=sink)
    decoded = contract.deserialize(df).orderBy("i")
    assert [(row.u.member0, row.u.member1) for row in decoded.collect()] == members
    again = [bytes(row.value)[5:] for row in contract.serialize(decoded).orderBy("i").collect()]
    assert again == bodies


CHOICE = ["string", {"type": "array", "items": "long"}]


@pytest.mark.parametrize(
    ("nullable", "bodies"),
    [
        pytest.param(
            {"type": "record", "name": "Inner", "fields": [{"name": "u", "type": CHOICE}]},
            [
                _branch(1, _branch(1, _zigzag(1) + _zigzag(5) + b"\x00")),
                _branch(1, _branch(0, b"\x02A")),
                _branch(0, b""),
            ],
            id="record",
        ),
        pytest.param(
            {"type": "array", "items": CHOICE},
            [
                _branch(
                    1,
                    _zigzag(2)
                    + _branch(0, b"\x02A")
                    + _branch(1, _zigzag(1) + _zigzag(7) + b"\x00")
                    + b"\x00",
                ),
                _branch(0, b""),
            ],
            id="array",
        ),
        pytest.param(
            {"type": "map", "values": CHOICE},
            [_branch(1, _zigzag(1) + b"\x02k" + _branch(1, _zigzag(1) + _zigzag(3) + b"\x00") + b"\x00")],
            id="map",
        ),
    ],
)
def test_a_nullable_value_holding_a_union_of_several_branches_serializes_back(
    spark: Any, sink: LocalTopicSink, nullable: dict[str, Any], bodies: list[bytes]
) -> None:
    """fastavro's writer picks the branch of an untagged union value (here `["null", X]`) by
    validating it, and its validate() refuses the branch tags of the unions inside when the
    tagged branch is an array, map, enum, fixed or logical type: such values are tagged too."""
    schema = {"type": "record", "name": "Holder", "fields": [{"name": "n", "type": ["null", nullable]}]}
    registry = LocalRegistry()
    schema_id = registry.register_schema("holders-value", Schema(json.dumps(schema)))
    df = spark.createDataFrame(
        [(i, encode_frame(schema_id, body)) for i, body in enumerate(bodies)], "i int, value binary"
    )
    contract = DataContract(registry, "holders-value", dlq_sink=sink)
    decoded = contract.deserialize(df).orderBy("i")
    again = [bytes(row.value)[5:] for row in contract.serialize(decoded).orderBy("i").collect()]
    assert again == bodies


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\x01", "the body ends early (cannot read double)"),
        (b"\x00" * 8 + b"\x04a", "the body ends early (Expected 2 bytes, read 1)"),
    ],
)
def test_a_body_that_ends_early_has_the_same_reason_in_every_process(body: bytes, reason: str) -> None:
    """fastavro names its buffer by address when a fixed-size value is cut; the reason leaves it out."""
    from contracts.formats.avro.format import AvroFormat

    schema_format = AvroFormat()
    schema = _record([{"name": "score", "type": "double"}, {"name": "name", "type": "string"}])
    with pytest.raises(EOFError) as raised:
        schema_format.decode(body, schema_format.parse(json.dumps(schema), []), None)
    assert str(raised.value) == reason
