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
from actions.dlq.sink import DlqSink, RunScopedSink, is_run_id
from actions.protocol import Action
from contracts import keys
from contracts.engine import jvm_avro, jvm_json, python_pass, runner, serde
from contracts.engine.conform import conformed
from contracts.engine.counts import Gatherer
from contracts.engine.frame import ORIGINAL, RECORD, STATUS, WARNINGS, refuse_reserved_columns
from contracts.engine.native_migration import NativeMigration, native_migration
from contracts.engine.payload import PayloadRules
from contracts.engine.reasons import NativeReasons, with_exact_reasons
from contracts.engine.routing import DlqLayout, Router, route_rejected
from contracts.engine.workers import check_workers
from contracts.errors import ContractError, ContractWarning
from contracts.formats.markers import ABSENT_MARK
from contracts.formats.protocol import SchemaFormat
from contracts.formats.wire import SchemaRef, encode_prefix, schema_id_header
from contracts.metrics import CollectMetrics, RuleMetrics, metrics_of, new_metrics, with_metrics
from contracts.model import RegisteredSchema, RuleMode
from contracts.planning import loader
from contracts.planning.plan import Plan
from contracts.planning.planner import (
    CompiledPlans,
    ContractPlanner,
    WriterVersion,
    action_registry,
    dlq_redaction,
    executor_registry,
)
from contracts.registry import Registry
from contracts.registry.guid import canonical_guid
from contracts.replay import RuleSkippingRegistry, VersionSchema, check_replay, replay, taken_frame
from contracts.streaming import MicroBatchWriter
from executors.config import RuleConfig

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


def _headers_field() -> Any:
    """The `headers` column `serialize` adds for a schema id header, typed as Spark's Kafka source
    and sink type Kafka headers."""
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    entry = StructType([StructField("key", StringType(), False), StructField("value", BinaryType(), True)])
    return StructField("headers", ArrayType(entry, False), True)


@dataclass(frozen=True)
class RuleResult:
    """The lazy outcome of applying a contract: valid rows, rejected rows (+ `_contract`), and this
    call's per-rule counts (None when `collect_metrics` is off), which `metrics_of(valid)` and
    `metrics_of(rejected)` also answer."""

    valid: DataFrame
    rejected: DataFrame
    metrics: RuleMetrics | None


