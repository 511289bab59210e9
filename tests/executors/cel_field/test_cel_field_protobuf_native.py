"""CEL_FIELD on Protobuf records natively (docs/semantics.md §4.9): the walk unrolled into Spark
expressions over the message's struct gives, for every rule of a corpus, the outcome and record of
its Python twin (the Protobuf walk, itself checked against the reference in
test_cel_field_protobuf.py) on generated messages; rules visiting values Spark holds otherwise than
CEL sees them stay in Python."""

from __future__ import annotations

import base64
import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts.formats.protobuf import ProtobufFormat
from contracts.formats.protobuf.values import from_spark, to_message, to_record, to_spark
from contracts.model import Rule, RuleKind, RuleMode
from executors.cel_field.executor import CelFieldExecutor
from executors.protocol import BatchStep, NativeStep, RuleContext, Step

FORMAT = ProtobufFormat()
SCHEMA = FORMAT.parse(
    """syntax = "proto3";
package diff;
import "confluent/meta.proto";
import "google/protobuf/wrappers.proto";
message Doc {
  string name = 1 [(confluent.field_meta).tags = "PII"];
  int32 age = 2;
  int64 big = 3;
  double score = 4;
  float ratio = 5;
  bool active = 6 [(confluent.field_meta).tags = "PII"];
  bytes blob = 7 [(confluent.field_meta).tags = "PII"];
  optional string note = 8 [(confluent.field_meta).tags = "PII"];
  oneof contact {
    string email = 9 [(confluent.field_meta).tags = "PII"];
    sint32 phone = 10;
  }
  Inner inner = 11;
  repeated Inner items = 12;
  map<string, Inner> by_key = 13;
  repeated string aliases = 14 [(confluent.field_meta).tags = "PII"];
  google.protobuf.StringValue nick = 15;
  google.protobuf.BoolValue flag = 16;
  Level level = 17;
  map<string, string> labels = 18;
  repeated bool bits = 19;
  message Inner {
    string city = 1 [(confluent.field_meta).tags = "PII"];
    bool ok = 2;
    int32 n = 3;
  }
  enum Level { LOW = 0; HIGH = 1; }
}
""",
    (),
)
METADATA_TAGS = {
    "diff.Doc.age": ("AUDIT",),
    "**.n": ("AUDIT",),
    "google.protobuf.StringValue.value": ("PII",),
}
# (kind, expression, rule tags): every rule here compiles natively.
CORPUS: list[tuple[str, str, tuple[str, ...]]] = [
    ("TRANSFORM", "typeName == 'STRING' ; value + '-x'", ()),
    ("TRANSFORM", "'****'", ("PII",)),  # bytes and bool fields cannot hold it: the rule fails
    ("TRANSFORM", "typeName == 'STRING' ; '****'", ("PII",)),
    ("TRANSFORM", "typeName == 'INT' ; value + 1", ()),  # int32's maximum overflows its field
    ("TRANSFORM", "typeName == 'LONG' ; value * 2", ()),
    ("TRANSFORM", "typeName == 'DOUBLE' || typeName == 'FLOAT' ; value * 2.0", ()),
    ("TRANSFORM", "typeName == 'FLOAT' ; value * 1e36", ()),  # beyond float's range: infinity
    ("TRANSFORM", "typeName == 'BOOLEAN' ; !value", ()),
    ("TRANSFORM", "typeName == 'BYTES' ; value + b'!'", ()),
    ("TRANSFORM", "name == 'city' ; fullName + ':' + string(message.n) + ':' + string(message.ok)", ()),
    ("TRANSFORM", "name == 'value' ; value + '~'", ()),  # wrappers: the BoolValue's fails
    ("TRANSFORM", "typeName == 'INT' ; value - 1", ("AUDIT",)),
    ("TRANSFORM", "typeName == 'STRING' ; null", ()),
    ("TRANSFORM", "typeName == 'INT' ; true", ()),
    ("CONDITION", "typeName == 'STRING' ; size(value) < 5", ()),
    ("CONDITION", "typeName == 'INT' ; value < 100", ("AUDIT",)),  # untagged bools holding false fail
    ("CONDITION", "typeName != 'BOOLEAN' ; size(value) > 0", ("PII",)),
    ("CONDITION", "typeName == 'LONG' ; value >= 0", ()),
]  # fmt: skip
TEXT = st.text(st.sampled_from("ab-é"), max_size=6)
INT32 = st.integers(-(2**31), 2**31 - 1)
INNER = st.fixed_dictionaries({"city": TEXT, "ok": st.booleans(), "n": st.integers(-200, 200)})


