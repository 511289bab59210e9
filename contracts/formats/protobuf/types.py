"""The Spark type of a Protobuf message, after spark-protobuf's `from_protobuf` (docs/semantics.md
§1.6): messages are structs, repeated fields arrays, map fields maps, enums their value names,
Timestamp a timestamp, Duration a day-time interval, wrappers their nullable scalar, and unsigned
integers widened so every value fits (as its `upcast.unsigned.ints` option does); Confluent's
`confluent.type.Decimal` is a decimal of the precision and scale its field declares."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from contracts.errors import ContractError
from contracts.formats.markers import (
    CEL_DIFFERS_KEY,
    NON_EMPTY,
    NOT_DEFAULT,
    PRESENCE_DEFAULT_KEY,
    PRESENCE_KEY,
    SET,
    SET_OR_DEFAULT,
)
from contracts.formats.protobuf.options import field_params

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor
    from pyspark.sql.types import DataType, StructField, StructType

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
DECIMAL = "confluent.type.Decimal"
"""Confluent's decimal message (confluent/type/decimal.proto): an unscaled integer and its scale."""
DEFAULT_DECIMAL = (10, 0)
"""The precision and scale of a Decimal field that declares none: Spark's and Confluent's Flink
SQL default decimal (Confluent's Java converter also defaults the scale to 0)."""
UNSIGNED = frozenset({4, 6, 7, 13})
"""FieldDescriptor.TYPE_UINT64, TYPE_FIXED64, TYPE_FIXED32, TYPE_UINT32."""
WRAPPERS = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
"""Well-known messages that stand for one value (a wrapper: the value or null)."""


def struct_type(message: Descriptor) -> StructType:
    """The Spark type of a record of `message`; ContractError for a recursive message or a message
    without fields (neither has a Spark type)."""
    made = _message_type(message, (message.full_name,))
    from pyspark.sql.types import StructType

    assert isinstance(made, StructType)
    return made


def _message_type(message: Descriptor, path: tuple[str, ...]) -> DataType:
    from pyspark.sql import types as T

    if not message.fields:
        raise _unsupported(path, f"message {message.full_name} has no fields (an empty struct)")
    return T.StructType([_struct_field(field, path) for field in message.fields])


def _struct_field(field: FieldDescriptor, path: tuple[str, ...]) -> StructField:
    """A field as a struct field: nullable when it can be unset (a message, a wrapper, a field with
    presence), marked when what CEL sees of it differs from its Spark value, and with its presence
    as protobuf decides it (contracts.formats.markers)."""
    from pyspark.sql import types as T

    always_set = is_repeated(field) or (field.message_type is None and not field.has_presence)
    metadata: dict[str, Any] = {CEL_DIFFERS_KEY: True} if cel_differs(field, frozenset(path)) else {}
    metadata.update(presence(field))
    return T.StructField(field.name, _field_type(field, path), not always_set, metadata)


def presence(field: FieldDescriptor) -> dict[str, Any]:
    """The field's presence, as protobuf's `HasField` and the reference's CEL decide it (§3.6): a
    repeated or map field is present when not empty; a message or wrapper when set (read unset:
    null); another field with presence (`optional`, a oneof member) when set (read unset: its
    default); a scalar without presence when it is not its default."""
    if is_repeated(field):
        return {PRESENCE_KEY: NON_EMPTY}
    if field.message_type is not None:
        return {PRESENCE_KEY: SET}
    kind = SET_OR_DEFAULT if field.has_presence else NOT_DEFAULT
    default = _spark_default(field)
    return {
        PRESENCE_KEY: kind,
        **({PRESENCE_DEFAULT_KEY: json.dumps(default)} if default is not None else {}),
    }


def _spark_default(field: FieldDescriptor) -> Any:
    """A scalar field's default as Spark holds it, when it is not its Spark type's zero: an enum's
    value name, bytes as their values, a number or string proto2 declares."""
    from google.protobuf.descriptor import FieldDescriptor as F

    value = field.default_value
    if field.type == F.TYPE_ENUM:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)
    if isinstance(value, bytes):
        return list(value) if value else None
    return value if value else None


def _field_type(field: FieldDescriptor, path: tuple[str, ...]) -> DataType:
    from pyspark.sql import types as T

    if is_map(field):
        key, value = field.message_type.fields
        return T.MapType(_value_type(key, path), _value_type(value, path), True)
    item = _value_type(field, path)
    return T.ArrayType(item, False) if is_repeated(field) else item


