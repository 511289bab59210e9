"""Replaying a DLQ topic: its records through the contract again, after a fix (docs/semantics.md §7.7).

As Confluent's clients do when they consume a DLQ record, each record skips the rule its last
`__rule.name` header names (it failed there; the replay asks whether the rest of the contract now
accepts it) and runs every other rule. The records are split by that header: rows naming one of
the contract's rules run through a copy of the contract with that rule disabled (in every version,
as the reference skips a rule by name wherever it runs), the others through the contract itself,
and the valid rows of all parts are one DataFrame. A record that fails again goes to its DLQ
topic with its headers, the new `__rule.*` ones last: nothing is lost, and a second replay skips
the rule it failed on this time. A local topic replayed by name gives the replay only the records
no other replay took (actions.dlq.replays), so replays never multiply a record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any, Protocol

from actions.dlq import replays
from actions.dlq.frame import decode_dlq, last_header, read_local_topic, record_column
from actions.dlq.sink import is_run_id
from contracts.codes import NOT_REGISTERED
from contracts.errors import ContractError, RegistryError
from contracts.model import RegisteredSchema, RuleMode, Schema
from contracts.registry import Registry

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from contracts.formats.protocol import SchemaFormat
    from contracts.planning.plan import Plan

APPLY = ("write", "read", "deserialize")
RULE_NAME = "__rule.name"
RULE_TOPIC = "__rule.topic"
MAX_RUN_ID = 96
"""A replay's run id, plus `-<part>`, names each part's DLQ output within the 100 characters allowed."""


@dataclass(frozen=True)
class VersionSchema:
    """One version's record: its format, its schema as the format parsed it and its Spark type
    (a ParsedSchema: what reads its DLQ values back)."""

    schema_format: SchemaFormat
    parsed: Any
    spark_type: StructType


class Replayable(Protocol):
    """What a replay needs of a contract (DataContract is one)."""

    subject: str
    registry: Registry

    @property
    def version(self) -> int: ...

    def plan(self, mode: str | RuleMode = ...) -> Plan: ...

    def write(self, df: DataFrame, *, run_id: str | None = None) -> DataFrame: ...

    def read(
        self, df: DataFrame, writer_version: int | None = None, *, run_id: str | None = None
    ) -> DataFrame: ...

    def deserialize(
        self,
        df: DataFrame,
        value_col: str = ...,
        key_col: str | None = ...,
        on_decode_error: str = ...,
        decode_dlq_topic: str | None = ...,
        tombstones: str = ...,
        *,
        run_id: str | None = None,
        is_key: bool | None = ...,
        key: Any = ...,
    ) -> DataFrame: ...

    def _skipping(self, rule: str) -> Replayable: ...

    def _version_schema(self, version: int | None) -> VersionSchema: ...


def taken_frame(spark: SparkSession, topic: str, taken: replays.Taken) -> DataFrame:
    """The records a replay took of local `topic` (actions.dlq.replays.take) as a DLQ frame."""
    return decode_dlq(read_local_topic(spark, topic, taken.files))


def check_replay(contract: Replayable, apply: str, run_id: str, options: dict[str, Any]) -> None:
    """ContractError for replay arguments that cannot be used, before anything is read or taken."""
    if apply not in APPLY:
        raise ContractError(
            f"apply must be one of {', '.join(APPLY)}, not {apply!r}", subject=contract.subject
        )
    if not is_run_id(run_id) or len(run_id) > MAX_RUN_ID:
        raise ContractError(
            f"a replay's run_id is 1-{MAX_RUN_ID} ASCII letters, digits, '_' or '-' (each part adds"
            f" '-<n>'), not {run_id!r}",
            subject=contract.subject,
            version=contract.version,
        )
    accepted = {"write": set(), "read": {"writer_version"}}.get(apply)
    if accepted is not None and set(options) - accepted:
        takes = f"only {', '.join(sorted(accepted))}" if accepted else "no options"
        raise ContractError(
            f"{apply} takes {takes}, got {', '.join(sorted(set(options) - accepted))}",
            subject=contract.subject,
        )


def replay(
    contract: Replayable, dlq: DataFrame, apply: str, run_id: str, options: dict[str, Any]
) -> DataFrame:
    """The valid rows of `dlq`'s records run through `contract` again (`apply`: "write" or "read"
    for JSON values, "deserialize" for wire-format ones), each skipping the rule its `__rule.name`
    names; the records that fail again go to their DLQ topics, part `n` under run id
    `<run_id>-<n>`, as the result is computed. The arguments are those `check_replay` accepts."""
    from pyspark.sql import functions as F

    from contracts.metrics import SummedMetrics, metrics_of, with_metrics

    rule = last_header(RULE_NAME)
    names = _rule_names(contract, apply)
    parts: list[tuple[Replayable, Column]] = [
        (contract._skipping(name), rule == F.lit(name)) for name in names
    ]
    parts.append((contract, rule.isNull() | ~rule.isin(*names) if names else F.lit(True)))
    writer_version = options.get("writer_version")
    schema = None if apply == "deserialize" else contract._version_schema(writer_version)
    outputs = []
    for number, (variant, chosen) in enumerate(parts):
        part_id = f"{run_id}-{number}"
        records = dlq.filter(chosen)
        if schema is None:
            outputs.append(variant.deserialize(_wire_records(records), run_id=part_id, **options))
            continue
        json_records = _json_records(records, schema, contract.subject)
        if apply == "write":
            outputs.append(variant.write(json_records, run_id=part_id))
        else:
            outputs.append(variant.read(json_records, writer_version, run_id=part_id))
    valid = reduce(lambda left, right: left.unionByName(right), outputs)
    # The counts of every part, summed per rule, as metrics_of answers for write/read/deserialize.
    counted = [metrics for metrics in map(metrics_of, outputs) if metrics is not None]
    return with_metrics(valid, SummedMetrics(counted)) if counted else valid


def _rule_names(contract: Replayable, apply: str) -> list[str]:
    """The names of the rules the replayed records may have failed on: the WRITE rules for
    "write"; the READ rules and every version's migration rules for "read" and "deserialize"."""
    mode = RuleMode.WRITE if apply == "write" else RuleMode.READ
    names = {planned.rule.name for planned in contract.plan(mode).rules}
    if apply != "write":
        for number in contract.registry.get_versions(contract.subject):
            rule_set = contract.registry.get_version(contract.subject, number).schema.rule_set
            names.update(rule.name for rule in (rule_set.migration_rules if rule_set else ()))
    return sorted(names)


