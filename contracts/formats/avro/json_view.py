"""The JSON view of Avro values that JSONata rules read and produce, and the way back.

Confluent's Java client hands a JSONata rule the record in Avro's JSON encoding and reads the
result back with the target schema; jsonata-python refuses anything but JSON types. So values JSON
cannot carry take Avro's JSON form here too (docs/guide.md, "JSONata rules"):

- bytes and fixed: a string of one character per byte, U+0000 to U+00FF (ISO-8859-1);
- decimal: that string of its unscaled value's big-endian two's complement bytes;
- date: days since 1970-01-01; time-millis / time-micros: units since midnight;
- timestamp-* and local-timestamp-*: milli- or microseconds since 1970-01-01 (UTC / local);
- uuid: its string.

Everything else is already JSON; a union value appears as its plain value (as confluent-kafka-
python hands it), not wrapped as in Avro's encoding. The way back converts a view value of the
right JSON type for the schema's type and leaves any other value as it is (an Avro value already,
or a value the schema check then refuses), so a value a rule leaves alone comes back exactly.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from contracts.errors import SerializationError
from contracts.formats.avro.types import AvroSchema, _Names, non_null_branches
from contracts.formats.avro.values import _BranchChooser

Convert = Callable[[Any], Any]
_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_DAY_UNITS = {"time-millis": 86_400_000, "time-micros": 86_400_000_000}
_UNITS = {"millis": datetime.timedelta(milliseconds=1), "micros": datetime.timedelta(microseconds=1)}
_CACHE_SIZE = 64
# The keys that make two Avro types hold the same values (docs, defaults, aliases and tags do not).
_TYPE_KEYS = ("type", "name", "symbols", "size", "logicalType", "precision", "scale")


class _Unreadable(Exception):
    """A value the conversion cannot make; `path` names where it sits in the record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


@dataclass(frozen=True)
class _Node:
    """One schema node's conversions into the view and back, None where values pass unchanged."""

    to_view: Convert | None = None
    from_view: Convert | None = None
    kind: str = ""
    """The JSON kind of the view of this type: string, number, boolean, object, array or null."""


def _whole(value: Any, what: str) -> int | None:
    """A view number as a whole number; None for values of another JSON kind (left alone)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            raise _Unreadable(f"{value!r} is not a whole number of {what}")
        return int(value)
    return value


def _octets(value: str, what: str) -> bytes:
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError as e:
        raise _Unreadable(
            f"{value!r} is not {what}: the JSON view holds one byte per character U+0000 to U+00FF,"
            f" and {value[e.start]!r} is beyond"
        ) from e


def _to_text(value: Any) -> Any:
    return value.decode("latin-1") if isinstance(value, bytes | bytearray) else value


def _bytes_back(value: Any) -> Any:
    return _octets(value, "bytes") if isinstance(value, str) else value


def _fixed_back(size: int) -> Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        data = _octets(value, f"a fixed of {size} bytes")
        if len(data) != size:
            raise _Unreadable(f"{value!r} has {len(data)} bytes, not the {size} of its fixed type")
        return data

    return convert


def _unscaled(value: Decimal, scale: int) -> int:
    """The decimal's unscaled integer at `scale`, exactly (no decimal context rounds it)."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise _Unreadable(f"{value} is not a number a decimal holds")
    unscaled = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        unscaled *= 10**shift
    else:
        unscaled, rest = divmod(unscaled, 10**-shift)
        if rest:
            raise _Unreadable(f"{value} has more than {scale} digits after the point")
    return -unscaled if sign else unscaled


