"""Migrations run in Python: a migration chain over decoded records, the result projected onto the
target schema; and the pass running them on a DataFrame decoded with the writer's schema (`read`).

The migrated record is projected as Java's client re-decodes it: extra fields dropped, a missing
field takes its default; a missing field without one, a value the target cannot hold, or a
TRANSFORM result that is no record at all makes the record undecodable, naming the rule that
made it (docs/semantics.md §6.4, §6.5).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine import python_pass
from contracts.engine.columns import (
    FAILURE,
    ORIGINAL,
    RECORD,
    STATUS,
    failed_batch,
    failure_field,
    raise_failures,
    status_type,
)
from contracts.engine.positions import refuse_unread
from contracts.errors import DataContractError, SerializationError, in_one_line
from contracts.formats.arrow_types import arrow_schema
from contracts.formats.protocol import SchemaFormat
from contracts.model import RuleKind
from contracts.planning.loader import ContractVersion
from contracts.planning.plan import Plan, PlannedRule
from contracts.planning.planner import WriterVersion

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_SHOWN_LENGTH = 80
"""How much of a rule's non-record result an error shows."""


@dataclass(frozen=True)
class Unreadable:
    """What a migration made of a record that is no record (a TRANSFORM returned a number, a
    string, a list): why, naming the rule. Later rules do not receive it; `project` raises its
    reason, so the record is undecodable (docs/semantics.md §6.5)."""

    reason: str


def migrate(
    plans: tuple[Plan, ...],
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    unreadable: Mapping[int, str] | None = None,
) -> list[PlannedRule | None]:
    """Run the migration plans over records in place: a DLQ rejection sets a row's status, an
    ERROR action its failure (the message the job fails with, see planner.raise_failures); a
    rule without executor fails each record, and each rule fails the rows in `unreadable`, whose
    records could not be read, with their reason; a TRANSFORM result that is not a record
    replaces the record with an `Unreadable`. Returns, per record, the last TRANSFORM that made it
    (None: no rule changed it), for `project` to name."""
    made_by: list[PlannedRule | None] = [None] * len(records)
    for plan in plans:
        for rule in plan.rules:
            rows = [i for i, record in enumerate(records) if not isinstance(record, Unreadable)]
            passed = _run(plan, rule, rows, records, statuses, failures, unreadable or {})
            if rule.rule.kind is not RuleKind.TRANSFORM:
                continue
            for i in (row for row, ok in zip(rows, passed, strict=True) if ok):
                made_by[i] = rule
                if not isinstance(records[i], Mapping):
                    records[i] = Unreadable(f"{_named(rule)} returned {_shown(records[i])}, not a record")
    return made_by


def _run(
    plan: Plan,
    rule: PlannedRule,
    rows: list[int],
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    unreadable: Mapping[int, str],
) -> list[bool | None]:
    """One rule over the records at `rows` (those still valid), in place: each one's outcome.
    Rows in `unreadable` fail the rule with their reason, unevaluated."""
    sub_records = [records[i] for i in rows]
    sub_statuses = [statuses[i] for i in rows]
    sub_failures = [failures[i] for i in rows]
    if rule.step is None:
        passed: list[bool | None] = [None] * len(rows)
        for j, status in enumerate(sub_statuses):
            if status is None and sub_failures[j] is None:
                reason = rule.missing_executor_reason
                sub_statuses[j], sub_failures[j] = python_pass.act(rule, sub_records[j], False, reason)
                passed[j] = False
    else:
        evaluator = python_pass.evaluator_for(plan.plan_id, rule)
        sub_unreadable = {j: unreadable[i] for j, i in enumerate(rows) if i in unreadable}
        passed, _ = python_pass.run_rule(
            rule, evaluator, sub_records, sub_statuses, sub_failures, unreadable=sub_unreadable
        )
    for j, i in enumerate(rows):
        records[i], statuses[i], failures[i] = sub_records[j], sub_statuses[j], sub_failures[j]
    return passed


