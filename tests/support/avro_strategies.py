"""Hypothesis strategies for random Avro schemas and records, shared by the Avro and wire-format tests."""

from __future__ import annotations

import datetime
import decimal
import io
import json
from typing import Any

import fastavro
import fastavro.validation
from hypothesis import strategies as st

from contracts.formats.avro import parse_schema

UTC = datetime.timezone.utc


def fastavro_round_trip(records: list[dict[str, Any]], schema: Any) -> list[dict[str, Any]]:
    """Write and read the records with fastavro: proves they are valid Avro, gives what a reader sees."""
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, records)
    buffer.seek(0)
    return list(fastavro.reader(buffer))


PRIMITIVE_KINDS = ["boolean", "int", "long", "float", "double", "string", "bytes"]
LOGICAL_TYPES = {
    "int": [{"type": "int", "logicalType": "date"}, {"type": "int", "logicalType": "time-millis"}],
    "long": [
        {"type": "long", "logicalType": logical}
        for logical in (
            "time-micros",
            "timestamp-millis",
            "timestamp-micros",
            "local-timestamp-millis",
            "local-timestamp-micros",
        )
    ],
    "string": [{"type": "string", "logicalType": "uuid"}],
}


class SchemaBuilder:
    """Draws random Avro schemas: fresh names, reuse of named types already defined, bounded depth."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.count = 0
        self.defined: list[str] = []

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def record(self, depth: int) -> dict[str, Any]:
        name = self.name("Rec")
        fields = [
            {"name": f"f{i}", "type": self.any(depth + 1), **self.tags()}
            for i in range(self.draw(st.integers(0 if depth else 1, 4)))
        ]
        self.defined.append(name)
        return {"type": "record", "name": name, "fields": fields}

    def tags(self) -> dict[str, Any]:
        return {"confluent:tags": ["PII"]} if self.draw(st.booleans()) else {}

    def any(self, depth: int) -> Any:
        choices = ["primitive", "logical", "decimal", "enum", "fixed", "nullable", "union", "named"]
        if depth < 3:
            choices += ["array", "map", "record"]
        return getattr(self, "_" + self.draw(st.sampled_from(choices)))(depth)

    def branch(self, kind: str, depth: int) -> Any:
        if kind in ("record", "array", "map", "enum", "fixed"):
            return getattr(self, "_" + kind)(depth)
        # No date, time, timestamp or uuid branches: fastavro writes an int (or a str) into such a
        # branch when it comes first, and then cannot read it back. Decimals are unambiguous.
        return self._decimal(depth) if kind == "bytes" and self.draw(st.booleans()) else kind

    def _primitive(self, depth: int) -> Any:
        return self.draw(st.sampled_from(["null", *PRIMITIVE_KINDS]))

    def _logical(self, depth: int) -> Any:
        return self.draw(st.sampled_from([t for ts in LOGICAL_TYPES.values() for t in ts]))

    def _decimal(self, depth: int) -> Any:
        precision = self.draw(st.integers(1, 38))
        decimal_type = {
            "logicalType": "decimal",
            "precision": precision,
            "scale": self.draw(st.integers(0, precision)),
        }
        if self.draw(st.booleans()):
            return {"type": "bytes", **decimal_type}
        return {"type": "fixed", "name": self.name("Dec"), "size": 17, **decimal_type}

    def _enum(self, depth: int) -> Any:
        name = self.name("Enum")
        self.defined.append(name)
        return {"type": "enum", "name": name, "symbols": ["A", "B", "C"][: self.draw(st.integers(1, 3))]}

    def _fixed(self, depth: int) -> Any:
        name = self.name("Fix")
        self.defined.append(name)
        return {"type": "fixed", "name": name, "size": self.draw(st.integers(0, 4))}

    def _named(self, depth: int) -> Any:
        return self.draw(st.sampled_from(self.defined)) if self.defined else self._enum(depth)

    def _array(self, depth: int) -> Any:
        return {"type": "array", "items": self.any(depth + 1)}

    def _map(self, depth: int) -> Any:
        return {"type": "map", "values": self.any(depth + 1)}

    def _record(self, depth: int) -> Any:
        return self.record(depth)

    def _nullable(self, depth: int) -> Any:
        inner = self.any(depth)
        if isinstance(inner, list) or inner == "null":
            return inner
        return ["null", inner] if self.draw(st.booleans()) else [inner, "null"]

    def _union(self, depth: int) -> Any:
        kinds = [*PRIMITIVE_KINDS, "enum", "fixed"] + (["record", "array", "map"] if depth < 3 else [])
        chosen = self.draw(st.lists(st.sampled_from(kinds), min_size=2, max_size=4, unique=True))
        branches = [self.branch(kind, depth + 1) for kind in chosen]
        return ["null", *branches] if self.draw(st.booleans()) else branches


def values_for(schema: Any, named: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Valid Python values (as fastavro writes them) for a parsed schema."""
    if isinstance(schema, list):
        values = st.one_of([values_for(branch, named) for branch in _writable_branches(schema, named)])
        return values.filter(lambda value: _fastavro_writes(value, schema, named))
    if isinstance(schema, str):
        schema = named.get(schema, {"type": schema})
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal":
        digits = st.integers(-(10 ** schema["precision"]) + 1, 10 ** schema["precision"] - 1)
        exact = decimal.Context(prec=40)
        return digits.map(lambda n: decimal.Decimal(n).scaleb(-schema.get("scale", 0), exact))
    if logical is not None and f"{kind}-{logical}" in LOGICAL_VALUES:
        return LOGICAL_VALUES[f"{kind}-{logical}"]
    if kind == "record":
        return st.fixed_dictionaries({f["name"]: values_for(f["type"], named) for f in schema["fields"]})
    if kind == "array":
        return st.lists(values_for(schema["items"], named), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=3), values_for(schema["values"], named), max_size=3)
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    return PRIMITIVE_VALUES[kind]


