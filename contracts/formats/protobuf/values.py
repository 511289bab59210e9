"""Protobuf records: messages as the plain values the reference's CEL sees, and those records as
Spark values and back (docs/semantics.md §1.6).

A record is a dict of the fields by their `.proto` names: enums as numbers, unsigned integers
as `Unsigned`, repeated fields as lists, maps as dicts, Timestamp as an aware UTC datetime,
Duration as a timedelta, wrappers as their value, a `confluent.type.Decimal` as its message's
fields (`value`, `precision`, `scale`), as the reference's CEL binds it. A field without presence
holds its value (the default when unset); an unset message or wrapper field is None; an unset
oneof member (a proto3 `optional` field is one) is left out, as the reference leaves it out of
what CEL sees.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from contracts.bounded import BoundedCache
from contracts.formats.markers import PresenceRecord, Unsigned
from contracts.formats.protobuf.types import (
    DECIMAL,
    DURATION,
    TIMESTAMP,
    UNSIGNED,
    WRAPPERS,
    decimal_type,
    is_map,
    is_repeated,
    is_unsigned_64,
)

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor
    from google.protobuf.message import Message


def to_record(message: Message) -> dict[str, Any]:
    """The message as a record."""
    return record_reader(message.DESCRIPTOR)(message)


def record_reader(descriptor: Descriptor) -> Callable[[Message], dict[str, Any]]:
    """What turns a message of `descriptor` into its record, made once per message and process:
    every field read in one call, then only the fields that need it converted, so no row asks
    what kind each field is."""
    return _READERS.get_or_make(descriptor, lambda: _compile_reader(descriptor))


_READERS: BoundedCache[Any, Callable[[Message], dict[str, Any]]] = BoundedCache(256)
"""Per process: the record reader of each message."""

_Fix = Callable[["Message", dict[str, Any]], None]
"""A field's step after the fields are read: it converts (or drops) the field's value in the record."""


def _compile_reader(descriptor: Descriptor) -> Callable[[Message], dict[str, Any]]:
    """The record reader of a message: its fields read in declaration order, then each field's fix."""
    names = tuple(field.name for field in descriptor.fields)
    if not names:
        return lambda message: {}
    fetch = attrgetter(*names)  # of one name, the value itself rather than a 1-tuple
    single = len(names) == 1
    fixes = tuple(fix for fix in map(_field_fix, descriptor.fields) if fix is not None)

    def read(message: Message) -> dict[str, Any]:
        values = fetch(message)
        record = dict(zip(names, (values,) if single else values, strict=False))  # as long by construction
        for fix in fixes:
            fix(message, record)
        return record

    return read


def _field_fix(field: FieldDescriptor) -> _Fix | None:
    """The field's step after reading (None when its value read is its record value): maps become
    dicts, repeated fields lists, an unset field with presence None (left out in a oneof)."""
    name = field.name
    if is_map(field):
        item = _plain_converter(field.message_type.fields_by_name["value"])

        def as_dict(message: Message, record: dict[str, Any]) -> None:
            pairs = record[name].items()
            record[name] = dict(pairs) if item is None else {key: item(value) for key, value in pairs}

        return as_dict
    convert = _plain_converter(field)
    if is_repeated(field):

        def as_list(message: Message, record: dict[str, Any]) -> None:
            values = record[name]
            record[name] = list(values) if convert is None else [convert(value) for value in values]

        return as_list
    if field.has_presence:
        in_oneof = field.containing_oneof is not None

        def if_set(message: Message, record: dict[str, Any]) -> None:
            if not message.HasField(name):
                if in_oneof:
                    del record[name]
                else:
                    record[name] = None
            elif convert is not None:
                record[name] = convert(record[name])

        return if_set
    if convert is None:
        return None

    def converted(message: Message, record: dict[str, Any]) -> None:
        record[name] = convert(record[name])

    return converted


