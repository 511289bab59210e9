"""`spark-contracts apply`'s input: a file dataset (Parquet, JSON lines, CSV) or a table of Spark's
catalog, holding records as columns or Confluent frames in a `value` column.

A local path is read as the file or directory of that very name (Spark would take `in[1].jsonl`
as a glob matching `in1.jsonl`). A line of a text format that does not parse as a record of the
contract (malformed JSON, a CSV row of the wrong shape, a value of the wrong type) fails the run
with one line naming the file and quoting the line, or, with an unreadable-rows DLQ topic, goes
to that topic with the line as the record's value (docs/semantics.md §7.8).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from actions.dlq.sink import DlqSink
    from contracts.contract import DataContract

# Record formats hold the record's fields as columns; wire formats hold Confluent frames in `value`.
RECORD_FORMATS = ("parquet", "json", "csv")
WIRE_FORMATS = ("avro-parquet", "avro-json")
FORMATS = RECORD_FORMATS + WIRE_FORMATS
TEXT_FORMATS = {"json": "JSON line", "csv": "CSV row", "avro-json": "JSON line"}
"""The formats whose lines may not parse, and what one of their lines is called."""
UNREADABLE_RULE = "read"
"""The `__rule.name` of a DLQ record holding an input line that could not be read."""
QUOTED = 120
"""How many characters of an unreadable line its error quotes."""
MAX_JSON_STRING = 2**31 - 1
"""The longest string value a JSON line may hold, in characters: Spark's reader (Jackson) refuses
more than 20 million by default, which made a valid 64 MiB line read as malformed."""

_GLOB = re.compile(r"[\[\]{}*?\\]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_MALFORMED = "__contract_malformed"
_LINE = "__contract_line"
"""Working columns, under the engine's reserved prefix (contracts.engine.columns.RESERVED_PREFIX)."""


@dataclass(frozen=True)
class Source:
    """Where the rows come from: a path (`location`) or a catalog table (`table`), in `format`."""

    format: str
    location: str | None = None
    table: str | None = None

    def describe(self) -> str:
        return f"table {self.table}" if self.table is not None else str(self.location)


@dataclass(frozen=True)
class Unreadable:
    """Where lines that cannot be read go: `topic` of `sink` under `run_id`, for `contract`'s
    subject and version in `mode`; without a topic, the run fails on the first one."""

    contract: DataContract
    mode: str
    sink: DlqSink
    run_id: str
    topic: str | None = None


def is_local(path: str) -> bool:
    """Whether `path` names a file of this machine (no URI scheme such as s3a: or file:)."""
    return not _SCHEME.match(path)


def local_absolute(path: str) -> str:
    """A local `path` made absolute against this process's working directory, which a session the
    command was given (a notebook's, a Spark Connect server) need not share; a URI as it is."""
    return os.path.abspath(path) if is_local(path) else path


def literal(path: str) -> str:
    """`path` as Spark must be given it to read that very file or directory: a local path absolute,
    with Hadoop's glob characters escaped when it exists; a glob or a URI as it is otherwise."""
    if is_local(path) and _GLOB.search(path) and os.path.exists(path):
        return _GLOB.sub(lambda match: "\\" + match.group(0), os.path.abspath(path))
    return local_absolute(path)


def check_local_input(path: str) -> None:
    """FileNotFoundError for a local input path without glob characters that does not exist, found
    before Spark starts rather than after."""
    if is_local(path) and not _GLOB.search(path) and not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "--input does not exist", path)


def read_rows(spark: SparkSession, source: Source, contract: DataContract) -> DataFrame:
    """The input's rows as read: records as columns (text formats read with the contract's types),
    or Kafka-shaped rows with a `value` column; a text format's unreadable lines are rows holding
    the line in a column of their own, for `readable` or `skip_unreadable` to take out."""
    from pyspark.sql.types import StringType, StructField, StructType

    if source.table is not None:
        return spark.read.table(source.table)
    path = literal(str(source.location))
    if source.format in ("parquet", "avro-parquet"):
        return spark.read.parquet(path)
    reader = spark.read.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", _MALFORMED)
    reader = reader.option("maxStringLen", str(MAX_JSON_STRING))
    if source.format == "avro-json":
        return reader.json(path)
    read = reader.schema(StructType([*contract.spark_schema.fields, StructField(_MALFORMED, StringType())]))
    return read.option("header", "true").csv(path) if source.format == "csv" else read.json(path)


