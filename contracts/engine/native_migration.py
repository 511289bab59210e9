"""Migrations as Spark expressions, where they give exactly what the Python path gives.

The Python path (`python_migration.migrate`, then `python_migration.project`) runs each rule per
record and projects the result onto the target schema. A chain of at most one JSONata or CEL_FIELD rule
that compiles natively against the writer's record — and a chain of none, pure schema resolution
— runs instead as Columns (docs/semantics.md §6.6): the rule's outcome and status as the planner
computes them for any native rule, then the projection (fields by name, defaults for missing
ones, an error where the target gives none or allows no null the value holds). Bytes, decimals,
dates, times and timestamps are carried as they are where the target field has the same type as
the field they come from (the Python path reads them through JSONata's JSON view and back, which
keeps them exactly then). Anything the projection cannot reproduce exactly (a value Python would
convert or refuse differently, a default that is not a plain literal) keeps the Python path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fastavro.schema import expand_schema

from actions.protocol import Effect
from contracts.engine.columns import OUTCOME_PREFIX, RECORD, STATUS
from contracts.engine.python_migration import made_by_text
from contracts.engine.reasons import NativeReasons
from contracts.engine.runner import native_status
from contracts.formats.avro.json_view import SOURCE_KEY, has_json_view, source_type
from contracts.formats.avro.project import missing_field_message, null_field_message
from contracts.planning.loader import ContractVersion, rule_context
from contracts.planning.migration import Resolver, migration_steps
from contracts.planning.plan import Plan, PlannedRule, build_plan
from executors.protocol import MigrationResult, NativeStep, native_migration_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

_OUTCOME = OUTCOME_PREFIX + "migration"
# Source → target Spark types whose Python values the target's Arrow conversion takes exactly.
_WIDENINGS = frozenset({("int", "bigint"), ("int", "double"), ("float", "double")})
_LITERAL_TYPES = frozenset({"null", "boolean", "int", "long", "float", "double", "string", "enum"})
# Target types (as `source_type` writes them) any computed JSON value of the matching Spark type is.
_COMPUTED = [{"type": kind} for kind in ("boolean", "int", "long", "float", "double", "string")]


class _Inexact(Exception):
    """The projection has no native form that is provably the Python path's."""


@dataclass(frozen=True)
class _Field:
    """How one target field is filled: copied from `source` (cast when widened), else `default`;
    `may_be_null` when the source may hold a null the target's type does not allow."""

    name: str
    dtype: DataType
    source: str | None
    widen: bool
    default: Any
    has_default: bool
    may_be_null: bool = False


@dataclass(frozen=True)
class Projection:
    """Plain data of a known Spark type read as the target record (Java's re-decode, docs/semantics.md §6)."""

    fields: tuple[_Field, ...]

    def may_miss(self, undefined: frozenset[str] = frozenset()) -> bool:
        """Whether some row may not be read: a field without default absent (or a key JSONata may
        leave out), or a null where the target allows none."""
        return any(
            f.may_be_null or (not f.has_default and (f.source is None or f.source in undefined))
            for f in self.fields
        )

    def build(
        self, record: Column, undefined: Mapping[str, Column] | None = None, made_by: str = ""
    ) -> Projected:
        """The target struct from `record` (a key flagged undefined counts as missing on that row),
        and why it cannot be read: the Python projection's error for the first field missing
        without default or null where the target allows none (ending with `made_by`), null where
        none is."""
        from pyspark.sql import functions as F

        columns = []
        reasons: list[tuple[Column | None, str]] = []
        for f in self.fields:
            default = F.lit(f.default).cast(f.dtype) if f.has_default else F.lit(None).cast(f.dtype)
            if f.source is None:
                column, missing = default, None
            else:
                value = record.getField(f.source)
                column = value.cast(f.dtype) if f.widen else value
                missing = undefined.get(f.source) if undefined else None
                if missing is not None:
                    column = F.when(missing, default).otherwise(column)
            if not f.has_default and (f.source is None or missing is not None):
                reasons.append((missing, missing_field_message(f.name) + made_by))
            if f.source is not None and f.may_be_null:
                null = value.isNull() if missing is None else ~missing & value.isNull()
                reasons.append((null, null_field_message(f.name) + made_by))
            columns.append(column.alias(f.name))
        return Projected(F.struct(*columns), _first_reason(reasons))