@dataclass(frozen=True)
class _Run:
    """One call's DLQ destination: the sink its tasks write to and the run id their writers carry."""

    sink: DlqSink
    run_id: str


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
        return f"{self._explain_migration(writer_version)}\n{plan}"

    def _explain_migration(self, writer_version: int) -> str:
        writer = self._compiler.writer(self.registry.get_version(self.subject, writer_version))
        header = f"Migration of subject {self.subject!r} from version {writer_version} to {self.version}"
        if writer.failure is not None:
            return f"{header}: impossible, {writer.failure}"
        if not any(plan.rules for plan in writer.migrations):
            return f"{header}: no migration rules"
        how = "as Spark expressions" if writer.native is not None else "in Python (a mapInArrow pass)"
        steps = [plan.explain() for plan in writer.migrations if plan.rules]
        indented = ["  " + line for step in steps for line in step.splitlines()]
        return "\n".join([f"{header}, run {how}:", *indented])

    def apply(self, df: DataFrame, mode: str | RuleMode = RuleMode.WRITE) -> RuleResult:
        """Run the rules of `mode` lazily: nothing executes until an action on the result."""
        plan = self._plans.rules(_mode(mode))
        check_workers(df.sparkSession)
        metrics, gatherer = self._metrics(plan, df, runs_on_input=True)
        warn = self._warnings_for(df)
        staged = runner.stage(plan, df, gatherer, keep_outcomes=warn)
        valid = _output(plan, staged.filter(_status().isNull()), _valid_columns(df, plan), gatherer, warn)
        rejected = with_exact_reasons(staged.filter(_status().isNotNull()), plan)
        return RuleResult(
            valid=with_metrics(valid, metrics),
            rejected=with_metrics(rejected.select(*_rejected_columns(df, plan)), metrics),
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
        columns = _valid_columns(df, plan)
        return self._enforced(plan, df, self._start_run(df, run_id), columns, warn=self._warnings_for(df))

    def read(
        self, df: DataFrame, writer_version: int | None = None, *, run_id: str | None = None
    ) -> DataFrame:
        """Migrate an already-decoded DataFrame written with `writer_version` (default: the target)
        to the target version, then READ rules (in reverse order); rejected rows go to their DLQ.
        `run_id` names the DLQ output as in `write`."""
        from pyspark.sql import functions as F

        plan = self._plans.rules(RuleMode.READ)
        check_workers(df.sparkSession)
        warn = self._warnings_for(df)
        if writer_version is None or writer_version == self.version:
            return self._enforced(plan, df, self._start_run(df, run_id), _valid_columns(df, plan), warn=warn)
        writer = self._compiler.writer(self.registry.get_version(self.subject, writer_version))
        if writer.failure is not None:
            raise ContractError(writer.failure, subject=self.subject, version=self.version)
        writer_plan = self._compiler.load(writer_version)
        packed = runner.pack(
            Plan(self.subject, writer_version, RuleMode.READ, writer_plan.spark_type, ()), df
        )
        native = self._natives([writer], df).get(writer_version)
        if native is not None:
            # As the Python projection raises: a migrated record missing a field fails the job.
            staged = packed.withColumn(ORIGINAL, F.col(RECORD))
            migrated = native.apply(staged, ORIGINAL, lambda reason: F.raise_error(reason))
        else:
            migrated = serde.migrate_decoded(packed, writer, self.target)
        metrics, gatherer = self._metrics(plan, df, runs_on_input=False)
        staged = runner.run(plan, migrated, gatherer, keep_outcomes=warn)
        layout = DlqLayout(record_column=ORIGINAL, schema=writer.schema, schema_format=self.target.format)
        reasons = _migration_reasons({ORIGINAL: native})
        run = self._start_run(df, run_id)
        routed = self._route(staged, layout, plan, run, migrations=writer.migrations, reasons=reasons)
        columns = _record_then_passthrough(df, writer_plan.spark_type, self.target.spark_type)
        return with_metrics(_output(plan, routed, columns, gatherer, warn), metrics)

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
        from pyspark.sql import functions as F

        if decode_dlq_topic is not None:
            checked_topic(decode_dlq_topic, "decode_dlq_topic", subject=self.subject, version=self.version)
        refuse_reserved_columns(df, self.subject, self.version)
        check_workers(df.sparkSession)
        df = serde.tombstone_filter(df, value_col, tombstones)
        is_key = value_col == "key" if is_key is None else is_key
        policy = serde.DecodePolicy(on_decode_error, decode_dlq_topic)
        if key is None:
            return self._decode(df, value_col, _key_column(df, key_col), policy, run_id, is_key)
        key_column = keys.key_column_of(df, key_col, key.subject, key.version)
        keys.check_free(df, self.subject, self.version)
        framed = df.withColumn(keys.RAW_KEY, F.col(f"`{key_column}`"))
        pinned = run_id is None and self._run_id is not None
        key_pass = key._with_run_id(f"{self._run_id}-key") if pinned else key
        decoded_keys = key_pass._decode(
            framed, key_column, keys.RAW_KEY, policy, keys.key_run_id(run_id), True, dlq_value=value_col
        )
        nested = keys.nest_decoded_key(decoded_keys, key.target.spark_type, key_column, df.columns)
        decoded = self._decode(nested, value_col, keys.RAW_KEY, policy, run_id, is_key)
        return with_metrics(decoded.drop(keys.RAW_KEY), metrics_of(decoded), metrics_of(decoded_keys))

    def _decode(
        self,
        df: DataFrame,
        value_col: str,
        key_col: str | None,
        policy: serde.DecodePolicy,
        run_id: str | None,
        is_key: bool,
        dlq_value: str | None = None,
    ) -> DataFrame:
        """`deserialize` of `value_col` alone; a DLQ record's key is `key_col`'s, its value the
        bytes of `dlq_value` (default: `value_col`)."""
        from pyspark.sql import functions as F

        warn = self._warnings_for(df)
        versions = self._compiler.versions()
        writers = self._compiler.writers(versions)
        natives = self._natives(writers.values(), df)
        headers = _present(df, "headers")
        # A `headers` column of another type is not Kafka's, so it holds no schema id headers.
        kafka_headers = headers if headers and serde.is_kafka_headers(df.schema[headers].dataType) else None
        decoder = serde.Decoder(
            subject=self.subject,
            target_version=self.version,
            target_schema=self.target.parsed,
            target_type_json=self.target.spark_type.json(),
            writers=writers,
            late=serde.LateWriters(self.registry, self.subject, self._compiler.writer),
            policy=policy,
            value_column=value_col,
            schema_format=self.target.format,
            native_types={version: native.writer_type.json() for version, native in natives.items()},
            guids=_guids(versions),
            headers_column=kafka_headers,
            id_header=schema_id_header(is_key),
        )
        plan = self._plans.rules(RuleMode.READ)
        layout = DlqLayout(
            record_column=RECORD,
            schema=self.target.parsed,
            schema_format=self.target.format,
            value_column=dlq_value or value_col,
            key_column=key_col,
            headers_column=_present(df, "headers"),
            topic_column=_present(df, "topic"),
        )
        run = self._start_run(df, run_id)
        # Decode failures and Python migrations are routed inside the decode pass itself (on the
        # JVM paths, jvm_avro and jvm_json, by the Python decoder given the rows the JVM does not
        # read); the frames travel on only when a later rule may send a row's bytes to a DLQ topic.
        jvm = jvm_avro.JvmDecode.plan(decoder, df.sparkSession) or jvm_json.JsonJvmDecode.plan(
            decoder, df.sparkSession
        )
        may_be_unreadable = any(n.may_be_unreadable for n in natives.values())
        unreadable_dlq = policy.action == "DLQ" and may_be_unreadable
        later_rejects = unreadable_dlq or plan.can_reject or any(n.can_reject for n in natives.values())
        router = Router(run.sink, run.run_id, layout, stage="decode")
        leading = None
        if jvm is not None:
            decoded = jvm.decode(df, decoder, router, keep_value=later_rejects)
        else:
            # The plan's first Python rules run in the decode pass when they can: one pass, not two.
            leading = serde.fuses(decoder, python_pass.leading_rules(plan))
            decoded = serde.decode(df, decoder, router, keep_value=later_rejects, leading=leading)
        unreadable = serde.unreadable_status(decoder, decoded.columns)
        for version, native in natives.items():
            column = serde.writer_column(version)
            decoded = native.apply(decoded, column, unreadable, otherwise=F.col(RECORD))
        metrics, gatherer = self._metrics(plan, df, runs_on_input=False)
        staged = serde.release_tombstones(
            runner.run(plan, decoded, gatherer, leading_ran=leading is not None, keep_outcomes=warn)
        )
        reasons = _migration_reasons({serde.writer_column(v): native for v, native in natives.items()})
        migrations = natives.values()
        routed = self._route(staged, layout, plan, run, migrations, reasons, route_always=unreadable_dlq)
        passthrough = [name for name in df.columns if name != value_col]
        columns = _record_then_passthrough_names(passthrough, self.target.spark_type)
        return with_metrics(_output(plan, routed, columns, gatherer, warn), metrics)

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
        if key is None:
            return self._encode(df, run_id, schema_id_serializer, is_key)
        key_column = keys.key_column_of(df, key_col, key.subject, key.version)
        keys.check_free(df, self.subject, self.version)
        keys.check_key_struct(df, key_column, key.target.spark_type, key.subject, key.version)
        unpacked, lifted = keys.unpack_key_fields(df, key.target.spark_type, key_column)
        pinned = run_id is None and self._run_id is not None
        key_pass = key._with_run_id(f"{self._run_id}-key") if pinned else key
        encoded_keys = key_pass._encode(
            unpacked, keys.key_run_id(run_id), schema_id_serializer, True, absent=keys.ABSENT
        )
        framed = keys.unpack_rest(encoded_keys, key_column, df.columns, lifted)
        encoded = self._encode(framed, run_id, schema_id_serializer, is_key)
        return with_metrics(encoded, metrics_of(encoded), metrics_of(encoded_keys))

    def _encode(
        self,
        df: DataFrame,
        run_id: str | None,
        schema_id_serializer: str,
        is_key: bool,
        absent: str | None = None,
    ) -> DataFrame:
        """`serialize` of the record alone; rows where column `absent` is true hold none (a null key)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType, StructField, StructType

        schema_ref = self._schema_ref(schema_id_serializer)
        plan = self._plans.rules(RuleMode.WRITE)
        record_fields = set(self.target.spark_type.fieldNames())
        passthrough = [f for f in df.schema.fields if f.name not in record_fields and f.name != "value"]
        in_header = self._schema_id_headers(df, schema_id_serializer, schema_ref, schema_id_header(is_key))
        added = [] if in_header is None or in_header.from_input else [_headers_field()]
        output = StructType([*passthrough, StructField("value", BinaryType(), True), *added])
        # Only what the encode pass reads enters it: not the original record, status or field columns.
        needed = [*[F.col(f"`{f.name}`") for f in passthrough], F.col(RECORD)]
        run = self._start_run(df, run_id)
        enforced = self._enforced(plan, df, run, needed, absent)
        schema = self.target.parsed
        # Rows the encoding rules reject carry their serialized body to the DLQ, as the reference's.
        layout = DlqLayout(
            record_column=RECORD,
            schema=schema,
            schema_format=self.target.format,
            value_column="value",
            key_column=_present(df, "key"),
            headers_column=_present(df, "headers"),
            topic_column=_present(df, "topic"),
        )
        payload = (
            PayloadRules(self._plans.encoding(RuleMode.WRITE)),
            Router(run.sink, run.run_id, layout, stage="encode"),
        )
        encoded = jvm_avro.encode(
            enforced, schema, schema_ref, output, self.target.format, in_header, payload
        )
        return with_metrics(encoded, metrics_of(enforced))

    def _schema_ref(self, schema_id_serializer: str) -> SchemaRef:
        """What `serialize` names the target's schema by: its id, or its GUID (for "prefix_guid" and
        "header"), which the registry must have given."""
        if schema_id_serializer not in serde.SCHEMA_ID_SERIALIZERS:
            raise ContractError(
                f"schema_id_serializer must be one of {', '.join(serde.SCHEMA_ID_SERIALIZERS)},"
                f" not {schema_id_serializer!r}",
                subject=self.subject,
                version=self.version,
            )
        if schema_id_serializer == "prefix":
            return self.schema_id
        if self.target.guid is None:
            raise ContractError(
                f"the registry gave no GUID for this version (Confluent Schema Registry gives one from"
                f" 8.0), so schema_id_serializer={schema_id_serializer!r} cannot name it: use 'prefix'",
                subject=self.subject,
                version=self.version,
            )
        return uuid.UUID(self.target.guid)

    def _schema_id_headers(
        self, df: DataFrame, schema_id_serializer: str, schema_ref: SchemaRef, header: str
    ) -> serde.SchemaIdHeaders | None:
        """What `serialize` does to the `headers` column: adds the schema id header ("header"),
        drops the input's own schema id headers, or (no Kafka headers to touch) nothing."""
        present = "headers" in df.columns and "headers" not in self.target.spark_type.fieldNames()
        kafka = present and serde.is_kafka_headers(df.schema["headers"].dataType)
        if schema_id_serializer != "header":
            return serde.SchemaIdHeaders("headers", header, None, True) if kafka else None
        if "headers" in self.target.spark_type.fieldNames() or (present and not kafka):
            what = (
                "is a field of the record"
                if not present
                else f"is {df.schema['headers'].dataType.simpleString()}"
            )
            raise ContractError(
                f"schema_id_serializer='header' writes the schema id into a `headers` column of Kafka"
                f" headers (array<struct<key:string,value:binary>>), and `headers` {what}",
                subject=self.subject,
                version=self.version,
            )
        return serde.SchemaIdHeaders("headers", header, encode_prefix(schema_ref), present)

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

    def _natives(self, writers: Iterable[WriterVersion], df: DataFrame) -> dict[int, NativeMigration]:
        """The writer versions whose migration to the target runs as Columns, by version; each is
        resolved (one Spark analysis) once per contract, not per micro-batch."""
        natives = {}
        for writer in writers:
            if writer.version not in self._resolved:
                native = writer.native
                self._resolved[writer.version] = native.resolved(df.sparkSession) if native else None
            resolved = self._resolved[writer.version]
            if resolved is not None:
                natives[writer.version] = resolved
        return natives

    def _start_run(self, df: DataFrame, run_id: str | None) -> _Run:
        """Where one call's DLQ output goes and the run id naming it: `run_id`, else the one
        `foreach_batch` pinned, else a new one.

        A chosen `run_id` starts that run afresh on a sink that can (a LocalTopicSink), so a rerun
        writes exactly its own records, whatever its partitions, and the earlier run's stragglers
        cannot add theirs. Not on a streaming DataFrame: a restarted query does not replay the
        micro-batches it committed, so their records stay, and one it replays replaces its own
        output task by task.
        """
        sink = self.dlq_sink
        if run_id is None:
            return _Run(sink, self._run_id or uuid.uuid4().hex)
        if not is_run_id(run_id):
            raise ContractError(
                f"run_id must be 1-100 ASCII letters, digits, '_' or '-', not {run_id!r}",
                subject=self.subject,
                version=self.version,
            )
        if df.isStreaming or not isinstance(sink, RunScopedSink):
            return _Run(sink, run_id)
        return _Run(sink.begin_run(run_id), run_id)

    def _enforced(
        self,
        plan: Plan,
        df: DataFrame,
        run: _Run,
        columns: list[Column],
        absent: str | None = None,
        warn: bool = False,
    ) -> DataFrame:
        """`plan` run on `df` with its rejected rows routed, as `columns` (and, with `warn`, the
        `_contract_warnings` column), answering `metrics_of`; rows where column `absent` is true
        hold no record and skip every rule."""
        metrics, gatherer = self._metrics(plan, df, runs_on_input=absent is None)
        if absent is None:
            staged = runner.stage(plan, df, gatherer, keep_outcomes=warn)
        else:
            packed = serde.without_record(runner.pack(plan, df), absent, self.subject, self.version)
            staged = serde.release_tombstones(runner.run(plan, packed, gatherer, keep_outcomes=warn))
        routed = self._route(staged, self._json_layout(df, plan), plan, run)
        return with_metrics(_output(plan, routed, columns, gatherer, warn), metrics)

    def _warnings_for(self, df: DataFrame) -> bool:
        """Whether this call adds `_contract_warnings` (the contract's `warnings_column`); a
        ContractError when `df` holds that column already (a valid output applied again)."""
        if self.warnings_column and WARNINGS in df.columns:
            raise ContractError(
                f"the DataFrame already has column {WARNINGS!r}, which the contract adds to its valid"
                f" rows; drop it first: df.drop({WARNINGS!r})",
                subject=self.subject,
                version=self.version,
            )
        return self.warnings_column

    def _metrics(
        self, plan: Plan, df: DataFrame, runs_on_input: bool
    ) -> tuple[RuleMetrics | None, Gatherer | None]:
        """One call's counts of `plan` on `df`, and what gathers them (None, None when metrics are
        off); `runs_on_input` as in `new_metrics`."""
        if self.collect_metrics is False:
            return None, None
        return new_metrics(plan, df, self.collect_metrics, runs_on_input)

    def _json_layout(self, df: DataFrame, plan: Plan) -> DlqLayout:
        """DLQ records whose value is the record as it arrived, as JSON (docs/semantics.md §7);
        on WRITE, with the fields ENCRYPT rules tag redacted (§11.4)."""
        return DlqLayout(
            redact=self._redaction if plan.mode is RuleMode.WRITE else None,
            record_column=ORIGINAL if plan.has_transforms else RECORD,
            schema=self.target.parsed,
            schema_format=self.target.format,
            key_column=_present(df, "key"),
            headers_column=_present(df, "headers"),
            topic_column=_present(df, "topic"),
        )

    def _route(
        self,
        staged: DataFrame,
        layout: DlqLayout,
        plan: Plan,
        run: _Run,
        migrations: Iterable[Plan | NativeMigration] = (),
        reasons: tuple[tuple[NativeReasons, str], ...] = (),
        route_always: bool = False,
    ) -> DataFrame:
        """Rejected rows to their DLQ topics, and copies of the rows a copy action fired on to
        theirs. When neither the plan nor the `migrations` that ran before it can reject a row, the
        plan copies none (and `route_always` is off: a decode policy that sends unreadable rows to a
        DLQ) there is no Python pass, only the filter on `_contract` that makes Spark evaluate it
        (an ERROR action fires there)."""
        routes = route_always or bool(plan.copies)
        if not routes and not any(p.can_reject for p in (plan, *migrations)):
            return staged.filter(_status().isNull())
        return route_rejected(staged, run.sink, run.run_id, layout, plan, reasons)

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


