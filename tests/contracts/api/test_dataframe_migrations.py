"""Migration rules on real DataFrames: each sees the record it migrates, field rules across
versions, and a migrated record the target cannot read is undecodable, naming the rule."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from dataframe_users import failure

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, formats
from contracts.engine.python_migration import project
from contracts.errors import ContractError, SerializationError
from contracts.formats.avro import parse_schema
from contracts.formats.wire import encode_frame

# -- migration rules see the record they migrate ------------------------------------------------

ITEMS = "items-value"
ITEM_V1 = {
    "type": "record",
    "name": "Item",
    "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "int"}],
}
ITEM_V2 = {**ITEM_V1, "fields": [ITEM_V1["fields"][0], {"name": "quantity", "type": "int"}]}
ITEM_V3 = {**ITEM_V2, "fields": [*ITEM_V2["fields"], {"name": "total", "type": "long"}]}


def migration(name: str, mode: str, expr: str, kind: str = "TRANSFORM", **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "type": "CEL", "mode": mode, "expr": expr, **fields}


def register_versions(
    subject: str, versions: list[tuple[dict[str, Any], list[dict[str, Any]]]]
) -> LocalRegistry:
    """Each version in its own major, so a rename needs no default to be registered."""
    registry = LocalRegistry()
    registry.set_config(subject, compatibilityGroup="major")
    for major, (schema, rules) in enumerate(versions, start=1):
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {"major": str(major)}},
            "ruleSet": {"migrationRules": rules},
        }
        registry.register_schema(subject, Schema.from_dict(payload))
    return registry


ITEM_VERSIONS = [
    (ITEM_V1, []),
    (
        ITEM_V2,
        [
            # First in the list: on UPGRADE it reads the writer's record, on DOWNGRADE (reversed,
            # after qtyDown) the version-1 record qtyDown made; either way it has `qty`.
            migration("positive", "UPDOWN", "message.qty > 0", kind="CONDITION", onFailure="DLQ,NONE",
                      params={"dlq.topic": "nonpositive"}),
            migration("qtyUp", "UPGRADE", "{'id': message.id, 'quantity': message.qty}"),
            migration("qtyDown", "DOWNGRADE", "{'id': message.id, 'qty': message.quantity}"),
        ],
    ),
    (
        ITEM_V3,
        [
            # Receives what version 2's migration left: a version-2 record.
            migration("totalUp", "UPGRADE",
                      "{'id': message.id, 'quantity': message.quantity, 'total': message.quantity * 2}"),
            migration("totalDown", "DOWNGRADE", "{'id': message.id, 'quantity': message.quantity}"),
        ],
    ),
]  # fmt: skip


def test_cel_migration_rules_compile_against_the_record_they_receive(
    spark: Any, sink: LocalTopicSink
) -> None:
    registry = register_versions(ITEMS, ITEM_VERSIONS)
    v1_rows = spark.createDataFrame([(1, 5), (2, 0)], "id long, qty int")
    latest = DataContract(registry, ITEMS, version=3, dlq_sink=sink)
    assert [tuple(row) for row in latest.read(v1_rows, writer_version=1).collect()] == [(1, 5, 10)]
    (rejected,) = sink.read("nonpositive")
    headers = dict(rejected.headers)
    assert (headers["__rule.name"], headers["__rule.mode"]) == (b"positive", b"UPGRADE")

    v3_rows = spark.createDataFrame([(1, 5, 10), (2, 0, 0)], "id long, quantity int, total long")
    oldest = DataContract(registry, ITEMS, version=1, dlq_sink=sink)
    # Downgrading, `positive` fails the second record and its action pair says NONE.
    assert sorted(tuple(row) for row in oldest.read(v3_rows, writer_version=3).collect()) == [(1, 5), (2, 0)]
    middle = DataContract(registry, ITEMS, version=2, dlq_sink=sink)
    v2_rows = spark.createDataFrame([(3, 7)], "id long, quantity int")
    assert [tuple(row) for row in latest.read(v2_rows, writer_version=2).collect()] == [(3, 7, 14)]
    assert [tuple(row) for row in middle.read(v1_rows.where("id = 1"), writer_version=1).collect()] == [
        (1, 5)
    ]


def test_a_migration_rule_reading_a_field_its_record_lacks_is_refused_naming_that_record(spark: Any) -> None:
    typo = migration("qtyUp", "UPGRADE", "{'id': message.id, 'quantity': message.quantity}")
    registry = register_versions(ITEMS, [(ITEM_V1, []), (ITEM_V2, [typo])])
    contract = DataContract(registry, ITEMS, version=2)
    rows = spark.createDataFrame([(1, 5)], "id long, qty int")
    with pytest.raises(ContractError, match="reads field 'quantity'") as caught:
        contract.read(rows, writer_version=1)
    error = caught.value
    assert (error.subject, error.version, error.rule, error.position) == (ITEMS, 2, "qtyUp", "1:40")
    assert "receives records of version 1" in str(error)


SECRET_V1 = {
    "type": "record",
    "name": "Secret",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "email", "type": "string"},
    ],
}
SECRET_V2 = {
    **SECRET_V1,
    "fields": [
        SECRET_V1["fields"][0],
        {"name": "socialSecurityNumber", "type": "string", "confluent:tags": ["PII"]},
        SECRET_V1["fields"][2],
    ],
}
# Version 2 tags `email` in its metadata: its field rules see that tag on either version's record.
SECRET_V2_TAGS = {"**.email": ["PII"]}
SECRETS = "secrets-value"


def _rename(name: str, mode: str, old: str, new: str) -> dict[str, Any]:
    expr = f"$merge([$sift($, function($v, $k) {{$k != '{old}'}}), {{'{new}': $.'{old}'}}])"
    return {"name": name, "kind": "TRANSFORM", "type": "JSONATA", "mode": mode, "expr": expr}


SSN_UP = _rename("ssnUp", "UPGRADE", "ssn", "socialSecurityNumber")
SSN_DOWN = _rename("ssnDown", "DOWNGRADE", "socialSecurityNumber", "ssn")
MASK = {"name": "maskPii", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "UPDOWN", "tags": ["PII"]}


def register_secrets(migrations: list[dict[str, Any]]) -> LocalRegistry:
    registry = LocalRegistry()
    registry.set_config(SECRETS, compatibilityGroup="major")
    for major, (schema, rules, tags) in enumerate(
        [(SECRET_V1, [], {}), (SECRET_V2, migrations, SECRET_V2_TAGS)], 1
    ):
        payload = {
            "schema": json.dumps(schema),
            "metadata": {"properties": {"major": str(major)}, "tags": tags},
            "ruleSet": {"migrationRules": rules},
        }
        registry.register_schema(SECRETS, Schema.from_dict(payload))
    return registry


def kafka_rows(
    spark: Any, registry: LocalRegistry, version: int, records: list[dict[str, Any]], subject: str = SECRETS
) -> Any:
    """The records framed by `version`, as a Kafka source's rows (key, value, topic, partition, offset)."""
    registered = registry.get_version(subject, version)
    schema = fastavro.parse_schema(json.loads(registered.schema.schema_str))
    topic = subject.removesuffix("-value")
    rows = []
    for offset, record in enumerate(records):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema, record)
        rows.append((b"k%d" % offset, encode_frame(registered.schema_id, body.getvalue()), topic, 0, offset))
    return spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")


