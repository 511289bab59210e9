"""Tombstones (a null frame; on write, a row without a record, such as a null key) on their way
through a call: not records, they pass every migration and rule with a placeholder status and
leave as valid rows with a null record, or are dropped on request (docs/semantics.md §8.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from contracts.engine.columns import (
    ORIGINAL,
    RECORD,
    STATUS,
    status_literal,
    status_type,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


TOMBSTONE = "TOMBSTONE"
"""The `_contract` action a tombstone carries while migrations and rules run: not a rejection,
only what makes every one of them skip the row (see release_tombstones)."""
TOMBSTONE_POLICIES = ("keep", "drop")


def tombstone_filter(df: DataFrame, value_column: str, tombstones: str) -> DataFrame:
    """The rows to decode: tombstones (a null value) kept ("keep") or left out ("drop")."""
    from pyspark.sql import functions as F

    if tombstones not in TOMBSTONE_POLICIES:
        raise ValueError(f"tombstones must be keep or drop, not {tombstones!r}")
    if tombstones == "drop":
        return df.filter(F.col(f"`{value_column}`").isNotNull())
    return df


def without_record(packed: DataFrame, absent: str, subject: str, version: int) -> DataFrame:
    """A packed frame (runner.pack) whose rows where boolean column `absent` is true hold no
    record (a null key on write): a null record with the TOMBSTONE status, so every rule skips
    them until release_tombstones, and the encode pass writes a null frame."""
    from pyspark.sql import functions as F

    status = {"rule": None, "mode": "WRITE", "action": TOMBSTONE, "reason": None, "topic": None}
    tombstone = status_literal({**status, "subject": subject, "version": version})
    nulled = {
        name: F.when(F.col(absent), F.lit(None)).otherwise(F.col(name))
        for name in (RECORD, ORIGINAL)
        if name in packed.columns
    }
    return packed.withColumns({**nulled, STATUS: F.when(F.col(absent), tombstone).otherwise(F.col(STATUS))})


def release_tombstones(staged: DataFrame) -> DataFrame:
    """After migrations and rules: the tombstones' placeholder status cleared, so they leave as
    valid rows, their record null."""
    from pyspark.sql import functions as F

    status = F.col(STATUS)
    is_tombstone = status.getField("action") == F.lit(TOMBSTONE)
    return staged.withColumn(STATUS, F.when(is_tombstone, F.lit(None).cast(status_type())).otherwise(status))


def mark_tombstones(batch: pa.RecordBatch, value_column: str, tombstone: pa.Scalar) -> pa.RecordBatch:
    """The batch with `tombstone` as the status of each row whose frame is null."""
    frames = batch.column(value_column)
    if not frames.null_count:
        return batch
    index = batch.schema.get_field_index(STATUS)
    status = pc.if_else(frames.is_null(), tombstone, batch.column(index))
    return batch.set_column(index, batch.schema.field(index), status)
