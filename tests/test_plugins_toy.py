"""A toy format, executor, action and DLQ sink, each added through the public protocols only, run
through DataContract on real DataFrames: what docs/plugins.md shows a plugin author."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from actions.dlq.sink import DlqRecord, DlqSink, DlqWriter
from actions.protocol import ActionContext, ActionPlan, Effect
from contracts import DataContract, RegisteredSchema, RegistryError, Schema, decode_dlq, formats
from contracts.codes import SCHEMA_NOT_FOUND, SUBJECT_NOT_FOUND, VERSION_NOT_FOUND
from contracts.errors import ContractError, SerializationError
from contracts.formats.fields import ConditionFailed, FieldVisit, FieldWalking, WalkedField, selects, tags_of
from contracts.formats.protocol import Records
from contracts.formats.wire import decode_frame
from executors.protocol import BatchStep, MigrationResult, Outcome, RuleContext, Step

pytestmark = pytest.mark.spark
# Spark's Python workers cannot import this test module: its plugins travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

_SPARK_TYPES = {"long": "bigint", "string": "string"}


class ToyFormat:
    """Schema type TOY: `{"fields": {"name": "long" | "string", …}}`, bodies are JSON objects."""

    schema_type = "TOY"

    def parse(self, schema_str: str, references: Sequence[str]) -> dict[str, str]:
        fields = json.loads(schema_str)["fields"]
        unknown = sorted(kind for kind in fields.values() if kind not in _SPARK_TYPES)
        if unknown:
            raise ContractError(f"TOY has no type {unknown[0]!r}", position="schema")
        return dict(fields)

    def spark_type(self, parsed: dict[str, str]) -> Any:
        from pyspark.sql.types import StructType, _parse_datatype_string

        return StructType.fromJson(
            {
                "type": "struct",
                "fields": [
                    {
                        "name": name,
                        "type": _parse_datatype_string(_SPARK_TYPES[kind]).jsonValue(),
                        "nullable": True,
                        "metadata": {},
                    }
                    for name, kind in parsed.items()
                ],
            }
        )

    def read_struct(self, column: pa.Array, parsed: dict[str, str], tagged: bool = False) -> Records:
        return Records(column.to_pylist(), {})

    def needs_tags(self, parsed: dict[str, str]) -> bool:
        return False

    def to_struct(
        self, records: list[Any], parsed: dict[str, str], record_type: pa.DataType, tagged: bool = False
    ) -> pa.Array:
        return pa.array(records, type=record_type)

    def conform(self, record: Any, parsed: dict[str, str]) -> Any:
        if not isinstance(record, dict) or set(record) - set(parsed):
            raise ValueError(f"{record!r} is no TOY record of fields {sorted(parsed)}")
        return {name: record.get(name) for name in parsed}

    def project(self, value: Any, parsed: dict[str, str]) -> Any:
        try:
            return self.conform(value, parsed)
        except ValueError as e:
            raise SerializationError(f"migrated record: {e}") from e

    def to_json_view(self, record: Any, parsed: dict[str, str]) -> Any:
        return record

    def from_json_view(self, value: Any, parsed: dict[str, str]) -> Any:
        return value

    def decode(self, body: bytes, writer: Any, reader: Any | None, tagged: bool = False) -> Any:
        return self.conform(json.loads(body), reader or writer)

    def encode(self, record: Any, parsed: dict[str, str]) -> bytes:
        return json.dumps(self.conform(record, parsed), sort_keys=True).encode()

    def dlq_value(self, record: Any, parsed: dict[str, str]) -> bytes:
        return json.dumps(record, sort_keys=True).encode()

    def read_dlq_value(self, value: Any, parsed: dict[str, str]) -> Any:
        from pyspark.sql import functions as F

        text = value.cast("string")
        return F.when(text.startswith("{"), F.from_json(text, self.spark_type(parsed)))

    # The tagged-field walk (contracts.formats.fields.FieldWalking): CEL_FIELD and ENCRYPT rules.

    def field_tree(self, parsed: dict[str, str], metadata_tags: Mapping[str, tuple[str, ...]]) -> None:
        return None  # no native form: CEL_FIELD rules run the walk below, in Python

    def field_walk(
        self,
        parsed: dict[str, str],
        metadata_tags: Mapping[str, tuple[str, ...]],
        rule_tags: frozenset[str],
        visit: FieldVisit,
        condition: bool = False,
    ) -> Callable[[Any], Any]:
        """Each field of a record is a leaf named `Toy.<field>`, tagged by the metadata's paths."""

        def walk(record: Any) -> Any:
            walked = dict(record)
            for name, kind in parsed.items():
                tags = tags_of(f"Toy.{name}", (), metadata_tags)
                if walked.get(name) is None or not selects(rule_tags, tags):
                    continue
                field = WalkedField(name, f"Toy.{name}", tags, walked, kind.upper())
                result = visit(field, walked[name])
                if condition and result is False:
                    raise ConditionFailed
                if not condition:
                    walked[name] = result
            return record if condition else walked

        return walk