def _plain_converter(field: FieldDescriptor) -> Callable[[Any], Any] | None:
    """What turns one value of the field as the runtime holds it (an element, for a repeated one)
    into its record value (None where they are the same)."""
    message = field.message_type
    if message is None:
        if field.type == field.TYPE_STRING and not _runtime_checks_utf8(field):
            return _text_of(field)
        return Unsigned if field.type in UNSIGNED else None
    name = message.full_name
    if name == TIMESTAMP:
        return lambda value: value.ToDatetime(tzinfo=datetime.timezone.utc)
    if name == DURATION:
        return lambda value: value.ToTimedelta()
    if name in WRAPPERS:
        inner = _plain_converter(message.fields_by_name["value"])
        return (lambda value: value.value) if inner is None else (lambda value: inner(value.value))
    nested: list[Callable[[Message], dict[str, Any]]] = []  # made on first use: messages may recurse

    def read_nested(value: Message) -> dict[str, Any]:
        if not nested:
            nested.append(record_reader(message))
        return nested[0](value)

    return read_nested


def _runtime_checks_utf8(field: FieldDescriptor) -> bool:
    """Whether the runtime refuses a body whose string field is not UTF-8 (proto3); otherwise
    (proto2, or an edition with `utf8_validation = NONE`) it hands such a value over as bytes."""
    from google.protobuf.descriptor_pb2 import FeatureSet

    features = getattr(field, "_GetFeatures", None)
    return features is not None and features().utf8_validation == FeatureSet.VERIFY


def _text_of(field: FieldDescriptor) -> Callable[[Any], Any]:
    """A string field's value as text; ValueError naming the field for bytes that are not UTF-8,
    which no Spark string holds (the record is then undecodable, docs/semantics.md §8.6)."""

    def text(value: Any) -> Any:
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{field.full_name} holds a string that is not valid UTF-8"
                    f" ({e.reason} at byte {e.start} of {value[:16]!r})"
                ) from None
        return value

    return text


def presence_view(record: Any, descriptor: Descriptor) -> Any:
    """The record as the reference's CEL reads the message (docs/semantics.md §3.6): a
    PresenceRecord holding every field — an unset `optional` or oneof member as its default, an
    unset message or wrapper as null — and naming the unset ones (`HasField` semantics, a scalar
    without presence at its default, an empty repeated or map field), nested messages likewise."""
    return _VIEWS.get_or_make(descriptor, lambda: _compile_view(descriptor))(record)


_VIEWS: BoundedCache[Any, Callable[[Any], Any]] = BoundedCache(256)
"""Per process: the presence view of each message, its fields' steps resolved once."""

_Step = Callable[[Any], "tuple[Any, bool]"]
"""A field's step of a view: its record value to (what CEL reads, whether it is unset)."""


def _compile_view(descriptor: Descriptor) -> Callable[[Any], Any]:
    steps = tuple((field.name, _view_step(field)) for field in descriptor.fields)

    def view(record: Any) -> Any:
        if not isinstance(record, dict):
            return record
        fields: dict[str, Any] = {}
        unset = []
        for name, step in steps:
            fields[name], is_unset = step(record.get(name))
            if is_unset:
                unset.append(name)
        return PresenceRecord(fields, frozenset(unset))

    return view


def _view_step(field: FieldDescriptor) -> _Step:
    """How the view reads one field of a record (see `presence_view`)."""
    if is_repeated(field):
        mapped = is_map(field)
        holds = _nested_message(field.message_type.fields_by_name["value"] if mapped else field)
        empty: Any = {} if mapped else []

        def many(value: Any) -> tuple[Any, bool]:
            if not value:
                return (empty if value is None else value), True
            if holds is None:
                return value, False
            if mapped:
                return {key: presence_view(item, holds) for key, item in value.items()}, False
            return [presence_view(item, holds) for item in value], False

        return many
    if field.message_type is not None:
        holds = _nested_message(field)
        if holds is None:
            return lambda value: (value, value is None)
        return lambda value: (None, True) if value is None else (presence_view(value, holds), False)
    default = _record_default(field)
    if field.has_presence:  # an unset `optional` scalar or oneof member (a record leaves it out)
        return lambda value: (default, True) if value is None else (value, False)
    return lambda value: (value, value == default)