@dataclass(frozen=True)
class Projected:
    """A projection's record and, where a field is missing without default, why (else null)."""

    record: Column
    reason: Column | None


def _first_reason(reasons: list[tuple[Column | None, str]]) -> Column | None:
    """The text of the first missing field (None as a flag: always missing)."""
    from pyspark.sql import functions as F

    if not reasons:
        return None
    if reasons[0][0] is None:
        return F.lit(reasons[0][1])
    chosen = F.when(reasons[0][0], F.lit(reasons[0][1]))
    for flag, text in reasons[1:]:
        chosen = chosen.when(F.lit(True) if flag is None else flag, F.lit(text))
    return chosen


def projection(source: StructType, target: ContractVersion, source_schema: Any = None) -> Projection:
    """The projection of records of Spark type `source` onto `target`: the writer's records as they
    are when `source_schema` is its Avro schema, else a JSONata result (whose fields copied from
    the record say their Avro type in metadata); raises _Inexact where only Python is exact."""
    named = _named(target.parsed)
    available = {f.name: f for f in source.fields}
    wanted_types = _field_types(target.parsed)
    writer_types = _field_types(source_schema) if source_schema is not None else {}
    fields = []
    for avro_field, spark_field in zip(target.parsed["fields"], target.spark_type.fields, strict=True):
        name = avro_field["name"]
        widen = may_be_null = False
        if name in available:
            have, want = available[name].dataType.simpleString(), spark_field.dataType.simpleString()
            if have != want and (have, want) not in _WIDENINGS:
                raise _Inexact(f"field {name}: {have} into {want}")
            widen = have != want
            _same_values(
                name, wanted_types[name], writer_types.get(name), available[name], source_schema, widen
            )
            may_be_null = available[name].nullable and not spark_field.nullable
        has_default = "default" in avro_field
        if has_default and not _literal_default(avro_field["type"], named):
            raise _Inexact(f"default of field {name}")
        fields.append(
            _Field(
                name,
                spark_field.dataType,
                name if name in available else None,
                widen,
                avro_field.get("default"),
                has_default,
                may_be_null,
            )
        )
    return Projection(tuple(fields))


def _same_values(
    name: str, wanted: Any, writer: Any, field: StructField, source_schema: Any, widen: bool
) -> None:
    """Raise _Inexact unless the Python path keeps the value of `field` as it is in the target,
    and finds every one a value of the target's type (nulls aside: `Projection` checks those).

    A writer's record holds Avro values, which Python passes on unchanged. A JSONata result holds
    the JSON view, which Python reads back as the target's type: exact where the value was a record
    field of that same type, or a computed string, number or boolean into a plain field of that kind.
    Either way the value's own type must be the target's (nulls aside), or a numeric widening."""
    copied = field.metadata.get(SOURCE_KEY)
    if source_schema is not None:
        have = source_type(writer)
    elif copied is not None:
        have = json.loads(copied)
    elif has_json_view(wanted) or source_type(wanted) not in _COMPUTED:
        raise _Inexact(f"field {name} read from a computed JSON value as {source_type(wanted)}")
    else:
        return
    want = source_type(wanted)
    if have != want and not (widen and have in _COMPUTED and want in _COMPUTED):
        raise _Inexact(f"field {name}: values of {have} read as {want}")


def _named(schema: Any) -> Mapping[str, Any]:
    return schema.get("__named_schemas", {}) if isinstance(schema, Mapping) else {}


def _field_types(schema: Any) -> dict[str, Any]:
    """Each field's Avro type, named types written out (fastavro's expanded schema), by name."""
    return {f["name"]: f["type"] for f in expand_schema(dict(schema))["fields"]}