@dataclass
class ToyRegistry:
    """The registry protocol's reads over a few registered versions of one subject (any schema type)."""

    versions: list[RegisteredSchema] = field(default_factory=list)

    def register(self, subject: str, schema: Schema) -> RegisteredSchema:
        registered = RegisteredSchema(100 + len(self.versions), schema, subject, len(self.versions) + 1)
        self.versions.append(registered)
        return registered

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        for registered in self.versions:
            if registered.subject == subject and registered.version == version:
                return registered
        raise RegistryError("Version not found.", status=404, error_code=VERSION_NOT_FOUND)

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        found = [r for r in self.versions if r.subject == subject]
        if not found:
            raise RegistryError("Subject not found.", status=404, error_code=SUBJECT_NOT_FOUND)
        return found[-1]

    def get_versions(self, subject: str) -> list[int]:
        return [r.version for r in self.versions if r.subject == subject]

    def get_schema(self, schema_id: int) -> Schema:
        for registered in self.versions:
            if registered.schema_id == schema_id:
                return registered.schema
        raise RegistryError("Schema not found", status=404, error_code=SCHEMA_NOT_FOUND)

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        for registered in self.versions:
            if registered.subject == subject and registered.schema.schema_str == schema.schema_str:
                return registered
        raise RegistryError("Schema not found", status=404, error_code=SCHEMA_NOT_FOUND)


class ShoutExecutor:
    """Rule type SHOUT: a TRANSFORM upper-casing the string fields, in Python batches. It claims
    the built-ins' powers: a later SHOUT rule of the same mode is superseded by an earlier one,
    and its migrations could run natively (as whole records)."""

    type = "SHOUT"
    native_migration = MigrationResult.RECORD

    def supersedes(self, rule: Any, other: Any) -> bool:
        return rule.type == other.type and rule.mode is other.mode

    def compile(self, ctx: RuleContext) -> Step:
        return BatchStep(_Shout(tuple(ctx.spark_type.fieldNames())))


@dataclass(frozen=True)
class _Shout:
    fields: tuple[str, ...]

    def __call__(self) -> Any:
        def evaluate(records: Sequence[Any]) -> list[Outcome]:
            return [
                Outcome(True, {k: v.upper() if isinstance(v, str) else v for k, v in record.items()})
                for record in records
            ]

        return evaluate


@dataclass(frozen=True)
class AuditAction:
    """Action AUDIT: the row goes on, and the rule name and record are appended to a file."""

    path: str
    name: str = "AUDIT"

    def plan(self, ctx: ActionContext) -> ActionPlan:
        return ActionPlan(self.name, Effect.CONTINUE, callback=_Audit(self.path, ctx.rule.name))


@dataclass(frozen=True)
class _Audit:
    path: str
    rule: str

    def __call__(self, ctx: Any, record: Any, reason: str | None) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"rule": self.rule, "id": record["id"], "reason": reason}) + "\n")


@dataclass(frozen=True)
class JsonFileSink:
    """A DLQ sink writing one JSON file per writer id into a directory; a retry replaces its file."""

    root: str

    def open(self, writer_id: str) -> DlqWriter:
        return _JsonFileWriter(Path(self.root) / f"{writer_id}.json")


