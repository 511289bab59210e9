"""The columns the engine works with: the reserved column names and the `_contract` status column.

While rules run, a DataFrame carries the record packed in RECORD (and, when a rule transforms it,
the untouched ORIGINAL), one outcome column per rule, and `_contract`: null while the row is valid,
else the rule, mode, action and reason that rejected it (docs/semantics.md §2.6). This module owns
those names and the status's type, as a Spark type, as a literal and as the Python pass's column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.errors import ContractError
from contracts.formats.markers import ABSENT_MARK

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructField, StructType

RECORD = "__contract_record"
ORIGINAL = "__contract_original"
STATUS = "_contract"
OUTCOME_PREFIX = "__contract_outcome_"
FIELD_PREFIX = "__contract_field_"
FAILURE = "__contract_failure"
"""A Python pass's column: the message the job fails with, on a row whose ERROR action fired there."""
ERRED = "__contract_erred"
"""True on a row a native rule rejected because evaluating it raised an error: only the rule's
Python twin knows that error's text, the row's exact reason (docs/semantics.md §2.2)."""
WARNINGS = "_contract_warnings"
"""With `warnings_column`, a valid row's rules that failed with an action that let it go on (NONE)."""
PARTITION = "__contract_partition"
"""The input partition of each row going into a routing pass: it names the pass's DLQ writer, as one
task may compute several input partitions (a `coalesce` after the contract)."""


def status_type() -> StructType:
    """The `_contract` struct: which rule rejected the row, in which mode, with which action and why."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    return StructType(
        [
            StructField("rule", StringType()),
            StructField("mode", StringType()),
            StructField("action", StringType()),
            StructField("reason", StringType()),
            StructField("topic", StringType()),
            StructField("subject", StringType()),
            StructField("version", IntegerType()),
        ]
    )


def failure_field() -> StructField:
    """The FAILURE column a Python pass adds to its output (see `raise_failures`)."""
    from pyspark.sql.types import StringType, StructField

    return StructField(FAILURE, StringType(), True)


def failed_batch(batch: pa.RecordBatch, output: pa.Schema, failure: str) -> pa.RecordBatch:
    """`batch` as a pass's `output` with every row marked to fail the job with `failure` (for
    `raise_failures`): an error a Python pass met on the batch fails the job natively, as one line
    (docs/semantics.md §9.9), not as a Python worker's traceback. The columns the pass adds or
    changes the type of (a migrated record) are null."""
    columns = []
    for field in output:
        if field.name == FAILURE:
            columns.append(pa.array([failure] * batch.num_rows, type=field.type))
        elif field.name in batch.schema.names and batch.schema.field(field.name).type == field.type:
            columns.append(batch.column(field.name))
        else:
            columns.append(pa.nulls(batch.num_rows, type=field.type))
    return pa.RecordBatch.from_arrays(columns, schema=output)


def raise_failures(staged: DataFrame) -> DataFrame:
    """After a Python pass that marked rows in FAILURE instead of raising: fail the job on such a
    row natively, in `_contract` as a native ERROR rule does, so both raise Spark's own
    USER_RAISED_EXCEPTION with the same first line, on a classic session and on Spark Connect
    (an exception raised in a Python worker reaches the user as a PythonException instead)."""
    from pyspark.sql import functions as F

    failure = F.col(FAILURE)
    status = F.when(failure.isNotNull(), F.raise_error(failure)).otherwise(F.col(STATUS))
    return staged.withColumn(STATUS, status).drop(FAILURE)


def status_literal(value: dict[str, Any]) -> Column:
    """`value` as a `_contract` struct. A string, or an int that fits the version's int, is a
    literal of its field's type already: only the others are cast (each cast is a Column more,
    and PySpark round trips, on a classic session)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StringType

    def field(name: str, data_type: Any) -> Column:
        given = value[name]
        typed = isinstance(given, str) and isinstance(data_type, StringType)
        typed = typed or (
            type(given) is int and isinstance(data_type, IntegerType) and -(2**31) <= given < 2**31
        )
        literal = F.lit(given) if typed else F.lit(given).cast(data_type)
        return literal.alias(name)

    return F.struct(*[field(f.name, f.dataType) for f in status_type().fields])


