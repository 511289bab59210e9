"""The executor protocol: an executor compiles a rule, once, into a native or a batch step.

A *native step* is a function of Spark Columns (the record as one struct Column) and runs inside
Catalyst at native speed. A *batch step* evaluates a batch of records in Python; the engine runs
consecutive batch steps in one `mapInArrow` pass and converts Arrow to records once per pass.
"""

from __future__ import annotations

import enum
import traceback
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from contracts.formats.protocol import Reference, SchemaFormat
from contracts.model import Rule, RuleKind, RuleMode

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class RuleContext:
    """What a rule runs against: the rule, where it is registered, the phase, and the record's schema."""

    rule: Rule
    subject: str
    version: int
    mode: RuleMode
    schema: Any
    """The record's schema as its format parsed it (`schema_format.parse`)."""
    spark_type: StructType
    schema_format: SchemaFormat
    """The format `schema` is parsed by (its registry schemaType): records, JSON view, bodies, and
    the record's field walk and presence."""
    metadata_tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    """The metadata properties of the version the rule runs for (the reference's target: the rule's
    own version, or for a DOWNGRADE migration the version it migrates to)."""
    named_schemas: tuple[Reference, ...] = ()
    # The contract's registry, for executors keeping state there (ENCRYPT's DEKs), and its
    # rule_config (secrets included: never printed; executors/config.py).
    registry: Any = field(default=None, repr=False, compare=False)
    rule_config: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    read_only: bool = False
    """Compile only to check or show the rule (`spark-contracts lint`, a plan shown before its mode
    has run): change nothing the rule reaches (no key created in a registry); the step is never run."""
    lint: bool = False
    """Compiled by `spark-contracts lint` (read-only too): a rule that would fail every record (an
    ENCRYPT rule whose KEK cannot be had) is a ContractError rather than a failure per record."""

    @property
    def params(self) -> Mapping[str, str]:
        """The rule's parameters, then the metadata properties of the version the rule runs for,
        as the reference's `get_parameter` looks a parameter up (a rule param wins, an empty one
        too; docs/semantics.md §1.2)."""
        return ChainMap(dict(self.rule.params), dict(self.properties))


@dataclass(frozen=True)
class Outcome:
    """One record's result of one rule: passed or not, the (possibly new) record, why it failed,
    and the cause behind that reason when there is more to it (an exception's traceback), which
    an ERROR action keeps for debugging after its first line."""

    passed: bool
    record: Any = None
    reason: str | None = None
    cause: str | None = None


@dataclass(frozen=True)
class NativeOutcome:
    """A native step's result as Columns: `passed` is a boolean Column (null counts as failed);
    `record` the new record struct for a TRANSFORM, None for a CONDITION. A migration's result is
    plain data whose keys may be left out: `undefined` flags, per key, the rows where that key is
    absent (its struct field is null there), so the projection onto the target can tell."""

    passed: Column
    record: Column | None = None
    undefined: Mapping[str, Column] = field(default_factory=dict)
    error: Column | None = None
    """True where `passed` is not true because evaluating the rule raised an error, false where the
    rule ran cleanly. A clean failure's reason is the rule's own (its doc, expression or name); an
    error's text only the Python twin knows, so only those rows are evaluated again when their
    exact reason is needed (docs/semantics.md §2.2). None: the step cannot tell them apart, and
    every failure is evaluated again."""


@dataclass(frozen=True)
class NativeStep:
    """A rule compiled to Spark expressions: `build(record)` maps the record struct Column to an outcome.

    `batch` is the same rule as a batch step, for the passes that must run rules in Python
    (migrations inside a decode, where one batch mixes records of several writer versions).
    """

    build: Callable[[Column], NativeOutcome]
    batch: BatchStep | None = None
    native: bool = field(default=True, init=False)
    explain: str | None = None
    """What `explain()` adds about this rule, e.g. the fields a CEL_FIELD rule touches."""
    runnable: bool = True
    """As for BatchStep."""


class BatchEvaluator(Protocol):
    """Evaluates one rule over a batch of records (Avro-shaped plain Python values), on a Spark worker."""

    def __call__(self, records: Sequence[Any]) -> Sequence[Outcome]: ...


@dataclass(frozen=True)
class BatchStep:
    """A rule evaluated in Python. `factory` is picklable and builds the evaluator once per worker."""

    factory: Callable[[], BatchEvaluator]
    native: bool = field(default=False, init=False)
    explain: str | None = None
    """What `explain()` adds about this rule, as for NativeStep."""
    why_not_native: str | None = None
    """Why the rule has no native form, for `explain()` (e.g. the function it calls)."""
    keeps_schema: bool = False
    """A TRANSFORM whose results are records of the schema whenever its input records are (ENCRYPT
    on Avro swaps strings for strings, bytes for bytes): the engine does not check them again."""
    runnable: bool = True
    """False for a step compiled `read_only` that must not run as it is (ENCRYPT's WRITE, which
    found no DEK so as to create none): the engine compiles the rule again before its mode runs."""