def _named(rule: PlannedRule) -> str:
    ctx = rule.ctx
    where = f"on subject {ctx.subject!r} version {ctx.version}"
    return f"migration rule {rule.rule.name!r} in {ctx.mode.value} {where}"


def made_by_text(rule: PlannedRule | None) -> str:
    """What a projection error adds to name the rule whose result it read ("" for none)."""
    return "" if rule is None else f" (the result of {_named(rule)})"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_LENGTH else text[: _SHOWN_LENGTH - 3] + "..."


def project(value: Any, schema: Any, schema_format: SchemaFormat, made_by: PlannedRule | None = None) -> Any:
    """A migrated value read as a record of the target `schema` by its format (for Avro: missing
    fields take their defaults, JSON-view values become Avro values, as Java reads the migrated
    JSON with the target schema); what cannot be is a SerializationError naming `made_by`, the
    rule whose result it was."""
    if isinstance(value, Unreadable):
        raise SerializationError(value.reason)
    try:
        return schema_format.project(value, schema)
    except SerializationError as e:
        raise SerializationError(f"{e}{made_by_text(made_by)}") from e


def migrate_decoded(packed: DataFrame, writer: WriterVersion, target: ContractVersion) -> DataFrame:
    """For a DataFrame already decoded with the writer's schema (its record packed in RECORD):
    migrate each record to the target. The writer-shaped record stays in ORIGINAL for the DLQ."""
    from pyspark.sql.types import StructField, StructType

    fields = [f for f in packed.schema.fields if f.name not in (RECORD, STATUS)]
    writer_type = packed.schema[RECORD].dataType
    output = StructType(
        [
            *fields,
            StructField(ORIGINAL, writer_type, True),
            StructField(RECORD, target.spark_type, True),
            StructField(STATUS, status_type(), True),
            failure_field(),
        ]
    )
    return raise_failures(packed.mapInArrow(_MigratePass(writer, target.parsed, output.json()), output))


@dataclass(frozen=True)
class _MigratePass:
    writer: WriterVersion
    target_schema: Any
    output_json: str

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.types import StructType

        output = arrow_schema(StructType.fromJson(json.loads(self.output_json)))
        rows_before = 0
        for batch in batches:
            try:
                yield self._migrated(batch, output, rows_before)
            except DataContractError as error:
                if not batch.num_rows:
                    raise
                yield failed_batch(batch, output, in_one_line(error))  # fails the job as one line
            rows_before += batch.num_rows

    def _migrated(self, batch: pa.RecordBatch, output: pa.Schema, rows_before: int) -> pa.RecordBatch:
        """The batch's records migrated and projected onto the target, with their statuses and failures."""
        read = self.writer.schema_format.read_struct(batch.column(RECORD), self.writer.schema)
        records = read.records
        statuses: list[dict[str, Any] | None] = batch.column(STATUS).to_pylist()
        failures: list[str | None] = [None] * batch.num_rows
        made_by = migrate(self.writer.migrations, records, statuses, failures, read.unreadable)
        refuse_unread(batch, rows_before, read.unreadable, statuses, failures, "migrated")
        projected: list[Any] = [None] * batch.num_rows
        for i, (record, status) in enumerate(zip(records, statuses, strict=True)):
            if status is not None or failures[i] is not None:
                continue
            try:
                projected[i] = project(record, self.target_schema, self.writer.schema_format, made_by[i])
            except SerializationError as e:
                failures[i] = str(e)  # the job fails with why, as a native migration fails it
        target_type = output.field(RECORD).type
        record_column = self.writer.schema_format.to_struct(projected, self.target_schema, target_type)
        columns = [
            record_column
            if f.name == RECORD
            else batch.column(RECORD)
            if f.name == ORIGINAL
            else pa.array(statuses, type=f.type)
            if f.name == STATUS
            else pa.array(failures, type=f.type)
            if f.name == FAILURE
            else batch.column(f.name)
            for f in output
        ]
        return pa.RecordBatch.from_arrays(columns, schema=output)