class _JsonFileWriter(DlqWriter):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[DlqRecord] = []

    def write(self, record: DlqRecord) -> None:
        self.records.append(record)

    def commit(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = [
            {"topic": r.topic, "value": r.value.decode(), "headers": dict(r.headers)} for r in self.records
        ]
        self.path.write_text(json.dumps(rows, default=bytes.decode))

    def abort(self) -> None:
        self.records.clear()


def _rule(name: str, kind: str, rule_type: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "type": rule_type, "mode": "WRITE", **fields}


@pytest.fixture(scope="module")
def toy_format() -> ToyFormat:
    toy = ToyFormat()
    formats.register(toy)
    return toy


def _contract(
    tmp_path: Path, rules: list[dict[str, Any]], tags: dict[str, list[str]] | None = None
) -> tuple[DataContract, JsonFileSink, Path]:
    registry = ToyRegistry()
    payload = {
        "schemaType": "TOY",
        "schema": json.dumps({"fields": {"id": "long", "name": "string"}}),
        "metadata": {"tags": tags or {}},
        "ruleSet": {"domainRules": rules},
    }
    registry.register("people-value", Schema.from_dict(payload))
    sink, audit = JsonFileSink(str(tmp_path / "dlq")), tmp_path / "audit.jsonl"
    contract = DataContract(
        registry,  # type: ignore[arg-type]  # the reads DataContract uses, no writes
        "people-value",
        executors=[ShoutExecutor()],
        actions=[AuditAction(str(audit))],
        dlq_sink=sink,
    )
    return contract, sink, audit


def _dlq(sink: JsonFileSink) -> list[dict[str, Any]]:
    return [row for path in sorted(Path(sink.root).glob("*.json")) for row in json.loads(path.read_text())]


def test_a_toy_format_executor_action_and_sink_run_a_contract(
    spark: Any, tmp_path: Path, toy_format: ToyFormat
) -> None:
    assert isinstance(toy_format, formats.SchemaFormat) and "TOY" in formats.known()
    rules = [
        _rule("shout", "TRANSFORM", "SHOUT"),
        _rule("shoutAgain", "TRANSFORM", "SHOUT"),  # superseded by `shout`, so never runs
        _rule("named", "CONDITION", "CEL", expr="message.name != 'BOB'", onFailure="AUDIT"),
        _rule(
            "positive",
            "CONDITION",
            "CEL",
            expr="message.id > 0",
            onFailure="DLQ",
            params={"dlq.topic": "bad"},
        ),
    ]
    contract, sink, audit = _contract(tmp_path, rules)
    assert [r.rule.name for r in contract.plan("WRITE").rules] == ["shout", "named", "positive"]
    df = spark.createDataFrame([(1, "ann"), (2, "bob"), (-3, "cy")], "id long, name string")
    valid = contract.write(df)
    assert sorted(map(tuple, valid.collect())) == [(1, "ANN"), (2, "BOB")]
    assert [json.loads(line)["id"] for line in audit.read_text().splitlines()] == [2]
    (rejected,) = _dlq(sink)
    assert rejected["topic"] == "bad" and json.loads(rejected["value"]) == {"id": -3, "name": "cy"}
    assert rejected["headers"]["__rule.name"] == "positive"
    # Read back by the format, as a DLQ topic on Kafka would be.
    kafka_like = spark.createDataFrame(
        [(rejected["value"].encode(), [("__rule.name", b"positive")])],
        "value binary, headers array<struct<key: string, value: binary>>",
    )
    (back,) = decode_dlq(kafka_like, contract).collect()
    assert (back.rule, back.record.id, back.record.name) == ("positive", -3, "cy")


def test_a_toy_format_frames_records_and_reads_them_back(
    spark: Any, tmp_path: Path, toy_format: ToyFormat
) -> None:
    contract, _, _ = _contract(tmp_path, [_rule("shout", "TRANSFORM", "SHOUT")])
    df = spark.createDataFrame([(1, "ann")], "id long, name string")
    (framed,) = contract.serialize(df).collect()
    schema_id, body = decode_frame(bytes(framed.value))
    assert (schema_id, json.loads(body)) == (contract.schema_id, {"id": 1, "name": "ANN"})
    reader, _, _ = _contract(tmp_path, [])
    assert [
        tuple(row) for row in reader.deserialize(contract.serialize(df)).select("id", "name").collect()
    ] == [(1, "ANN")]


def test_a_toy_format_with_a_field_walk_runs_cel_field_rules(
    spark: Any, tmp_path: Path, toy_format: ToyFormat
) -> None:
    """CEL_FIELD reaches fields through the format's walk alone: the executor knows no TOY."""
    assert isinstance(toy_format, FieldWalking)
    rules = [
        _rule("mask", "TRANSFORM", "CEL_FIELD", expr="typeName == 'STRING' ; value + '*'", tags=["PII"]),
        _rule(
            "small",
            "CONDITION",
            "CEL_FIELD",
            expr="typeName == 'LONG' ; value < 10",
            onFailure="DLQ",
            params={"dlq.topic": "big"},
        ),
    ]
    contract, _, _ = _contract(tmp_path, rules, tags={"Toy.name": ["PII"], "Toy.*": ["ALL"]})
    assert "no native field walk for TOY records" in contract.explain("WRITE")
    df = spark.createDataFrame([(1, "ann"), (20, "bob")], "id long, name string")
    result = contract.apply(df, "WRITE")
    assert [tuple(row) for row in result.valid.collect()] == [(1, "ann*")]
    (rejected,) = result.rejected.collect()
    assert (rejected["id"], rejected["_contract"]["rule"]) == (20, "small")


def test_a_schema_type_without_a_format_fails_at_load_naming_the_known_ones(tmp_path: Path) -> None:
    registry = ToyRegistry()
    registry.register("x-value", Schema.from_dict({"schemaType": "NOPE", "schema": "{}"}))
    with pytest.raises(ContractError, match=r"schema type NOPE is not supported \(known: .*AVRO") as raised:
        DataContract(registry, "x-value")  # type: ignore[arg-type]
    assert (raised.value.subject, raised.value.version) == ("x-value", 1)


def test_a_format_must_implement_the_protocol() -> None:
    with pytest.raises(TypeError, match="does not implement SchemaFormat"):
        formats.register(object())  # type: ignore[arg-type]


def test_the_toy_sink_is_a_dlq_sink() -> None:
    assert isinstance(JsonFileSink("x"), DlqSink)