def secrets_read(contract: DataContract, df: Any, writer: int, framed: bool) -> list[tuple[Any, ...]]:
    """The records `contract` reads from `df` (decoded rows of `writer`, or frames), as tuples."""
    if framed:
        read = contract.deserialize(df, key_col="key").drop("key", "topic", "partition", "offset")
    else:
        read = contract.read(df, writer_version=writer)
    return sorted(tuple(row) for row in read.collect())


V1_SECRETS = [{"id": 1, "ssn": "123", "email": "a@x"}, {"id": 2, "ssn": "4567", "email": "b@y"}]
V2_SECRETS = [{"id": 1, "socialSecurityNumber": "123", "email": "a@x"}]


@pytest.mark.parametrize("framed", [False, True], ids=["read", "deserialize"])
@pytest.mark.parametrize(
    "rules",
    [[{**MASK, "expr": "'XXX'"}, SSN_UP, SSN_DOWN], [SSN_UP, SSN_DOWN, {**MASK, "expr": "'XXX'"}]],
    ids=["mask-receives-version-1", "mask-receives-version-2"],
)
def test_a_cel_field_transform_masks_the_tagged_fields_across_versions(
    spark: Any, sink: LocalTopicSink, rules: list[dict[str, Any]], framed: bool
) -> None:
    """As Java's client runs it, a CEL_FIELD migration rule walks the record it receives (the writer's
    first in the list, the renamed one after a rename; on DOWNGRADE the list runs reversed), with that
    record's inline tags and the rule version's metadata tags (docs/semantics.md §4.7). The Python
    reference fails such a rule on every record instead."""
    registry = register_secrets(rules)
    newer = DataContract(registry, SECRETS, version=2, dlq_sink=sink)
    older = DataContract(registry, SECRETS, version=1, dlq_sink=sink)
    if framed:
        v1_rows, v2_rows = (
            kafka_rows(spark, registry, 1, V1_SECRETS),
            kafka_rows(spark, registry, 2, V2_SECRETS),
        )
    else:
        v1_rows = spark.createDataFrame(
            [tuple(r.values()) for r in V1_SECRETS], "id long, ssn string, email string"
        )
        v2_rows = spark.createDataFrame(
            [tuple(r.values()) for r in V2_SECRETS], "id long, socialSecurityNumber string, email string"
        )
    assert secrets_read(newer, v1_rows, 1, framed) == [(1, "XXX", "XXX"), (2, "XXX", "XXX")]
    assert secrets_read(older, v2_rows, 2, framed) == [(1, "XXX", "XXX")]
    assert secrets_read(newer, v2_rows, 2, framed) == [(1, "123", "a@x")]  # no migration, no mask


