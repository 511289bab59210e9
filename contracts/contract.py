"""The DataFrame API: a contract from the registry, enforced on Spark DataFrames, lazily."""

from __future__ import annotations

import copy
import dataclasses
import os
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actions.builtin import checked_topic
from actions.dlq.local_topic import DEFAULT_DLQ_DIR, LocalTopicSink
from actions.dlq.replays import take
from actions.dlq.sink import DlqSink
from actions.protocol import Action
from contracts.engine import decode
from contracts.engine.columns import refuse_reserved_columns
from contracts.engine.conform import conformed
from contracts.engine.counts import CollectMetrics
from contracts.engine.native_migration import NativeMigration, native_migration
from contracts.engine.pipelines import Counted, Pipelines
from contracts.engine.tombstones import tombstone_filter
from contracts.engine.workers import check_workers
from contracts.errors import ContractError, ContractWarning
from contracts.formats.markers import ABSENT_MARK
from contracts.formats.protocol import SchemaFormat
from contracts.metrics import RuleMetrics, metrics_for, with_metrics
from contracts.model import RuleMode
from contracts.planning import loader
from contracts.planning.plan import Plan
from contracts.planning.planner import (
    CompiledPlans,
    ContractPlanner,
    action_registry,
    dlq_redaction,
    executor_registry,
)
from contracts.registry import Registry
from contracts.replay import RuleSkippingRegistry, VersionSchema, check_replay, replay, taken_frame
from contracts.streaming import MicroBatchWriter
from executors.config import RuleConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class RuleResult:
    """The lazy outcome of applying a contract: valid rows, rejected rows (+ `_contract`), and this
    call's per-rule counts (None when `collect_metrics` is off), which `metrics_of(valid)` and
    `metrics_of(rejected)` also answer."""

    valid: DataFrame
    rejected: DataFrame
    metrics: RuleMetrics | None


