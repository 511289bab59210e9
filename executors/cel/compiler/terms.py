"""Typed CEL terms for the native compiler: CEL types of Spark columns, and (value, error) Column pairs.

A compiled sub-expression is a `Term`: its static CEL type and a function from the variables in
scope (Columns) to a `Val`. A `Val` is the value Column plus an error Column that is never null
(None when the term cannot fail): an evaluation error is a rule failure, never a crash
(docs/semantics.md §9.3). A SQL null value without an error is CEL `null` — a null field
(docs/semantics.md §3).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
# Kinds whose values compare with < <= > >= in cel-python exactly as Spark orders them (NaN aside).
ORDERED = frozenset({"int", "double", "string", "bytes", "bool", "timestamp", "duration"})
SCALARS = ORDERED | {"uint", "null"}


class NotNativeCel(Exception):
    """The expression has no exact native form: the rule runs with cel-python instead."""


@dataclass(frozen=True)
class CelType:
    """A static CEL type. `fields` marks a record (a CEL map keyed by its field names); `elem` is a
    list's element or a map's value, `key` a map's key; `nullable` says the value may be null."""

    kind: str
    nullable: bool = False
    elem: CelType | None = None
    key: CelType | None = None
    fields: StructType | None = None

    def non_null(self) -> CelType:
        return replace(self, nullable=False)

    def with_null(self) -> CelType:
        return replace(self, nullable=True)

    def same(self, other: CelType) -> bool:
        """Equal up to nullability, all the way down."""
        return self.non_null() == other.non_null() or (
            self.kind == other.kind
            and self.fields == other.fields
            and _same_or_none(self.elem, other.elem)
            and _same_or_none(self.key, other.key)
        )


def _same_or_none(a: CelType | None, b: CelType | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.same(b))


@dataclass(frozen=True)
class Val:
    """A term's Columns: its value and, unless it cannot fail, a non-null boolean error flag."""

    value: Column
    error: Column | None = None


Env = Mapping[str, "Column"]


@dataclass(frozen=True)
class Term:
    """A compiled sub-expression. `constant` holds a plan-time cel-python value (`is_constant`).

    `fails` is False only when its emitted error flag is surely None. `value_cost` and `error_cost`
    bound the nodes of the Spark expressions it emits for each, and `depth` their nesting: a Spark
    expression is a tree, so an operator that reads an operand's Column k times holds k copies of
    it, and nested operators multiply (`derived` adds it up). The compiler leaves a rule to
    cel-python past a budget.
    """

    type: CelType
    emit: Callable[[Env], Val]
    constant: Any = None
    is_constant: bool = False
    error: bool = False
    fails: bool = True
    value_cost: int = 1
    error_cost: int = 0
    depth: int = 1
    pointer: str | None = None
    """For a record reached from `message` by field names, its JSON pointer there (`""` for
    `message`): a JSON property's presence may need it (docs/semantics.md §3.6)."""

    @property
    def cost(self) -> int:
        return self.value_cost + self.error_cost


Uses = tuple[int, int, int, int]
"""How many copies of an operand's value and error Columns a result's value holds, then its error."""
PASSED_ON: Uses = (1, 0, 0, 1)  # the value read once for the value, the error passed on


def derived(
    cel_type: CelType,
    emit: Callable[[Env], Val],
    operands: Sequence[tuple[Term, Uses]],
    *,
    fails: bool = True,
    depth: int = 3,
) -> Term:
    """A term computed from operands, each with the copies of its Columns the result holds;
    `depth` is how many levels of Spark expressions it adds."""
    value = 4 + sum(v * t.value_cost + e * t.error_cost for t, (v, e, _, _) in operands)
    error = 4 + sum(v * t.value_cost + e * t.error_cost for t, (_, _, v, e) in operands)
    return Term(
        cel_type,
        emit,
        fails=fails,
        value_cost=value,
        error_cost=error if fails else 0,
        depth=depth + max((operand.depth for operand, _ in operands), default=0),
    )


def error_term() -> Term:
    """A sub-expression that always fails (cel-python has no overload for it, or it raised)."""
    from pyspark.sql import functions as F

    return Term(
        CelType("null", True),
        lambda env: Val(F.lit(None), F.lit(True)),
        is_constant=True,
        error=True,
        error_cost=1,
    )


def any_error(*errors: Column | None) -> Column | None:
    """The disjunction of the error flags that can be set (None when none can)."""
    present = [e for e in errors if e is not None]
    if not present:
        return None
    combined = present[0]
    for error in present[1:]:
        combined = combined | error
    return combined


def known(error: Column | None) -> Column:
    from pyspark.sql import functions as F

    return F.lit(False) if error is None else error


def spark_cel_type(dtype: DataType, nullable: bool, avro_type: str | None = None) -> CelType:
    """The CEL type of a Spark column holding a value of the reference's `message` map (§3)."""
    from pyspark.sql import types as T

    simple = {
        T.ByteType: "int",
        T.ShortType: "int",
        T.IntegerType: "int",
        T.LongType: "int",
        T.FloatType: "double",
        T.DoubleType: "double",
        T.StringType: "string",
        T.BinaryType: "bytes",
        T.BooleanType: "bool",
        T.DateType: "int",
        T.TimestampType: "timestamp",
        T.NullType: "null",
    }
    for spark_class, kind in simple.items():
        if type(dtype) is spark_class:
            return CelType(kind, nullable or kind == "null")
    if isinstance(dtype, T.ArrayType):
        return CelType("list", nullable, elem=spark_cel_type(dtype.elementType, dtype.containsNull))
    if isinstance(dtype, T.MapType) and isinstance(dtype.keyType, T.StringType):
        value = spark_cel_type(dtype.valueType, dtype.valueContainsNull)
        return CelType("map", nullable, elem=value, key=CelType("string"))
    if isinstance(dtype, T.StructType) and avro_type != "COMBINED":
        return CelType("map", nullable, key=CelType("string"), fields=dtype)
    # Decimals, local timestamps and multi-branch unions reach cel-python as values it has no
    # CEL type for (Decimal, naive datetimes, a branch chosen per value).
    return CelType("opaque", nullable)