def _writable_branches(union: list[Any], named: dict[str, Any]) -> list[Any]:
    """The branches whose values fastavro writes in that branch: next to a decimal branch, plain
    bytes would be taken for the decimal's unscaled value (out of its precision when read back)."""
    resolved = [named.get(b, {"type": b}) if isinstance(b, str) else b for b in union]
    if not any(r.get("logicalType") == "decimal" for r in resolved):
        return union
    return [
        b
        for b, r in zip(union, resolved, strict=True)
        if r["type"] not in ("bytes", "fixed") or r.get("logicalType")
    ]


def _fastavro_writes(value: Any, union: list[Any], named: dict[str, Any]) -> bool:
    """Whether fastavro's writer can place a plain value in this union: it tries the branches in
    order with its validator, which raises instead of answering False on some mismatches (a
    record's string field tried as a map of dates is parsed as an ISO date)."""
    record = {"type": "record", "name": "UnionProbe", "fields": [{"name": "u", "type": union}]}
    try:
        probe = fastavro.parse_schema(record, named_schemas=dict(named))
        return bool(fastavro.validation.validate({"u": value}, probe, raise_errors=False))
    except ValueError:
        return False


def holds_list_of_nulls(schema: Any) -> bool:
    """Whether an array or map of `null` appears anywhere in the schema (JSON form): pyspark's
    createDataFrame cannot build such input (pyarrow's cast of a list of nulls leaves it invalid)."""
    if isinstance(schema, list):
        return any(holds_list_of_nulls(branch) for branch in schema)
    if not isinstance(schema, dict):
        return False
    items = schema.get("items", schema.get("values"))
    if schema.get("type") in ("array", "map") and (items == "null" or holds_list_of_nulls(items)):
        return True
    return any(holds_list_of_nulls(f["type"]) for f in schema.get("fields", ()))


MILLIS = st.integers(0, 999).map(lambda ms: ms * 1000)
INSTANTS = st.datetimes(datetime.datetime(1700, 1, 1), datetime.datetime(2500, 1, 1))
PRIMITIVE_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "string": st.text(max_size=5),
    "bytes": st.binary(max_size=5),
}
LOGICAL_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "int-date": st.dates(),
    "int-time-millis": st.builds(lambda t, ms: t.replace(microsecond=ms), st.times(), MILLIS),
    "long-time-micros": st.times(),
    "long-timestamp-millis": st.builds(lambda d, ms: d.replace(microsecond=ms, tzinfo=UTC), INSTANTS, MILLIS),
    "long-timestamp-micros": INSTANTS.map(lambda d: d.replace(tzinfo=UTC)),
    "long-local-timestamp-millis": st.builds(lambda d, ms: d.replace(microsecond=ms), INSTANTS, MILLIS),
    "long-local-timestamp-micros": INSTANTS,
    "string-uuid": st.uuids(),
}


@st.composite
def schemas_and_records(draw: st.DrawFn) -> tuple[Any, list[dict[str, Any]]]:
    """A random record schema (parsed) and up to 12 valid records for it."""
    schema = parse_schema(json.dumps(SchemaBuilder(draw).record(0)))
    records = draw(st.lists(values_for(schema, schema["__named_schemas"]), min_size=1, max_size=12))
    return schema, records
