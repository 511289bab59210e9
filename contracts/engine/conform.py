"""`DataContract.conform`: a DataFrame's record columns cast and reordered to the contract's Spark
type, where that loses nothing (docs/semantics.md §1.4).

A column is cast only when every value it can hold has exactly one value of the schema's type: a
wider number (int to bigint or double, float to double, an integer or a decimal into a decimal with
room for it), a date to a timestamp, a null column to anything. Struct fields are matched by name
and reordered, a missing nullable field becomes null, and arrays and maps are conformed element by
element. Anything else (a string to an int, a double to an int, a field the schema lacks) is a
ContractError naming the column path, both types and why: no value is silently changed or dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from contracts.engine.columns import quote_name
from contracts.errors import ContractError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructField, StructType

_WIDER = {
    "tinyint": ("smallint", "int", "bigint", "float", "double"),
    "smallint": ("int", "bigint", "float", "double"),
    "int": ("bigint", "double"),
    "float": ("double",),
}
"""The numeric types each one casts to exactly (a float holds every int only to 2^24, a double
every bigint only to 2^53)."""
_INTEGRAL_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}


def conformed(df: DataFrame, record_type: StructType, subject: str, version: int) -> DataFrame:
    """`df` with the record's fields first, in the schema's order and types, then its other
    columns as they are; a ContractError for a field that is missing or cannot be cast."""
    from pyspark.sql import functions as F

    to = _Conforming(subject, version)
    present = {field.name: field.dataType for field in df.schema.fields}
    columns = [
        to.field(
            F.col(quote_name(field.name)) if field.name in present else None, present.get(field.name), field
        )
        for field in record_type.fields
    ]
    names = set(record_type.fieldNames())
    return df.select(*columns, *(F.col(quote_name(name)) for name in df.columns if name not in names))


@dataclass(frozen=True)
class _Conforming:
    """Builds the conformed columns for one contract version (named in its errors)."""

    subject: str
    version: int

    def field(
        self, column: Column | None, source: DataType | None, field: StructField, path: str = ""
    ) -> Column:
        """Struct field `field` from `column` (None: the input lacks it), under its own name."""
        from pyspark.sql import functions as F

        where = f"{path}.{field.name}" if path else field.name
        if column is None or source is None:
            if not field.nullable:
                raise self.error(where, "is missing, and the schema does not allow null")
            return F.lit(None).cast(field.dataType).alias(field.name)
        return self.value(column, source, field.dataType, where).alias(field.name)

    def value(self, column: Column, source: DataType, target: DataType, path: str) -> Column:
        """`column`'s values, of type `source`, as values of `target`."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, MapType, NullType, StructType

        if source.simpleString() == target.simpleString():
            return column
        if isinstance(source, NullType):
            return F.lit(None).cast(target)
        if isinstance(target, StructType) and isinstance(source, StructType):
            return self.struct(column, source, target, path)
        if isinstance(target, ArrayType) and isinstance(source, ArrayType):
            element, wanted = source.elementType, target.elementType
            return F.transform(column, lambda item: self.value(item, element, wanted, f"{path}[]"))
        if isinstance(target, MapType) and isinstance(source, MapType):
            keys, values = (source.keyType, target.keyType), (source.valueType, target.valueType)
            keyed = F.transform_keys(column, lambda key, _: self.value(key, *keys, f"{path}{{key}}"))
            return F.transform_values(keyed, lambda _, item: self.value(item, *values, f"{path}{{value}}"))
        if _widens(source, target):
            return column.cast(target)
        raise self.error(
            path,
            f"is {source.simpleString()} but the schema says {target.simpleString()}, which does not"
            " hold every value of it: cast it yourself if its values fit",
        )

    def struct(self, column: Column, source: StructType, target: StructType, path: str) -> Column:
        """A struct column as `target`'s struct: fields by name, in its order; null stays null."""
        from pyspark.sql import functions as F

        present = {field.name: field.dataType for field in source.fields}
        extra = [name for name in present if name not in target.fieldNames()]
        if extra:
            raise self.error(path, f"has field(s) {', '.join(extra)} the schema's struct lacks")
        fields = [
            self.field(column.getField(f.name) if f.name in present else None, present.get(f.name), f, path)
            for f in target.fields
        ]
        return F.when(column.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))

    def error(self, path: str, why: str) -> ContractError:
        return ContractError(
            f"column {path!r} {why}", subject=self.subject, version=self.version, position=path
        )


def _widens(source: DataType, target: DataType) -> bool:
    """Whether every value of `source` has exactly one value of `target`."""
    from pyspark.sql.types import DateType, DecimalType, TimestampType

    src, dst = source.simpleString(), target.simpleString()
    if dst in _WIDER.get(src, ()):
        return True
    if isinstance(target, DecimalType):
        room = target.precision - target.scale
        if src in _INTEGRAL_DIGITS:
            return room >= _INTEGRAL_DIGITS[src]
        if isinstance(source, DecimalType):
            return target.scale >= source.scale and room >= source.precision - source.scale
    return isinstance(source, DateType) and isinstance(target, TimestampType)