Step = NativeStep | BatchStep


class MigrationResult(enum.Enum):
    """What a TRANSFORM's native result is when the engine runs a migration rule natively (and
    which record it walks: the one the rule receives, docs/semantics.md §6.3, §6.6)."""

    RECORD = "record"
    """The migrated record as Spark values of the record the rule received (CEL_FIELD)."""
    JSON_VIEW = "json_view"
    """Plain data in the record's JSON view, its fields' metadata naming the Avro types they copy
    (`contracts.formats.avro.json_view.SOURCE_KEY`), read back onto the target (JSONata)."""


@runtime_checkable
class Executor(Protocol):
    """Compiles rules of one `type` (CEL, CEL_FIELD, JSONATA or a custom name) into steps.

    Two optional members give an executor the powers the built-ins have; the engine reads them
    with `supersedes_rule` and `native_migration_of`, never by testing for a class:

    - `supersedes(rule, other) -> bool`: whether `rule` must not run because `other`, a rule of the
      same list running before it (after it in READ and DOWNGRADE), does the same job — CEL_FIELD's
      transforms with the same tags (docs/semantics.md §4.5). Judged on the whole list, disabled
      rules and other modes included, as the reference does. Absent: never.
    - `native_migration: MigrationResult | None`: set when the executor's native steps may run a
      single migration rule as Columns, saying what their result is. Absent or None: migrations
      with its rules run in Python.
    """

    type: str

    def compile(self, ctx: RuleContext) -> Step:
        """Compile `ctx.rule` once; raise contracts.errors.ContractError for a rule that cannot run."""
        ...


def supersedes_rule(executor: Any, rule: Rule, other: Rule) -> bool:
    """Whether `executor` (the one running `rule`) says `other` supersedes `rule` (see Executor)."""
    supersedes = getattr(executor, "supersedes", None)
    return bool(supersedes(rule, other)) if supersedes is not None else False


def native_migration_of(executor: Any) -> MigrationResult | None:
    """How `executor`'s native steps may run a migration rule, or None (see Executor)."""
    form = getattr(executor, "native_migration", None)
    return form if isinstance(form, MigrationResult) else None


class RecordExecutor(Protocol):
    """The simple, Confluent-style interface: one record at a time.

    `transform` returns the new record for a TRANSFORM rule, or a truthy/falsy value for a
    CONDITION; raising is a rule failure. The engine runs it batched in Python.
    """

    type: str

    def transform(self, ctx: RuleContext, message: Any) -> Any: ...


@dataclass(frozen=True)
class _RecordEvaluator:
    """Adapts a RecordExecutor to a batch evaluator, turning its answers into Outcomes."""

    executor: RecordExecutor
    ctx: RuleContext

    def __call__(self, records: Sequence[Any]) -> Sequence[Outcome]:
        return [self._one(record) for record in records]

    def _one(self, record: Any) -> Outcome:
        rule = self.ctx.rule
        try:
            result = self.executor.transform(self.ctx, record)
        except Exception as e:  # a failing executor is a rule failure, never a crash (docs/semantics.md §9.3)
            return Outcome(False, record, f"{type(e).__name__}: {e}", traceback.format_exc())
        if rule.kind is RuleKind.CONDITION:
            if result:
                return Outcome(True, record)
            return Outcome(False, record, condition_failure_message(rule))
        if result is None:
            return Outcome(False, record, f"Rule failed: {rule.name}")
        return Outcome(True, result)


@dataclass(frozen=True)
class RecordExecutorAdapter:
    """An Executor made from a RecordExecutor: every rule compiles to a batch step calling it per record."""

    executor: RecordExecutor

    @property
    def type(self) -> str:
        return self.executor.type

    def compile(self, ctx: RuleContext) -> Step:
        return BatchStep(_PartialEvaluator(self.executor, ctx))


@dataclass(frozen=True)
class _PartialEvaluator:
    """A picklable factory for _RecordEvaluator (a lambda would not pickle)."""

    executor: RecordExecutor
    ctx: RuleContext

    def __call__(self) -> BatchEvaluator:
        return _RecordEvaluator(self.executor, self.ctx)


def same_tag_transforms(rule: Rule, other: Rule) -> bool:
    """The reference's field rules (CEL_FIELD, ENCRYPT): a TRANSFORM is superseded by another of
    the same type and mode with the same non-empty tags that runs before it (docs/semantics.md §4.5)."""
    return (
        bool(rule.tags)
        and rule.kind is RuleKind.TRANSFORM
        and other.kind is RuleKind.TRANSFORM
        and rule.mode is other.mode
        and rule.type == other.type
        and tuple(rule.tags) == tuple(other.tags)
    )


def condition_failure_message(rule: Rule) -> str:
    """The reference's text for a failed condition: the rule's doc, else its expression, else its name."""
    if rule.doc:
        return rule.doc
    if rule.expr:
        return f"Rule expr failed: {rule.expr}"
    return f"Rule failed: {rule.name}"