def _output(
    plan: Plan, frame: DataFrame, columns: list[Column], gatherer: Gatherer | None, warn: bool = False
) -> DataFrame:
    """`frame` as `columns` (with `warn`, then `_contract_warnings` from its outcome columns),
    observed with the per-rule counts when the plan counts them on its output
    (runner.counts_at_output): its outcome columns carried to the top and dropped there."""
    from pyspark.sql import functions as F

    if warn:
        columns = [*columns, runner.warnings_column(plan).alias(WARNINGS)]
    if gatherer is None or not runner.counts_at_output(plan, gatherer):
        return frame.select(*columns)
    carried = frame.select(*columns, *(F.col(name) for name in runner.outcome_columns(plan)))
    return runner.observe_output(plan, carried, gatherer)


def _migration_reasons(
    migrations: Mapping[str, NativeMigration | None],
) -> tuple[tuple[NativeReasons, str], ...]:
    """Exact-reason twins of native migration rules, each with the column of the record it read."""
    pairs = []
    for column, native in migrations.items():
        reasons = native.reasons() if native is not None else None
        if reasons is not None:
            pairs.append((reasons, column))
    return tuple(pairs)


def _guids(versions: Iterable[RegisteredSchema]) -> dict[str, int]:
    """The schema id of each version's GUID (in canonical form), where the registry gave one."""
    return {
        guid: registered.schema_id
        for registered in versions
        if registered.guid is not None and (guid := canonical_guid(registered.guid)) is not None
    }


