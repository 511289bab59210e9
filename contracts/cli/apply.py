"""`spark-contracts apply`: a contract's WRITE or READ rules over a dataset, with its DLQ and counts.

Everything that needs no Spark is done first (`prepare_apply`: the contract loaded and its rules
compiled, local paths checked), so a mistake costs seconds rather than a Spark start.
"""

from __future__ import annotations

import errno
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from actions.builtin import checked_topic
from actions.dlq.local_topic import LocalTopicSink
from actions.dlq.sink import is_run_id
from contracts.cli.dlq import cell, table
from contracts.cli.inputs import (
    FORMATS,
    RECORD_FORMATS,
    TEXT_FORMATS,
    WIRE_FORMATS,
    Source,
    Unreadable,
    check_local_input,
    framed,
    is_local,
    read_rows,
    readable,
    skip_unreadable,
    unreadable_count,
)
from contracts.cli.progress import Progress
from contracts.cli.registry import Credentials, open_registry
from contracts.errors import ContractError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from contracts.contract import DataContract
    from contracts.planning.plan import PlannedRule
    from contracts.registry import Registry

OUTPUT_MODES = ("error", "overwrite", "append")
"""--output-mode: what a run does with an --output that exists (Spark's save modes)."""
DEFAULT_SAMPLE = 5
"""How many rejected rows a dry run prints unless --sample says otherwise."""


@dataclass(frozen=True)
class RejectLimit:
    """--max-rejected: the most rows a run may reject, a count (`N`) or a percent of its input (`P%`)."""

    value: float
    percent: bool

    @classmethod
    def parse(cls, text: str) -> RejectLimit:
        """`N` (0 or more rows) or `P%` (0 to 100); ValueError saying what was expected."""
        percent = text.endswith("%")
        try:
            value = float(text[:-1]) if percent else int(text)
        except ValueError:
            raise ValueError(f"expected N (rows) or P% (percent of the input rows), not {text!r}") from None
        if percent and not (math.isfinite(value) and 0 <= value <= 100):
            raise ValueError(f"a percentage must be between 0% and 100%, not {text!r}")
        if value < 0:
            raise ValueError(f"a number of rows must be 0 or more, not {text!r}")
        return cls(value, percent)

    def exceeded_by(self, rejected: int, total: int) -> bool:
        """Whether `rejected` rows out of `total` input rows are more than this limit allows."""
        return rejected * 100 > self.value * total if self.percent else rejected > self.value

    def describe(self, rejected: int, total: int) -> str:
        """One line: how many rows were rejected against the limit."""
        if not self.percent:
            return f"{rejected} rows rejected, more than --max-rejected {self} allows"
        share = 100 * rejected / total
        return f"{rejected} of {total} rows rejected ({share:.4g}%), more than --max-rejected {self} allows"

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else str(int(self.value))