def _nested_message(field: FieldDescriptor) -> Descriptor | None:
    """The message a field's values are records of, None for a scalar or a well-known value."""
    message = field.message_type
    if (
        message is None
        or message.full_name in (TIMESTAMP, DURATION, DECIMAL)
        or message.full_name in WRAPPERS
    ):
        return None
    return message


def _record_default(field: FieldDescriptor) -> Any:
    """A scalar field's default as a record holds it (an enum's number, an unsigned `Unsigned`)."""
    convert = _plain_converter(field)
    return field.default_value if convert is None else convert(field.default_value)


def to_message(record: Any, descriptor: Descriptor, strict: bool = True) -> Message:
    """A record (or a JSON-like dict of the same shape) as a message of `descriptor`; ValueError
    naming the field that does not fit. `strict`: a key that names no field is an error, else
    it is left out, as a reader leaves out fields it does not know."""
    from google.protobuf.message_factory import GetMessageClass

    message = GetMessageClass(descriptor)()
    _fill(message, record, descriptor.full_name, strict)
    return message


def _fill(message: Message, record: Any, path: str, strict: bool) -> None:
    if not isinstance(record, Mapping):
        raise ValueError(f"{path} must be a record (a dict), not {type(record).__name__}")
    descriptor = message.DESCRIPTOR
    message.SetInParent()
    for key, value in record.items():
        field = _field_named(descriptor, key)
        if field is None:
            if strict:
                raise ValueError(f"{path} has no field {key!r}")
            continue
        if value is None:
            continue
        where = f"{path}.{key}"
        try:
            _set(message, field, value, where, strict)
        except (TypeError, ValueError, OverflowError) as e:
            if str(e).startswith(where):
                raise
            raise ValueError(f"{where}: {e}") from e


def _field_named(descriptor: Descriptor, key: Any) -> FieldDescriptor | None:
    """The field a record key names: by its `.proto` name, else by its JSON name."""
    if not isinstance(key, str):
        return None
    found = descriptor.fields_by_name.get(key)
    if found is None:
        found = next((field for field in descriptor.fields if field.json_name == key), None)
    return found


def _set(message: Message, field: FieldDescriptor, value: Any, where: str, strict: bool) -> None:
    target = getattr(message, field.name)
    if is_map(field):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} is a map and must be a dict, not {type(value).__name__}")
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        for key, item in value.items():
            key = _scalar(key, key_field)
            if value_field.message_type is not None and value_field.message_type.full_name not in _SPECIAL:
                _fill(target[key], item, f"{where}[{key!r}]", strict)
            else:
                _store_map(target, key, item, value_field, f"{where}[{key!r}]", strict)
        return
    if is_repeated(field):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            raise ValueError(f"{where} is repeated and must be a list, not {type(value).__name__}")
        for i, item in enumerate(value):
            if item is None:
                raise ValueError(f"{where}[{i}] is null: a repeated field holds no nulls")
            if field.message_type is not None:
                _fill_value(target.add(), item, field, f"{where}[{i}]", strict)
            else:
                target.append(_scalar(item, field))
        return
    if field.message_type is not None:
        _fill_value(target, value, field, where, strict)
    else:
        setattr(message, field.name, _scalar(value, field))


_SPECIAL = frozenset({TIMESTAMP, DURATION, *WRAPPERS})


def _store_map(
    target: Any, key: Any, item: Any, value_field: FieldDescriptor, where: str, strict: bool
) -> None:
    if value_field.message_type is None:
        target[key] = _scalar(item, value_field)
    else:
        _fill_value(target[key], item, value_field, where, strict)