@st.composite
def docs(draw: st.DrawFn) -> dict[str, Any]:
    """A Doc record as the reference's CEL sees it (an unset oneof member left out)."""
    doc = draw(
        st.fixed_dictionaries(
            {
                "name": TEXT,
                "age": st.one_of(st.integers(-5, 150), st.just(2**31 - 1)),
                "big": st.integers(-(2**62), 2**62),
                "score": st.floats(-1e6, 1e6),
                "ratio": st.floats(-1e3, 1e3, width=32) | st.just(999.5),
                "active": st.booleans(),
                "blob": st.binary(max_size=4),
                "note": st.none() | TEXT,
                "inner": st.none() | INNER,
                "items": st.lists(INNER, max_size=2),
                "by_key": st.dictionaries(TEXT, INNER, max_size=2),
                "aliases": st.lists(TEXT, max_size=2),
                "nick": st.none() | TEXT,
                "flag": st.none() | st.booleans(),
                "level": st.sampled_from([0, 1]),
                "labels": st.dictionaries(TEXT, TEXT, max_size=2),
                "bits": st.lists(st.booleans(), max_size=2),
            }
        )
    )
    contact = draw(st.sampled_from(["email", "phone", None]))
    if contact == "email":
        doc["email"] = draw(TEXT)
    elif contact == "phone":
        doc["phone"] = draw(INT32)
    return conformed(doc)


def conformed(record: Any) -> Any:
    """The record as a Doc message holds it (floats as float32)."""
    return to_record(to_message(record, SCHEMA.message()))


def compiled(kind: str, expr: str, tags: tuple[str, ...]) -> Step:
    rule = Rule("r", RuleKind(kind), RuleMode.WRITE, "CEL_FIELD", expr, tags)
    spark_type = FORMAT.spark_type(SCHEMA)
    ctx = RuleContext(rule, "d-value", 1, RuleMode.WRITE, SCHEMA, spark_type, FORMAT, METADATA_TAGS)
    return CelFieldExecutor().compile(ctx)


def spark_row(record: dict[str, Any]) -> dict[str, Any]:
    """The record as createDataFrame takes a row of the Doc struct (maps as dicts)."""
    row = to_spark(record, SCHEMA.message())
    return {**row, "by_key": dict(row["by_key"]), "labels": dict(row["labels"])}


@pytest.fixture(scope="module")
def steps() -> list[Step]:
    """The corpus compiled once (compiling CEL raises the recursion limit, which Hypothesis minds)."""
    made = [compiled(*rule) for rule in CORPUS]
    assert all(isinstance(step, NativeStep) for step in made), [
        (rule, getattr(step, "why_not_native", None)) for rule, step in zip(CORPUS, made, strict=True)
    ]
    return made