@pytest.mark.parametrize("framed", [False, True], ids=["read", "deserialize"])
@pytest.mark.parametrize("on_failure", ["NONE", "DLQ"])
def test_a_cel_field_condition_checks_the_tagged_fields_across_versions(
    spark: Any, sink: LocalTopicSink, on_failure: str, framed: bool
) -> None:
    """Record 2's social security number has four digits: the UPDOWN condition fails it upgrading
    (on the version-2 record ssnUp made) and downgrading (on the version-1 record ssnDown made);
    its action decides."""
    check = {
        "name": "shortPii",
        "kind": "CONDITION",
        "type": "CEL_FIELD",
        "mode": "UPDOWN",
        "tags": ["PII"],
        "expr": "size(value) == 3",
        "onFailure": on_failure,
        "params": {"dlq.topic": "long-pii"},
    }
    registry = register_secrets([SSN_UP, check, SSN_DOWN])
    newer = DataContract(registry, SECRETS, version=2, dlq_sink=sink)
    older = DataContract(registry, SECRETS, version=1, dlq_sink=sink)
    v2_secrets = [*V2_SECRETS, {"id": 2, "socialSecurityNumber": "4567", "email": "b@y"}]
    if framed:
        v1_rows, v2_rows = (
            kafka_rows(spark, registry, 1, V1_SECRETS),
            kafka_rows(spark, registry, 2, v2_secrets),
        )
    else:
        v1_rows = spark.createDataFrame(
            [tuple(r.values()) for r in V1_SECRETS], "id long, ssn string, email string"
        )
        v2_rows = spark.createDataFrame(
            [tuple(r.values()) for r in v2_secrets], "id long, socialSecurityNumber string, email string"
        )
    kept = [(1, "123", "a@x"), (2, "4567", "b@y")] if on_failure == "NONE" else [(1, "123", "a@x")]
    assert secrets_read(newer, v1_rows, 1, framed) == kept
    assert secrets_read(older, v2_rows, 2, framed) == kept
    if on_failure == "DLQ":
        rejected = sink.read("long-pii")
        headers = [dict(record.headers) for record in rejected]
        assert sorted((h["__rule.name"], h["__rule.mode"]) for h in headers) == [
            (b"shortPii", b"DOWNGRADE"),
            (b"shortPii", b"UPGRADE"),
        ]
        if framed:  # the frames as they arrived
            assert {record.key for record in rejected} == {b"k1"}