def _literal_default(schema: Any, named: Mapping[str, Any]) -> bool:
    """Whether the field's default is a scalar literal Spark takes as it is (a union's default
    belongs to its first branch; a logical type's default is JSON Python converts)."""
    first = schema[0] if isinstance(schema, list) else schema
    if isinstance(first, str) and first in named:
        first = named[first]
    if isinstance(first, dict) and first.get("logicalType") is not None:
        return False
    kind = first if isinstance(first, str) else first.get("type")
    return kind in _LITERAL_TYPES


def _when(condition: Column, reason: Column | None) -> Column | None:
    from pyspark.sql import functions as F

    return None if reason is None else F.when(condition, reason)


def _otherwise(chosen: Column | None, condition: Column, reason: Column | None) -> Column | None:
    from pyspark.sql import functions as F

    if reason is None:
        return chosen
    return F.when(condition, reason) if chosen is None else chosen.when(condition, reason)


def _mark_unreadable(
    staged: DataFrame, evaluated: Column, reason: Column | None, unreadable: Callable[[Column], Column]
) -> DataFrame:
    """Rows still valid whose projection lacks a field get `unreadable(reason)` as their status."""
    from pyspark.sql import functions as F

    if reason is None:
        return staged
    status = F.col(STATUS)
    failing = evaluated & status.isNull() & reason.isNotNull()
    return staged.withColumn(STATUS, F.when(failing, unreadable(reason)).otherwise(status))


