"""Parity of migrations with confluent-kafka 2.16.1's AvroDeserializer (issue 5 §4, docs/semantics.md §6).

The four versions of tests/contracts/engine/test_serde.py (majors 1, 1, 2, 3; JSONata renames) are
registered, in the same order, in the reference's mock registry and in a LocalRegistry, so schema
ids match. Records written by each version with the reference serializer are read by the reference
deserializer and by our `DataContract.deserialize`, for readers pinned to each major and to each
explicit version: every record must end the same way — the same record, an error naming the same
rule, or the same DLQ record — except where a case carries a `Difference` (docs/semantics.md wins).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest
from parity_corpus import Difference
from reference_oracle import (
    Outcome,
    SourceRecord,
    add_dlq_outcomes,
    mock_client,
    read_by_reference,
    written_with_version,
)
from test_serde import MAJOR, SUBJECT, V1, V2, VERSIONS, WRITTEN, _rename

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats import avro
from contracts.formats.wire import encode_frame

TOPIC = SUBJECT.removesuffix("-value")
RELEASE = "app.release"
"""A metadata property unique to each version: how the reference deserializer pins an explicit one."""
ROW_HEADER = "row"
"""Every record carries its index in this header, so its DLQ record can be told apart."""
DLQ_TOPIC = "users-migration"

Version = tuple[dict[str, Any], str, list[dict[str, Any]]]
"""A version as test_serde declares it: Avro schema, major, migration rules."""


@dataclass(frozen=True)
class Reader:
    """A reader's pin, on our side (DataContract arguments) and on the reference's (its config)."""

    id: str
    ours: Mapping[str, Any]
    reference: Mapping[str, Any]


def major(n: int) -> Reader:
    pin = {MAJOR: str(n)}
    return Reader(f"major{n}", {"use_latest_with_metadata": pin}, {"use.latest.with.metadata": pin})


def explicit(version: int) -> Reader:
    pin = {RELEASE: str(version)}
    return Reader(f"version{version}", {"version": version}, {"use.latest.with.metadata": pin})


@dataclass(frozen=True)
class Scenario:
    """Versions registered in both registries, one reader, and the record each listed version writes."""

    id: str
    versions: Sequence[Version]
    reader: Reader
    written: Mapping[int, dict[str, Any]]
    difference: Difference | None = None


def payload(number: int, version: Version) -> dict[str, Any]:
    schema, major_version, migrations = version
    return {
        "schemaType": "AVRO",
        "schema": json.dumps(schema),
        "metadata": {"properties": {MAJOR: major_version, RELEASE: str(number)}},
        "ruleSet": {"migrationRules": migrations},
    }


def _projected_onto(target: dict[str, Any]) -> Callable[[list[Outcome]], list[Outcome]]:
    """Our outcomes: each record the reference hands on as the migration left it, read as the target
    schema (extra fields dropped, a missing one takes its default); at least one must change."""

    def ours(reference: list[Outcome]) -> list[Outcome]:
        fields = target["fields"]
        projected: list[Outcome] = [
            ("record", {f["name"]: outcome[1].get(f["name"], f.get("default")) for f in fields})
            if outcome[0] == "record"
            else outcome
            for outcome in reference
        ]
        assert projected != reference, "no record lacks a target field: the difference is stale"
        return projected

    return ours


def projects_like_java(target: dict[str, Any]) -> Difference:
    return Difference(
        "a migrated record becomes a record of the target version as Java re-decodes it: extra fields"
        " dropped, a field the migration did not produce takes its default (docs/semantics.md §6); the"
        " Python reference hands the migrated dict on as it is",
        _projected_onto(target),
    )


def _every_record_fails(reference: list[Outcome]) -> list[Outcome]:
    """A migrated record the target cannot read (no default for a missing field) is undecodable."""
    assert all(outcome[0] == "record" for outcome in reference), reference
    return [("error", None, "no default") for _ in reference]


NO_DEFAULT_IS_AN_ERROR = Difference(
    "a migrated record missing a target field that has no default is a deserialization failure"
    " (docs/semantics.md §6, the decode policy of issue 5 §1); the Python reference hands it on without it",
    _every_record_fails,
)


def _original_bytes(reference: list[Outcome]) -> list[Outcome]:
    """Each DLQ record's value as the frame that arrived (written by version = schema id), where
    the reference sends the writer-decoded record as JSON."""
    ours: list[Outcome] = []
    for outcome in reference:
        if outcome[0] == "dlq":
            _, rule, topic, key, value, headers = outcome
            version = list(WRITTEN)[int(dict(headers)[ROW_HEADER] or b"")]
            assert value is not None and json.loads(value) == WRITTEN[version], outcome
            body = io.BytesIO()
            fastavro.schemaless_writer(
                body, fastavro.parse_schema(VERSIONS[version - 1][0]), WRITTEN[version]
            )
            outcome = ("dlq", rule, topic, key, encode_frame(version, body.getvalue()), headers)
        ours.append(outcome)
    assert ours != reference, "no record went to the DLQ: the difference is stale"
    return ours


MIGRATION_DLQ_VALUE_IS_THE_FRAME = Difference(
    "a record a migration rule sends to the DLQ is read-side: its value is the original bytes as they"
    " arrived (docs/semantics.md §7); the Python reference runs migrations without the original message"
    " and sends the writer-decoded record as JSON",
    _original_bytes,
)

READERS = [major(1), major(2), major(3), *(explicit(v) for v in (1, 2, 3, 4))]
TARGETS = {"major1": V2, "major2": VERSIONS[2][0], "major3": VERSIONS[3][0]} | {
    f"version{v}": VERSIONS[v - 1][0] for v in (1, 2, 3, 4)
}
# Readers the reference hands a record of another shape: a version-1 record (no `age`) carried
# through version 3's rename reaches versions 3 and 4 without it; records downgraded through
# version 3's rename reach version 1 with `age`, which version 1 lacks.
RESHAPED = {"major2", "major3", "version1", "version3", "version4"}


def _failing(rule: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The rule with an expression that raises in JSONata ($number of a non-number)."""
    return {**rule, "expr": "$number('not a number')", **fields}