@dataclass(frozen=True)
class ApplyJob:
    """What to run: the contract (registry, subject, version), the mode, input, output and DLQ.

    `run_id` makes this run the rerun of an earlier one with that id: its DLQ records and its
    output replace the earlier run's.
    """

    registry: str
    subject: str
    mode: str
    input: str | None
    format: str
    output: str | None
    dlq_dir: str
    version: int | None = None
    allow_unknown_rule_types: bool = False
    run_id: str | None = None
    use_latest_with_metadata: tuple[tuple[str, str], ...] = ()
    """The target: the latest version whose metadata properties hold these pairs (not with version)."""
    executors: tuple[Any, ...] = ()
    """Rule executors added to (or replacing) the registered ones, as DataContract(executors=…)."""
    actions: tuple[Any, ...] = ()
    """Actions added to (or replacing) the registered ones, as DataContract(actions=…)."""
    dry_run: bool = False
    """Run the rules and report, writing neither the output nor DLQ records (record formats only)."""
    sample: int | None = None
    """With dry_run: how many rejected rows to print (default DEFAULT_SAMPLE)."""
    max_rejected: RejectLimit | None = None
    """Fail the run (exit 1) when it rejects more rows than this."""
    rule_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Passed to the rules' executors, as DataContract(rule_config=…); secrets, so never printed."""
    key_subject: str | None = None
    """Wire-format input only: the subject whose contract (latest version) decodes the `key` column first."""
    protobuf_message: str | None = None
    """A Protobuf contract's record message by full name, as DataContract(protobuf_message=…)."""
    table: str | None = None
    """A table of Spark's catalog to read instead of `input` (a path)."""
    output_mode: str = "error"
    """What the run does with an output that exists: fail (error), replace it or add to it."""
    unreadable_dlq: str | None = None
    """The DLQ topic of input lines that do not parse and of frames that do not decode (without one,
    such a row fails the run)."""
    registry_auth: Credentials | None = field(default=None, repr=False)
    """The registry's KEY:SECRET when not in its URL; never printed."""

    def __post_init__(self) -> None:
        if (self.input is None) == (self.table is None):
            raise ValueError("give --input PATH or --table NAME" + (", not both" if self.table else ""))
        if self.table is not None and self.format in TEXT_FORMATS:
            raise ValueError(
                "--table reads a table's rows: records as columns (--format parquet, the default) or"
                " Confluent frames in a binary `value` column (--format avro-parquet)"
            )
        if self.output_mode not in OUTPUT_MODES:
            raise ValueError(
                f"--output-mode must be one of {', '.join(OUTPUT_MODES)}, not {self.output_mode!r}"
            )
        if self.output_mode != "error" and self.dry_run:
            raise ValueError("--output-mode goes with --output: a dry run writes nothing")
        if self.output_mode == "append" and self.run_id is not None:
            raise ValueError(
                "--run-id reruns a run, replacing its output: it does not go with --output-mode append"
            )
        if self.unreadable_dlq is not None:
            self._check_unreadable_dlq(self.unreadable_dlq)
        if self.output is None and not self.dry_run:
            raise ValueError("--output is required, unless --dry-run")
        if self.sample is not None and not self.dry_run:
            raise ValueError("--sample goes with --dry-run")
        if self.sample is not None and self.sample < 0:
            raise ValueError(f"--sample must be 0 or more, not {self.sample}")
        if self.dry_run and self.format in WIRE_FORMATS:
            # deserialize routes rejected rows to the DLQ inside its decode and rule passes and
            # returns only the valid ones: there are no rejected rows to count or show without writing.
            raise ValueError(
                f"--dry-run takes record input ({', '.join(RECORD_FORMATS)}), not {self.format}:"
                " wire-format input is decoded by deserialize, which sends rejected rows to the DLQ"
                " and cannot hand them back"
            )
        if self.use_latest_with_metadata and self.version is not None:
            raise ValueError("give either --version or --use-latest-with-metadata, not both")
        if self.mode not in ("WRITE", "READ"):
            raise ValueError(f"mode must be WRITE or READ, not {self.mode!r}")
        if self.format not in FORMATS:
            raise ValueError(f"unknown input format {self.format!r}; expected one of {', '.join(FORMATS)}")
        if self.format in WIRE_FORMATS and self.mode != "READ":
            # Wire-format records are decoded by `deserialize`, which runs the READ side
            # (docs/semantics.md §6).
            raise ValueError(f"{self.format} input is decoded with the READ rules: use --mode READ")
        if self.key_subject is not None and self.format not in WIRE_FORMATS:
            raise ValueError(f"--key-subject decodes framed keys: it takes {' or '.join(WIRE_FORMATS)} input")
        if self.run_id is not None and not is_run_id(self.run_id):
            raise ValueError(f"--run-id must be 1-100 ASCII letters, digits, '_' or '-', not {self.run_id!r}")

    def _check_unreadable_dlq(self, topic: str) -> None:
        if self.format not in TEXT_FORMATS and self.format not in WIRE_FORMATS:
            raise ValueError(
                f"--unreadable-dlq takes input that can hold unreadable rows ({', '.join(TEXT_FORMATS)}"
                f" lines, {' or '.join(WIRE_FORMATS)} frames), not {self.format} records"
            )
        try:
            checked_topic(topic, "--unreadable-dlq", subject=self.subject, version=self.version)
        except ContractError as error:
            raise ValueError(f"--unreadable-dlq {topic!r}: {error.reason}") from error

    @property
    def source(self) -> Source:
        return Source(self.format, self.input, self.table)


@dataclass(frozen=True)
class Prepared:
    """An apply job ready for Spark: its contract (and key contract) loaded and checked."""

    job: ApplyJob
    contract: DataContract
    key: DataContract | None
    sink: LocalTopicSink


def prepare_apply(job: ApplyJob, err: TextIO) -> Prepared | None:
    """What needs no Spark, before a session starts: local paths checked, the contract loaded and
    compiled; None (after saying why on `err`) when a rule no executor handles stops the run."""
    sink = LocalTopicSink(job.dlq_dir)
    registry = open_registry(job.registry, auth=job.registry_auth)
    contract = _contract(job, registry, job.subject, sink)
    key = None if job.key_subject is None else _contract(job, registry, job.key_subject, sink)
    unhandled = unhandled_rules(contract, job)
    for rule in unhandled:
        err.write(f"spark-contracts apply: warning: {rule.unhandled()}\n")
    if unhandled and not job.allow_unknown_rule_types:
        err.write(
            "spark-contracts apply: error: not run, as no record could pass; fix the rule type or"
            " register its executor, or pass --allow-unknown-rule-types to run it anyway\n"
        )
        return None
    if job.input is not None:
        check_local_input(job.input)
    output = job.output
    refuses_existing = not job.dry_run and job.output_mode == "error" and job.run_id is None
    if output is not None and refuses_existing and is_local(output) and os.path.exists(output):
        what = "--output exists (--output-mode overwrite replaces it, append adds to it)"
        raise FileExistsError(errno.EEXIST, what, output)
    return Prepared(job, contract, key, sink)


