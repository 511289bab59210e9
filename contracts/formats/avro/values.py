"""Avro values (fastavro's dicts) ↔ Spark values and Arrow batches, through converters compiled per schema.

Each schema node compiles to four converters (None where the value passes unchanged): `to_spark`
(fastavro value → what createDataFrame accepts), `to_arrow` (→ what pa.array accepts, timestamps
as integers), `from_row` (a collected Spark value: Rows, bytearrays, naive local datetimes) and
`from_arrow` (an Arrow to_pylist value, read with timestamps and dates as integers).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fastavro.validation import validate
from pyspark.sql import types as T

from contracts.bounded import BoundedCache
from contracts.errors import SerializationError
from contracts.formats.arrow_text import invalid_utf8_rows, sound_nulls, valid_utf8
from contracts.formats.arrow_types import arrow_schema, arrow_type, readable_arrow_type
from contracts.formats.avro.types import (
    _NAMED,
    AvroSchema,
    _Names,
    is_widened_union,
    non_null_branches,
    spark_type,
)
from contracts.formats.protocol import Records

Convert = Callable[[Any], Any]
_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_MICROSECOND = datetime.timedelta(microseconds=1)
_CACHE_SIZE = 64


@dataclass(frozen=True)
class _Node:
    """One schema node's converters, None where a value passes unchanged."""

    to_spark: Convert | None = None
    to_arrow: Convert | None = None
    from_row: Convert | None = None
    from_arrow: Convert | None = None

    def each(self, wrap: Callable[[Convert | None], Convert | None]) -> _Node:
        """The node whose converters are this node's, each wrapped (for elements, nulls, …)."""
        return _Node(wrap(self.to_spark), wrap(self.to_arrow), wrap(self.from_row), wrap(self.from_arrow))


_IDENTITY = _Node()


def _time_to_int(unit: int) -> Convert:
    """time-millis/micros: fastavro reads a datetime.time, spark-avro keeps the int (units per second)."""

    def convert(value: Any) -> Any:
        if isinstance(value, datetime.time):
            seconds = value.hour * 3600 + value.minute * 60 + value.second
            return seconds * unit + value.microsecond * unit // 1_000_000
        return value

    return convert