# -- a migrated record the target cannot read is undecodable, naming the rule ------------------

ITEM_V1_NOTED = {**ITEM_V1, "fields": [*ITEM_V1["fields"], {"name": "note", "type": "string", "default": ""}]}
ITEM_RECORDS = [{"id": 1, "qty": 5}, {"id": 2, "qty": 0}]


def assert_undecodable(
    spark: Any, sink: LocalTopicSink, rule: dict[str, Any], why: str, kept: list[tuple[Any, ...]]
) -> None:
    """Version 2 (ITEM_V1_NOTED) migrates ITEM_RECORDS with `rule`; those not `kept` cannot be read
    as version 2, for the reason `why`: `read` fails naming it, `deserialize` fails naming the
    first such record's position under ERROR and routes each one's frame to the decode DLQ under DLQ."""
    registry = register_versions(ITEMS, [(ITEM_V1, []), (ITEM_V1_NOTED, [rule])])
    contract = DataContract(registry, ITEMS, version=2, dlq_sink=sink)
    rows = spark.createDataFrame([tuple(r.values()) for r in ITEM_RECORDS], "id long, qty int")
    name, first, _ = failure(contract.read(rows, writer_version=1))
    assert name == "SparkRuntimeException" and first.startswith(f"[USER_RAISED_EXCEPTION] {why}")
    frames = kafka_rows(spark, registry, 1, ITEM_RECORDS, subject=ITEMS)
    offset = next(i for i, record in enumerate(ITEM_RECORDS) if (record["id"], record["qty"], "") not in kept)
    where = (
        f"cannot deserialize the record at topic items, partition 0, offset {offset} of subject 'items-value'"
    )
    assert f"{where}: {why}" in failure(contract.deserialize(frames.where(f"offset = {offset}")))[2]
    read = contract.deserialize(
        frames, key_col="key", on_decode_error="DLQ", decode_dlq_topic="items-undecodable"
    )
    assert sorted(tuple(row) for row in read.select("id", "qty", "note").collect()) == kept
    routed = sink.read("items-undecodable")
    assert len(routed) == len(ITEM_RECORDS) - len(kept)
    framed = {row["key"]: row["value"] for row in frames.collect()}
    for record in routed:
        assert record.value == framed[record.key]
        assert dict(record.headers)["__rule.exception"] == why.encode()


NOT_RECORDS = [
    ("JSONATA", "qty > 0 ? $ : 42", "42"),
    ("JSONATA", "qty > 0 ? $ : 'abc'", "'abc'"),
    ("JSONATA", "qty > 0 ? $ : [1, 2]", "[1, 2]"),
    ("CEL", "message.qty > 0 ? message : 42", "42"),
    ("CEL", "message.qty > 0 ? message : [message.qty]", "[0]"),
]


