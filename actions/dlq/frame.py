"""DLQ topics as Spark DataFrames: a local topic read with `spark.read`, and the columns that make
any DLQ record readable — its `__rule.*` headers and, given the record's parsed schema, its value
read back as the record by the schema's format (docs/semantics.md §7.7).

The frame has the shape of Spark's Kafka source (`key`, `value`, `topic`, `offset`, `timestamp`,
`headers` as an array of key/value structs), so a DLQ topic read from Kafka with
`spark.read.format("kafka").option("includeHeaders", "true")` decodes the same way, and `deserialize`
reads a frame of wire-format rejects as it reads the topic they came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from actions.dlq.record import RULE_EXCEPTION, RULE_MODE, RULE_NAME, RULE_SUBJECT, RULE_TOPIC

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from contracts.formats.protocol import ParsedSchema

RULE_HEADERS = {
    "rule": RULE_NAME,
    "mode": RULE_MODE,
    "subject": RULE_SUBJECT,
    "source_topic": RULE_TOPIC,
    "reason": RULE_EXCEPTION,
}
"""The decoded columns and the DLQ header each comes from (the last one, when it repeats)."""
RECORD_COLUMN = "record"


def _line_type() -> StructType:
    """One JSON line of a local topic file (actions.dlq.local_topic)."""
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("offset", T.LongType()),
            T.StructField("timestamp_ms", T.LongType()),
            T.StructField("key", T.StringType()),
            T.StructField("value", T.StringType()),
            T.StructField("headers", T.ArrayType(T.ArrayType(T.StringType()))),
        ]
    )


def read_local_topic(spark: SparkSession, topic: str, files: Sequence[str]) -> DataFrame:
    """The committed record files of one local topic as a Kafka-shaped DataFrame, plus `writer`
    (the writer id that committed the record). Read by Spark's JSON source, failing on a line that
    is not a DLQ record rather than reading it as nulls; no file gives an empty frame."""
    from pyspark.sql import functions as F

    if files:
        lines = (
            spark.read.schema(_line_type())
            .option("mode", "FAILFAST")
            .json([Path(path).as_uri() for path in files])
        )
        lines = lines.withColumn("writer", F.regexp_replace(F.col("_metadata.file_name"), r"\.jsonl$", ""))
    else:
        lines = spark.createDataFrame([], _line_type()).withColumn("writer", F.lit(None).cast("string"))
    headers = F.transform(
        F.col("headers"),
        lambda pair: F.struct(F.get(pair, 0).alias("key"), F.unbase64(F.get(pair, 1)).alias("value")),
    )
    return lines.select(
        F.unbase64("key").alias("key"),
        F.unbase64("value").alias("value"),
        F.lit(topic).alias("topic"),
        "writer",
        "offset",
        F.timestamp_millis("timestamp_ms").alias("timestamp"),
        headers.alias("headers"),
    )


def decode_dlq(dlq: DataFrame, schema: ParsedSchema | None = None) -> DataFrame:
    """`dlq` (Kafka-shaped, with `headers`) plus `rule`, `mode`, `subject`, `source_topic` and
    `reason` from its `__rule.*` headers, and, given the record's `schema` (a DataContract: its
    target version's), `record`: the value read back as that record by the schema's format where
    it holds one (null for the frame of a read-side reject)."""
    columns = {name: last_header(header) for name, header in RULE_HEADERS.items()}
    if schema is not None:
        columns[RECORD_COLUMN] = record_column(schema)
    return dlq.withColumns(columns)


def record_column(schema: ParsedSchema) -> Column:
    """The record the DLQ `value` column holds, read by `schema`'s format (null where it holds
    none); TypeError for a schema that says nothing of its format."""
    from pyspark.sql import functions as F

    from contracts.formats.protocol import ParsedSchema

    if not isinstance(schema, ParsedSchema):
        raise TypeError(
            "a DLQ value is read back by the record's format: give the record's parsed schema with its"
            f" format (a DataContract, or a ParsedSchema), not {type(schema).__name__}"
        )
    return schema.schema_format.read_dlq_value(F.col("value"), schema.parsed)


def last_header(name: str, headers: str = "headers") -> Column:
    """The value of the last header called `name`, as UTF-8 text (null when there is none): the
    one the reference reads when a header repeats, as it does on a record replayed twice."""
    from pyspark.sql import functions as F

    matching = F.filter(F.col(headers), lambda header: header["key"] == F.lit(name))
    return F.get(matching, F.size(matching) - 1)["value"].cast("string")