def run_apply(prepared: Prepared, spark: SparkSession, out: TextIO, err: TextIO) -> int:
    """Enforce the contract on the input, write the valid rows as Parquet to the job's output, send
    rejected rows to the DLQ topics under its DLQ directory, and print a per-rule summary; or, for a
    dry run, only count and show them. Exit status 1 when more rows were rejected than
    `max_rejected` allows."""
    job = prepared.job
    if job.output is not None and not job.dry_run:  # ApplyJob: only a dry run may lack an output
        return _write(prepared, job.output, spark, out, err)
    return _dry_run(prepared, spark, out, err)


def _contract(job: ApplyJob, registry: Registry, subject: str, sink: LocalTopicSink) -> DataContract:
    """The job's contract on `subject`: its version and message options apply to the job's own
    subject only."""
    from contracts.contract import DataContract

    own = subject == job.subject
    return DataContract(
        registry,
        subject,
        version=job.version if own else None,
        use_latest_with_metadata=(dict(job.use_latest_with_metadata) or None) if own else None,
        executors=job.executors,
        actions=job.actions,
        dlq_sink=sink,
        # Text input loses its unreadable lines as it is read (routed, or failing the run): counts
        # on demand would read it again, and Spark refuses a read of it that needs no field.
        collect_metrics="observe" if job.format in TEXT_FORMATS else True,
        rule_config=job.rule_config,
        protobuf_message=job.protobuf_message if own else None,
    )


def _write(prepared: Prepared, output: str, spark: SparkSession, out: TextIO, err: TextIO) -> int:
    """The run itself, valid rows to `output`: the Spark job runs once (the valid rows and the DLQ
    in one pass); errors propagate to the caller, after the run id that a rerun replacing this
    run's output needs."""
    from contracts.metrics import counts_table, metrics_of

    job, contract, key, sink = prepared.job, prepared.contract, prepared.key, prepared.sink
    run_id = job.run_id or uuid.uuid4().hex
    # A new run that cannot reject a row has no DLQ output to name, so it leaves the DLQ dir alone.
    routes_unreadable = job.unreadable_dlq is not None and job.format in TEXT_FORMATS
    may_reject = job.format in WIRE_FORMATS or routes_unreadable or contract.plan(job.mode).can_reject
    contract_run = run_id if job.run_id or may_reject else None
    source = job.source
    unreadable = Unreadable(contract, job.mode, sink, run_id, job.unreadable_dlq)
    rows = framed(readable(read_rows(spark, source, contract), source, unreadable), source, key is not None)
    valid = _enforced(contract, rows, job, contract_run, key)
    before = {topic: sink.count(topic) for topic in sink.topics()}
    mode = "overwrite" if job.run_id else job.output_mode
    rows_before = _rows_at(spark, output) if mode == "append" else 0
    label = f"{job.mode} rules of {job.subject} version {contract.version} on {source.describe()}"
    label += f" (run {run_id})"
    try:
        with Progress(label, err, spark):
            # A rerun replaces the output the failed run may have left (Spark leaves its directory).
            valid.write.mode(mode).parquet(output)
    except Exception:
        err.write(
            f"spark-contracts apply: DLQ records this run committed are under run id {run_id}; once"
            f" fixed, rerun with --run-id {run_id} to replace them and the output\n"
        )
        raise
    written = spark.read.parquet(output).count() - rows_before
    key_metrics = metrics_of(valid, key=True)
    if key_metrics is not None:
        out.write(f"key rules of {job.key_subject}:\n{counts_table(key_metrics.get())}")
    metrics = metrics_of(valid)
    if key_metrics is not None:
        out.write(f"value rules of {job.subject}:\n")
    out.write(counts_table(metrics.get() if metrics is not None else {}))
    out.write(f"valid rows: {written} -> {output}\n")
    rejected = 0
    for topic in sink.topics():
        added = sink.count(topic) - before.get(topic, 0)
        rejected += added
        if added:
            out.write(f"DLQ {topic}: {added} rows -> {sink.root}/{topic}\n")
    kept = f"run {run_id}'s output and DLQ records are written; --run-id {run_id} reruns it, replacing them"
    return _within_limit(job, rejected, written + rejected, err, kept)


def _rows_at(spark: SparkSession, output: str) -> int:
    """How many rows the Parquet dataset at `output` holds already (0 where there is none)."""
    from pyspark.errors import AnalysisException

    try:
        return spark.read.parquet(output).count()
    except AnalysisException:
        return 0