@pytest.mark.parametrize(
    ("rule_type", "expr", "shown"), NOT_RECORDS, ids=[f"{t}:{e}" for t, e, _ in NOT_RECORDS]
)
def test_a_migration_transform_whose_result_is_no_record_makes_the_record_undecodable(
    spark: Any, sink: LocalTopicSink, rule_type: str, expr: str, shown: str
) -> None:
    """Not a rule failure, and not a crash of the whole job: the record cannot be read as the
    target, like one missing a field (docs/semantics.md §6.5)."""
    rule = {"name": "reshape", "kind": "TRANSFORM", "type": rule_type, "mode": "UPGRADE", "expr": expr}
    named = "migration rule 'reshape' in UPGRADE on subject 'items-value' version 2"
    why = f"{named} returned {shown}, not a record"
    assert_undecodable(spark, sink, rule, why, kept=[(1, 5, "")])


UNFIT_FIELDS = [
    ("name == 'qty' ; 'abc'", "Item.qty is <abc> of type <class 'str'> expected int", []),
    (
        "name == 'qty' ; value * 1000000000",
        "Item.qty is <5000000000> of type <class 'int'> expected int",
        [(2, 0, "")],
    ),
]


@pytest.mark.parametrize(("expr", "invalid", "kept"), UNFIT_FIELDS, ids=["a string", "beyond int"])
def test_a_cel_field_migration_result_its_field_cannot_hold_makes_the_record_undecodable(
    spark: Any, sink: LocalTopicSink, expr: str, invalid: str, kept: list[tuple[Any, ...]]
) -> None:
    """Not a failure of the rule: the migrated record does not fit the target (docs/semantics.md
    §4.7, §6.4)."""
    rule = {"name": "scale", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "UPGRADE", "expr": expr}
    made_by = "(the result of migration rule 'scale' in UPGRADE on subject 'items-value' version 2)"
    why = f"migrated record does not fit the target schema: {invalid} {made_by}"
    assert_undecodable(spark, sink, rule, why, kept)


WRONG_SHAPES = [
    {"id": 1, "qty": {"a": 1}, "note": "n"},
    {"id": "1", "qty": 5},
    {"id": 1, "qty": None},
    {"id": 1, "qty": 1.5},
    {"id": 1, "qty": True},
    {1: 2},
    {"id": 2**70, "qty": 1},
    {"id": float("inf"), "qty": 1},
    {"id": 1, "qty": 1, "note": b"x"},
    {"id": 1, "qty": 1, "note": ["x"]},
    42,
    "abc",
    [1, 2],
]


@pytest.mark.parametrize("value", WRONG_SHAPES, ids=repr)
def test_whatever_a_migration_leaves_the_target_cannot_hold_is_a_serialization_error(value: Any) -> None:
    """The projection onto the target checks every value (docs/semantics.md §6.4): no shape a rule
    may produce reaches the Arrow conversion, where it failed the whole pass before."""
    with pytest.raises(SerializationError, match="migrated record"):
        project(value, parse_schema(ITEM_V1_NOTED), formats.get("AVRO"))


def test_a_migration_error_in_python_fails_the_job_as_a_native_one(spark: Any, sink: LocalTopicSink) -> None:
    """Migrations in Python (reading a decoded DataFrame, and inside the decode pass) fail with the
    first line a native ERROR rule gives."""
    positive, up, down = ITEM_VERSIONS[1][1]
    registry = register_versions(
        ITEMS, [(ITEM_V1, []), (ITEM_V2, [{**positive, "onFailure": "ERROR,NONE"}, up, down])]
    )
    contract = DataContract(registry, ITEMS, version=2, dlq_sink=sink)
    expected = (
        "SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] Rule 'positive' failed in UPGRADE on subject 'items-value' version 2:"
        " Rule expr failed: message.qty > 0",
    )
    rows = spark.createDataFrame([(1, 5), (2, 0)], "id long, qty int")
    assert failure(contract.read(rows, writer_version=1))[:2] == expected
    writer = registry.get_version(ITEMS, 1)
    frames = []
    for record in ({"id": 1, "qty": 5}, {"id": 2, "qty": 0}):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, fastavro.parse_schema(ITEM_V1), record)
        frames.append((encode_frame(writer.schema_id, body.getvalue()),))
    assert failure(contract.deserialize(spark.createDataFrame(frames, "value binary")))[:2] == expected