def _json_records(dlq: DataFrame, schema: VersionSchema, subject: str) -> DataFrame:
    """The records of DLQ values holding a record as JSON, read back by the record's format, as the
    record's columns, with the DLQ record's `key` and `headers`, and `topic`: the topic the record
    was first bound for (its `__rule.topic`). A value holding no record fails the job, naming
    where it is and what to do."""
    from pyspark.sql import functions as F

    record = record_column(schema)
    position = [F.col(name).cast("string") for name in ("topic", "writer", "offset") if name in dlq.columns]
    missing = F.raise_error(
        F.concat_ws(
            " ",
            F.lit(f"a DLQ record replayed on {subject!r} holds no JSON record"),
            F.lit("(topic, writer, offset:"),
            *position,
            F.lit(
                "): its value is a wire-format frame or not a JSON object; replay it with apply='deserialize'"
            ),
        )
    )
    checked = dlq.withColumn("__replayed", F.when(record.isNull(), missing).otherwise(record))
    fields = schema.spark_type.fieldNames()
    extra = {
        "key": F.col("key"),
        "headers": F.col("headers"),
        "topic": last_header(RULE_TOPIC),
    }
    columns = [F.col("__replayed").getField(name).alias(name) for name in fields]
    columns += [column.alias(name) for name, column in extra.items() if name not in fields]
    return checked.select(*columns)


def _wire_records(dlq: DataFrame) -> DataFrame:
    """Read-side DLQ records as the Kafka rows they were: `key`, `value` (the frame as it arrived),
    `topic` (the one the record was read from, its `__rule.topic`) and `headers`."""
    return dlq.select("key", "value", last_header(RULE_TOPIC).alias("topic"), "headers")


@dataclass(frozen=True)
class RuleSkippingRegistry:
    """A registry whose schemas have every rule named `rule` disabled: the contract a replayed
    record runs through. Reads only; it never changes the registry it wraps."""

    inner: Registry
    rule: str

    def _skipping(self, schema: Schema) -> Schema:
        rules = schema.rule_set
        if rules is None:
            return schema

        def disabled(group: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(dataclasses.replace(r, disabled=True) if r.name == self.rule else r for r in group)

        skipping = dataclasses.replace(
            rules,
            migration_rules=disabled(rules.migration_rules),
            domain_rules=disabled(rules.domain_rules),
            encoding_rules=disabled(rules.encoding_rules),
        )
        return dataclasses.replace(schema, rule_set=skipping)

    def _registered(self, registered: RegisteredSchema) -> RegisteredSchema:
        return dataclasses.replace(registered, schema=self._skipping(registered.schema))

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        raise ContractError("a replay's registry is read only", subject=subject)

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        """The version registering `schema`, given as the inner registry holds it or as this one
        gives it (its rule disabled: a schema id resolved during the replay is looked up so)."""
        try:
            return self._registered(self.inner.lookup_schema(subject, schema))
        except RegistryError as e:
            if e.error_code not in NOT_REGISTERED:
                raise
            for number in reversed(self.inner.get_versions(subject)):
                registered = self._registered(self.inner.get_version(subject, number))
                if registered.schema == schema:
                    return registered
            raise

    def get_schema(self, schema_id: int) -> Schema:
        return self._skipping(self.inner.get_schema(schema_id))

    def get_schema_by_guid(self, guid: str) -> Schema:
        return self._skipping(self.inner.get_schema_by_guid(guid))

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        return self._registered(self.inner.get_version(subject, version))

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        return self._registered(self.inner.get_latest_version(subject))

    def get_latest_with_metadata(self, subject: str, metadata: dict[str, str]) -> RegisteredSchema:
        return self._registered(self.inner.get_latest_with_metadata(subject, metadata))

    def get_versions(self, subject: str) -> list[int]:
        return self.inner.get_versions(subject)

    def get_subjects(self) -> list[str]:
        return self.inner.get_subjects()

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        raise ContractError("a replay's registry is read only", subject=subject)

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> int:
        raise ContractError("a replay's registry is read only", subject=subject)

    def get_config(self, subject: str | None = None, default_to_global: bool = True) -> dict[str, Any]:
        return self.inner.get_config(subject, default_to_global)

    def set_config(self, subject: str | None = None, **config: Any) -> dict[str, Any]:
        raise ContractError("a replay's registry is read only", subject=subject)

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        return self.inner.test_compatibility(subject, schema, version)
