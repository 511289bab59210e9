"""The decode pass runs a plan's leading Python rules itself, one pass instead of two: rows, DLQ
records, counts and failures are those of a rules pass after it (docs/semantics.md §8.12)."""

from __future__ import annotations

import contextlib
import datetime
import decimal
import io
import json
import re
import sys
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest
from avro_strategies import schemas_and_records
from decode_paths import path_chosen
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, assume, given, settings
from hypothesis_profiles import examples
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, formats, metrics_of
from contracts.engine import decode, python_pass
from contracts.engine.jvm_avro import PATH_ENV
from contracts.formats import avro
from contracts.formats.wire import encode_frame
from contracts.model import RuleMode

# The executors defined here run on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "events-value"
KAFKA = "key binary, value binary, topic string, partition int, offset long"
EVENT = {
    "type": "record",
    "name": "Event",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "tags", "type": {"type": "map", "values": "float"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


class ShapeCheck:
    """Rule type SHAPE: a per-record condition on a checksum of the record's repr, so a record
    that reached it with another Python type or value anywhere would likely get another outcome."""

    type = "SHAPE"

    def transform(self, ctx: Any, message: dict[str, Any]) -> bool:
        if message["name"] == "stop":
            raise ValueError("the rule cannot take a record named stop")
        return zlib.crc32(repr(message).encode()) % 3 != 0


class Stamp:
    """Rule type STAMP: a per-record transform appending the record's day to its name."""

    type = "STAMP"

    def transform(self, ctx: Any, message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "name": f"{message['name']}@{message['day'].isoformat()}"}


def _event(i: int, name: str) -> dict[str, Any]:
    return {
        "id": i,
        "name": name,
        "at": datetime.datetime(2026, 1, 1, 12, 0, i % 60, 123000, tzinfo=datetime.timezone.utc),
        "local": datetime.datetime(2026, 3, 1, 8, i % 60, 0, 456789),
        "day": datetime.date(2026, 1, 1) + datetime.timedelta(days=i),
        "clock": datetime.time(9, 30, i % 60, 5000),
        "price": decimal.Decimal(i).scaleb(-3) - decimal.Decimal("7.5"),
        "ref": uuid.UUID(int=i * 7919),
        "kind": "AB"[i % 2],
        "tags": {"w": i / 4},
        "note": None if i % 3 else f"note {i}",
    }


def _registry(rules: list[dict[str, Any]]) -> LocalRegistry:
    registry = LocalRegistry()
    payload = {"schema": json.dumps(EVENT), "ruleSet": {"domainRules": rules}}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    return registry


def _frame(registry: LocalRegistry, record: dict[str, Any]) -> bytes:
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(EVENT), record)
    return encode_frame(registry.get_version(SUBJECT, 1).schema_id, body.getvalue())


RULES = [
    # READ rules run last to first: shape, stamp, then the native rule reading what stamp wrote.
    {
        "name": "stamped",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "READ",
        "expr": "message.name.contains('@2026')",
    },
    {"name": "stamp", "kind": "TRANSFORM", "type": "STAMP", "mode": "READ"},
    {"name": "shape", "kind": "CONDITION", "type": "SHAPE", "mode": "READ"},
]
DLQ = {"dlq.topic": "bad-events"}


def _topic(spark: Any, registry: LocalRegistry, names: list[str]) -> Any:
    """Records named `names` at offsets 0…, then a tombstone and a corrupt frame."""
    rows = [(b"k", _frame(registry, _event(i, name)), "events", 0, i) for i, name in enumerate(names)]
    rows += [
        (b"t", None, "events", 0, len(names)),
        (b"c", b"\x00\x00\x00\x00\x01\xff", "events", 0, len(names) + 1),
    ]
    # One partition: one task, so an ERROR fails the job at the same first row either way.
    return spark.createDataFrame(rows, KAFKA).coalesce(1)


def _read(
    spark: Any, tmp: Path, fused: bool, names: list[str], monkeypatch: Any, on_failure: str = "DLQ"
) -> tuple[Any, ...]:
    """deserialize (decode policy DLQ) with the leading rules fused into the decode pass or not,
    the shape rule's failures going `on_failure`: the rows, the DLQ records, the counts, and how
    many Python passes the plan runs."""
    shape = {**RULES[2], "params": DLQ, "onFailure": on_failure}
    registry = _registry([*RULES[:2], shape])
    sink = LocalTopicSink(tmp)
    contract = DataContract(registry, SUBJECT, dlq_sink=sink, executors=[ShapeCheck(), Stamp()])
    topic = _topic(spark, registry, names)
    decoded = _deserialize(
        contract, topic, fused, monkeypatch, on_decode_error="DLQ", decode_dlq_topic="undecodable"
    )
    rows = sorted((tuple(row) for row in decoded.collect()), key=lambda row: row[-1])
    dlq = {
        topic: sorted((r.key, r.value, r.headers[-1]) for r in sink.read(topic)) for topic in sink.topics()
    }
    metrics = metrics_of(decoded)
    assert metrics is not None
    counts = {name: (c.passed, c.failed) for name, c in metrics.get().items()}
    return rows, dlq, counts, python_passes(decoded)


def _deserialize(contract: DataContract, df: Any, fused: bool, monkeypatch: Any, **options: Any) -> Any:
    """`contract.deserialize(df)` on the fastavro path, its leading rules in the decode pass or not."""
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(decode, "fuses", lambda decoder, leading: None)
        with path_chosen(PATH_ENV, "python"):
            return contract.deserialize(df, **options)


def python_passes(df: Any) -> int:
    """How many Arrow-batched Python passes the query's physical plan runs (a `mapInArrow` pass or
    an Arrow UDF, as the DLQ router is)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain()
    return out.getvalue().count("MapInArrow") + out.getvalue().count("ArrowEvalPython")


def test_rules_in_the_decode_pass_give_the_rows_dlq_records_and_counts_of_a_pass_of_their_own(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    names = [f"user {i}" for i in range(24)]
    fused = _read(spark, tmp_path / "fused", True, names, monkeypatch)
    apart = _read(spark, tmp_path / "apart", False, names, monkeypatch)
    assert fused[:3] == apart[:3]
    assert (fused[3], apart[3]) == (2, 3)  # the decode's and the router's; a rules pass apart
    rows, dlq, counts = fused[:3]
    # Some records fail the checksum and go to the rule's topic; the corrupt frame to the decode's.
    assert 0 < len(dlq["bad-events"]) < len(names)
    assert [key for key, _, _ in dlq["undecodable"]] == [b"c"]
    assert len(rows) == len(names) - len(dlq["bad-events"]) + 1  # and the tombstone
    assert all(row[1].endswith("@" + row[4].isoformat()) for row in rows if row[0] is not None)
    assert counts["shape"] == (len(rows) - 1, len(dlq["bad-events"]))
    assert counts["stamped"] == (len(rows) - 1, 0)


def test_a_rule_error_in_the_decode_pass_fails_the_job_as_its_own_pass_does(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    names = ["ann", "stop", "bob"]
    messages = []
    for fused in (True, False):
        with pytest.raises(Exception) as raised:
            _read(spark, tmp_path / str(fused), fused, names, monkeypatch, on_failure="ERROR")
        messages.append(str(raised.value))
    first_lines = [re.search(r"Rule 'shape' failed[^\n]*", message) for message in messages]
    assert first_lines[0] is not None and first_lines[1] is not None
    assert first_lines[0].group() == first_lines[1].group()


def test_leading_rules_are_fused_only_where_the_decode_pass_reads_what_a_rules_pass_would() -> None:
    registry = _registry(RULES)
    contract = DataContract(registry, SUBJECT, executors=[ShapeCheck(), Stamp()])
    plan = contract.plan(RuleMode.READ)
    leading = python_pass.leading_rules(plan)
    assert leading is not None and [r.rule.name for r in leading.rules] == ["shape", "stamp"]
    # The native rule leads: nothing to fuse.
    native_first = DataContract(_registry(RULES[1:] + RULES[:1]), SUBJECT, executors=[ShapeCheck(), Stamp()])
    assert python_pass.leading_rules(native_first.plan(RuleMode.READ)) is None


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=schemas_and_records())
def test_a_decoded_record_is_what_a_rules_pass_reads_back_from_its_struct(
    case: tuple[Any, list[Any]],
) -> None:
    """What fusing relies on: a rule sees the same Python values either way (repr: types, time
    zones and decimal digits too) for a schema whose unions tell their branch by value."""
    schema, generated = case
    assume(not avro.chooses_union_branches(schema))
    decoded = []
    for record in generated:
        body = io.BytesIO()
        schemaless_writer(body, schema, record)
        decoded.append(formats.get("AVRO").decode(body.getvalue(), schema, schema))
    record_type = avro.arrow_type(avro.struct_type(schema))
    read = avro.read_struct(avro.records_to_struct(decoded, schema, record_type), schema)
    assert read.unreadable == {}
    assert [repr(r) for r in read.records] == [repr(r) for r in decoded]


class Carry:
    """Rule type CARRY: a per-record migration, run in Python, returning the record as it is."""

    type = "CARRY"

    def transform(self, ctx: Any, message: dict[str, Any]) -> dict[str, Any]:
        return message


class FloatAmount:
    """Rule type FLOAT_AMOUNT: whether the record's double field holds a Python float."""

    type = "FLOAT_AMOUNT"

    def transform(self, ctx: Any, message: dict[str, Any]) -> bool:
        return isinstance(message["amount"], float)


def test_a_record_migrated_in_the_decode_pass_reaches_the_rules_as_a_rules_pass_reads_it(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A migrated record's new double field takes its default from JSON (the int 0): the rules see
    the float a rules pass reads back from Spark, in both plans."""
    major = "application.major.version"
    fields = [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]
    amount = {"name": "amount", "type": "double", "default": 0}
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibilityGroup=major)
    read_rule = {"name": "floatAmount", "kind": "CONDITION", "type": "FLOAT_AMOUNT", "mode": "READ"}
    upgrade = {"name": "carry", "kind": "TRANSFORM", "type": "CARRY", "mode": "UPGRADE"}
    for version_fields, version, rules in [
        (fields, "1", {}),
        ([*fields, amount], "2", {"migrationRules": [upgrade], "domainRules": [read_rule]}),
    ]:
        schema = {**EVENT, "fields": version_fields}
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {major: version}},
            "ruleSet": rules,
        }
        registry.register_schema(SUBJECT, Schema.from_dict(payload))
    rows = []
    for offset, (version, record) in enumerate(
        [(1, {"id": 1, "name": "old"}), (2, {"id": 2, "name": "new", "amount": 2.5})]
    ):
        registered = registry.get_version(SUBJECT, version)
        body = io.BytesIO()
        schemaless_writer(body, parse_schema(json.loads(registered.schema.schema_str)), record)
        rows.append((b"k", encode_frame(registered.schema_id, body.getvalue()), "events", 0, offset))
    results = []
    for fused in (True, False):
        contract = DataContract(registry, SUBJECT, executors=[Carry(), FloatAmount()])
        decoded = _deserialize(contract, spark.createDataFrame(rows, KAFKA), fused, monkeypatch)
        results.append((sorted(tuple(row) for row in decoded.collect()), python_passes(decoded)))
    assert results[0][0] == results[1][0]
    assert [row[:3] for row in results[0][0]] == [(1, "old", 0.0), (2, "new", 2.5)]
    assert (results[0][1], results[1][1]) == (1, 2)