def _decimal_to_view(scale: int, size: int | None) -> Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, Decimal):
            return value
        unscaled = _unscaled(value, scale)
        length = size or (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        try:
            return unscaled.to_bytes(length, "big", signed=True).decode("latin-1")
        except OverflowError as e:
            raise _Unreadable(f"{value} does not fit the {size} bytes of its fixed type") from e

    return convert


def _decimal_back(precision: int, scale: int, size: int | None) -> Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        data = _octets(value, "a decimal's unscaled bytes")
        if not data or (size is not None and len(data) != size):
            wanted = f"the {size} of its fixed type" if size is not None else "at least one"
            raise _Unreadable(f"{value!r} has {len(data)} bytes of a decimal's unscaled value, not {wanted}")
        unscaled = int.from_bytes(data, "big", signed=True)
        digits = str(abs(unscaled))
        if len(digits) > precision:
            raise _Unreadable(
                f"unscaled value {unscaled} has more than the {precision} digits of its decimal"
            )
        return Decimal((int(unscaled < 0), tuple(int(d) for d in digits), -scale))

    return convert


def _date_to_view(value: Any) -> Any:
    return value.toordinal() - _EPOCH_ORDINAL if isinstance(value, datetime.date) else value


def _date_back(value: Any) -> Any:
    days = _whole(value, "days")
    if days is None:
        return value
    try:
        return datetime.date.fromordinal(days + _EPOCH_ORDINAL)
    except (ValueError, OverflowError) as e:
        raise _Unreadable(f"day {days} after 1970-01-01 is outside the years 1 to 9999") from e


def _time_to_view(per_second: int) -> Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, datetime.time):
            return value
        seconds = (value.hour * 60 + value.minute) * 60 + value.second
        return seconds * per_second + value.microsecond * per_second // 1_000_000

    return convert