def readable(rows: DataFrame, source: Source, unreadable: Unreadable) -> DataFrame:
    """`rows` without their unreadable lines: the run fails on the first, or each goes to the DLQ
    topic as the rows are computed (one pass, no second read of the input)."""
    from pyspark.sql import functions as F

    from contracts.engine.columns import STATUS, status_literal, status_type
    from contracts.engine.routing import DlqLayout, Router, with_partition

    if _MALFORMED not in rows.columns:
        return rows  # JSON lines whose columns were inferred: no line was unreadable
    line = F.col(_MALFORMED)
    what = TEXT_FORMATS[source.format]
    if unreadable.topic is None:
        failed = F.raise_error(_refusal(what, line))
        return rows.filter(F.when(line.isNotNull(), failed).isNull()).drop(_MALFORMED)
    contract = unreadable.contract
    status = {
        "rule": UNREADABLE_RULE,
        "mode": unreadable.mode,
        "action": "DLQ",
        "reason": f"malformed {what}: it does not parse as a record of the contract",
        "topic": unreadable.topic,
        "subject": contract.subject,
        "version": contract.version,
    }
    rejected = F.when(line.isNotNull(), status_literal(status)).otherwise(F.lit(None).cast(status_type()))
    staged = rows.withColumns({STATUS: rejected, _LINE: F.encode(line, "UTF-8")})
    layout = DlqLayout(_LINE, contract.parsed, contract.target.format, value_column=_LINE)
    router = Router(unreadable.sink, unreadable.run_id, layout, stage="read")
    routed = with_partition(staged).mapInArrow(router, staged.schema)
    return routed.drop(STATUS, _LINE, _MALFORMED)


def skip_unreadable(rows: DataFrame) -> DataFrame:
    """`rows` without their unreadable lines, which a dry run counts (`unreadable_count`) instead."""
    from pyspark.sql import functions as F

    if _MALFORMED not in rows.columns:
        return rows
    return rows.filter(F.col(_MALFORMED).isNull()).drop(_MALFORMED)


def framed(rows: DataFrame, source: Source, framed_keys: bool) -> DataFrame:
    """Kafka-shaped rows with binary frames: JSON lines hold `value` (and the `key` too with
    `framed_keys`) as base64 text."""
    from pyspark.sql import functions as F

    if source.format != "avro-json":
        return rows
    names = ["value", "key"] if framed_keys and "key" in rows.columns else ["value"]
    return rows.withColumns({name: F.unbase64(F.col(name)) for name in names})


def unreadable_count(rows: DataFrame) -> int | None:
    """How many of `rows` (as `read_rows` read them before taking the unreadable lines out) are
    unreadable lines, for a dry run; None for input that has none. One job reading every column:
    whether a line parses depends on the columns read."""
    from pyspark.sql import functions as F

    if _MALFORMED not in rows.columns:
        return None
    every = F.to_json(F.struct(*(F.col(f"`{name}`") for name in rows.columns)))
    return rows.filter(F.col(_MALFORMED).isNotNull() & every.isNotNull()).count()


def _refusal(what: str, line: Column) -> Column:
    """What the run fails with on an unreadable line: its file, and its start quoted."""
    from pyspark.sql import functions as F

    cut = F.concat(F.substring(line, 1, QUOTED), F.lit("..."))
    quoted = F.when(F.length(line) > QUOTED, cut).otherwise(line)
    too_long = f"{what} longer than the {MAX_JSON_STRING}-character limit of one value, or malformed,"
    return F.concat(
        F.when(F.length(line) > MAX_JSON_STRING, F.lit(too_long)).otherwise(F.lit(f"malformed {what}")),
        F.lit(" in "),
        F.regexp_replace(F.col("_metadata.file_path"), "^file:", ""),
        F.lit(": '"),
        quoted,
        F.lit(f"'; --unreadable-dlq TOPIC sends each such {what} to a DLQ topic instead"),
    )
