"""`spark-contracts dlq show|replay`: print a local DLQ topic (in Python, without Spark), and replay
it through a fixed contract (contracts.replay), writing the valid rows and sending the
still-failing ones back to the DLQ.

Nothing that imports pyspark is imported before a command needs Spark: `dlq show` never does.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import heapq
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from actions.dlq import replays
from actions.dlq.frame import RULE_HEADERS
from actions.dlq.local_topic import DEFAULT_DLQ_DIR, LocalTopicSink, writer_of
from actions.dlq.sink import DlqError, DlqRecord, is_run_id
from contracts.cli.errors import UsageError
from contracts.cli.message import add_protobuf_message_argument
from contracts.cli.plugins import add_plugin_arguments, load_plugins
from contracts.cli.progress import Progress
from contracts.cli.registry import open_registry
from contracts.cli.rule_config import add_rule_config_arguments, load_rule_config
from contracts.replay import APPLY, MAX_RUN_ID

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SessionFactory = Callable[[], "SparkSession"]
SHOWN = ("timestamp", "rule", "mode", "subject", "reason", "key", "value")
DEFAULT_ROWS = 20
MAX_CELL = 60
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_TOPIC_HELP = "the DLQ topic: a directory of --dlq-dir"
_DLQ_DIR_HELP = f"the LocalTopicSink directory holding the DLQ topics (default: ./{DEFAULT_DLQ_DIR})"


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
        help="print a DLQ topic's records, oldest first (no Spark)",
        description="Each record's time (UTC), the rule that rejected it (name, mode, subject,"
        " reason), key and value, oldest first, read from the topic's files without Spark.",
    )
    show.add_argument("topic", metavar="TOPIC", help=_TOPIC_HELP)
    show.add_argument("--dlq-dir", default=DEFAULT_DLQ_DIR, help=_DLQ_DIR_HELP)
    show.add_argument(
        "-n", type=_positive, default=DEFAULT_ROWS, help=f"records to print (default {DEFAULT_ROWS})"
    )
    show.add_argument(
        "--full", action="store_true", help=f"print whole cells (by default cut at {MAX_CELL} characters)"
    )
    show.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per record instead of a table: every header, key and value as"
        ' text, or {"base64": ...} where they are not printable UTF-8',
    )
    show.set_defaults(handler=_show)

    replay = actions.add_parser(
        "replay",
        parents=parents,
        help="run a DLQ topic's records through the (fixed) contract again",
        description="Each record skips the rule its __rule.name header names; valid rows are written as"
        " Parquet to --output, records failing again go back to their DLQ topics. A replay takes the"
        " records no earlier replay of the topic took; a rerun with its --run-id takes them again.",
    )
    replay.add_argument("topic", metavar="TOPIC", help=_TOPIC_HELP)
    replay.add_argument("--registry", required=True, help="a LocalRegistry directory or a registry URL")
    replay.add_argument("--subject", required=True)
    replay.add_argument("--version", type=int, help="the contract version (default: the latest)")
    add_protobuf_message_argument(replay)
    replay.add_argument(
        "--apply",
        default="write",
        choices=APPLY,
        help="write: WRITE-side records (JSON values); read: records `read` rejected (JSON values);"
        " deserialize: read-side ones (wire-format frames)",
    )
    replay.add_argument(
        "--writer-version",
        type=int,
        help="with --apply read: the version the records were written with (default: the contract's)",
    )
    replay.add_argument("--output", required=True, help="where the valid rows go (Parquet)")
    replay.add_argument("--dlq-dir", default=DEFAULT_DLQ_DIR, help=_DLQ_DIR_HELP)
    replay.add_argument(
        "--run-id",
        type=_run_id,
        help="rerun the replay of this id: it takes the same records again, and its DLQ records and"
        " --output are replaced (default: a new id)",
    )
    add_plugin_arguments(replay)
    add_rule_config_arguments(replay)
    replay.set_defaults(handler=_replay, new_session=new_session)


def _show(args: argparse.Namespace, spark: SparkSession | None, out: TextIO, err: TextIO) -> int:
    sink = LocalTopicSink(args.dlq_dir)
    existing(sink, args.topic)
    taken = replays.taken(sink, args.topic)
    total = 0
    replayed = 0

    def counted() -> Iterable[tuple[str, int, DlqRecord]]:
        nonlocal total, replayed
        for path, offset, record in sink.scan(args.topic):
            total += 1
            replayed += os.path.basename(path) in taken
            yield path, offset, record

    oldest = heapq.nsmallest(
        args.n, counted(), key=lambda entry: (entry[2].timestamp_ms, writer_of(entry[0]), entry[1])
    )
    if args.json:
        for path, offset, record in oldest:
            line = _as_json(record, writer_of(path), offset, os.path.basename(path) in taken)
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    else:
        rows = [_cells(record, args.full) for _, _, record in oldest]
        out.write(table(SHOWN, rows))
    summary = f"{args.topic}: {total} records in {os.path.join(sink.root, args.topic)}"
    if replayed:
        summary += f", {replayed} taken by replays"
    # With --json, stdout holds only the records.
    (err if args.json else out).write(f"{summary} (showing {len(oldest)})\n")
    return 0


def _replay(args: argparse.Namespace, spark: SparkSession | None, out: TextIO, err: TextIO) -> int:
    from contracts.contract import DataContract
    from contracts.replay import taken_frame

    plugins = load_plugins(args)
    rule_config = load_rule_config(args)
    if args.writer_version is not None and args.apply != "read":
        raise UsageError("--writer-version goes with --apply read")
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
    existing(sink, args.topic)
    options = {} if args.writer_version is None else {"writer_version": args.writer_version}
    run_id = args.run_id or uuid.uuid4().hex
    taken = replays.take(sink, args.topic, run_id)
    runs = ", ".join(taken.skipped_for)
    skipped = f"; skipped {taken.skipped} that replay {runs} took" if taken.skipped else ""
    if not taken.records:
        out.write(f"nothing to replay in {args.topic} (run {run_id}){skipped}")
        out.write(": rerun it with its --run-id if it failed\n" if taken.skipped else "\n")
        return 0
    session = args.new_session() if spark is None else spark
    label = f"replay of {args.topic} through {args.subject} version {contract.version} (run {run_id})"
    try:
        dlq = taken_frame(session, args.topic, taken)
        valid = contract.replay(dlq, apply=args.apply, run_id=run_id, **options)
        with Progress(label, err, session):
            valid.write.mode("overwrite" if args.run_id else "error").parquet(args.output)
        written = session.read.parquet(args.output).count()
    except Exception:
        err.write(
            f"spark-contracts dlq replay: once fixed, rerun with --run-id {run_id} to replay the same"
            " records and replace this replay's DLQ records and output\n"
        )
        raise
    finally:
        if spark is None:
            session.stop()
    out.write(f"replayed {taken.records} records of {args.topic} (run {run_id}){skipped}\n")
    out.write(f"valid rows: {written} -> {args.output}\n")
    for topic, count in sorted(replays.sent_back(sink, run_id).items()):
        out.write(f"DLQ {topic}: {count} rows -> {os.path.join(sink.root, topic)}\n")
    return 0


def existing(sink: LocalTopicSink, topic: str) -> None:
    """DlqError, listing the topics there are, unless `topic` holds a committed record."""
    topics = sink.topics()
    if topic in topics:
        return
    if not os.path.isdir(sink.root):
        raise DlqError(f"no DLQ directory {sink.root} (--dlq-dir)")
    there = f"its topics: {', '.join(topics)}" if topics else "it holds no topic"
    raise DlqError(f"no topic {topic!r} in {sink.root}; {there}")


def _cells(record: DlqRecord, full: bool) -> list[str]:
    headers = _rule_headers(record)
    values = [_time(record.timestamp_ms), *(headers[name] for name in SHOWN[1:5])]
    values += [_text(record.key), _text(record.value)]
    return [cell(value, full) for value in values]


def _as_json(record: DlqRecord, writer: str, offset: int, replayed: bool) -> dict[str, Any]:
    """One record as `dlq show --json` prints it."""
    return {
        "timestamp": _time(record.timestamp_ms, iso=True),
        **_rule_headers(record),
        "key": _json_bytes(record.key),
        "value": _json_bytes(record.value),
        "headers": [{"key": name, "value": _json_bytes(value)} for name, value in record.headers],
        "topic": record.topic,
        "writer": writer,
        "offset": offset,
        "replayed": replayed,
    }


def _rule_headers(record: DlqRecord) -> dict[str, str | None]:
    """The last value of each `__rule.*` header, as text (the one the reference reads)."""
    last = dict(record.headers)
    texts: dict[str, str | None] = {}
    for column, header in RULE_HEADERS.items():
        value = last.get(header)
        texts[column] = None if value is None else value.decode("utf-8", "replace")
    return texts


def _time(timestamp_ms: int, iso: bool = False) -> str:
    at = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.timezone.utc)
    if iso:
        return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return at.strftime("%Y-%m-%d %H:%M:%S")


def _printable(data: bytes) -> str | None:
    """`data` as text when it is UTF-8 without control characters (but tab and line breaks)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if _UNPRINTABLE.search(text) else text


def _text(data: bytes | None) -> str | None:
    """A key or value for the table: itself when printable text, else 0x and its hex."""
    if data is None:
        return None
    text = _printable(data)
    return text if text is not None else "0x" + data.hex()


def _json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """Bytes for `--json`: the text when printable, else {"base64": ...}, so nothing is lost."""
    if data is None:
        return None
    text = _printable(data)
    return text if text is not None else {"base64": base64.b64encode(data).decode("ascii")}


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def _run_id(text: str) -> str:
    if not is_run_id(text) or len(text) > MAX_RUN_ID:
        raise argparse.ArgumentTypeError(f"1-{MAX_RUN_ID} ASCII letters, digits, '_' or '-', not {text!r}")
    return text


def cell(value: Any, full: bool = False) -> str:
    """`value` for a table cell: on one line, `-` for null, cut at MAX_CELL characters unless `full`."""
    text = "-" if value is None else str(value).replace("\n", " ")
    return text if full or len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns under a header and a rule; rows as given."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def render(row: Sequence[str]) -> str:
        return "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()

    return "\n".join([render(header), "  ".join("-" * w for w in widths), *map(render, rows)]) + "\n"
