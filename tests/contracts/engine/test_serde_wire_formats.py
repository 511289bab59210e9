"""The newer wire formats on DataFrames (docs/semantics.md §8.1): V1 frames naming the schema by
GUID, and schema ids in Kafka headers before a bare body, decoded among V0 frames and written by
`serialize` as `schema_id_serializer` asks."""

from __future__ import annotations

import dataclasses
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.errors import ContractError
from contracts.formats.wire import encode_frame, encode_prefix
from contracts.model import RegisteredSchema

SUBJECT = "users-value"
MAJOR = "application.major.version"
KAFKA = "key binary, value binary, topic string, partition int, offset long"
HEADERS = "array<struct<key: string, value: binary>>"


def _record(fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": "User", "namespace": "com.acme", "fields": fields}


V1 = _record([{"name": "name", "type": "string"}, {"name": "ssn", "type": "string"}])
V2 = _record([*V1["fields"], {"name": "age", "type": "int", "default": 0}])
V3 = _record([{"name": "name", "type": "string"}, {"name": "socialSecurityNumber", "type": "string"}])
V4 = _record([*V3["fields"], {"name": "city", "type": "string", "default": "?"}])
RENAMES = [
    {
        "name": "ssnUp",
        "kind": "TRANSFORM",
        "type": "JSONATA",
        "mode": "UPGRADE",
        "expr": "$merge([$sift($, function($v, $k) {$k != 'ssn'}), {'socialSecurityNumber': $.ssn}])",
    },
    {
        "name": "ssnDown",
        "kind": "TRANSFORM",
        "type": "JSONATA",
        "mode": "DOWNGRADE",
        "expr": "$merge([$sift($, function($v, $k) {$k != 'socialSecurityNumber'}),"
        " {'ssn': $.socialSecurityNumber}])",
    },
]
WRITTEN = {
    1: {"name": "ann", "ssn": "111"},
    2: {"name": "bob", "ssn": "222", "age": 42},
    3: {"name": "cy", "socialSecurityNumber": "333"},
}
EXPECTED = {  # each as version 3 reads it
    1: {"name": "ann", "socialSecurityNumber": "111"},
    2: {"name": "bob", "socialSecurityNumber": "222"},
    3: {"name": "cy", "socialSecurityNumber": "333"},
}


@pytest.fixture
def registry() -> LocalRegistry:
    """Versions 1 and 2 of major version 1, version 3 of major version 2 (renaming ssn)."""
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibilityGroup=MAJOR)
    for schema, major, migrations in ((V1, "1", []), (V2, "1", []), (V3, "2", RENAMES)):
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


def body(registered: RegisteredSchema, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(json.loads(registered.schema.schema_str)), record)
    return out.getvalue()


def guid_of(registered: RegisteredSchema) -> uuid.UUID:
    assert registered.guid is not None
    return uuid.UUID(registered.guid)


def kafka_rows(spark: Any, rows: list[tuple[bytes | None, list[tuple[str, bytes | None]] | None]]) -> Any:
    """Kafka-source rows (includeHeaders): a value and its headers each, at offsets 0, 1, …"""
    data = [
        (None, value, "users", 0, offset, None if headers is None else [tuple(h) for h in headers])
        for offset, (value, headers) in enumerate(rows)
    ]
    return spark.createDataFrame(data, f"{KAFKA}, headers {HEADERS}")


def records_of(decoded: Any, fields: tuple[str, ...] = ("name", "socialSecurityNumber")) -> list[Any]:
    return [{name: row[name] for name in fields} for row in decoded.orderBy("offset").collect()]


def test_v0_v1_and_header_frames_decode_together_in_one_dataframe(
    spark: Any, registry: LocalRegistry
) -> None:
    v1, v2, v3 = (registry.get_version(SUBJECT, n) for n in (1, 2, 3))
    # An earlier header names version 2, whose reading of version 3's body fails: the last one wins.
    stale = [("__value_schema_id", encode_prefix(v2.schema_id))]
    rows = [
        (encode_frame(v1.schema_id, body(v1, WRITTEN[1])), [("trace", b"t")]),
        (encode_frame(guid_of(v2), body(v2, WRITTEN[2])), None),
        (body(v3, WRITTEN[3]), [("__value_schema_id", encode_prefix(guid_of(v3)))]),
        (body(v2, WRITTEN[2]), [("__value_schema_id", encode_prefix(v2.schema_id))]),
        (body(v3, WRITTEN[3]), [*stale, ("x", None), ("__value_schema_id", encode_prefix(guid_of(v3)))]),
        # A header without a value names nothing: the prefix does, as the reference reads it.
        (encode_frame(guid_of(v1), body(v1, WRITTEN[1])), [("__value_schema_id", None)]),
        # The key's header is not the value's.
        (encode_frame(v3.schema_id, body(v3, WRITTEN[3])), [("__key_schema_id", b"\x09")]),
    ]

    decoded = DataContract(registry, SUBJECT).deserialize(kafka_rows(spark, rows))

    assert records_of(decoded) == [EXPECTED[n] for n in (1, 2, 3, 2, 3, 1, 3)]
    kept = [row["headers"] for row in decoded.orderBy("offset").collect()]
    assert [(h["key"], h["value"]) for h in kept[0]] == [("trace", b"t")]
    assert kept[1] is None