class DataContract:
    """A subject's data contract, resolved and compiled once, applied to DataFrames.

    The target version is `version`, else the latest whose metadata matches
    `use_latest_with_metadata`, else the latest. `executors` adds or replaces rule executors (a
    sequence registers by type, a mapping by rule name); `actions` adds or replaces actions by
    name; `dlq_sink` receives rejected rows (default: a LocalTopicSink under ./dlq-topics).
    Each call's per-rule counts belong to its result: `RuleResult.metrics`, or
    `contracts.metrics_of(df)` for the DataFrame a call returned; the contract keeps none.
    By default a batch call whose rules all run as Spark expressions counts them on demand (the
    first `get()` runs one aggregate job; the call's own query stays as fast as the rules alone),
    other calls during the first action on the result (Spark's `observe()`);
    `collect_metrics="observe"` always observes (for an input that would not read the same rows
    twice), `collect_metrics=False` skips them (both are then None), which also spares evaluating a
    rule whose outcome changes no row (onFailure NONE). `rule_config` is passed to every executor, as
    the reference's `rule_conf` (e.g. the local KMS's `secret`); its values never print.
    `protobuf_message` chooses a Protobuf contract's record by its message's full name
    (`acme.Refund`, a nested `acme.Outer.Inner`) in every version, where the schema declares
    several, as Confluent's clients are given the message class; by default the file's first.
    `warnings_column=True` adds `_contract_warnings` to the valid rows of `apply`, `write`, `read`
    and `deserialize`: the names of the rules the row failed whose action let it go on (NONE).
    """

    def __init__(
        self,
        registry: Registry,
        subject: str,
        version: int | None = None,
        use_latest_with_metadata: Mapping[str, str] | None = None,
        executors: Iterable[Any] | Mapping[str, Any] | None = None,
        actions: Iterable[Action] | None = None,
        dlq_sink: DlqSink | None = None,
        collect_metrics: CollectMetrics = True,
        rule_config: Mapping[str, str] | None = None,
        protobuf_message: str | None = None,
        warnings_column: bool = False,
    ) -> None:
        if collect_metrics not in (True, False, "observe"):
            raise ContractError(
                f"collect_metrics must be True, False or 'observe', not {collect_metrics!r}", subject=subject
            )
        self.registry = registry
        self.collect_metrics = collect_metrics
        self.warnings_column = warnings_column
        self.subject = subject
        registered = loader.resolve(registry, subject, version, use_latest_with_metadata)
        self.target = loader.load_version(registry, registered, protobuf_message)
        self._compiler = ContractPlanner(
            registry,
            subject,
            self.target,
            executor_registry(executors),
            action_registry(actions),
            RuleConfig(rule_config),
            registry,
            protobuf_message,
            native_migration,
        )
        self._dlq_sink = dlq_sink
        self._run_id: str | None = None
        self._resolved: dict[int, NativeMigration | None] = {}
        self._plans = CompiledPlans(self._compiler)
        # Both modes compiled read-only now: a contract that cannot run fails at load (§9.9).
        for mode in (RuleMode.WRITE, RuleMode.READ):
            self._plans.rules(mode, run=False)
        self._plans.encoding(RuleMode.WRITE, run=False)
        self._redaction = dlq_redaction(self.target, self._compiler.rule_config)
        shown = (self._plans.rules(mode, run=False) for mode in (RuleMode.WRITE, RuleMode.READ))
        for plan in (*shown, self._plans.encoding(RuleMode.WRITE, run=False)):
            for rule in plan.rules:
                if rule.step is None:
                    warnings.warn(rule.unhandled(), ContractWarning, stacklevel=2)

    @property
    def spark_schema(self) -> StructType:
        """The Spark type of the target version's record: its fields, the columns a DataFrame gives
        the contract. A JSON Schema record's `_absent` mask (docs/semantics.md §1.5) is not among
        them: `deserialize` adds it after them, and a DataFrame may leave it out."""
        from pyspark.sql.types import StructType

        fields = [f for f in self.target.spark_type.fields if not f.metadata.get(ABSENT_MARK)]
        return (
            StructType(fields) if len(fields) < len(self.target.spark_type.fields) else self.target.spark_type
        )

    @property
    def version(self) -> int:
        return self.target.version

    @property
    def planner(self) -> ContractPlanner:
        """What compiled this contract: the target's plans, and each registered writer version with
        its migrations to the target (what `spark-contracts apply` checks before it runs)."""
        return self._compiler

    @property
    def parsed(self) -> Any:
        """The target version's schema as its format parsed it (an Avro schema, a JSON Schema, a
        compiled Protobuf schema), e.g. to read a DLQ topic's records back."""
        return self.target.parsed

    @property
    def avro_schema(self) -> Any:
        """Deprecated: `parsed`, which every format has (the name dates from Avro-only contracts)."""
        warnings.warn(
            "DataContract.avro_schema is deprecated: use DataContract.parsed",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.target.parsed

    @property
    def schema_format(self) -> SchemaFormat:
        """The format of the target version's schema type: with `parsed`, what reads its records
        back from a DLQ topic (`decode_dlq(dlq, contract)`)."""
        return self.target.format

    @property
    def schema_id(self) -> int:
        return self.target.schema_id

    @property
    def dlq_sink(self) -> DlqSink:
        if self._dlq_sink is None:
            self._dlq_sink = LocalTopicSink(os.path.abspath(DEFAULT_DLQ_DIR))
        return self._dlq_sink

    def conform(self, df: DataFrame) -> DataFrame:
        """`df` with the record's columns cast and reordered to `spark_schema` where no value
        changes (int to long or double, a wider decimal, struct fields by name, a missing nullable
        field as null), its other columns after them; a ContractError naming the column, both types
        and why, for one that cannot be (contracts.engine.conform)."""
        return conformed(df, self.spark_schema, self.subject, self.version)

    def plan(self, mode: str | RuleMode = RuleMode.WRITE) -> Plan:
        """The compiled plan for WRITE or READ; `print(contract.plan("WRITE"))` explains it. Before
        the mode has run, a plan compiled to be shown, which changes nothing (docs/semantics.md §11.2)."""
        return self._plans.rules(_mode(mode), run=False)

    def explain(self, mode: str | RuleMode = RuleMode.WRITE, writer_version: int | None = None) -> str:
        """What the engine decided for `mode`: each rule in running order with its actions, how it
        runs (native, or in Python and why) and what it touches, and the rules that do not run.
        With `writer_version`, first the migration of that version's records to the target: its
        UPGRADE/DOWNGRADE steps and whether they run as Spark expressions. Encoding rules (on the
        serialized payload, in `serialize` and `deserialize`) come last, when the target has any."""
        chosen = _mode(mode)
        plan = self.plan(chosen).explain()
        encoding = self._plans.encoding(chosen, run=False)
        if encoding.rules:
            lines = encoding.explain().splitlines()[1:]
            where = (
                "after encoding, in serialize"
                if chosen is RuleMode.WRITE
                else "before decoding, in deserialize"
            )
            plan += f"\nEncoding rules on the serialized payload ({where}):\n" + "\n".join(lines)
        if writer_version is None or writer_version == self.version:
            return plan
        return f"{self._compiler.explain_migration(writer_version)}\n{plan}"

    def apply(self, df: DataFrame, mode: str | RuleMode = RuleMode.WRITE) -> RuleResult:
        """Run the rules of `mode` lazily: nothing executes until an action on the result."""
        plan = self._plans.rules(_mode(mode))
        check_workers(df.sparkSession)
        valid, rejected, counts = self._pipelines().apply(df, plan)
        metrics = metrics_for(counts)
        return RuleResult(
            valid=with_metrics(valid, metrics),
            rejected=with_metrics(rejected, metrics),
            metrics=metrics,
        )

    def write(self, df: DataFrame, *, run_id: str | None = None) -> DataFrame:
        """WRITE rules; rejected rows go to their DLQ topics as the valid rows are computed.

        `run_id` names this run's DLQ output (default: a new random id). Given, it makes a rerun
        replace what an earlier run with that id wrote: a LocalTopicSink drops that run's records
        when this is called, so the rerun of a job that failed half-way leaves no duplicates
        (docs/guide.md, "Dead-letter sinks").
        """
        plan = self._plans.rules(RuleMode.WRITE)
        check_workers(df.sparkSession)
        return _counted(self._pipelines().write(df, plan, run_id))

    def read(
        self, df: DataFrame, writer_version: int | None = None, *, run_id: str | None = None
    ) -> DataFrame:
        """Migrate an already-decoded DataFrame written with `writer_version` (default: the target)
        to the target version, then READ rules (in reverse order); rejected rows go to their DLQ.
        `run_id` names the DLQ output as in `write`."""
        plan = self._plans.rules(RuleMode.READ)
        check_workers(df.sparkSession)
        return _counted(self._pipelines().read(df, plan, writer_version, run_id))

    def deserialize(
        self,
        df: DataFrame,
        value_col: str = "value",
        key_col: str | None = "key",
        on_decode_error: str = "ERROR",
        decode_dlq_topic: str | None = None,
        tombstones: str = "keep",
        *,
        run_id: str | None = None,
        is_key: bool | None = None,
        key: DataContract | None = None,
    ) -> DataFrame:
        """Kafka-shaped rows (Confluent wire format in `value_col`) → the target version's record as
        typed columns plus the other columns (all but `value_col`), migrated, READ rules applied.

        A frame names its writer's schema by id (magic byte 0) or GUID (magic byte 1) in its
        prefix, or, when the row's Kafka `headers` hold a `__value_schema_id` header
        (`__key_schema_id` when `is_key`; default: whether `value_col` is "key"), in that header,
        before a bare body, as Confluent's dual schema id deserializer reads it.
        Undecodable records follow `on_decode_error`: "ERROR" fails the job, "DLQ" sends their raw
        bytes, with the key from `key_col` (None: no key), to `decode_dlq_topic`. A tombstone (a
        null value) is not a record: "keep" passes it through with null record fields, skipping
        migrations and rules; "drop" leaves it out. `run_id` names the DLQ output as in `write`.

        `key`, the contract of the key's subject (e.g. `<topic>-key`), decodes `key_col` first, as
        Confluent's consumer does: its record replaces the key's bytes as one struct column (null
        for a null key), after its own migrations and READ rules; a row its rules or decoding
        reject goes to its DLQ with the key and value as they arrived and goes no further
        (`metrics_of(result, key=True)` gives its counts; its DLQ output is named `<run_id>-key`).
        """
        if decode_dlq_topic is not None:
            checked_topic(decode_dlq_topic, "decode_dlq_topic", subject=self.subject, version=self.version)
        refuse_reserved_columns(df, self.subject, self.version)
        check_workers(df.sparkSession)
        df = tombstone_filter(df, value_col, tombstones)
        is_key = value_col == "key" if is_key is None else is_key
        policy = decode.DecodePolicy(on_decode_error, decode_dlq_topic)
        key_pipelines = None if key is None else key._pipelines()
        pipelines = self._pipelines()
        return _counted(pipelines.deserialize(df, value_col, key_col, policy, run_id, is_key, key_pipelines))

    def serialize(
        self,
        df: DataFrame,
        *,
        run_id: str | None = None,
        schema_id_serializer: str = "prefix",
        is_key: bool = False,
        key: DataContract | None = None,
        key_col: str = "key",
    ) -> DataFrame:
        """WRITE rules, then the record as a `value` column in Confluent framing; the other columns
        (a `key`, `topic`, `headers`, …) pass through for a Kafka sink. `run_id` names the DLQ
        output as in `write`.

        `schema_id_serializer` says where the schema is named, as the reference's
        `schema.id.serializer`: "prefix" (default), this version's id after magic byte 0;
        "prefix_guid", its GUID after magic byte 1; "header", its GUID in a `__value_schema_id`
        header (`__key_schema_id` when `is_key`) added to the `headers` column (created when the
        input has none), the value being the bare body. A schema id header of the input (it named
        the schema of the value being replaced) is dropped whichever is chosen.

        `key`, the contract of the key's subject, first encodes `key_col` (a struct of its record;
        null for no key, which stays null) into the key's frame, after its WRITE rules, as
        Confluent's producer does; a row they reject goes to its DLQ and goes no further
        (`metrics_of(result, key=True)` gives its counts; its DLQ output is named `<run_id>-key`).
        The key's schema is named as `schema_id_serializer` says (a `__key_schema_id` header)."""
        check_workers(df.sparkSession)
        key_pipelines = None if key is None else key._pipelines()
        pipelines = self._pipelines()
        return _counted(pipelines.serialize(df, run_id, schema_id_serializer, is_key, key_pipelines, key_col))

    def foreach_batch(
        self,
        write_valid: Callable[[DataFrame, int], None],
        *,
        name: str,
        apply: str = "write",
        **options: Any,
    ) -> MicroBatchWriter:
        """A function for `writeStream.foreachBatch`: each micro-batch goes through `apply` (write,
        read, deserialize or serialize, with `options`), its rejected rows to their DLQ topics, and
        its valid rows to `write_valid(valid, batch_id)`. `name` (unique per query) names the DLQ
        output of each micro-batch, so a micro-batch replayed after a restart replaces it."""
        return MicroBatchWriter(self, write_valid, name, apply, tuple(options.items()))

    def replay(
        self,
        dlq: DataFrame | str,
        *,
        apply: str = "write",
        run_id: str | None = None,
        spark: SparkSession | None = None,
        **options: Any,
    ) -> DataFrame:
        """The valid rows of a DLQ topic's records run through this contract again, after a fix;
        each record skips the rule its `__rule.name` header names, as Confluent's clients do, and
        one that fails again goes back to a DLQ topic as the result is computed (contracts.replay).

        `dlq` is a topic of this contract's LocalTopicSink, of which the replay takes the records
        no other replay took, for good (a rerun with the same `run_id`, which a topic needs, takes
        them again: the way to finish a replay that failed), or a DataFrame with
        `key`, `value` and `headers` (`LocalTopicSink.read_df`, or a Kafka DLQ topic read with
        includeHeaders), replayed whole. `apply` is "write" for WRITE-side records (JSON values),
        "read" for those `read` rejected (JSON values; `writer_version=` as `read` was given it),
        or "deserialize" for read-side ones (wire-format frames; `options` go to `deserialize`).
        `run_id` (default for a DataFrame: a new one) names the DLQ output as in `write`; each part
        of the replay appends `-<n>` to it."""
        if isinstance(dlq, str) and run_id is None:
            raise ContractError(
                f"replaying topic {dlq!r} needs a run_id: the records the replay takes are its own, and"
                " a replay that fails is finished by a rerun with the same run_id",
                subject=self.subject,
            )
        run_id = run_id or uuid.uuid4().hex
        check_replay(self, apply, run_id, options)
        if isinstance(dlq, str):
            sink = self.dlq_sink
            if not isinstance(sink, LocalTopicSink):
                raise ContractError(
                    f"replay reads a topic by name from a LocalTopicSink only; read {dlq!r} with"
                    " spark.read.format('kafka') (option includeHeaders=true) and pass the DataFrame",
                    subject=self.subject,
                )
            from pyspark.sql import SparkSession

            dlq = taken_frame(spark or SparkSession.active(), dlq, take(sink, dlq, run_id))
        return replay(self, dlq, apply, run_id, options)

    def _version_schema(self, version: int | None) -> VersionSchema:
        """Version `version`'s record (None: the target's): its format, parsed schema, Spark type."""
        loaded = self.target if version is None or version == self.version else self._compiler.load(version)
        return VersionSchema(loaded.format, loaded.parsed, loaded.spark_type)

    def _skipping(self, rule: str) -> DataContract:
        """This contract with every rule named `rule` disabled in every version: the contract a DLQ
        record that failed on `rule` is replayed through."""
        registry = RuleSkippingRegistry(self.registry, rule)
        variant = copy.copy(self)
        variant.registry = registry
        registered = registry.get_version(self.subject, self.version)
        variant.target = loader.load_version(registry, registered, self._compiler.protobuf_message)
        variant._compiler = dataclasses.replace(self._compiler, registry=registry, target=variant.target)
        variant._resolved = {}
        variant._plans = CompiledPlans(variant._compiler)
        for mode in (RuleMode.WRITE, RuleMode.READ):
            variant._plans.rules(mode, run=False)
        return variant

    def _with_run_id(self, run_id: str) -> DataContract:
        """This contract with DLQ output named by `run_id`: a DataFrame computed again (a replayed
        micro-batch) rewrites the same DLQ files instead of adding new ones."""
        pinned = copy.copy(self)
        pinned._run_id = run_id
        return pinned

    def _pipelines(self) -> Pipelines:
        """This contract's calls as the engine assembles them, its DLQ output named as pinned."""
        return Pipelines(
            self._compiler,
            self._plans,
            lambda: self.dlq_sink,
            self._run_id,
            self.collect_metrics,
            self.warnings_column,
            self._redaction,
            self._resolved,
        )

    def __repr__(self) -> str:
        return f"DataContract(subject={self.subject!r}, version={self.version}, id={self.schema_id})"


def _mode(mode: str | RuleMode) -> RuleMode:
    try:
        chosen = RuleMode(mode.upper() if isinstance(mode, str) else mode)
    except ValueError:
        raise ContractError(f"mode must be WRITE or READ, not {mode!r}") from None
    if chosen not in (RuleMode.WRITE, RuleMode.READ):
        raise ContractError(f"mode must be WRITE or READ, not {chosen.value}")
    return chosen


def _counted(counted: Counted) -> DataFrame:
    """A call's output, answering `metrics_of` with its counts (and `key=True` with its key's)."""
    return with_metrics(counted.df, metrics_for(counted.counts), metrics_for(counted.key_counts))
