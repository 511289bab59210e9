"""A contract's calls assembled on DataFrames: `apply`, `write`, `read`, `serialize` and
`deserialize` as the engine's passes, each call's DLQ run, and the counts each call gathers.

`DataContract` resolves its options and hands each call here; what comes back is the call's
DataFrame(s) with the counts the API layer turns into the call's `RuleMetrics`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actions.dlq.redaction import Redaction
from actions.dlq.sink import DlqSink, RunScopedSink, is_run_id
from contracts.engine import (
    decode,
    encode,
    id_headers,
    jvm_avro,
    jvm_json,
    kafka_keys,
    python_migration,
    python_pass,
    runner,
    tombstones,
)
from contracts.engine.columns import ORIGINAL, RECORD, STATUS, WARNINGS, field_path, quote_name
from contracts.engine.counts import CollectMetrics, Counting, CountOnDemand, Gatherer, counting
from contracts.engine.encoding_rules import PayloadRules
from contracts.engine.native_migration import NativeMigration
from contracts.engine.read_twice import reads_twice_safely
from contracts.engine.reasons import NativeReasons, with_exact_reasons
from contracts.engine.routing import DlqLayout, Router, route_beside, route_rejected
from contracts.errors import ContractError
from contracts.formats.wire import schema_id_header
from contracts.model import RegisteredSchema, RuleMode
from contracts.planning.loader import ContractVersion
from contracts.planning.plan import Plan
from contracts.planning.planner import CompiledPlans, ContractPlanner, LateWriters, WriterVersion
from contracts.registry.guid import canonical_guid

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class Run:
    """One call's DLQ destination: the sink its tasks write to and the run id their writers carry."""

    sink: DlqSink
    run_id: str


@dataclass(frozen=True)
class Counted:
    """A call's output and how its counts (and, with a key contract, the key's) are gathered."""

    df: DataFrame
    counts: Counting | None
    key_counts: Counting | None = None


