"""Whether a record's field is present (`has()`) and what reading it gives, as Spark Columns, by the
presence its format marks on the Spark field (contracts.formats.markers; docs/semantics.md §3.6):
every field of an Avro record is present; a Protobuf field by protobuf's own rules (set, not its
default, not empty); a JSON property when the document has it, which the record's absent-property
mask tells for a property that accepts null."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from contracts.formats.markers import (
    ABSENT_FIELD,
    IN_DOCUMENT,
    IN_DOCUMENT_OR_NULL,
    NON_EMPTY,
    NOT_DEFAULT,
    PRESENCE_DEFAULT_KEY,
    PRESENCE_KEY,
    SET,
    SET_OR_DEFAULT,
)
from executors.cel.compiler.terms import Env, NotNativeCel

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructField


def kind(field: StructField) -> str | None:
    """The field's presence kind; None: present wherever its record is."""
    found = field.metadata.get(PRESENCE_KEY)
    return str(found) if found is not None else None


def reads_as_set(field: StructField) -> bool:
    """Whether reading the field never gives a null its presence stands for (an unset field read as
    its default, an absent property read as an error): its CEL value is then not nullable."""
    return kind(field) in (SET_OR_DEFAULT, IN_DOCUMENT)


def present(value: Column, field: StructField, env: Env, pointer: str | None) -> Column:
    """True where the field (its Column `value`, in a non-null record at JSON pointer `pointer`
    from `message`) is present, as `has()` answers."""
    from pyspark.sql import functions as F

    found = kind(field)
    if found is None:
        return F.lit(True)
    if found in (SET, SET_OR_DEFAULT, IN_DOCUMENT):
        return value.isNotNull()
    if found == NOT_DEFAULT:
        return F.coalesce(value != default(field), F.lit(False))
    if found == NON_EMPTY:
        return F.coalesce(F.size(value) > 0, F.lit(False))
    if found == IN_DOCUMENT_OR_NULL:
        return value.isNotNull() | ~_listed(field, env, pointer)
    raise NotNativeCel(f"field {field.name} of presence {found!r}")


def read(value: Column, field: StructField, env: Env, pointer: str | None) -> tuple[Column, Column | None]:
    """The field's value as CEL reads it, and where reading it is an error ("no such key": an
    absent JSON property), None when it never is."""
    from pyspark.sql import functions as F

    found = kind(field)
    if found == SET_OR_DEFAULT:
        return F.coalesce(value, default(field)), None
    if found == IN_DOCUMENT:
        return value, value.isNull()
    if found == IN_DOCUMENT_OR_NULL:
        return value, value.isNull() & _listed(field, env, pointer)
    return value, None


def _listed(field: StructField, env: Env, pointer: str | None) -> Column:
    """Whether the record's mask lists the property at `pointer` (its own pointer) as absent."""
    from pyspark.sql import functions as F

    if pointer is None:
        raise NotNativeCel(f"the presence of property {field.name} of a record not reached from `message`")
    mask = env["message"].getField(ABSENT_FIELD)
    return F.coalesce(F.array_contains(mask, F.lit(pointer)), F.lit(False))


def default(field: StructField) -> Column:
    """The field's default as a Column of its Spark type: its PRESENCE_DEFAULT_KEY, else the zero."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    text = field.metadata.get(PRESENCE_DEFAULT_KEY)
    dtype = field.dataType
    if isinstance(dtype, T.BinaryType):
        return F.lit(bytearray(json.loads(text) if text is not None else [])).cast(dtype)
    if text is not None:
        return F.lit(json.loads(text)).cast(dtype)
    zeros = {T.StringType: "", T.BooleanType: False}
    return F.lit(zeros.get(type(dtype), 0)).cast(dtype)
