"""Avro frames written by `to_avro`, with the records fastavro must judge in a branch of their own
(docs/semantics.md §8.10): no row of the input crosses to Python unless it is one of those.

`to_avro` writes fastavro's bytes for every record `jvm_avro.to_avro_encode` does not flag as a
suspect (a null where the schema has none, a string that is not UTF-8). A suspect is usually a
record fastavro refuses, failing the job; fastavro writes a few (a null boolean, as false). When
the input reads twice safely (contracts.engine.read_twice), the query is two branches joined by a
union: the other rows, encoded by `to_avro` alone, and the suspects, each numbered by its Spark
partition and row before it is picked out, so a failure names the row the one-pass UDF would
name (rows the driver holds, which Spark numbers on the driver, keep the one-pass UDF). A suspect
fastavro writes comes after the other rows, from a partition of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine import encode, positions
from contracts.engine.columns import PARTITION, RECORD, quote_name
from contracts.engine.read_twice import physical_plan, reads_twice_safely
from contracts.formats.protocol import SchemaFormat

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

ROW = "__contract_row"
"""A suspect's row number in its Spark partition, counted before the suspects are picked out."""
_PICKED = "__contract_picked"
"""True for a suspect, in the projection that numbers the rows."""
_ROW_BITS = (1 << 33) - 1
"""`monotonically_increasing_id` keeps a row's number in its partition in its lower 33 bits."""


def numbers_rows_in_tasks(df: DataFrame) -> bool:
    """Whether the suspects of `df` may be picked out in a branch of their own: it reads twice
    safely, and its rows are not held by the driver (Spark evaluates a projection of those on the
    driver, numbering every row as partition 0, before tasks split them)."""
    if df.isStreaming:
        return False
    plan = physical_plan(df)
    return "LocalTableScan" not in plan and reads_twice_safely(df, plan)


@dataclass(frozen=True)
class SuspectFrames:
    """The picklable `mapInArrow` body of the suspects' branch: each suspect's fastavro frame with
    the output's other columns, or the failure the fastavro path gives for it."""

    schema: Any
    schema_name: str
    prefix: bytes
    schema_format: SchemaFormat
    output_names: tuple[str, ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if not batch.num_rows:
                continue
            # A task of this branch reads one input partition: its rows share PARTITION.
            numbering = (batch.column(PARTITION)[0].as_py(), batch.column(ROW).to_pylist())
            frames = encode.encode_frames(
                batch, 0, self.schema, self.schema_name, self.prefix, self.schema_format, numbering=numbering
            )
            columns = [
                pa.array(frames, pa.binary()) if name == "value" else batch.column(name)
                for name in self.output_names
            ]
            yield pa.RecordBatch.from_arrays(columns, names=list(self.output_names))


def encode_beside(
    staged: DataFrame,
    suspect: Column,
    written: Column,
    output: StructType,
    frames: SuspectFrames,
) -> DataFrame:
    """`output`'s columns for `staged`: `written` (the frame `to_avro` gives) as the value of a
    row that is not `suspect`, the suspects' rows from `frames` in a branch of their own."""
    from pyspark.sql import functions as F

    names = list(frames.output_names)
    encoded = staged.filter(~suspect).select(
        *[written.alias(name) if name == "value" else F.col(quote_name(name)) for name in names]
    )
    wanted = [RECORD, *positions.ENCODE_POSITION, *names]
    given = [name for name in dict.fromkeys(wanted) if name in staged.columns]
    # The test is a column of the projection that numbers the rows, so Spark reads it from the
    # input's columns and builds a record only for the rows picked out, not for every row.
    numbered = staged.withColumns(
        {
            PARTITION: F.spark_partition_id(),
            ROW: F.monotonically_increasing_id().bitwiseAND(F.lit(_ROW_BITS)),
            _PICKED: suspect,
        }
    )
    picked = numbered.filter(F.col(_PICKED)).select(*[F.col(quote_name(n)) for n in given], PARTITION, ROW)
    return encoded.unionByName(picked.mapInArrow(frames, output))