def _time_back(logical: str) -> Convert:
    per_day = _DAY_UNITS[logical]
    per_second = per_day // 86_400
    unit = logical.removeprefix("time-")

    def convert(value: Any) -> Any:
        count = _whole(value, unit)
        if count is None:
            return value
        if not 0 <= count < per_day:
            raise _Unreadable(f"{count} {unit} is not a time of day (0 to {per_day - 1})")
        seconds, fraction = divmod(count, per_second)
        minutes, second = divmod(seconds, 60)
        return datetime.time(minutes // 60, minutes % 60, second, fraction * 1_000_000 // per_second)

    return convert


def _timestamp_to_view(unit: datetime.timedelta, local: bool) -> Convert:
    def convert(value: Any) -> Any:
        if not isinstance(value, datetime.datetime):
            return value
        if local:
            return (value.replace(tzinfo=None) - _EPOCH_NAIVE) // unit
        # fastavro writes a naive datetime in a timestamp field as UTC.
        aware = value if value.tzinfo is not None else value.replace(tzinfo=_UTC)
        return (aware - _EPOCH) // unit

    return convert


def _timestamp_back(unit: datetime.timedelta, local: bool, name: str) -> Convert:
    epoch = _EPOCH_NAIVE if local else _EPOCH

    def convert(value: Any) -> Any:
        count = _whole(value, name)
        if count is None:
            return value
        try:
            return epoch + count * unit
        except OverflowError as e:
            raise _Unreadable(f"{count} {name} since 1970-01-01 is outside the years 1 to 9999") from e

    return convert


def _uuid_to_view(value: Any) -> Any:
    return str(value) if isinstance(value, uuid.UUID) else value


def _leaf(schema: dict[str, Any]) -> _Node:
    """Primitive, enum, fixed and logical types, keyed as fastavro keys its logical readers."""
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        size = int(schema["size"]) if kind == "fixed" else None
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        return _Node(_decimal_to_view(scale, size), _decimal_back(precision, scale, size), "string")
    if kind == "bytes":
        return _Node(_to_text, _bytes_back, "string")
    if kind == "fixed":
        return _Node(_to_text, _fixed_back(int(schema["size"])), "string")
    if kind == "int" and logical == "date":
        return _Node(_date_to_view, _date_back, "number")
    if (kind, logical) in (("int", "time-millis"), ("long", "time-micros")):
        return _Node(_time_to_view(_DAY_UNITS[logical] // 86_400), _time_back(logical), "number")
    if (
        kind == "long"
        and isinstance(logical, str)
        and logical.removeprefix("local-").startswith("timestamp-")
    ):
        name = logical.rsplit("-", 1)[1]
        local = logical.startswith("local-")
        if name in _UNITS:
            return _Node(
                _timestamp_to_view(_UNITS[name], local), _timestamp_back(_UNITS[name], local, name), "number"
            )
    if kind == "string" and logical == "uuid":
        return _Node(_uuid_to_view, None, "string")
    return _Node(kind=_PLAIN_KINDS.get(kind, ""))


_PLAIN_KINDS = {
    "null": "null",
    "boolean": "boolean",
    "int": "number",
    "long": "number",
    "float": "number",
    "double": "number",
    "string": "string",
    "enum": "string",
}


class _ViewConverters:
    """Compiles one schema's view conversions (recursion was refused when its Spark type was made)."""

    def __init__(self, schema: AvroSchema) -> None:
        self.names = _Names(schema)

    def node(self, schema: AvroSchema) -> _Node:
        resolved = self.names.resolve(schema, "")
        if isinstance(resolved, list):
            return self._union(resolved)
        kind = resolved["type"]
        if kind == "record":
            fields = [(f["name"], self.node(f["type"])) for f in resolved["fields"]]
            return _Node(
                _record([(n, c.to_view) for n, c in fields]),
                _record([(n, c.from_view) for n, c in fields]),
                "object",
            )
        if kind == "array":
            items = self.node(resolved["items"])
            return _Node(_array(items.to_view), _array(items.from_view), "array")
        if kind == "map":
            values = self.node(resolved["values"])
            return _Node(_map(values.to_view), _map(values.from_view), "object")
        return _leaf(resolved)

    def _union(self, union: list[Any]) -> _Node:
        branches = non_null_branches(union)
        if len(branches) == 1:
            return self.node(branches[0])
        nodes = [self.node(branch) for branch in branches]
        if all(n.to_view is None and n.from_view is None for n in nodes):
            return _Node()
        chooser = _BranchChooser([self._validation_schema(branch) for branch in branches])
        record_fields = [self._field_names(branch) for branch in branches]
        return _Node(_union_to_view(chooser, nodes), _union_back(nodes, record_fields))

    def _validation_schema(self, branch: AvroSchema) -> AvroSchema:
        """A branch fastavro's validate() can check on its own: names travel with it."""
        resolved = self.names.resolve(branch, "")
        if isinstance(branch, str) and isinstance(resolved, dict) and resolved["type"] == branch:
            return branch
        return {**resolved, "__fastavro_parsed": True, "__named_schemas": self.names.named}

    def _field_names(self, branch: AvroSchema) -> frozenset[str] | None:
        resolved = self.names.resolve(branch, "")
        if isinstance(resolved, dict) and resolved["type"] == "record":
            return frozenset(f["name"] for f in resolved["fields"])
        return None


def _record(fields: list[tuple[str, Convert | None]]) -> Convert | None:
    converters = [(name, convert) for name, convert in fields if convert is not None]
    if not converters:
        return None

    def convert(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        out = dict(value)
        for name, field_convert in converters:
            if name in out:
                try:
                    out[name] = field_convert(out[name])
                except _Unreadable as e:
                    e.path.insert(0, name)
                    raise
        return out

    return convert


def _array(items: Convert | None) -> Convert | None:
    if items is None:
        return None

    def convert(value: Any) -> Any:
        if not isinstance(value, list):
            return value
        out = []
        for index, item in enumerate(value):
            try:
                out.append(items(item))
            except _Unreadable as e:
                e.path.insert(0, f"[{index}]")
                raise
        return out

    return convert


def _map(values: Convert | None) -> Convert | None:
    if values is None:
        return None

    def convert(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        out = {}
        for key, item in value.items():
            try:
                out[key] = values(item)
            except _Unreadable as e:
                e.path.insert(0, f"[{key!r}]")
                raise
        return out

    return convert


def _union_to_view(chooser: _BranchChooser, nodes: list[_Node]) -> Convert:
    """An Avro value takes the branch fastavro's writer would write it as."""

    def convert(value: Any) -> Any:
        if value is None:
            return None
        try:
            index = chooser(value)
        except SerializationError:
            return value
        branch_convert = nodes[index].to_view
        return value if branch_convert is None else branch_convert(value)

    return convert


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return ""


def _union_back(nodes: list[_Node], record_fields: list[frozenset[str] | None]) -> Convert:
    """A view value takes a branch whose view has its JSON kind: a string or number stays as it
    is when a branch holds it so (a string does not become bytes), else the first branch that
    converts it wins; an object takes the first record whose fields cover its keys."""

    def convert(value: Any) -> Any:
        kind = _json_kind(value)
        candidates = [node for node in nodes if node.kind == kind]
        if kind == "object":
            keys = set(value)
            covering = [
                node
                for node, fields in zip(nodes, record_fields, strict=True)
                if node.kind == kind and (fields is None or keys <= fields)
            ]
            candidates = covering or candidates
        converters = [node.from_view for node in candidates]
        if not converters or converters[0] is None or (kind != "object" and None in converters):
            return value
        failure: _Unreadable | None = None
        for branch_convert in converters:
            if branch_convert is None:
                continue
            try:
                return branch_convert(value)
            except _Unreadable as e:
                failure = failure or e
        assert failure is not None
        raise failure

    return convert


_NODES: dict[int, tuple[AvroSchema, _Node]] = {}


def _node(schema: AvroSchema) -> _Node:
    """The schema's conversions, compiled once per parsed schema object (kept alive while cached)."""
    hit = _NODES.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    node = _ViewConverters(schema).node(schema)
    if len(_NODES) >= _CACHE_SIZE:
        _NODES.pop(next(iter(_NODES)))
    _NODES[id(schema)] = (schema, node)
    return node


def _apply(convert: Convert | None, value: Any, doing: str) -> Any:
    if convert is None:
        return value
    try:
        return convert(value)
    except _Unreadable as e:
        where = "".join(p if p.startswith("[") else f".{p}" for p in e.path).lstrip(".")
        raise SerializationError(f"{doing}{f' field {where!r}' if where else ''}: {e.reason}") from e


def to_json_view(value: Any, schema: AvroSchema) -> Any:
    """An Avro value (as fastavro reads it) of the parsed `schema`, as the JSON JSONata sees;
    SerializationError where a value does not fit its type (a decimal of another scale)."""
    return _apply(_node(schema).to_view, value, "no JSON view of")


def from_json_view(value: Any, schema: AvroSchema) -> Any:
    """A JSON view value (or an Avro value: it passes unchanged) read as the parsed `schema`;
    SerializationError where a view value of the right JSON type cannot be converted."""
    return _apply(_node(schema).from_view, value, "cannot read")


def has_json_view(schema: AvroSchema) -> bool:
    """Whether values of this parsed schema look different in the JSON view (bytes, logical types)."""
    node = _node(schema)
    return node.to_view is not None or node.from_view is not None


def canonical_type(schema: AvroSchema, within: AvroSchema) -> Any:
    """The type as plain data that two types holding the same values share: names resolved
    (`within` is the parsed schema it belongs to), docs, defaults, aliases and tags dropped."""
    names = _Names(within)

    def canonical(node: AvroSchema) -> Any:
        resolved = names.resolve(node, "")
        if isinstance(resolved, list):
            return [canonical(branch) for branch in resolved]
        out: dict[str, Any] = {key: resolved[key] for key in _TYPE_KEYS if key in resolved}
        kind = resolved["type"]
        if kind == "record":
            out["fields"] = [[f["name"], canonical(f["type"])] for f in resolved["fields"]]
        elif kind == "array":
            out["items"] = canonical(resolved["items"])
        elif kind == "map":
            out["values"] = canonical(resolved["values"])
        return out

    return canonical(schema)


SOURCE_KEY = "json_view.source"
"""Metadata of a field of a JSON-view result (a migration rule's native output): the Avro type of
the record field it copies, as `source_type` gives it in JSON, so the way back can read it exactly."""


def source_type(schema: AvroSchema) -> Any:
    """An (expanded) Avro type as the data two types holding the same values share, null aside."""
    inner = schema
    if isinstance(schema, list):
        branches = [branch for branch in schema if branch != "null"]
        if len(branches) == 1:
            inner = branches[0]
    return canonical_type(inner, schema)