def spark_value(column: Column, dtype: DataType) -> Column:
    """A field's Column as the compiler represents its CEL type: ints as long, doubles as double,
    dates as days since the epoch."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType):
        return column.cast("long")
    if isinstance(dtype, T.FloatType):
        return column.cast("double")
    if isinstance(dtype, T.DateType):
        return F.unix_date(column).cast("long")
    return column


def constant_term(value: Any) -> Term:
    """A plan-time cel-python value as a literal term (lists and maps of one element type)."""
    cel_type = constant_type(value)
    return Term(
        cel_type,
        lambda env: Val(literal_column(value, cel_type)),
        constant=value,
        is_constant=True,
        fails=False,
        value_cost=_literal_cost(value),
    )


def _literal_cost(value: Any) -> int:
    """Nodes of a literal's Column: one, or one per element of a list or map (and its array)."""
    if isinstance(value, list):
        return 1 + sum(_literal_cost(item) for item in value)
    if isinstance(value, dict):
        return 1 + sum(1 + _literal_cost(item) for item in value.values())
    return 2


def constant_type(value: Any) -> CelType:
    """The CEL type of a plan-time value; NotNativeCel when no single static type describes it."""
    from celpy import celtypes

    if value is None:
        return CelType("null", True)
    for cel_class, kind in (
        (celtypes.BoolType, "bool"),
        (celtypes.UintType, "uint"),
        (celtypes.IntType, "int"),
        (celtypes.DoubleType, "double"),
        (celtypes.TimestampType, "timestamp"),
        (celtypes.DurationType, "duration"),
    ):
        if isinstance(value, cel_class):
            return CelType(kind)
    if isinstance(value, str) and any("\ud800" <= character <= "\udfff" for character in value):
        # cel-python reads '\ud83d' as a lone surrogate, which no JVM string can hold.
        raise NotNativeCel("a string constant with a lone surrogate")
    # cel-python returns plain str/bytes/float from some operators ('a' + 'b', 1.5 + 1).
    for plain, kind in ((str, "string"), (bytes, "bytes"), (float, "double")):
        if isinstance(value, plain) and not isinstance(value, bool):
            return CelType(kind)
    if isinstance(value, list):
        return CelType("list", elem=_one_type(list(value)))
    if isinstance(value, dict):
        keys = _one_type(list(value.keys()))
        if keys.kind not in ("string", "dyn"):
            raise NotNativeCel("a map literal whose keys are not strings")
        return CelType("map", key=CelType("string"), elem=_one_type(list(value.values())))
    raise NotNativeCel(f"a constant of type {type(value).__name__}")


def _one_type(values: list[Any]) -> CelType:
    if not values:
        return CelType("dyn")
    types = {constant_type(v) for v in values}
    kinds = {t.kind for t in types if t.kind != "null"}
    if len(kinds) > 1 or len({t.non_null() for t in types if t.kind != "null"}) > 1:
        raise NotNativeCel("a constant list or map mixing element types")
    if not kinds:
        return CelType("null", True)
    (base,) = {t.non_null() for t in types if t.kind != "null"}
    return base.with_null() if len(kinds) < len({t.kind for t in types}) else base


def literal_column(value: Any, cel_type: CelType) -> Column:
    """A Column holding a plan-time CEL value, in the compiler's representation of its type."""
    from pyspark.sql import functions as F

    kind = cel_type.kind
    if value is None:
        return F.lit(None)
    if kind in ("int", "uint"):
        if not INT_MIN <= int(value) <= INT_MAX:
            raise NotNativeCel("an unsigned literal beyond int64")
        return F.lit(int(value)).cast("long")
    if kind == "double":
        return F.lit(float(value)).cast("double")
    if kind == "string":
        return F.lit(str(value))
    if kind == "bytes":
        return F.lit(bytearray(value)).cast("binary")
    if kind == "bool":
        return F.lit(bool(value))
    if kind == "timestamp":
        return F.timestamp_micros(F.lit(timestamp_micros(value)))
    if kind == "duration":
        return F.lit(duration_micros(value)).cast("long")
    if kind == "list":
        assert cel_type.elem is not None
        if cel_type.elem.kind in ("dyn", "null"):
            raise NotNativeCel("a list literal without element type")
        return F.array(*[literal_column(v, cel_type.elem) for v in value])
    if kind == "map":
        assert cel_type.elem is not None
        if cel_type.elem.kind in ("dyn", "null"):
            raise NotNativeCel("a map literal without value type")
        pairs = [c for k, v in value.items() for c in (F.lit(str(k)), literal_column(v, cel_type.elem))]
        return F.create_map(*pairs)
    raise NotNativeCel(f"a literal of kind {kind}")


def timestamp_micros(value: datetime.datetime) -> int:
    """Microseconds since the epoch, exactly (no float rounding)."""
    return duration_micros(value - EPOCH)


def duration_micros(value: datetime.timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
