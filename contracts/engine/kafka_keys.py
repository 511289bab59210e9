"""Kafka keys under their own contract: the key subject's record decoded into, and encoded from,
one struct column beside the value's record (docs/semantics.md §8.9).

Both passes keep the rest of the row out of the key contract's way: on read the key's fields are
nested back into the key column by position (a key field may share a name with any other column);
on write every other column travels packed in one struct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.errors import ContractError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

# Working columns of the key's passes. Not under the engine's reserved prefix: the key contract's
# own pass refuses inputs holding such a name; `check_free` refuses an input holding one of these.
RAW_KEY = "__key_frame"
"""The key's frame while the value is decoded: a DLQ record's key is the key as it arrived."""
REST = "__key_rest"
"""Every other column, packed, while the key is encoded."""
ABSENT = "__key_absent"
"""Whether the row has no key while the key is encoded: such a row is no record, its key stays null."""
LIFTED = ("headers", "topic")
"""Columns the key's encode pass reads beside the record (schema id headers, DLQ records)."""


def check_free(df: DataFrame, subject: str, version: int) -> None:
    """A ContractError when `df` holds a working column name of the key's passes."""
    for name in (RAW_KEY, REST, ABSENT):
        if name in df.columns:
            raise ContractError(
                f"the DataFrame has column {name!r}, a name a key contract's pass adds; rename it",
                subject=subject,
                version=version,
                position=name,
            )


def key_run_id(run_id: str | None) -> str | None:
    """The run id of the key's pass: its DLQ output is named apart from the value's."""
    return None if run_id is None else f"{run_id}-key"


def key_column_of(df: DataFrame, key_col: str | None, subject: str, version: int) -> str:
    """The column holding the key, which a key contract needs."""
    if key_col is None or key_col not in df.columns:
        what = "key_col=None" if key_col is None else f"no column {key_col!r}"
        raise ContractError(
            f"a key contract needs the Kafka key's column, and there is {what}"
            f" (columns: {', '.join(df.columns)})",
            subject=subject,
            version=version,
        )
    return key_col


def check_key_struct(df: DataFrame, key_col: str, key_type: StructType, subject: str, version: int) -> None:
    """A ContractError unless `key_col` holds a struct (the key's record) to encode."""
    from pyspark.sql.types import StructType

    found = df.schema[key_col].dataType
    if not isinstance(found, StructType):
        raise ContractError(
            f"column {key_col!r} holds {found.simpleString()}, and the key's record is a struct"
            f" {key_type.simpleString()}",
            subject=subject,
            version=version,
            position=key_col,
        )


def nest_decoded_key(decoded: DataFrame, key_type: StructType, key_col: str, columns: list[str]) -> DataFrame:
    """The key pass's output (the key's fields, then every other column) as `columns` with the
    key's record as one struct in `key_col` (null where the key was null), then RAW_KEY."""
    from pyspark.sql import functions as F

    count = len(key_type.fields)
    placeholders = [f"__key_field_{i}" for i in range(count)]
    renamed = decoded.toDF(*placeholders, *decoded.columns[count:])
    record = F.struct(*[F.col(p).alias(f.name) for p, f in zip(placeholders, key_type.fields, strict=True)])
    key = F.when(F.col(RAW_KEY).isNull(), F.lit(None)).otherwise(record).alias(key_col)
    return renamed.select(*[key if c == key_col else F.col(f"`{c}`") for c in columns], F.col(RAW_KEY))


def unpack_key_fields(df: DataFrame, key_type: StructType, key_col: str) -> tuple[DataFrame, list[str]]:
    """The key's record as top-level columns, the LIFTED columns that are no key field, ABSENT,
    and every other column packed in REST, for the key's encode pass; and the lifted names."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    names = set(key_type.fieldNames())
    lifted = [c for c in LIFTED if c in df.columns and c not in names]
    rest = [c for c in df.columns if c != key_col and c not in lifted]
    key = F.col(f"`{key_col}`")
    given = df.schema[key_col].dataType
    held = set(given.fieldNames()) if isinstance(given, StructType) else set()
    # A field the key's struct leaves out is null (a JSON key's absent-property mask, §1.5).
    fields = [
        (key.getField(f.name) if f.name in held else F.lit(None).cast(f.dataType)).alias(f.name)
        for f in key_type.fields
    ]
    packed = F.struct(*[F.col(f"`{c}`") for c in rest]).alias(REST)
    return df.select(*fields, *lifted, packed, key.isNull().alias(ABSENT)), lifted


def unpack_rest(encoded: DataFrame, key_col: str, columns: list[str], lifted: list[str]) -> DataFrame:
    """The key's encode pass output (lifted columns, REST, the key's frame in `value`) as
    `columns`, the frame in `key_col` (and a `headers` column the pass added, last)."""
    from pyspark.sql import functions as F

    def column(name: str) -> Column:
        if name == key_col:
            return F.col("value").alias(key_col)
        return F.col(f"`{name}`") if name in lifted else F.col(REST).getField(name).alias(name)

    added = ["headers"] if "headers" in encoded.columns and "headers" not in columns else []
    return encoded.select(*[column(c) for c in columns], *added)