@pytest.mark.spark
@settings(max_examples=examples(2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(docs(), min_size=8, max_size=14))
def test_native_steps_match_the_protobuf_walk(
    spark: Any, steps: list[Step], records: list[dict[str, Any]]
) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([spark_row(r) for r in records], FORMAT.spark_type(SCHEMA))
    record = F.struct(*[F.col(name) for name in df.columns])
    columns = []
    for index, step in enumerate(steps):
        assert isinstance(step, NativeStep)
        outcome = step.build(record)
        columns.append(F.coalesce(outcome.passed, F.lit(False)).alias(f"passed{index}"))
        if outcome.record is not None:
            columns.append(outcome.record.alias(f"record{index}"))

    rows = df.select(*columns).collect()

    for index, ((kind, expr, tags), step) in enumerate(zip(CORPUS, steps, strict=True)):
        assert isinstance(step, NativeStep) and isinstance(step.batch, BatchStep)
        expected = step.batch.factory()(copy.deepcopy(records))
        for row, original, twin in zip(rows, records, expected, strict=True):
            assert row[f"passed{index}"] == twin.passed, (expr, tags, repr(original), twin.reason)
            if twin.passed and kind == "TRANSFORM":
                native = from_spark(row[f"record{index}"].asDict(recursive=True), SCHEMA.message())
                assert conformed(native) == conformed(twin.record), (expr, original)


@pytest.mark.parametrize(
    ("field", "expr", "why"),
    [
        ("uint32 count = 2;", "typeName == 'INT' ; value", "a visited uint value"),
        ('import "google/protobuf/timestamp.proto";|google.protobuf.Timestamp at = 2;', "value", "timestamp"),
        ('import "google/protobuf/duration.proto";|google.protobuf.Duration wait = 2;', "value", "Duration"),
        ('import "confluent/type/decimal.proto";|confluent.type.Decimal amount = 2;', "value", "decimal"),
        ("string s = 2;", "typeName == 'STRING' ; b'raw'", "the protobuf runtime converts"),
        ("bool b = 2;", "typeName == 'BOOLEAN' ; 1", "the protobuf runtime converts"),
    ],
)
def test_values_cel_sees_otherwise_than_spark_stay_in_python(field: str, expr: str, why: str) -> None:
    imports, _, declared = field.rpartition("|")
    parsed = FORMAT.parse(f'syntax = "proto3"; {imports} message M {{ string id = 1; {declared} }}', ())
    rule = Rule("r", RuleKind.TRANSFORM, RuleMode.WRITE, "CEL_FIELD", expr, ())
    ctx = RuleContext(
        rule, "m-value", 1, RuleMode.WRITE, parsed, FORMAT.spark_type(parsed), schema_format=FORMAT
    )

    step = CelFieldExecutor().compile(ctx)

    assert isinstance(step, BatchStep) and why in (step.why_not_native or ""), step
    others = dataclasses.replace(rule, expr="name == 'id' ; value + '!'")  # leaves that field alone
    assert isinstance(CelFieldExecutor().compile(dataclasses.replace(ctx, rule=others)), NativeStep)


@pytest.mark.parametrize("tags", [(), ("UNUSED",)])
def test_a_bool_value_holding_false_fails_a_condition_only_by_its_own_field(
    tmp_path: Path, tags: tuple[str, ...]
) -> None:
    """As in the reference: untagged, its `value` passes the guard-false condition; under tags
    that leave it unselected, its plain false fails the record."""
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor as Reference
    from confluent_kafka.serialization import MessageField, SerializationContext
    from protoc_classes import generated_module
    from reference_oracle import mock_client

    text = 'syntax = "proto3"; package b; import "google/protobuf/wrappers.proto";'
    text += " message M { google.protobuf.BoolValue flag = 1; string s = 2; }"
    pb2 = generated_module(tmp_path, "contracts_test_bool_value.proto", text)
    expr = "typeName == 'STRING' ; size(value) < 5"
    rule = {
        "name": "r",
        "kind": "CONDITION",
        "type": "CEL_FIELD",
        "mode": "WRITE",
        "expr": expr,
        "tags": list(tags),
    }
    schema = base64.standard_b64encode(pb2.DESCRIPTOR.serialized_pb).decode("ascii")
    client = mock_client(f"mock://bool-value-{len(tags)}")
    client.register_schema("t-value", ReferenceSchema.from_dict(
        {"schemaType": "PROTOBUF", "schema": schema, "ruleSet": {"domainRules": [rule]}}
    ))  # fmt: skip
    rules = RuleRegistry()
    rules.register_executor(Reference())
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = ProtobufSerializer(pb2.M, client, conf=conf, rule_registry=rules)
    message = pb2.M(s="ab")
    message.flag.value = False
    try:
        serializer(message, SerializationContext("t", MessageField.VALUE))
        theirs = True
    except Exception:
        theirs = False
    parsed = FORMAT.parse(text, ())
    ctx = RuleContext(
        Rule("r", RuleKind.CONDITION, RuleMode.WRITE, "CEL_FIELD", expr, tags),
        "t-value",
        1,
        RuleMode.WRITE,
        parsed,
        FORMAT.spark_type(parsed),
        schema_format=FORMAT,
    )
    step = CelFieldExecutor().compile(ctx)
    assert isinstance(step, NativeStep) and isinstance(step.batch, BatchStep)

    (ours,) = step.batch.factory()([to_record(message)])

    assert ours.passed == theirs == (not tags)