def _int_to_time(unit: int) -> Convert:
    def convert(value: int) -> datetime.time:
        seconds, fraction = divmod(value, unit)
        return datetime.time(seconds // 3600, seconds // 60 % 60, seconds % 60, fraction * 1_000_000 // unit)

    return convert


def _aware(value: datetime.datetime) -> datetime.datetime:
    # fastavro writes a naive timestamp as UTC; Spark would read it as local time.
    return value if value.tzinfo is not None else value.replace(tzinfo=_UTC)


def _collected_timestamp(value: datetime.datetime) -> datetime.datetime:
    # Spark collects TimestampType as a naive datetime in the Python process's local time zone.
    return value.astimezone(_UTC)


# Arrow timestamps and dates travel as integers: pyarrow converts aware datetimes, and builds
# datetimes and dates, several times slower than this arithmetic does.
def _utc_micros(value: datetime.datetime) -> int:
    return (_aware(value) - _EPOCH) // _MICROSECOND


def _local_micros(value: datetime.datetime) -> int:
    return (value - _EPOCH_NAIVE) // _MICROSECOND


def _micros_to_utc(value: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(0, 0, value)


def _micros_to_local(value: int) -> datetime.datetime:
    return _EPOCH_NAIVE + datetime.timedelta(0, 0, value)


def _days_to_date(value: int) -> datetime.date:
    return datetime.date.fromordinal(value + _EPOCH_ORDINAL)


_TIMESTAMP = _Node(_aware, _utc_micros, _collected_timestamp, _micros_to_utc)
_LOCAL_TIMESTAMP = _Node(None, _local_micros, None, _micros_to_local)
_LOGICAL = {
    "int-date": _Node(None, None, None, _days_to_date),
    "int-time-millis": _Node(
        _time_to_int(1_000), _time_to_int(1_000), _int_to_time(1_000), _int_to_time(1_000)
    ),
    "long-time-micros": _Node(
        _time_to_int(1_000_000), _time_to_int(1_000_000), _int_to_time(1_000_000), _int_to_time(1_000_000)
    ),
    "long-timestamp-millis": _TIMESTAMP,
    "long-timestamp-micros": _TIMESTAMP,
    "long-local-timestamp-millis": _LOCAL_TIMESTAMP,
    "long-local-timestamp-micros": _LOCAL_TIMESTAMP,
    "string-uuid": _Node(str, str, uuid.UUID, uuid.UUID),
}


def _nullable(convert: Convert | None) -> Convert | None:
    if convert is None:
        return None
    return lambda value: None if value is None else convert(value)


class _ConverterCompiler:
    """Compiles one schema's converters; spark_type() has already refused recursion.

    With `union_branches`, values carry their union branch as fastavro does, so the branch the
    data holds is kept instead of guessed from the value: from Arrow, a multi-branch union's value
    becomes a writer's (branch name, value) tuple; to Spark or Arrow, the values of named branches
    are taken as fastavro's reader tags them with `return_named_type` (in any union), and plain
    values are still accepted."""

    def __init__(self, schema: AvroSchema, union_branches: bool = False) -> None:
        self.names = _Names(schema)
        self.union_branches = union_branches
        self.chooses_branches = False
        """Whether some union has several non-null branches, one of which a plain value may fit wrongly."""

    def node(self, schema: AvroSchema) -> _Node:
        resolved = self.names.resolve(schema, "")
        if isinstance(resolved, list):
            return self._union(resolved)
        kind = resolved["type"]
        if kind == "record":
            return self._record(resolved)
        if kind == "array":
            return self._array(self.node(resolved["items"]))
        if kind == "map":
            return self._map(self.node(resolved["values"]))
        if kind in ("bytes", "fixed") and resolved.get("logicalType") != "decimal":
            return _Node(from_row=bytes)
        # Keyed as fastavro keys its logical readers: a logical type applies only on its base type.
        return _LOGICAL.get(f"{kind}-{resolved.get('logicalType')}", _IDENTITY)

    def fields(self, record: dict[str, Any]) -> list[tuple[str, _Node]]:
        return [(f["name"], self.node(f["type"])) for f in record["fields"]]

    def _record(self, record: dict[str, Any]) -> _Node:
        return _record_node(self.fields(record))

    def _array(self, items: _Node) -> _Node:
        return items.each(_each)

    def _map(self, values: _Node) -> _Node:
        node = values.each(_each_value)
        # Arrow's to_pylist gives a map as (key, value) pairs: much faster than its maps_as_pydicts.
        from_pairs = values.from_arrow
        pairs_to_dict = dict if from_pairs is None else lambda pairs: {k: from_pairs(v) for k, v in pairs}
        return _Node(node.to_spark, node.to_arrow, node.from_row, pairs_to_dict)

    def _union(self, union: list[Any]) -> _Node:
        branches = non_null_branches(union)
        if len(branches) == 1:
            outer, self.chooses_branches = self.chooses_branches, False
            node = self.node(branches[0])
            holds_choice, self.chooses_branches = self.chooses_branches, outer or self.chooses_branches
            if self.union_branches and self._named(branches[0]):
                # fastavro's reader tags a named branch's value even when it is the only one.
                node = _Node(
                    _untagged(node.to_spark), _untagged(node.to_arrow), node.from_row, node.from_arrow
                )
            if self.union_branches and holds_choice:
                # A value holding tagged union values is tagged itself: fastavro's writer picks an
                # untagged value's branch with validate(), which refuses a tag naming an array, map,
                # enum, fixed or logical-type branch inside it.
                node = _Node(
                    node.to_spark,
                    node.to_arrow,
                    node.from_row,
                    _tagged(self._branch_name(branches[0]), node.from_arrow),
                )
            return node.each(_nullable)
        if len(branches) == 0 or is_widened_union(branches):
            return _IDENTITY
        self.chooses_branches = True
        members = [self.node(branch) for branch in branches]
        chooser = _BranchChooser([self._validation_schema(branch) for branch in branches])
        names = [self._branch_name(b) for b in branches]
        tags = {name: i for i, (name, b) in enumerate(zip(names, branches, strict=True)) if self._named(b)}
        tagged = tags if self.union_branches else None
        from_arrow = [m.from_arrow for m in members]
        return _Node(
            _to_members(chooser, [m.to_spark for m in members], tagged),
            _to_members(chooser, [m.to_arrow for m in members], tagged),
            _from_members([m.from_row for m in members]),
            _from_members_tagged(names, from_arrow) if self.union_branches else _from_members(from_arrow),
        ).each(_nullable)

    def _named(self, branch: AvroSchema) -> bool:
        resolved = self.names.resolve(branch, "")
        return isinstance(resolved, dict) and resolved["type"] in _NAMED

    def _branch_name(self, branch: AvroSchema) -> str:
        """The name fastavro's writer knows a union branch by: a named type's full name, else its type."""
        resolved = self.names.resolve(branch, "")
        assert isinstance(resolved, dict)
        return str(resolved["name"] if resolved["type"] in _NAMED else resolved["type"])

    def _validation_schema(self, branch: AvroSchema) -> AvroSchema:
        """A branch fastavro's validate() can check on its own: names travel with it."""
        resolved = self.names.resolve(branch, "")
        if isinstance(branch, str) and isinstance(resolved, dict) and resolved["type"] == branch:
            return branch
        return {**resolved, "__fastavro_parsed": True, "__named_schemas": self.names.named}


def _record_node(fields: list[tuple[str, _Node]]) -> _Node:
    names = [name for name, _ in fields]
    from_row = [(name, node.from_row) for name, node in fields]

    def row_to_dict(value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            value = dict(zip(getattr(value, "__fields__", names), value, strict=True))
        return _convert_fields(value, from_row)

    return _Node(
        _fields_converter([(name, node.to_spark) for name, node in fields]),
        _fields_converter([(name, node.to_arrow) for name, node in fields]),
        row_to_dict,
        _fields_converter([(name, node.from_arrow) for name, node in fields]),
    )


def _convert_fields(value: Mapping[str, Any], fields: list[tuple[str, Convert | None]]) -> dict[str, Any]:
    return {name: value[name] if convert is None else convert(value[name]) for name, convert in fields}


def _fields_converter(fields: list[tuple[str, Convert | None]]) -> Convert | None:
    if all(convert is None for _, convert in fields):
        return None
    return lambda value: _convert_fields(value, fields)


def _each(convert: Convert | None) -> Convert | None:
    return None if convert is None else lambda values: [convert(v) for v in values]


def _each_value(convert: Convert | None) -> Convert | None:
    return None if convert is None else lambda values: {k: convert(v) for k, v in values.items()}


def _fits(value: Any, branch: AvroSchema, exact: bool) -> bool:
    """fastavro's validate, except that a decimal too wide for a branch is a mismatch (fastavro
    raises ValueError for it even when told not to raise), and so is anything but a Decimal for a
    decimal branch: fastavro would take bytes as its unscaled value, which a reader sees as a
    decimal out of range, and a fixed or bytes branch next to it holds them as they are. `exact`
    also refuses a value of another Python type than fastavro reads for a logical type (a plain
    int for a date), which fastavro's writer would take."""
    if isinstance(branch, dict):
        logical = branch.get("logicalType")
        if logical == "decimal" and not isinstance(value, Decimal):
            return False
        read_as = _READ_AS.get(f"{branch['type']}-{logical}") if exact else None
        if read_as is not None and not read_as(value):
            return False
    try:
        return bool(validate(value, branch, raise_errors=False))
    except ValueError:
        return False


def _is_date(value: Any) -> bool:
    return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)


def _instance_of(kind: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, kind)


# What fastavro's reader returns for each logical type (keyed as _LOGICAL is).
_READ_AS: dict[str, Callable[[Any], bool]] = {
    "int-date": _is_date,
    "int-time-millis": _instance_of(datetime.time),
    "long-time-micros": _instance_of(datetime.time),
    **{
        f"long-{kind}": _instance_of(datetime.datetime)
        for kind in (
            "timestamp-millis",
            "timestamp-micros",
            "local-timestamp-millis",
            "local-timestamp-micros",
        )
    },
    "string-uuid": _instance_of(uuid.UUID),
}


class _BranchChooser:
    """Picks the union branch of a plain value: the one fastavro's writer would pick (its
    write_union rules), among the branches whose logical type reads values of its Python type
    first, so that a value read from a branch goes back to it."""

    def __init__(self, branches: list[AvroSchema]) -> None:
        self.branches = branches
        self.kinds = [_kind(branch) for branch in branches]
        self.record_fields = [
            {f["name"] for f in branch["fields"]} if kind == "record" and isinstance(branch, dict) else set()
            for branch, kind in zip(branches, self.kinds, strict=True)
        ]

    def __call__(self, value: Any) -> int:
        best = self._choose(value, exact=True)
        if best < 0:
            best = self._choose(value, exact=False)
        if best < 0:
            raise SerializationError(f"{value!r} matches no branch of the union {self.kinds}")
        return best

    def _choose(self, value: Any, exact: bool) -> int:
        best, most_fields, could_be_float = -1, -1, False
        for index, (branch, kind) in enumerate(zip(self.branches, self.kinds, strict=False)):
            if could_be_float:
                # fastavro prefers a later double over float: Python floats are doubles.
                if kind == "double":
                    return index
                continue
            if not _fits(value, branch, exact):
                continue
            if kind == "record":
                matched = len(self.record_fields[index].intersection(value))
                if matched > most_fields:
                    best, most_fields = index, matched
            elif kind == "float":
                best, could_be_float = index, True
            else:
                return index
        return best


def _kind(branch: AvroSchema) -> str:
    return branch if isinstance(branch, str) else str(branch["type"])


def _to_members(
    choose: _BranchChooser, converts: list[Convert | None], tags: Mapping[str, int] | None = None
) -> Convert:
    """A union value → spark-avro's member struct, the value's branch set and the others null: a
    value `tags` names by fastavro's reader tuple (branch name, value) in that branch, a plain one
    in the branch `choose` picks."""
    count = len(converts)

    def convert(value: Any) -> dict[str, Any]:
        if tags is not None and isinstance(value, tuple):
            name, value = value
            index = tags[name]
        else:
            index = choose(value)
        members: dict[str, Any] = dict.fromkeys((f"member{i}" for i in range(count)), None)
        branch_convert = converts[index]
        members[f"member{index}"] = value if branch_convert is None else branch_convert(value)
        return members

    return convert


def _untagged(convert: Convert | None) -> Convert:
    """A named branch's value as fastavro's reader tags it, (name, value), or plain → converted."""

    def untag(value: Any) -> Any:
        if isinstance(value, tuple):
            value = value[1]
        return value if convert is None else convert(value)

    return untag


def _from_members_tagged(names: list[str], converts: list[Convert | None]) -> Convert:
    """spark-avro's member struct (Arrow's dict) → (branch name, value) of its one non-null member."""
    return _from_members([_tagged(name, convert) for name, convert in zip(names, converts, strict=True)])


def _tagged(name: str, convert: Convert | None) -> Convert:
    return (lambda value: (name, value)) if convert is None else (lambda value: (name, convert(value)))


def _from_members(converts: list[Convert | None]) -> Convert:
    """spark-avro's member struct (a Row or a dict) → the plain value of its one non-null member."""

    def convert(value: Any) -> Any:
        members = value.values() if isinstance(value, Mapping) else value
        for member, branch_convert in zip(members, converts, strict=False):
            if member is not None:
                return member if branch_convert is None else branch_convert(member)
        return None

    return convert


@dataclass(frozen=True)
class _Column:
    """A record field as an Arrow column: converters, Arrow type, and that type with all fields nullable."""

    name: str
    node: _Node
    arrow: pa.DataType
    readable: pa.DataType


@dataclass(frozen=True)
class _Codec:
    """One schema's compiled converters, its Spark type and, for records, its Arrow schema."""

    node: _Node
    dtype: T.DataType
    columns: tuple[_Column, ...]
    arrow: pa.Schema | None
    chooses_branches: bool


def _compile(schema: AvroSchema, union_branches: bool) -> _Codec:
    dtype, _ = spark_type(schema)
    compiler = _ConverterCompiler(schema, union_branches)
    if not isinstance(dtype, T.StructType):
        node = compiler.node(schema)
        return _Codec(node, dtype, (), None, compiler.chooses_branches)
    resolved = compiler.names.resolve(schema, "")
    assert isinstance(resolved, dict)
    fields = compiler.fields(resolved)
    columns = tuple(
        _Column(name, node, arrow_type(f.dataType), readable_arrow_type(f.dataType))
        for (name, node), f in zip(fields, dtype.fields, strict=True)
    )
    return _Codec(_record_node(fields), dtype, columns, arrow_schema(dtype), compiler.chooses_branches)


def chooses_union_branches(schema: AvroSchema) -> bool:
    """Whether a plain value may not tell its union branch: some union has several non-null
    branches (not numeric ones Spark widens into one type). Read such a schema's bodies with
    fastavro's `return_named_type` and convert them with `union_branches` to keep each branch."""
    return _codec(schema).chooses_branches


# Keyed by id() and union_branches; the entry holds the schema itself, so that id cannot be
# reused while cached.
_CODECS: BoundedCache[tuple[int, bool], tuple[AvroSchema, _Codec]] = BoundedCache(_CACHE_SIZE)


def _codec(schema: AvroSchema, union_branches: bool = False) -> _Codec:
    key = (id(schema), union_branches)
    hit = _CODECS.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    codec = _compile(schema, union_branches)
    _CODECS.put(key, (schema, codec))
    return codec


def avro_to_spark_value(value: Any, schema: AvroSchema) -> Any:
    """A fastavro value (e.g. a record dict) → the Python value Spark accepts for spark_type(schema)."""
    convert = _codec(schema).node.to_spark
    return value if convert is None else _guarded(convert, value)


def spark_to_avro_value(value: Any, schema: AvroSchema) -> Any:
    """A collected Spark value (a Row, or a dict) → the value fastavro reads and writes for the schema."""
    convert = _codec(schema).node.from_row
    return value if convert is None else _guarded(convert, value)


def _guarded(convert: Convert, value: Any) -> Any:
    try:
        return convert(value)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise SerializationError(f"value does not match the Avro schema: {e!r}") from e


def records_to_arrow(
    records: Iterable[Mapping[str, Any]], schema: AvroSchema, union_branches: bool = False
) -> pa.RecordBatch:
    """Record dicts → the RecordBatch Spark's mapInArrow expects for struct_type(schema); with
    `union_branches`, as fastavro's reader gives them with `return_named_type`."""
    codec = _record_codec(schema, union_branches)
    rows = records if isinstance(records, list) else list(records)
    try:
        arrays = [pa.array(_column_values(rows, column), column.arrow) for column in codec.columns]
    except (TypeError, ValueError, KeyError, AttributeError, pa.ArrowException) as e:
        raise SerializationError(f"records do not match the Avro schema: {e!r}") from e
    return pa.RecordBatch.from_arrays(arrays, schema=codec.arrow)


def arrow_ready(schema: AvroSchema, union_branches: bool = False) -> bool:
    """Whether fastavro's record dicts of this schema convert to Arrow as they are: no logical
    type, multi-branch union or other value that needs converting first (nor, with
    `union_branches`, a named union branch, whose values fastavro's reader then tags)."""
    return _record_codec(schema, union_branches).node.to_arrow is None


def _column_values(rows: list[Mapping[str, Any]], column: _Column) -> list[Any]:
    name, convert = column.name, column.node.to_arrow
    return [r[name] for r in rows] if convert is None else [convert(r[name]) for r in rows]


def arrow_to_records(
    batch: pa.RecordBatch | pa.Table, schema: AvroSchema, union_branches: bool = False
) -> list[dict[str, Any]]:
    """A batch holding the schema's columns (extra columns ignored) → record dicts as fastavro reads
    them; for a writer, `union_branches` names each multi-branch union value's branch (fastavro's
    tuple notation), since fastavro's own guess can differ from the branch the value was read from.
    A string that is not valid UTF-8 is a SerializationError naming the first such row."""
    read = read_records(batch, schema, union_branches)
    if read.unreadable:
        row = min(read.unreadable)
        raise SerializationError(f"the Arrow batch's row {row}: {read.unreadable[row]}")
    return read.records


def read_records(
    batch: pa.RecordBatch | pa.Table, schema: AvroSchema, union_branches: bool = False
) -> Records:
    """As arrow_to_records, but a row holding a string that is not valid UTF-8 is read with each
    such byte replaced by U+FFFD and listed in `unreadable` instead of failing the batch."""
    codec = _record_codec(schema, union_branches)
    names = [column.name for column in codec.columns]
    missing = [name for name in names if name not in batch.schema.names]
    if missing:
        raise SerializationError(f"the Arrow batch lacks the record's columns {missing}")
    unreadable: dict[int, str] = {}
    try:
        columns = [_read_column(batch.column(column.name), column, unreadable) for column in codec.columns]
    except (TypeError, ValueError, AttributeError, pa.ArrowException) as e:
        raise SerializationError(f"the Arrow batch does not hold the Avro schema's records: {e!r}") from e
    records = (
        [dict(zip(names, row, strict=False)) for row in zip(*columns, strict=False)]
        if columns
        else [{} for _ in range(batch.num_rows)]
    )
    return Records(records, unreadable)


def read_struct(column: pa.Array, schema: AvroSchema, union_branches: bool = False) -> Records:
    """read_records of a record struct column, None where the struct itself is null (a row without
    a record: a tombstone, or a row already rejected)."""
    if not column.null_count:
        return read_records(pa.RecordBatch.from_struct_array(column), schema, union_branches)
    valid = column.is_valid()
    present = pc.indices_nonzero(valid).to_pylist()
    read = read_records(pa.RecordBatch.from_struct_array(column.filter(valid)), schema, union_branches)
    records: list[Any] = [None] * len(column)
    for row, record in zip(present, read.records, strict=True):
        records[row] = record
    return Records(records, {present[row]: reason for row, reason in read.unreadable.items()})


def records_to_struct(
    records: list[Any], schema: AvroSchema, record_type: pa.DataType, union_branches: bool = False
) -> pa.Array:
    """Records (None for rows without one) as a struct column of `record_type`: fastavro's dicts
    as they are, in one conversion, when no field needs converting for Arrow. `union_branches`
    as for records_to_arrow."""
    if arrow_ready(schema, union_branches):
        try:
            return pa.array(records, type=record_type)
        except (TypeError, ValueError, pa.ArrowException) as e:
            raise SerializationError(f"records do not match the Avro schema: {e!r}") from e
    present = [i for i, record in enumerate(records) if record is not None]
    if len(present) == len(records):
        return records_to_arrow(records, schema, union_branches).to_struct_array().cast(record_type)
    present_records = [records[i] for i in present]
    packed = records_to_arrow(present_records, schema, union_branches).to_struct_array().cast(record_type)
    index: list[int | None] = [None] * len(records)
    for position, i in enumerate(present):
        index[i] = position
    return packed.take(pa.array(index, type=pa.int64()))


def _read_column(array: pa.Array | pa.ChunkedArray, column: _Column, unreadable: dict[int, str]) -> list[Any]:
    """The column's values as fastavro's; rows whose strings are not UTF-8 are added to `unreadable`."""
    if array.type != column.readable:
        # Timestamps and dates become integers (whatever Spark's session time zone), large types
        # plain ones. The target is all nullable: pyarrow refuses to cast a null struct whose
        # non-nullable children hold nulls.
        array = sound_nulls(array.cast(column.readable))
    convert = column.node.from_arrow
    try:
        values = array.to_pylist()
    except UnicodeDecodeError:
        return _read_invalid_utf8(array, column, unreadable)
    return values if convert is None else [convert(v) for v in values]


def _read_invalid_utf8(
    array: pa.Array | pa.ChunkedArray, column: _Column, unreadable: dict[int, str]
) -> list[Any]:
    """The slow path of a column holding strings that are not UTF-8: those bytes replaced, the rows
    named in `unreadable`, and a value its converter refuses after the replacement (a uuid) null."""
    values = valid_utf8(array).to_pylist()
    invalid = dict(invalid_utf8_rows(array))
    for row, error in invalid.items():
        unreadable.setdefault(
            row,
            f"field {column.name!r} holds a string that is not valid UTF-8"
            f" ({error.reason} at byte {error.start} of {error.object[:16]!r})",
        )
    convert = column.node.from_arrow
    if convert is None:
        return values
    return [_converted(convert, v) if row in invalid else convert(v) for row, v in enumerate(values)]


def _converted(convert: Convert, value: Any) -> Any:
    try:
        return convert(value)
    except (TypeError, ValueError):
        return None


def _record_codec(schema: AvroSchema, union_branches: bool = False) -> _Codec:
    codec = _codec(schema, union_branches)
    if codec.arrow is None:
        raise SerializationError("Arrow batches hold records: the schema's top level must be a record")
    return codec


def plain_fields(schema: AvroSchema) -> tuple[tuple[str, pa.DataType], ...] | None:
    """A record schema's fields as (name, Arrow type) when `read_struct` gives every field's Arrow
    values as they are (no converter): its records are then its columns' `to_pylist` rows. None
    when some field converts (a logical type, a union of several branches, a nested record)."""
    codec = _record_codec(schema)
    if any(column.node.from_arrow is not None for column in codec.columns):
        return None
    return tuple((column.name, column.readable) for column in codec.columns)
