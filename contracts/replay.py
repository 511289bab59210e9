"""Replaying a DLQ topic: its records through the contract again, after a fix (docs/semantics.md §7.7).

As Confluent's clients do when they consume a DLQ record, each record skips the rule its last
`__rule.name` header names (it failed there; the replay asks whether the rest of the contract now
accepts it) and runs every other rule. The records are split by that header: rows naming one of
the contract's rules run through a copy of the contract with that rule disabled (in every version,
as the reference skips a rule by name wherever it runs), the others through the contract itself,
and the valid rows of all parts are one DataFrame. A record that fails again goes to its DLQ
topic with its headers, the new `__rule.*` ones last: nothing is lost, and a second replay skips
the rule it failed on this time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any, Protocol

from actions.dlq.frame import last_header
from actions.dlq.json_record import record_column
from contracts.codes import NOT_REGISTERED
from contracts.errors import ContractError, RegistryError
from contracts.model import RegisteredSchema, RuleMode, Schema
from contracts.registry import Registry

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from contracts.planning.plan import Plan

APPLY = ("write", "deserialize")
RULE_NAME = "__rule.name"
RULE_TOPIC = "__rule.topic"
MAX_RUN_ID = 96
"""A replay's run id, plus `-<part>`, names each part's DLQ output within the 100 characters allowed."""


class Replayable(Protocol):
    """What a replay needs of a contract (DataContract is one)."""

    subject: str
    registry: Registry

    @property
    def version(self) -> int: ...

    @property
    def parsed(self) -> Any: ...

    @property
    def spark_schema(self) -> StructType: ...

    def plan(self, mode: str | RuleMode = ...) -> Plan: ...

    def write(self, df: DataFrame, *, run_id: str | None = None) -> DataFrame: ...

    def deserialize(
        self, df: DataFrame, *args: Any, run_id: str | None = None, **kwargs: Any
    ) -> DataFrame: ...

    def _skipping(self, rule: str) -> Replayable: ...


def replay(
    contract: Replayable, dlq: DataFrame, apply: str, run_id: str | None, options: dict[str, Any]
) -> DataFrame:
    """The valid rows of `dlq`'s records run through `contract` again (`apply`: "write" for JSON
    values, "deserialize" for wire-format ones), each skipping the rule its `__rule.name` names;
    the records that fail again go to their DLQ topics as the result is computed."""
    from pyspark.sql import functions as F

    if apply not in APPLY:
        raise ContractError(
            f"apply must be one of {', '.join(APPLY)}, not {apply!r}", subject=contract.subject
        )
    if run_id is not None and len(run_id) > MAX_RUN_ID:
        raise ContractError(
            f"a replay's run_id is at most {MAX_RUN_ID} characters (each part adds '-<n>'),"
            f" not {len(run_id)}",
            subject=contract.subject,
            version=contract.version,
        )
    if apply == "write" and options:
        raise ContractError(
            f"write takes no options, got {', '.join(sorted(options))}", subject=contract.subject
        )
    rule = last_header(RULE_NAME)
    names = _rule_names(contract, apply)
    parts: list[tuple[Replayable, Column]] = [
        (contract._skipping(name), rule == F.lit(name)) for name in names
    ]
    parts.append((contract, rule.isNull() | ~rule.isin(*names) if names else F.lit(True)))
    outputs = []
    for number, (variant, chosen) in enumerate(parts):
        part_id = None if run_id is None else f"{run_id}-{number}"
        records = dlq.filter(chosen)
        if apply == "write":
            outputs.append(variant.write(_json_records(records, contract), run_id=part_id))
        else:
            outputs.append(variant.deserialize(_wire_records(records), run_id=part_id, **options))
    return reduce(lambda left, right: left.unionByName(right), outputs)


def _rule_names(contract: Replayable, apply: str) -> list[str]:
    """The names of the rules the replayed records may have failed on: the WRITE rules for
    "write"; the READ rules and every version's migration rules for "deserialize"."""
    mode = RuleMode.WRITE if apply == "write" else RuleMode.READ
    names = {planned.rule.name for planned in contract.plan(mode).rules}
    if apply == "deserialize":
        for number in contract.registry.get_versions(contract.subject):
            rule_set = contract.registry.get_version(contract.subject, number).schema.rule_set
            names.update(rule.name for rule in (rule_set.migration_rules if rule_set else ()))
    return sorted(names)


def _json_records(dlq: DataFrame, contract: Replayable) -> DataFrame:
    """The records of WRITE-side DLQ values as the record's columns, with the DLQ record's `key`
    and `headers`, and `topic`: the topic the record was first bound for (its `__rule.topic`).
    A value holding no JSON record fails the job, naming where it is and what to do."""
    from pyspark.sql import functions as F

    record = record_column(F.col("value"), contract.parsed)
    position = [F.col(name).cast("string") for name in ("topic", "writer", "offset") if name in dlq.columns]
    missing = F.raise_error(
        F.concat_ws(
            " ",
            F.lit(f"a DLQ record replayed on {contract.subject!r} holds no JSON record"),
            F.lit("(topic, writer, offset:"),
            *position,
            F.lit(
                "): its value is a wire-format frame or not a JSON object; replay it with apply='deserialize'"
            ),
        )
    )
    checked = dlq.withColumn("__replayed", F.when(record.isNull(), missing).otherwise(record))
    fields = contract.spark_schema.fieldNames()
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