def test_guids_of_versions_registered_after_the_contract_resolve_on_the_workers(
    spark: Any, registry: LocalRegistry
) -> None:
    reader = DataContract(registry, SUBJECT)
    payload = {
        "schema": json.dumps(V4),
        "metadata": {"properties": {MAJOR: "2"}},
        "ruleSet": {},  # its own, empty: else it keeps version 3's renames
    }
    registry.register_schema(SUBJECT, Schema.from_dict(payload))
    v4 = registry.get_version(SUBJECT, 4)
    record = {"name": "eve", "socialSecurityNumber": "555", "city": "Oslo"}
    rows = [
        (encode_frame(guid_of(v4), body(v4, record)), None),
        (body(v4, record), [("__value_schema_id", encode_prefix(guid_of(v4)))]),
    ]

    decoded = reader.deserialize(kafka_rows(spark, rows))

    assert records_of(decoded) == [{"name": "eve", "socialSecurityNumber": "555"}] * 2


def test_bad_guids_and_schema_id_headers_go_to_the_decode_dlq_saying_what_is_wrong(
    spark: Any, registry: LocalRegistry, sink: LocalTopicSink
) -> None:
    v2 = registry.get_version(SUBJECT, 2)
    other = registry.register_schema("other-value", Schema('"string"'))
    other_guid = registry.get_version("other-value", 1).guid
    unknown = uuid.UUID("00000000-0000-4000-8000-00000000beef")
    good = body(v2, WRITTEN[2])
    rows = [
        (encode_frame(unknown, good), None),
        (encode_frame(uuid.UUID(other_guid or ""), b"\x02a"), None),
        (good, [("__value_schema_id", encode_prefix(v2.schema_id) + b"\x00")]),
        (good, [("__value_schema_id", b"\x07" + bytes(16))]),
        (good, [("__value_schema_id", b"")]),
        (good, [("__value_schema_id", encode_prefix(unknown))]),
        (good, [("__value_schema_id", encode_prefix(other))]),
        (encode_frame(guid_of(v2), good), None),
    ]
    reader = DataContract(registry, SUBJECT, dlq_sink=sink)

    decoded = reader.deserialize(kafka_rows(spark, rows), on_decode_error="DLQ", decode_dlq_topic="bad")

    assert records_of(decoded) == [EXPECTED[2]]
    records = sink.read("bad")
    reasons = sorted(dict(record.headers)["__rule.exception"].decode() for record in records)
    assert reasons == sorted(
        [
            f"unknown schema guid {unknown}: the registry has no such schema",
            f"schema guid {other_guid} is not registered under subject 'users-value'",
            "header __value_schema_id holds 6 bytes: a schema id header is 5 bytes (magic byte 0 and an"
            " id) or 17 (magic byte 1 and a GUID)",
            "unknown magic byte 7 in the header __value_schema_id (expected 0 or 1): not Confluent wire"
            " format",
            "header __value_schema_id of 0 bytes is shorter than the 5-byte schema id",
            f"unknown schema guid {unknown}: the registry has no such schema",
            f"schema id {other} is not registered under subject 'users-value'",
        ]
    )
    # A DLQ record is the row as it came, its bare body and its headers, ready to replay.
    empty_header = [record for record in records if ("__value_schema_id", b"") in record.headers]
    assert [record.value for record in empty_header] == [good]


def test_an_unknown_guid_fails_the_job_by_default_naming_its_offset(
    spark: Any, registry: LocalRegistry
) -> None:
    unknown = uuid.UUID("00000000-0000-4000-8000-00000000beef")
    rows: list[tuple[bytes | None, Any]] = [(encode_frame(unknown, b"\x02a"), None)]
    with pytest.raises(Exception, match=f"offset 0 of subject 'users-value': unknown schema guid {unknown}"):
        DataContract(registry, SUBJECT).deserialize(kafka_rows(spark, rows)).collect()


def test_keys_read_the_key_schema_id_header(spark: Any, registry: LocalRegistry) -> None:
    """Decoding a `key` column takes `__key_schema_id`; a value's header does not apply to it."""
    v3 = registry.get_version(SUBJECT, 3)
    headers = [("__value_schema_id", b"\x07"), ("__key_schema_id", encode_prefix(guid_of(v3)))]
    df = spark.createDataFrame(
        [(body(v3, WRITTEN[3]), 0, headers)], f"key binary, offset long, headers {HEADERS}"
    )
    reader = DataContract(registry, SUBJECT)

    assert records_of(reader.deserialize(df, value_col="key", key_col=None)) == [EXPECTED[3]]
    with pytest.raises(Exception, match="unknown magic byte 7 in the header __value_schema_id"):
        reader.deserialize(df, value_col="key", key_col=None, is_key=False).collect()