def _present(df: DataFrame, name: str) -> str | None:
    return name if name in df.columns else None


def _key_column(df: DataFrame, key_col: str | None) -> str | None:
    """The column holding the Kafka key: `key_col` ("key" by default, taken when present)."""
    if key_col is None or (key_col == "key" and key_col not in df.columns):
        return None
    if key_col not in df.columns:
        raise ContractError(f"no column {key_col!r} holds the Kafka key (columns: {', '.join(df.columns)})")
    return key_col


def _status() -> Column:
    from pyspark.sql import functions as F

    return F.col(STATUS)


def _valid_columns(df: DataFrame, plan: Plan) -> list[Column]:
    """The input's columns in their order, record fields taken from the (transformed) record."""
    return _columns_from(df, plan, RECORD)


def _rejected_columns(df: DataFrame, plan: Plan) -> list[Column]:
    """The input's columns as they arrived, plus `_contract`."""
    return [*_columns_from(df, plan, ORIGINAL if plan.has_transforms else RECORD), _status()]


def _columns_from(df: DataFrame, plan: Plan, struct_column: str) -> list[Column]:
    from pyspark.sql import functions as F

    record_fields = set(plan.record_type.fieldNames())

    def field(name: str) -> Column:
        return (
            runner.record_field(plan, name)
            if struct_column == RECORD
            else F.col(struct_column).getField(name)
        )

    return [field(name).alias(name) if name in record_fields else F.col(f"`{name}`") for name in df.columns]


def _record_then_passthrough_names(passthrough: list[str], record_type: StructType) -> list[Column]:
    """The record's fields, then the other columns — a column named like a record field is dropped."""
    from pyspark.sql import functions as F

    fields = record_type.fieldNames()
    kept = [name for name in passthrough if name not in fields]
    return [*(F.col(RECORD).getField(name).alias(name) for name in fields), *(F.col(f"`{n}`") for n in kept)]


def _record_then_passthrough(df: DataFrame, writer_type: StructType, record_type: StructType) -> list[Column]:
    """For a migrated DataFrame: the target record's fields, then the input's non-record columns."""
    writer_fields = set(writer_type.fieldNames())
    passthrough = [name for name in df.columns if name not in writer_fields]
    return _record_then_passthrough_names(passthrough, record_type)
