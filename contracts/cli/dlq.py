"""`spark-contracts dlq show|replay`: read a local DLQ topic as a table, and replay it through a
fixed contract (contracts.replay), writing the valid rows and sending the still-failing ones back
to the DLQ."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from actions.dlq.local_topic import LocalTopicSink
from actions.dlq.sink import is_run_id
from contracts.cli.message import add_protobuf_message_argument
from contracts.cli.plugins import add_plugin_arguments, load_plugins
from contracts.cli.progress import Progress
from contracts.cli.registry import open_registry
from contracts.cli.rule_config import add_rule_config_arguments, load_rule_config
from contracts.contract import DEFAULT_DLQ_DIR, DataContract
from contracts.replay import APPLY, MAX_RUN_ID

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

SessionFactory = Callable[[], "SparkSession"]
SHOWN = ("timestamp", "rule", "mode", "subject", "reason", "key", "value")
DEFAULT_ROWS = 20
MAX_CELL = 60


def add_dlq_command(
    commands: Any, parents: list[argparse.ArgumentParser], new_session: SessionFactory
) -> None:
    """Register `dlq show` and `dlq replay` with the CLI's subcommands."""
    dlq = commands.add_parser(
        "dlq",
        parents=parents,
        help="show or replay a local DLQ topic",
        description="Read a DLQ topic of a LocalTopicSink directory, or replay it through a fixed contract.",
    )
    actions = dlq.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show",
        parents=parents,
        help="print a DLQ topic's records as a table",
        description="Each record's time, the rule that rejected it (name, mode, subject, reason),"
        " key and value.",
    )
    show.add_argument("topic")
    show.add_argument("--dlq-dir", default=DEFAULT_DLQ_DIR, help="the local DLQ topics directory")
    show.add_argument(
        "-n", type=_positive, default=DEFAULT_ROWS, help=f"rows to print (default {DEFAULT_ROWS})"
    )
    show.set_defaults(handler=_show, new_session=new_session)

    replay = actions.add_parser(
        "replay",
        parents=parents,
        help="run a DLQ topic's records through the (fixed) contract again",
        description="Each record skips the rule its __rule.name header names; valid rows are written as"
        " Parquet to --output, records failing again go back to their DLQ topics.",
    )
    replay.add_argument("topic")
    replay.add_argument("--registry", required=True, help="a LocalRegistry directory or a registry URL")
    replay.add_argument("--subject", required=True)
    replay.add_argument("--version", type=int, help="the contract version (default: the latest)")
    add_protobuf_message_argument(replay)
    replay.add_argument(
        "--apply",
        default="write",
        choices=APPLY,
        help="write: WRITE-side records (JSON values); deserialize: read-side ones (wire-format frames)",
    )
    replay.add_argument("--output", required=True, help="where the valid rows go (Parquet)")
    replay.add_argument("--dlq-dir", default=DEFAULT_DLQ_DIR, help="the local DLQ topics directory")
    replay.add_argument(
        "--run-id",
        type=_run_id,
        help="rerun the replay of this id: its DLQ records and --output are replaced (default: a new id)",
    )
    add_plugin_arguments(replay)
    add_rule_config_arguments(replay)
    replay.set_defaults(handler=_replay, new_session=new_session)


def _show(args: argparse.Namespace, spark: SparkSession | None, out: TextIO, err: TextIO) -> int:
    with _Session(args, spark) as session:
        from pyspark.sql import functions as F

        sink = LocalTopicSink(args.dlq_dir)
        dlq = sink.read_df(session, args.topic)
        shown = dlq.orderBy("timestamp", "writer", "offset").select(
            F.date_format("timestamp", "yyyy-MM-dd HH:mm:ss").alias("timestamp"),
            *SHOWN[1:5],
            _text(F.col("key")).alias("key"),
            _text(F.col("value")).alias("value"),
        )
        rows = [[cell(row[name]) for name in SHOWN] for row in shown.limit(args.n).collect()]
        out.write(table(SHOWN, rows))
        total = sink.count(args.topic)
        out.write(f"{args.topic}: {total} records in {sink.root}/{args.topic} (showing {len(rows)})\n")
    return 0


def _replay(args: argparse.Namespace, spark: SparkSession | None, out: TextIO, err: TextIO) -> int:
    plugins = load_plugins(args)
    rule_config = load_rule_config(args)
    run_id = args.run_id or uuid.uuid4().hex
    sink = LocalTopicSink(args.dlq_dir)
    contract = DataContract(
        open_registry(args.registry),
        args.subject,
        version=args.version,
        executors=plugins.executors,
        actions=plugins.actions,
        dlq_sink=sink,
        rule_config=rule_config,
        protobuf_message=args.protobuf_message,
    )
    with _Session(args, spark) as session:
        dlq = sink.read_df(session, args.topic)
        replayed = dlq.count()
        before = {topic: sink.count(topic) for topic in sink.topics()}
        valid = contract.replay(dlq, apply=args.apply, run_id=run_id)
        label = f"replay of {args.topic} through {args.subject} version {contract.version} (run {run_id})"
        try:
            with Progress(label, err, session):
                valid.write.mode("overwrite" if args.run_id else "error").parquet(args.output)
        except Exception:
            err.write(
                f"spark-contracts dlq replay: once fixed, rerun with --run-id {run_id} to replace this"
                " replay's DLQ records and output\n"
            )
            raise
        written = session.read.parquet(args.output).count()
    out.write(f"replayed {replayed} records of {args.topic} (run {run_id})\n")
    out.write(f"valid rows: {written} -> {args.output}\n")
    for topic in sink.topics():
        added = sink.count(topic) - before.get(topic, 0)
        if added:
            out.write(f"DLQ {topic}: {added} rows -> {sink.root}/{topic}\n")
    return 0


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def _run_id(text: str) -> str:
    if not is_run_id(text) or len(text) > MAX_RUN_ID:
        raise argparse.ArgumentTypeError(f"1-{MAX_RUN_ID} ASCII letters, digits, '_' or '-', not {text!r}")
    return text


class _Session:
    """The session given (tests, notebooks), else a new one stopped on exit."""

    def __init__(self, args: argparse.Namespace, spark: SparkSession | None) -> None:
        self.own = spark is None
        self.spark = args.new_session() if spark is None else spark

    def __enter__(self) -> SparkSession:
        return self.spark

    def __exit__(self, *exc: object) -> None:
        if self.own:
            self.spark.stop()


def _text(column: Column) -> Column:
    """A key or value as text: itself when it is JSON or printable UTF-8, else 0x and its hex."""
    from pyspark.sql import functions as F

    text = F.try_validate_utf8(column.cast("string"))
    printable = text.rlike(r"^[^\x00-\x08\x0e-\x1f\x7f]*$")
    return (
        F.when(column.isNull(), F.lit(None))
        .when(printable, text)
        .otherwise(F.concat(F.lit("0x"), F.hex(column)))
    )


def cell(value: Any) -> str:
    """`value` for a table cell: on one line, cut at MAX_CELL characters, `-` for null."""
    text = "-" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns under a header and a rule; rows as given."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def render(row: Sequence[str]) -> str:
        return "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()

    return "\n".join([render(header), "  ".join("-" * w for w in widths), *map(render, rows)]) + "\n"