def _fill_value(target: Message, value: Any, field: FieldDescriptor, where: str, strict: bool) -> None:
    """Fill a message-typed value: a well-known type from its plain value, else from a record."""
    name = field.message_type.full_name
    if name == TIMESTAMP:
        if not isinstance(value, datetime.datetime):
            raise ValueError(f"{where} is a Timestamp and must be a datetime, not {type(value).__name__}")
        target.FromDatetime(value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc))
    elif name == DURATION:
        if not isinstance(value, datetime.timedelta):
            raise ValueError(f"{where} is a Duration and must be a timedelta, not {type(value).__name__}")
        target.FromTimedelta(value)
    elif name in WRAPPERS:
        target.value = _scalar(value, field.message_type.fields_by_name["value"])
    else:
        _fill(target, value, where, strict)


def _scalar(value: Any, field: FieldDescriptor) -> Any:
    """A scalar value as the runtime stores it: an enum's name becomes its number."""
    enum = field.enum_type
    if enum is not None and isinstance(value, str):
        found = enum.values_by_name.get(value)
        if found is None:
            raise ValueError(f"{value!r} is no value of enum {enum.full_name}")
        return found.number
    if isinstance(value, bool) and field.cpp_type != field.CPPTYPE_BOOL:
        raise TypeError(f"{value!r} is a bool, not a value of the field's type")
    return value