def _dry_run(prepared: Prepared, spark: SparkSession, out: TextIO, err: TextIO) -> int:
    """The rules over the input through `DataContract.apply`, which routes nothing: the per-rule
    summary, the valid rows and the rejected rows per DLQ topic, and a sample of the rejected rows
    with their rule and reason; nothing is written. Unreadable lines fail it, as they fail a run,
    unless they have a DLQ topic: then they are counted there."""
    from pyspark.sql import functions as F

    from contracts.metrics import counts_table

    job, contract = prepared.job, prepared.contract
    source = job.source
    rows = read_rows(spark, source, contract)
    if job.unreadable_dlq is None:
        df = readable(rows, source, Unreadable(contract, job.mode, prepared.sink, "dry-run"))
    else:
        df = skip_unreadable(rows)
    result = contract.apply(df, mode=job.mode)
    status = F.col("_contract")
    shown = DEFAULT_SAMPLE if job.sample is None else job.sample
    label = f"dry run of the {job.mode} rules of {job.subject} version {contract.version}"
    label += f" on {source.describe()}"
    with Progress(label, err, spark):
        # The first action goes over every row: an observed plan's counts come from it. A global
        # count, never a grouping: when a grouping's input is empty (no row rejected), Spark's
        # adaptive execution drops the finished stage below it and, with it, the observed counts.
        valid = result.valid.count()
        per_topic = result.rejected.groupBy(status.getField("topic").alias("topic")).count().collect()
        by_topic = {row["topic"]: row["count"] for row in per_topic}
        if job.unreadable_dlq is not None:
            unreadable = unreadable_count(rows)
            if unreadable:
                by_topic[job.unreadable_dlq] = by_topic.get(job.unreadable_dlq, 0) + unreadable
        record = F.to_json(F.struct(*(F.col(f"`{name}`") for name in df.columns)))
        sample = (
            result.rejected.select(
                status.getField("rule").alias("rule"),
                status.getField("topic").alias("topic"),
                record.alias("row"),
                status.getField("reason").alias("reason"),
            )
            .limit(shown)
            .collect()
            if shown and by_topic
            else []
        )
        counts = result.metrics.get() if result.metrics is not None else {}
    out.write(counts_table(counts))
    out.write(f"valid rows: {valid} (dry run: not written)\n")
    for topic, n in sorted(by_topic.items()):
        out.write(f"DLQ {topic}: {n} rows (dry run: not written)\n")
    if sample:
        out.write(f"rejected rows, a sample of {len(sample)}:\n")
        lines = [[cell(r.rule), cell(r.topic), cell(r.row), _whole(r.reason)] for r in sample]
        out.write(table(("rule", "topic", "row", "reason"), lines))
    rejected = sum(by_topic.values())
    return _within_limit(job, rejected, valid + rejected, err, "a dry run: nothing was written")


def _whole(reason: str | None) -> str:
    """A rejected row's reason on one line, uncut (the last column of the sample): what to fix."""
    return "-" if reason is None else reason.replace("\n", " ")


def _within_limit(job: ApplyJob, rejected: int, total: int, err: TextIO, note: str) -> int:
    """0, or 1 after one line on `err` when the run rejected more rows than --max-rejected allows."""
    limit = job.max_rejected
    if limit is None or not limit.exceeded_by(rejected, total):
        return 0
    err.write(f"spark-contracts apply: error: {limit.describe(rejected, total)} ({note})\n")
    return 1


def unhandled_rules(contract: DataContract, job: ApplyJob) -> list[PlannedRule]:
    """The rules of the job's mode (and, for wire-format input, of the migrations from every
    registered version) whose type no executor handles: each fails every record it sees."""
    plans = [contract.plan(job.mode)]
    if job.format in WIRE_FORMATS:
        plans += [plan for writer in contract.planner.writers().values() for plan in writer.migrations]
    return [rule for plan in plans for rule in plan.rules if rule.step is None]


def _enforced(
    contract: DataContract, df: DataFrame, job: ApplyJob, run_id: str | None, key: DataContract | None = None
) -> DataFrame:
    """The valid rows; wire-format input is decoded (and migrated) to the contract's version first,
    its keys first with the `key` contract when given."""
    if job.format in WIRE_FORMATS:
        if job.unreadable_dlq is None:
            return contract.deserialize(df, run_id=run_id, key=key)
        topic = job.unreadable_dlq
        return contract.deserialize(df, run_id=run_id, key=key, on_decode_error="DLQ", decode_dlq_topic=topic)
    if job.mode == "WRITE":
        return contract.write(df, run_id=run_id)
    return contract.read(df, run_id=run_id)