def _with_upgrade(upgrade: dict[str, Any]) -> list[Version]:
    """The four versions, version 3's UPGRADE rename replaced by `upgrade`."""
    v3_schema, v3_major, v3_rules = VERSIONS[2]
    return [VERSIONS[0], VERSIONS[1], (v3_schema, v3_major, [upgrade, v3_rules[1]]), VERSIONS[3]]


SSN_UP = VERSIONS[2][2][0]
FAILING_ERROR = _with_upgrade(_failing(SSN_UP))
FAILING_DLQ = _with_upgrade(_failing(SSN_UP, onFailure="DLQ", params={"dlq.topic": DLQ_TOPIC}))
NO_DEFAULT_V2 = {
    **V2,
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "socialSecurityNumber", "type": "string"},
        {"name": "age", "type": "int"},
    ],
}
NO_DEFAULT = [
    (V1, "1", []),
    (NO_DEFAULT_V2, "2", [_rename("ssnUp", "ssn", "socialSecurityNumber", "UPGRADE")]),
]


def _cel(name: str, mode: str, expr: str, kind: str = "TRANSFORM", **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "type": "CEL", "mode": mode, "expr": expr, **fields}


# The four versions with CEL migration rules, each compiled against the record it receives:
# `ssnLength` reads the writer's record on UPGRADE and the version-2 record `ssnDown` made on
# DOWNGRADE (its action pair fails the record upgrading, lets it go on downgrading); version 4's
# rules receive what version 3's left.
CEL_VERSIONS = [
    VERSIONS[0],
    VERSIONS[1],
    (VERSIONS[2][0], "2", [
        _cel("ssnLength", "UPDOWN", "size(message.ssn) == 3", kind="CONDITION", onFailure="ERROR,NONE"),
        _cel("ssnUp", "UPGRADE", "{'name': message.name, 'socialSecurityNumber': message.ssn}"),
        _cel("ssnDown", "DOWNGRADE",
             "{'name': message.name, 'ssn': message.socialSecurityNumber, 'age': message.age}"),
    ]),
    (VERSIONS[3][0], "3", [
        _cel("nameUp", "UPGRADE",
             "{'fullName': message.name, 'socialSecurityNumber': message.socialSecurityNumber}"),
        _cel("nameDown", "DOWNGRADE",
             "{'name': message.fullName, 'socialSecurityNumber': message.socialSecurityNumber,"
             " 'age': message.age}"),
    ]),
]  # fmt: skip
CEL_WRITTEN = {
    **WRITTEN,
    1: {"name": "ann", "ssn": "1111"},
    4: {"fullName": "di", "socialSecurityNumber": "4444", "age": 19},
}


PII_FIELDS = ("ssn", "socialSecurityNumber")
MASKED = "XXX"