@dataclass(frozen=True)
class NativeMigration:
    """A writer version's migration to the target as Columns: its one rule (None for schema
    resolution alone), the projection of the rule's result (`migrated`, fixed by `resolved`) and
    the projection of a record the rule left unchanged (None when a failure never continues).

    The rule's result is JSONata's plain data in the JSON view (`result_view`), or a record of the
    writer's own schema, `writer_schema` (a CEL_FIELD transform); a CONDITION has no result and
    hands the writer's record on."""

    writer_type: StructType
    writer_schema: Any
    target: ContractVersion
    rule: PlannedRule | None
    unchanged: Projection | None
    result_view: bool = True
    migrated: Projection | None = None
    undefined: frozenset[str] = frozenset()
    """The rule result's keys JSONata may leave out (known once `resolved`)."""

    @property
    def may_be_unreadable(self) -> bool:
        """Whether a migrated record may not be read as the target (a decode failure)."""
        unchanged = self.unchanged is not None and self.unchanged.may_miss()
        return unchanged or (self.migrated is not None and self.migrated.may_miss(self.undefined))

    @property
    def can_reject(self) -> bool:
        """Whether the rule's action can send a row to a dead-letter topic."""
        actions = (self.rule.on_success, self.rule.on_failure) if self.rule is not None else ()
        return any(action.effect is Effect.REJECT for action in actions)

    def resolved(self, spark: SparkSession) -> NativeMigration | None:
        """With the rule's result type analysed by Spark (on the driver): None when that result
        has no exact native projection (or is no record), and the Python path must run."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        if self.rule is None:
            return self
        probe = spark.createDataFrame([], self.writer_type)
        record = F.struct(*[F.col(f"`{name}`") for name in self.writer_type.fieldNames()])
        result = self._step.build(record)
        if result.record is None:  # a CONDITION: the writer's record goes on as it was
            result_type, result_schema = self.writer_type, self.writer_schema
        else:
            result_type = probe.select(result.record.alias("r")).schema["r"].dataType
            result_schema = None if self.result_view else self.writer_schema
        if not isinstance(result_type, StructType):
            return None
        try:
            migrated = projection(result_type, self.target, result_schema)
        except _Inexact:
            return None
        return replace(self, migrated=migrated, undefined=frozenset(result.undefined))

    def apply(
        self,
        staged: DataFrame,
        source: str,
        unreadable: Callable[[Column], Column],
        otherwise: Column | None = None,
    ) -> DataFrame:
        """Migrate the writer's records in column `source` (null on rows of other writers) into
        RECORD, setting `_contract` as the rule's action says, and to `unreadable(reason)` where
        the result cannot be read as the target; other rows keep `otherwise`."""
        from pyspark.sql import functions as F

        writer = F.col(source)
        active = F.col(STATUS).isNull() & writer.isNotNull()
        fallback = otherwise if otherwise is not None else F.lit(None)
        if self.rule is None:
            assert self.unchanged is not None
            projected = self.unchanged.build(writer)
            staged = staged.withColumn(RECORD, F.when(active, projected.record).otherwise(fallback))
            return _mark_unreadable(staged, active, projected.reason, unreadable)
        assert self.migrated is not None, "resolve the migration on the driver first"
        result = self._step.build(writer)
        staged = staged.withColumn(_OUTCOME, F.when(active, F.coalesce(result.passed, F.lit(False))))
        outcome = F.col(_OUTCOME)
        if result.record is None:  # a CONDITION hands the record on, named by no transform
            migrated = self.migrated.build(writer)
        else:
            migrated = self.migrated.build(result.record, result.undefined, made_by_text(self.rule))
        record, reason = F.when(outcome, migrated.record), _when(outcome, migrated.reason)
        if self.unchanged is not None:
            unchanged = self.unchanged.build(writer)
            record = record.when(~outcome, unchanged.record)
            reason = _otherwise(reason, ~outcome, unchanged.reason)
        record = record.when(outcome.isNull(), fallback)
        staged = staged.withColumns({RECORD: record, STATUS: native_status(self.rule, outcome)})
        return _mark_unreadable(staged, outcome.isNotNull(), reason, unreadable).drop(_OUTCOME)

    def reasons(self) -> NativeReasons | None:
        """Exact failure reasons for the rows this rule rejects (its Python twin sees the writer's record)."""
        if self.rule is None:
            return None
        ctx = self.rule.ctx
        return NativeReasons(Plan(ctx.subject, ctx.version, ctx.mode, ctx.spark_type, (self.rule,)))

    @property
    def _step(self) -> NativeStep:
        assert self.rule is not None and isinstance(self.rule.step, NativeStep)
        return self.rule.step


def native_migration(
    versions: Mapping[int, ContractVersion],
    writer: int,
    target: int,
    executors: Any,
    resolve_action: Resolver,
) -> NativeMigration | None:
    """The migration from `writer` to `target` as Columns, or None when it must run in Python
    (or when there is none: the target's own records are read with the target schema). Its one
    rule, if any, is compiled natively against the writer's record by an executor that says what
    its native result is (`native_migration`, docs/semantics.md §6.6)."""
    if writer == target:
        return None
    if any(versions[v].format.schema_type != "AVRO" for v in (writer, target)):
        return None  # the native projection onto the target reads Avro schemas
    steps = migration_steps(versions, writer, target, executors)
    rules = [(version, mode, rule) for version, mode, step_rules in steps for rule in step_rules]
    source, goal = versions[writer], versions[target]
    try:
        unchanged = projection(source.spark_type, goal, source.parsed)
    except _Inexact:
        unchanged = None
    if not rules:
        if unchanged is None:
            return None
        return NativeMigration(source.spark_type, source.parsed, goal, None, unchanged)
    if len(rules) > 1:
        return None
    version, mode, rule = rules[0]
    executor = executors.find(rule.type, rule_name=rule.name)
    result = native_migration_of(executor)
    if result is None:
        return None
    ctx = rule_context(version, mode, rule, record=source)
    step = executor.compile(ctx)
    where = (version.subject, version.version, mode, source.spark_type)
    (planned,) = build_plan(*where, [(ctx, step)], resolve_action).rules
    if not isinstance(step, NativeStep) or planned.has_callbacks:
        return None
    if planned.on_failure.effect is Effect.CONTINUE and unchanged is None:
        return None
    continues = planned.on_failure.effect is Effect.CONTINUE
    result_view = result is MigrationResult.JSON_VIEW
    kept = unchanged if continues else None
    return NativeMigration(source.spark_type, source.parsed, goal, planned, kept, result_view)