# -- serialize --------------------------------------------------------------------------------------


def record_rows(spark: Any, headers: list[tuple[str, bytes | None]] | None = None) -> Any:
    """Version 3 records with a key, a topic and (given) the same Kafka headers each."""
    entries = None if headers is None else [tuple(header) for header in headers]
    rows = [
        (n, record["name"], record["socialSecurityNumber"], b"k", "users", entries)
        for n, record in EXPECTED.items()
    ]
    columns = "offset long, name string, socialSecurityNumber string, key binary, topic string"
    return spark.createDataFrame(rows, f"{columns}, headers {HEADERS}")


@pytest.mark.parametrize("serializer", ["prefix", "prefix_guid", "header"])
def test_serialize_names_the_schema_where_asked_and_reads_back(
    spark: Any, registry: LocalRegistry, serializer: str
) -> None:
    contract = DataContract(registry, SUBJECT)
    v3 = registry.get_version(SUBJECT, 3)
    df = record_rows(spark).drop("headers")

    out = contract.serialize(df, schema_id_serializer=serializer)

    rows = out.orderBy("offset").collect()
    bodies = [body(v3, EXPECTED[n]) for n in (1, 2, 3)]
    prefixes = {"prefix": encode_prefix(v3.schema_id), "prefix_guid": encode_prefix(guid_of(v3))}
    prefix = prefixes.get(serializer)
    if prefix is not None:
        assert [bytes(row["value"]) for row in rows] == [prefix + b for b in bodies]
        assert "headers" not in out.columns
    else:
        assert [bytes(row["value"]) for row in rows] == bodies
        assert [[(h["key"], bytes(h["value"])) for h in row["headers"]] for row in rows] == [
            [("__value_schema_id", encode_prefix(guid_of(v3)))]
        ] * 3
    assert records_of(contract.deserialize(out)) == [EXPECTED[n] for n in (1, 2, 3)]


def test_serialize_replaces_the_schema_id_headers_it_finds(spark: Any, registry: LocalRegistry) -> None:
    """An input's schema id header named the schema of a value being replaced: it goes, and the
    other headers stay in order; "header" adds the new one last."""
    contract = DataContract(registry, SUBJECT)
    guid = encode_prefix(guid_of(registry.get_version(SUBJECT, 3)))
    stale = ("__value_schema_id", encode_prefix(1))
    df = record_rows(spark, [("trace", b"t"), stale, ("__key_schema_id", b"k"), stale])

    def headers(out: Any) -> list[Any]:
        return [[(h["key"], h["value"]) for h in row["headers"]] for row in out.orderBy("offset").collect()]

    kept = [("trace", b"t"), ("__key_schema_id", b"k")]
    assert headers(contract.serialize(df)) == [kept] * 3
    assert (
        headers(contract.serialize(df, schema_id_serializer="header"))
        == [[*kept, ("__value_schema_id", guid)]] * 3
    )
    assert (
        headers(contract.serialize(df, schema_id_serializer="header", is_key=True))
        == [[("trace", b"t"), stale, stale, ("__key_schema_id", guid)]] * 3
    )


def test_serialize_refuses_what_it_cannot_write(spark: Any, registry: LocalRegistry) -> None:
    contract = DataContract(registry, SUBJECT)
    df = record_rows(spark).drop("headers")
    with pytest.raises(
        ContractError, match="schema_id_serializer must be one of prefix, prefix_guid, header, not 'V1'"
    ):
        contract.serialize(df, schema_id_serializer="V1")
    with pytest.raises(ContractError, match="`headers` is map<string,string>"):
        contract.serialize(df.selectExpr("*", "map('a', 'b') AS headers"), schema_id_serializer="header")
    without_guids = _NoGuids(registry)
    old = DataContract(without_guids, SUBJECT)  # type: ignore[arg-type]
    with pytest.raises(ContractError, match="the registry gave no GUID for this version"):
        old.serialize(df, schema_id_serializer="prefix_guid")
    assert old.serialize(df).count() == 3


def test_a_record_field_named_headers_cannot_take_a_schema_id_header(spark: Any) -> None:
    registry = LocalRegistry()
    schema = _record([{"name": "headers", "type": "string"}])
    registry.register_schema("h-value", Schema(json.dumps(schema)))
    df = spark.createDataFrame([("x",)], "headers string")
    with pytest.raises(ContractError, match="`headers` is a field of the record"):
        DataContract(registry, "h-value").serialize(df, schema_id_serializer="header")


@dataclasses.dataclass
class _NoGuids:
    """A registry as Confluent's before 8.0 answers: versions without a GUID."""

    inner: LocalRegistry

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        return dataclasses.replace(self.inner.get_version(subject, version), guid=None)

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        return self.get_version(subject, "latest")