def _value_type(field: FieldDescriptor, path: tuple[str, ...]) -> DataType:
    """The Spark type of one value of `field` (an element, for a repeated field)."""
    from google.protobuf.descriptor import FieldDescriptor as F
    from pyspark.sql import types as T

    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        message = field.message_type
        name = message.full_name
        if name == TIMESTAMP:
            return T.TimestampType()
        if name == DURATION:
            return T.DayTimeIntervalType()
        if name == DECIMAL:
            return T.DecimalType(*decimal_type(field))
        if name in WRAPPERS:
            return _value_type(message.fields_by_name["value"], path)
        if name in path:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise _unsupported(
                path, f"the recursive message {name} ({cycle})", "a Spark type cannot nest without end"
            )
        return _message_type(message, (*path, name))
    scalars = {
        F.TYPE_DOUBLE: T.DoubleType(),
        F.TYPE_FLOAT: T.FloatType(),
        F.TYPE_INT32: T.IntegerType(),
        F.TYPE_SINT32: T.IntegerType(),
        F.TYPE_SFIXED32: T.IntegerType(),
        F.TYPE_INT64: T.LongType(),
        F.TYPE_SINT64: T.LongType(),
        F.TYPE_SFIXED64: T.LongType(),
        F.TYPE_UINT32: T.LongType(),
        F.TYPE_FIXED32: T.LongType(),
        F.TYPE_UINT64: T.DecimalType(20, 0),
        F.TYPE_FIXED64: T.DecimalType(20, 0),
        F.TYPE_BOOL: T.BooleanType(),
        F.TYPE_STRING: T.StringType(),
        F.TYPE_BYTES: T.BinaryType(),
        F.TYPE_ENUM: T.StringType(),
    }
    return scalars[field.type]


def decimal_type(field: FieldDescriptor) -> tuple[int, int]:
    """The precision and scale a `confluent.type.Decimal` field declares in its
    `(confluent.field_meta).params` (`precision`, `scale`), as Confluent's converters read them,
    DEFAULT_DECIMAL for what it leaves out; ContractError naming the field for a value that is no
    integer or that Spark cannot hold (precision 1..38, scale 0..precision)."""
    params = field_params(field)
    found = []
    for key, default in zip(("precision", "scale"), DEFAULT_DECIMAL, strict=True):
        text = params.get(key)
        try:
            found.append(default if text is None else int(text))
        except ValueError:
            raise ContractError(
                f"the Decimal field {field.full_name} declares {key} {text!r}, which is no integer",
                position="schema",
            ) from None
    precision, scale = found
    if not (1 <= precision <= 38 and 0 <= scale <= precision):
        raise ContractError(
            f"the Decimal field {field.full_name} is decimal({precision},{scale}), which Spark cannot"
            " hold: its precision must be 1..38 and its scale 0..precision (declare them with"
            ' `[(confluent.field_meta).params = {key: "precision", value: "…"}, …]`)',
            position="schema",
        )
    return precision, scale


def holds_decimal(message: Descriptor, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a record of `message` can hold a `confluent.type.Decimal` value (in any field, at
    any depth): its values must then fit their fields' Spark decimals."""
    for field in message.fields:
        nested = field.message_type
        if nested is None or nested.full_name in seen:
            continue
        if nested.full_name == DECIMAL or holds_decimal(nested, seen | {message.full_name}):
            return True
    return False


def is_repeated(field: FieldDescriptor) -> bool:
    """Whether the field is repeated (protobuf 7 dropped `label` for `is_repeated`)."""
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def is_required(field: FieldDescriptor) -> bool:
    """Whether the field is a proto2 `required` one."""
    required = getattr(field, "is_required", None)
    return bool(required) if required is not None else field.label == field.LABEL_REQUIRED


def is_map(field: FieldDescriptor) -> bool:
    return is_repeated(field) and field.message_type is not None and field.message_type.GetOptions().map_entry


def is_unsigned_64(field: FieldDescriptor) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as F

    return field.type in (F.TYPE_UINT64, F.TYPE_FIXED64)


def cel_differs(field: FieldDescriptor, seen: frozenset[str] = frozenset()) -> bool:
    """Whether CEL sees the field's value otherwise than Spark holds it: an enum (its number in
    CEL, its name in Spark), an unsigned integer (a uint in CEL, a wider type in Spark), a Decimal
    (its message's fields in CEL, a decimal in Spark), or a message holding such a field."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type == F.TYPE_ENUM or field.type in UNSIGNED:
        return True
    nested = field.message_type
    if nested is not None and nested.full_name == DECIMAL:
        return True
    if nested is None or nested.full_name in seen:
        return False
    return any(cel_differs(inner, seen | {nested.full_name}) for inner in nested.fields)


def _unsupported(path: tuple[str, ...], what: str, why: str | None = None) -> ContractError:
    return ContractError(
        f"{what} in {' > '.join(path)} has no Spark type{f': {why}' if why else ''}", position="schema"
    )