@dataclass(frozen=True)
class Pipelines:
    """One contract's calls on DataFrames: its planner and compiled plans, where its DLQ output
    goes, and how it counts. `resolved` (shared with the contract's copies) caches the writer
    versions' native migrations as Spark analysed them."""

    planner: ContractPlanner
    plans: CompiledPlans
    sink: Callable[[], DlqSink]
    """The contract's DLQ sink, asked for when a call routes (its default is made then)."""
    pinned_run_id: str | None
    """The run id `foreach_batch` pinned for each micro-batch (None: a new one per call)."""
    collect_metrics: CollectMetrics
    warnings_column: bool
    redaction: Redaction | None
    resolved: dict[int, NativeMigration | None]

    @property
    def target(self) -> ContractVersion:
        return self.planner.target

    @property
    def subject(self) -> str:
        return self.planner.subject

    @property
    def version(self) -> int:
        return self.planner.target.version

    def apply(self, df: DataFrame, plan: Plan) -> tuple[DataFrame, DataFrame, Counting | None]:
        """`plan` run lazily on `df`: the valid rows, the rejected rows with `_contract`, the counts."""
        counts, gatherer = self._counting(plan, df, runs_on_input=True)
        warn = self._warnings_for(df)
        staged = runner.stage(plan, df, gatherer, keep_outcomes=warn)
        valid = _output(plan, staged.filter(_status().isNull()), _valid_columns(df, plan), gatherer, warn)
        rejected = with_exact_reasons(staged.filter(_status().isNotNull()), plan)
        return valid, rejected.select(*_rejected_columns(df, plan)), counts

    def write(self, df: DataFrame, plan: Plan, run_id: str | None) -> Counted:
        """WRITE rules on `df`, rejected rows routed to their DLQ topics."""
        columns = _valid_columns(df, plan)
        return self._enforced(plan, df, self._start_run(df, run_id), columns, warn=self._warnings_for(df))

    def read(self, df: DataFrame, plan: Plan, writer_version: int | None, run_id: str | None) -> Counted:
        """`df`, decoded with `writer_version`'s schema, migrated to the target, then READ rules."""
        from pyspark.sql import functions as F

        warn = self._warnings_for(df)
        if writer_version is None or writer_version == self.version:
            return self._enforced(plan, df, self._start_run(df, run_id), _valid_columns(df, plan), warn=warn)
        writer = self.planner.writer(self.planner.registry.get_version(self.subject, writer_version))
        if writer.failure is not None:
            raise ContractError(writer.failure, subject=self.subject, version=self.version)
        writer_plan = self.planner.load(writer_version)
        packed = runner.pack(
            Plan(self.subject, writer_version, RuleMode.READ, writer_plan.spark_type, ()), df
        )
        native = self.natives([writer], df).get(writer_version)
        if native is not None:
            # As the Python projection raises: a migrated record missing a field fails the job.
            staged = packed.withColumn(ORIGINAL, F.col(RECORD))
            migrated = native.apply(staged, ORIGINAL, lambda reason: F.raise_error(reason))
        else:
            migrated = python_migration.migrate_decoded(packed, writer, self.target)
        counts, gatherer = self._counting(plan, df, runs_on_input=False)
        staged = runner.run(plan, migrated, gatherer, keep_outcomes=warn)
        layout = DlqLayout(record_column=ORIGINAL, schema=writer.schema, schema_format=self.target.format)
        reasons = _migration_reasons({ORIGINAL: native})
        run = self._start_run(df, run_id)
        routed = self._route(staged, layout, plan, run, migrations=writer.migrations, reasons=reasons)
        columns = _record_then_passthrough(df, writer_plan.spark_type, self.target.spark_type)
        return Counted(_output(plan, routed, columns, gatherer, warn), counts)

    def deserialize(
        self,
        df: DataFrame,
        value_col: str,
        key_col: str | None,
        policy: decode.DecodePolicy,
        run_id: str | None,
        is_key: bool,
        key: Pipelines | None,
    ) -> Counted:
        """`df`'s frames in `value_col` decoded, migrated and READ rules run; with `key` (the key
        subject's pipelines), `key_col` decoded first into one struct column (docs/semantics.md §8.9)."""
        from pyspark.sql import functions as F

        if key is None:
            return self._decode(df, value_col, _key_column(df, key_col), policy, run_id, is_key)
        key_column = kafka_keys.key_column_of(df, key_col, key.subject, key.version)
        kafka_keys.check_free(df, self.subject, self.version)
        framed = df.withColumn(kafka_keys.RAW_KEY, F.col(f"`{key_column}`"))
        key_pass = self._key_pass(key, run_id)
        decoded_keys = key_pass._decode(
            framed,
            key_column,
            kafka_keys.RAW_KEY,
            policy,
            kafka_keys.key_run_id(run_id),
            True,
            dlq_value=value_col,
        )
        nested = kafka_keys.nest_decoded_key(decoded_keys.df, key.target.spark_type, key_column, df.columns)
        decoded = self._decode(nested, value_col, kafka_keys.RAW_KEY, policy, run_id, is_key)
        return Counted(decoded.df.drop(kafka_keys.RAW_KEY), decoded.counts, decoded_keys.counts)

    def serialize(
        self,
        df: DataFrame,
        run_id: str | None,
        schema_id_serializer: str,
        is_key: bool,
        key: Pipelines | None,
        key_col: str,
    ) -> Counted:
        """WRITE rules, then the record in Confluent framing in `value`; with `key`, `key_col`'s
        record encoded first into the key's frame (docs/semantics.md §8.9)."""
        if key is None:
            return self._encode(df, run_id, schema_id_serializer, is_key)
        key_column = kafka_keys.key_column_of(df, key_col, key.subject, key.version)
        kafka_keys.check_free(df, self.subject, self.version)
        kafka_keys.check_key_struct(df, key_column, key.target.spark_type, key.subject, key.version)
        unpacked, lifted = kafka_keys.unpack_key_fields(df, key.target.spark_type, key_column)
        encoded_keys = self._key_pass(key, run_id)._encode(
            unpacked, kafka_keys.key_run_id(run_id), schema_id_serializer, True, absent=kafka_keys.ABSENT
        )
        framed = kafka_keys.unpack_rest(encoded_keys.df, key_column, df.columns, lifted)
        encoded = self._encode(framed, run_id, schema_id_serializer, is_key)
        return Counted(encoded.df, encoded.counts, encoded_keys.counts)

    def natives(self, writers: Iterable[WriterVersion], df: DataFrame) -> dict[int, NativeMigration]:
        """The writer versions whose migration to the target runs as Columns, by version; each is
        resolved (one Spark analysis) once per contract, not per micro-batch."""
        natives = {}
        for writer in writers:
            if writer.version not in self.resolved:
                native = writer.native
                self.resolved[writer.version] = native.resolved(df.sparkSession) if native else None
            resolved = self.resolved[writer.version]
            if resolved is not None:
                natives[writer.version] = resolved
        return natives

    def _key_pass(self, key: Pipelines, run_id: str | None) -> Pipelines:
        """The key contract's pipelines for this call: a micro-batch's key output is named apart."""
        if run_id is None and self.pinned_run_id is not None:
            return dataclasses.replace(key, pinned_run_id=f"{self.pinned_run_id}-key")
        return key

    def _decode(
        self,
        df: DataFrame,
        value_col: str,
        key_col: str | None,
        policy: decode.DecodePolicy,
        run_id: str | None,
        is_key: bool,
        dlq_value: str | None = None,
    ) -> Counted:
        """`deserialize` of `value_col` alone; a DLQ record's key is `key_col`'s, its value the
        bytes of `dlq_value` (default: `value_col`)."""
        from pyspark.sql import functions as F

        warn = self._warnings_for(df)
        versions = self.planner.versions()
        writers = self.planner.writers(versions)
        natives = self.natives(writers.values(), df)
        headers = _present(df, "headers")
        # A `headers` column of another type is not Kafka's, so it holds no schema id headers.
        is_kafka = headers is not None and id_headers.is_kafka_headers(df.schema[headers].dataType)
        kafka_headers = headers if is_kafka else None
        decoder = decode.Decoder(
            subject=self.subject,
            target_version=self.version,
            target_schema=self.target.parsed,
            target_type_json=self.target.spark_type.json(),
            writers=writers,
            late=LateWriters(self.planner.registry, self.subject, self.planner.writer),
            policy=policy,
            value_column=value_col,
            schema_format=self.target.format,
            native_types={version: native.writer_type.json() for version, native in natives.items()},
            guids=_guids(versions),
            headers_column=kafka_headers,
            id_header=schema_id_header(is_key),
        )
        plan = self.plans.rules(RuleMode.READ)
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
            leading = decode.fuses(decoder, python_pass.leading_rules(plan))
            decoded = decode.decode(df, decoder, router, keep_value=later_rejects, leading=leading)
        unreadable = decode.unreadable_status(decoder, decoded.columns)
        for version, native in natives.items():
            column = decode.writer_column(version)
            decoded = native.apply(decoded, column, unreadable, otherwise=F.col(RECORD))
        counts, gatherer = self._counting(plan, df, runs_on_input=False)
        staged = tombstones.release_tombstones(
            runner.run(plan, decoded, gatherer, leading_ran=leading is not None, keep_outcomes=warn)
        )
        reasons = _migration_reasons({decode.writer_column(v): native for v, native in natives.items()})
        migrations = natives.values()
        routed = self._route(staged, layout, plan, run, migrations, reasons, route_always=unreadable_dlq)
        passthrough = [name for name in df.columns if name != value_col]
        columns = _record_then_passthrough_names(passthrough, self.target.spark_type)
        return Counted(_output(plan, routed, columns, gatherer, warn), counts)

    def _encode(
        self,
        df: DataFrame,
        run_id: str | None,
        schema_id_serializer: str,
        is_key: bool,
        absent: str | None = None,
    ) -> Counted:
        """`serialize` of the record alone; rows where column `absent` is true hold none (a null key)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType, StructField, StructType

        schema_ref = id_headers.schema_ref(self.target, schema_id_serializer)
        plan = self.plans.rules(RuleMode.WRITE)
        record_fields = set(self.target.spark_type.fieldNames())
        passthrough = [f for f in df.schema.fields if f.name not in record_fields and f.name != "value"]
        in_header = id_headers.serialized_headers(
            df, self.target, schema_id_serializer, schema_ref, schema_id_header(is_key)
        )
        added = [] if in_header is None or in_header.from_input else [id_headers.headers_field()]
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
        rules = PayloadRules(self.plans.encoding(RuleMode.WRITE))
        payload = (rules, Router(run.sink, run.run_id, layout, stage="encode"))
        enforced_df, target_format = enforced.df, self.target.format
        arguments = (schema, schema_ref, output, target_format, in_header, payload)
        encoded = jvm_avro.to_avro_encode(enforced_df, *arguments)
        if encoded is None:
            encoded = encode.encode(enforced_df, *arguments)
        return Counted(encoded, enforced.counts)

    def _start_run(self, df: DataFrame, run_id: str | None) -> Run:
        """Where one call's DLQ output goes and the run id naming it: `run_id`, else the one
        `foreach_batch` pinned, else a new one.

        A chosen `run_id` starts that run afresh on a sink that can (a LocalTopicSink), so a rerun
        writes exactly its own records, whatever its partitions, and the earlier run's stragglers
        cannot add theirs. Not on a streaming DataFrame: a restarted query does not replay the
        micro-batches it committed, so their records stay, and one it replays replaces its own
        output task by task.
        """
        sink = self.sink()
        if run_id is None:
            return Run(sink, self.pinned_run_id or uuid.uuid4().hex)
        if not is_run_id(run_id):
            raise ContractError(
                f"run_id must be 1-100 ASCII letters, digits, '_' or '-', not {run_id!r}",
                subject=self.subject,
                version=self.version,
            )
        if df.isStreaming or not isinstance(sink, RunScopedSink):
            return Run(sink, run_id)
        return Run(sink.begin_run(run_id), run_id)

    def _enforced(
        self,
        plan: Plan,
        df: DataFrame,
        run: Run,
        columns: Sequence[Column | str],
        absent: str | None = None,
        warn: bool = False,
    ) -> Counted:
        """`plan` run on `df` with its rejected rows routed, as `columns` (and, with `warn`, the
        `_contract_warnings` column); rows where column `absent` is true hold no record and skip
        every rule."""
        counts, gatherer = self._counting(plan, df, runs_on_input=absent is None)
        if absent is None:
            staged = runner.stage(plan, df, gatherer, keep_outcomes=warn)
        else:
            packed = tombstones.without_record(runner.pack(plan, df), absent, self.subject, self.version)
            staged = tombstones.release_tombstones(runner.run(plan, packed, gatherer, keep_outcomes=warn))
        beside = absent is None and _routes_beside(plan, df, gatherer)
        routed = self._route(staged, self._json_layout(df, plan), plan, run, beside=beside)
        return Counted(_output(plan, routed, columns, gatherer, warn), counts)

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

    def _counting(
        self, plan: Plan, df: DataFrame, runs_on_input: bool
    ) -> tuple[Counting | None, Gatherer | None]:
        """How one call's counts of `plan` on `df` are gathered (None, None when metrics are off);
        `runs_on_input` as in `counting`."""
        if self.collect_metrics is False:
            return None, None
        counts = counting(plan, df, self.collect_metrics, runs_on_input)
        return counts, counts.gatherer

    def _json_layout(self, df: DataFrame, plan: Plan) -> DlqLayout:
        """DLQ records whose value is the record as it arrived, as JSON (docs/semantics.md §7);
        on WRITE, with the fields ENCRYPT rules tag redacted (§11.4)."""
        return DlqLayout(
            redact=self.redaction if plan.mode is RuleMode.WRITE else None,
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
        run: Run,
        migrations: Iterable[Plan | NativeMigration] = (),
        reasons: tuple[tuple[NativeReasons, str], ...] = (),
        route_always: bool = False,
        beside: bool = False,
    ) -> DataFrame:
        """Rejected rows to their DLQ topics, and copies of the rows a copy action fired on to
        theirs. When neither the plan nor the `migrations` that ran before it can reject a row, the
        plan copies none (and `route_always` is off: a decode policy that sends unreadable rows to a
        DLQ) there is no Python pass, only the filter on `_contract` that makes Spark evaluate it
        (an ERROR action fires there). `beside`: the rows to route reach Python in a branch of
        their own (`route_beside`), the valid rows never."""
        routes = route_always or bool(plan.copies)
        if not routes and not any(p.can_reject for p in (plan, *migrations)):
            return staged.filter(_status().isNull())
        if beside:
            return route_beside(staged, run.sink, run.run_id, layout, plan)
        return route_rejected(staged, run.sink, run.run_id, layout, plan, reasons)


def _routes_beside(plan: Plan, df: DataFrame, gatherer: Gatherer | None) -> bool:
    """Whether `plan` on `df` routes its rejected rows in a branch of their own: it routes rows at
    all, every rule runs as Spark expressions (no Python pass to run twice), the counts are not
    observed in the query (an observation in both branches would count twice) and `df` reads twice
    safely (asked last: it plans `df`)."""
    routes = plan.can_reject or bool(plan.copies)
    counted_apart = gatherer is None or isinstance(gatherer, CountOnDemand)
    return routes and plan.all_native and counted_apart and reads_twice_safely(df)


def _output(
    plan: Plan,
    staged: DataFrame,
    columns: Sequence[Column | str],
    gatherer: Gatherer | None,
    warn: bool = False,
) -> DataFrame:
    """`staged` as `columns` (with `warn`, then `_contract_warnings` from its outcome columns),
    observed with the per-rule counts when the plan counts them on its output
    (runner.counts_at_output): its outcome columns carried to the top and dropped there."""
    from pyspark.sql import functions as F

    if warn:
        columns = [*columns, runner.warnings_column(plan).alias(WARNINGS)]
    if gatherer is None or not runner.counts_at_output(plan, gatherer):
        return staged.select(*columns)
    carried = staged.select(*columns, *(F.col(name) for name in runner.outcome_columns(plan)))
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


def _valid_columns(df: DataFrame, plan: Plan) -> list[Column | str]:
    """The input's columns in their order, record fields taken from the (transformed) record."""
    return _columns_from(df, plan, RECORD)


def _rejected_columns(df: DataFrame, plan: Plan) -> list[Column | str]:
    """The input's columns as they arrived, plus `_contract`."""
    return [*_columns_from(df, plan, ORIGINAL if plan.has_transforms else RECORD), _status()]


def _columns_from(df: DataFrame, plan: Plan, struct_column: str) -> list[Column | str]:
    """Named by strings where they can be (a struct's field selected by its path keeps the field's
    name), as each Column built on a classic session costs PySpark round trips to the JVM."""
    record_fields = set(plan.record_type.fieldNames())

    def field(name: str) -> Column | str:
        if struct_column == RECORD:
            return runner.record_field(plan, name)
        return field_path(struct_column, name)

    return [field(name) if name in record_fields else quote_name(name) for name in df.columns]


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