def _tagged(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its social security number field tagged PII."""
    fields = [{**f, "confluent:tags": ["PII"]} if f["name"] in PII_FIELDS else f for f in schema["fields"]]
    return {**schema, "fields": fields}


def _field_rule_versions(**fields: Any) -> list[Version]:
    """Three tagged versions; version 3 masks the PII field in a CEL_FIELD migration rule, which
    the reference fails for every record it migrates (it gives a field rule no schema to walk)."""
    mask = {"name": "maskPii", "kind": "TRANSFORM", "type": "CEL_FIELD", "mode": "UPDOWN", "tags": ["PII"]}
    v3_schema, v3_major, (up, down) = VERSIONS[2]
    return [
        (_tagged(VERSIONS[0][0]), "1", []),
        (_tagged(VERSIONS[1][0]), "1", []),
        (_tagged(v3_schema), v3_major, [up, {**mask, "expr": repr(MASKED), **fields}, down]),
    ]


FIELD_READERS = [major(1), major(2), *(explicit(v) for v in (1, 2, 3))]
FIELD_RESHAPED = {"major2", "version1", "version3"}
FIELD_WRITTEN = {version: WRITTEN[version] for version in (1, 2, 3)}
NO_FIELD_WALKER = "'NoneType' object is not callable"
"""How the reference fails a CEL_FIELD migration rule: it runs migrations without a field walker."""


def masks_like_java(reader: Reader) -> Difference:
    """The mask rule runs: each record the reference fails on it (with onFailure ERROR) is ours as
    the reference hands it on when the rule may fail (onFailure NONE), its PII field masked."""

    def ours(reference: list[Outcome]) -> list[Outcome]:
        failing = reference_run(_field_rule_versions(), reader, FIELD_WRITTEN).outcomes
        passing = reference_run(_field_rule_versions(onFailure="NONE"), reader, FIELD_WRITTEN).outcomes
        assert reference in (failing, passing), reference
        ran = [outcome[:2] == ("error", "maskPii") for outcome in failing]
        assert any(ran), "the reference fails no record on the field rule: the difference is stale"
        assert {outcome[2] for outcome, rule_ran in zip(failing, ran, strict=True) if rule_ran} == {
            NO_FIELD_WALKER
        }, failing
        masked: list[Outcome] = []
        for outcome, rule_ran in zip(passing, ran, strict=True):
            if rule_ran:
                assert outcome[0] == "record", outcome
                outcome = ("record", {k: MASKED if k in PII_FIELDS else v for k, v in outcome[1].items()})
            masked.append(outcome)
        return _projected_onto(TARGETS[reader.id])(masked) if reader.id in FIELD_RESHAPED else masked

    return Difference(
        "a CEL_FIELD migration rule walks the record it migrates, as Confluent's Java client runs it"
        " (docs/semantics.md §4.7, §10.18); the Python reference gives migrations no field walker and"
        f" fails such a rule on every record ({NO_FIELD_WALKER})",
        ours,
    )


SCENARIOS = [
    *(
        Scenario(
            f"cel-{reader.id}",
            CEL_VERSIONS,
            reader,
            CEL_WRITTEN,
            difference=projects_like_java(TARGETS[reader.id]) if reader.id in RESHAPED else None,
        )
        for reader in READERS
    ),
    *(
        Scenario(
            f"cel-field-none-{reader.id}",
            _field_rule_versions(onFailure="NONE"),
            reader,
            FIELD_WRITTEN,
            difference=masks_like_java(reader),
        )
        for reader in FIELD_READERS
    ),
    *(
        Scenario(
            f"cel-field-error-{reader.id}",
            _field_rule_versions(),
            reader,
            FIELD_WRITTEN,
            difference=masks_like_java(reader),
        )
        for reader in FIELD_READERS
    ),
    Scenario("failing-upgrade-dlq-unused-by-major1", FAILING_DLQ, major(1), WRITTEN),
    *(
        Scenario(
            f"four-versions-{reader.id}",
            VERSIONS,
            reader,
            WRITTEN,
            difference=projects_like_java(TARGETS[reader.id]) if reader.id in RESHAPED else None,
        )
        for reader in READERS
    ),
    *(Scenario(f"failing-upgrade-error-{r.id}", FAILING_ERROR, r, WRITTEN) for r in READERS[:3]),
    *(
        Scenario(
            f"failing-upgrade-dlq-{r.id}",
            FAILING_DLQ,
            r,
            WRITTEN,
            difference=MIGRATION_DLQ_VALUE_IS_THE_FRAME,
        )
        for r in READERS[1:3]
    ),
    Scenario(
        "no-default-for-a-missing-field",
        NO_DEFAULT,
        major(2),
        {1: WRITTEN[1]},
        difference=NO_DEFAULT_IS_AN_ERROR,
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
def test_each_record_ends_as_the_reference_deserializer_ends_it(
    spark: Any, scenario: Scenario, tmp_path: Path
) -> None:
    run = reference_run(scenario.versions, scenario.reader, scenario.written)
    reference = run.outcomes
    expected = scenario.difference.ours(reference) if scenario.difference is not None else reference
    engine = _Engine(spark, run.registry, scenario.reader, tmp_path / "dlq")
    kept = [i for i, outcome in enumerate(expected) if outcome[0] != "error"]
    assert engine.outcomes([run.frames[i] for i in kept], [run.records[i] for i in kept]) == {
        i: expected[i] for i in kept
    }
    for i, outcome in enumerate(expected):
        if outcome[0] == "error":
            engine.expect_error(run.frames[i], run.records[i], outcome)


@dataclass(frozen=True)
class ReferenceRun:
    """Versions registered in both registries (same ids), the records the reference serializer
    framed, and how the reference deserializer ends each of them for one reader."""

    registry: LocalRegistry
    frames: list[bytes]
    records: list[SourceRecord]
    outcomes: list[Outcome]


def reference_run(
    versions: Sequence[Version], reader: Reader, written: Mapping[int, dict[str, Any]]
) -> ReferenceRun:
    client, registry = _registries(versions)
    records = [
        SourceRecord(dict(value), b"k%d" % i, ((ROW_HEADER, str(i).encode()),))
        for i, value in enumerate(written.values())
    ]
    frames = [
        written_with_version(client, SUBJECT, version, [record], TOPIC)[0]
        for version, record in zip(written, records, strict=True)
    ]
    outcomes = read_by_reference(client, frames, records, TOPIC, reader.reference)
    return ReferenceRun(registry, frames, records, outcomes)


def _registries(versions: Sequence[Version]) -> tuple[Any, LocalRegistry]:
    """The versions in a fresh mock registry and a LocalRegistry, with the same ids."""
    from confluent_kafka.schema_registry import Schema as ReferenceSchema

    client = mock_client()
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibilityGroup=MAJOR)
    for number, version in enumerate(versions, start=1):
        body = payload(number, version)
        reference_id = client.register_schema(SUBJECT, ReferenceSchema.from_dict(body))
        assert registry.register_schema(SUBJECT, Schema.from_dict(body)) == reference_id
    return client, registry


class _Engine:
    """Our side: `DataContract.deserialize` of the reference's frames, DLQ records in a LocalTopicSink."""

    def __init__(self, spark: Any, registry: LocalRegistry, reader: Reader, dlq: Path) -> None:
        self.spark = spark
        self.sink = LocalTopicSink(dlq)
        self.contract = DataContract(registry, SUBJECT, dlq_sink=self.sink, **reader.ours)
        self.parsed = avro.parse_schema(self.contract.target.schema.schema_str)

    def outcomes(self, frames: list[bytes], records: list[SourceRecord]) -> dict[int, Outcome]:
        """Read the frames in one DataFrame: each one's outcome by its row number."""
        outcomes: dict[int, Outcome] = {}
        if not frames:
            return outcomes
        names = self.contract.spark_schema.fieldNames()
        for row in self._run(frames, records).collect():
            outcomes[row[ROW_HEADER]] = (
                "record",
                avro.spark_to_avro_value({name: row[name] for name in names}, self.parsed),
            )
        add_dlq_outcomes(self.sink, outcomes, ROW_HEADER)
        return outcomes

    def expect_error(self, frame: bytes, record: SourceRecord, outcome: Outcome) -> None:
        """The record alone fails the job, naming the rule the reference names."""
        with pytest.raises(Exception) as caught:
            self._run([frame], [record]).collect()
        if outcome[1] is not None:
            assert outcome[1] in str(caught.value)

    def _run(self, frames: list[bytes], records: list[SourceRecord]) -> Any:
        from pyspark.sql.types import (
            ArrayType,
            BinaryType,
            IntegerType,
            StringType,
            StructField,
            StructType,
        )

        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        schema = StructType(
            [
                StructField("value", BinaryType()),
                StructField("key", BinaryType()),
                StructField("topic", StringType()),
                StructField("headers", ArrayType(header)),
                StructField(ROW_HEADER, IntegerType()),
            ]
        )
        rows = [
            (frame, record.key, TOPIC, list(record.headers), int(record.headers[0][1] or b""))
            for frame, record in zip(frames, records, strict=True)
        ]
        return self.contract.deserialize(self.spark.createDataFrame(rows, schema), key_col="key")