RESERVED_PREFIX = "__contract_"
"""Every working column the engine adds starts with this; with STATUS, the names an input may not hold."""


def refuse_reserved_columns(df: DataFrame, subject: str, version: int) -> None:
    """A ContractError when `df` already holds a column the engine adds (`_contract`, `__contract_*`),
    e.g. a contract's `rejected` rows applied again: the engine would add a second one."""
    for name in df.columns:
        if name == STATUS or name.startswith(RESERVED_PREFIX):
            raise ContractError(
                f"the DataFrame already has column {name!r}, a name the contract adds to its rows;"
                f" drop it first (a `rejected` DataFrame applied again: df.drop({name!r}))",
                subject=subject,
                version=version,
                position=name,
            )


def check_record_columns(df: DataFrame, record_type: StructType, subject: str, version: int) -> list[str]:
    """The record's field names, after checking the DataFrame has each with the schema's type and
    no column the engine adds (`refuse_reserved_columns`). A JSON record's absent-property mask
    (`ABSENT_FIELD`) may be left out: then no property is absent (`record_columns`)."""
    refuse_reserved_columns(df, subject, version)
    present = {f.name: f.dataType for f in df.schema.fields}
    for expected in record_type.fields:
        if expected.name not in present and expected.metadata.get(ABSENT_MARK):
            continue
        if expected.name not in present:
            raise ContractError(
                f"the DataFrame has no column {expected.name!r}, a field of the contract's schema"
                f" (columns: {', '.join(df.columns)})",
                subject=subject,
                version=version,
                position=expected.name,
            )
        # simpleString ignores nullability and field metadata, which may differ harmlessly.
        if present[expected.name].simpleString() != expected.dataType.simpleString():
            raise ContractError(
                f"column {expected.name!r} is {present[expected.name].simpleString()} but the schema"
                f" says {expected.dataType.simpleString()} (DataContract.conform(df) casts what can be"
                " cast without loss)",
                subject=subject,
                version=version,
                position=expected.name,
            )
    return [f.name for f in record_type.fields]


def record_columns(df: DataFrame, record_type: StructType) -> dict[str, Column | str]:
    """The record's fields as the DataFrame's columns, by name (after `check_record_columns`): the
    column's quoted name, or a null for a mask the DataFrame leaves out (docs/semantics.md §1.5)."""
    from pyspark.sql import functions as F

    present = set(df.columns)
    return {
        f.name: quote_name(f.name) if f.name in present else F.lit(None).cast(f.dataType)
        for f in record_type.fields
    }


def field_path(struct_column: str, name: str) -> str:
    """Field `name` of the struct column `struct_column` as `select` takes it by name: its selection
    is named `name`, and builds no Column on the driver."""
    return f"{quote_name(struct_column)}.{quote_name(name)}"


def quote_name(name: str) -> str:
    """`name` as a Spark column reference, backquoted so dots and spaces stay part of it."""
    return "`" + name.replace("`", "``") + "`"


def status_values(column: pa.Array | pa.ChunkedArray) -> list[dict[str, Any] | None]:
    """A `_contract` column's statuses as dicts (None for a valid row), rows with equal statuses
    sharing one dict: a batch's rejects carry a handful of distinct statuses, so each is read once
    instead of once per row."""
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not len(column):
        return []
    # Each distinct status gets a small code, built field by field (re-encoded after each field,
    # so the codes stay below the row count): equal codes, equal statuses. A dictionary lists its
    # values in the order they first occur, so each code's first row is where its value is first.
    codes = column.is_valid().cast(pa.int64())
    for index in range(column.type.num_fields):
        encoded = pc.dictionary_encode(pc.struct_field(column, [index]), null_encoding="encode")
        combined = pc.add(pc.multiply(codes, len(encoded.dictionary)), encoded.indices.cast(pa.int64()))
        distinct_codes = pc.dictionary_encode(combined)
        codes = distinct_codes.indices.cast(pa.int64())
    firsts = pc.index_in(distinct_codes.dictionary, value_set=combined)
    distinct = column.take(firsts).to_pylist()
    return [distinct[code] for code in codes.to_pylist()]