def to_spark(record: Mapping[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    """A record as its Spark row's value (a dict Arrow reads as the message's struct): enums by
    name (an unknown number as its digits), unsigned 64-bit integers as decimals, maps as pairs."""
    row: dict[str, Any] = {}
    for name, convert in spark_converters(descriptor):
        value = record.get(name)
        row[name] = value if value is None or convert is None else convert(value)
    return row


def spark_converters(descriptor: Descriptor) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
    """Per field of the message, in order: its name and what turns its record value (not None)
    into its Spark value (None where they are the same). Made once per message and process."""
    return _CONVERTERS.get_or_make(
        descriptor, lambda: tuple((field.name, _field_converter(field)) for field in descriptor.fields)
    )


_CONVERTERS: BoundedCache[Any, tuple[tuple[str, Callable[[Any], Any] | None], ...]] = BoundedCache(256)


def _field_converter(field: FieldDescriptor) -> Callable[[Any], Any] | None:
    if is_map(field):
        key = _value_converter(field.message_type.fields_by_name["key"])
        item = _value_converter(field.message_type.fields_by_name["value"])
        return lambda value: [
            (
                k if key is None else key(k),
                v if v is None or item is None else item(v),
            )
            for k, v in value.items()
        ]
    one = _value_converter(field)
    if is_repeated(field):
        return None if one is None else lambda value: [None if v is None else one(v) for v in value]
    return one


def _value_converter(field: FieldDescriptor) -> Callable[[Any], Any] | None:
    """What turns one value of the field (an element, for a repeated one) into its Spark value."""
    message = field.message_type
    if message is not None:
        if message.full_name in WRAPPERS:
            return _value_converter(message.fields_by_name["value"])
        if message.full_name in (TIMESTAMP, DURATION):
            return None
        if message.full_name == DECIMAL:
            precision, scale = decimal_type(field)
            return lambda value: spark_decimal(value, precision, scale, field.full_name)
        return lambda value: to_spark(value, message) if isinstance(value, Mapping) else value
    enum = field.enum_type
    if enum is not None:
        names = {number: value.name for number, value in enum.values_by_number.items()}

        def name_of(value: Any) -> Any:
            if isinstance(value, int) and not isinstance(value, bool):
                known = names.get(value)
                return known if known is not None else str(value)
            return value

        return name_of
    if is_unsigned_64(field):
        return lambda value: (
            Decimal(value) if isinstance(value, int) and not isinstance(value, bool) else value
        )
    return None


_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Decimal arithmetic without rounding, over every exponent a Decimal's int32 scale reaches."""


def spark_decimal(record: Any, precision: int, scale: int, where: str) -> Decimal:
    """A Decimal record (its message's fields) as the Spark decimal(precision, scale) of its
    field: the same number at that scale; ValueError naming the field when the number needs more
    fractional digits than the scale or more digits than the precision (never rounded)."""
    if not isinstance(record, Mapping):
        raise ValueError(
            f"{where} is a {DECIMAL} and must be its fields (a dict), not {type(record).__name__}"
        )
    unscaled = int.from_bytes(record.get("value") or b"", "big", signed=True)
    own_scale = int(record.get("scale") or 0)
    digits = len(str(abs(unscaled))) if unscaled else 0
    shown = _EXACT.create_decimal(unscaled).scaleb(-own_scale, _EXACT)
    if unscaled and own_scale > scale:
        drop = own_scale - scale
        if drop > digits or unscaled % 10**drop:
            raise ValueError(f"{where}: {shown} has more fractional digits than decimal({precision},{scale})")
        unscaled //= 10**drop
    elif unscaled and own_scale < scale:
        if digits + scale - own_scale > precision:
            raise ValueError(f"{where}: {shown} has more digits than decimal({precision},{scale})")
        unscaled *= 10 ** (scale - own_scale)
    if unscaled and len(str(abs(unscaled))) > precision:
        raise ValueError(f"{where}: {shown} has more digits than decimal({precision},{scale})")
    return _EXACT.create_decimal(unscaled).scaleb(-scale, _EXACT)


def decimal_record(value: Decimal) -> dict[str, Any]:
    """A Spark decimal as a Decimal record, as Confluent's clients write a BigDecimal: the unscaled
    integer in the fewest two's-complement bytes, its digit count, and the decimal's scale."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a finite decimal")
    unscaled = int("".join(map(str, digits)) or "0")
    unscaled = -unscaled if sign else unscaled
    length = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return {
        "value": unscaled.to_bytes(length, "big", signed=True),
        "precision": Unsigned(len(digits)),
        "scale": -exponent,
    }


def from_spark(row: Mapping[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    """A Spark row's value (Arrow's dict of the struct) as a record; ValueError for an enum name
    the enum does not have or a value out of its field's range."""
    record: dict[str, Any] = {}
    for field in descriptor.fields:
        value = row.get(field.name)
        where = f"{descriptor.full_name}.{field.name}"
        if value is None:
            if field.containing_oneof is None:
                unset = not is_repeated(field) and (field.has_presence or field.message_type is not None)
                record[field.name] = None if unset else _default(field)
        elif is_map(field):
            key_field = field.message_type.fields_by_name["key"]
            value_field = field.message_type.fields_by_name["value"]
            pairs = value.items() if isinstance(value, Mapping) else value
            record[field.name] = {
                _record_value(key, key_field, where): _record_value(item, value_field, where)
                for key, item in pairs
            }
        elif is_repeated(field):
            record[field.name] = [_record_value(item, field, where) for item in value]
        else:
            record[field.name] = _record_value(value, field, where)
    return record


def _default(field: FieldDescriptor) -> Any:
    """What a field without presence holds when unset (a repeated field: an empty list)."""
    if is_map(field):
        return {}
    if is_repeated(field):
        return []
    return Unsigned(field.default_value) if field.type in UNSIGNED else field.default_value


def _record_value(value: Any, field: FieldDescriptor, where: str) -> Any:
    if value is None:
        return None
    message = field.message_type
    if message is not None:
        if message.full_name in WRAPPERS:
            return _record_value(value, message.fields_by_name["value"], where)
        if message.full_name in (TIMESTAMP, DURATION):
            return value
        if message.full_name == DECIMAL and isinstance(value, Decimal):
            return decimal_record(value)
        return from_spark(value, message)
    enum = field.enum_type
    if enum is not None:
        found = enum.values_by_name.get(value)
        if found is not None:
            return found.number
        if value.lstrip("-").isdigit():
            return int(value)
        raise ValueError(f"{where}: {value!r} is no value of enum {enum.full_name}")
    if field.type in UNSIGNED:
        return Unsigned(value)
    return value
