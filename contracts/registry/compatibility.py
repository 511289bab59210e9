"""Avro schema-resolution compatibility: can a reader schema read data written with a writer schema.

Pure functions over schemas as fastavro parses them (full names, named types referenced by name).
The rules are the Avro specification's "Schema Resolution" section as Avro Java's
`SchemaCompatibility` applies them, which is what Confluent's registry runs for AVRO subjects.
BACKWARD means the new schema reads the old; FORWARD the old reads the new; FULL both.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from fastavro.schema import parse_schema

AvroSchema = Any
"""A schema as JSON data (str, list or dict), as written or as `fastavro.parse_schema` returns it."""

_PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int"}),
    "long": frozenset({"int", "long"}),
    "float": frozenset({"int", "long", "float"}),
    "double": frozenset({"int", "long", "float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"string", "bytes"}),
}
"""Reader type -> the writer types it can read (the spec's promotions)."""

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})


class Compatibility(str, enum.Enum):
    """The registry's compatibility levels."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """New schema must read data written with the old ones."""
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """Old schemas must read data written with the new one."""
        return self.value.startswith(("FORWARD", "FULL"))


@dataclass(frozen=True)
class ParsedAvro:
    """A parsed schema plus every named type it can see (its own and its references')."""

    schema: AvroSchema
    names: Mapping[str, Mapping[str, Any]]


def parse_avro(schema: AvroSchema, named: Mapping[str, Any] | None = None) -> ParsedAvro:
    """Parse a schema (JSON data) with `named` types from references already known; raises on invalid Avro."""
    names: dict[str, Any] = dict(named or {})
    _require_fields(schema)
    parsed = parse_schema(schema, names, _write_hint=False)
    return ParsedAvro(parsed, names)


def _require_fields(schema: AvroSchema) -> None:
    """Reject a record without "fields", which fastavro accepts but Avro Java (the registry) does not."""
    if isinstance(schema, list):
        for branch in schema:
            _require_fields(branch)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "error") and not isinstance(schema.get("fields"), list):
            raise ValueError(f"Record has no fields: {schema.get('name')}")
        for child in (schema.get("type"), schema.get("items"), schema.get("values")):
            _require_fields(child)
        for item in schema.get("fields") or ():
            _require_fields(item.get("type") if isinstance(item, dict) else None)


@dataclass
class _Checker:
    reader_names: Mapping[str, Mapping[str, Any]]
    writer_names: Mapping[str, Mapping[str, Any]]
    errors: list[str] = field(default_factory=list)
    # Named pairs being compared higher up the stack: assumed compatible, so recursion ends.
    in_progress: set[tuple[str, str]] = field(default_factory=set)

    def check(self, reader: AvroSchema, writer: AvroSchema, path: str) -> bool:
        """Record why `reader` cannot read `writer` at `path`; return whether it can."""
        reader = _resolve(reader, self.reader_names)
        writer = _resolve(writer, self.writer_names)
        if isinstance(writer, list):
            return self._writer_union(reader, writer, path)
        if isinstance(reader, list):
            return self._reader_union(reader, writer, path)
        reader_type, writer_type = _type_name(reader), _type_name(writer)
        if reader_type in _PRIMITIVES or writer_type in _PRIMITIVES:
            if writer_type in _PROMOTIONS.get(reader_type, {reader_type}):
                return True
            return self._fail(path, f"reader type '{reader_type}' cannot read writer type '{writer_type}'")
        if _kind(reader_type) != _kind(writer_type):
            return self._fail(path, f"reader type '{reader_type}' cannot read writer type '{writer_type}'")
        if reader_type == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items")
        if reader_type == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values")
        if not _names_match(reader, writer):
            return self._fail(
                f"{path}/name",
                f"reader {reader_type} '{reader['name']}' does not match"
                f" writer {writer_type} '{writer['name']}'",
            )
        return self._named(reader, writer, path)

    def _named(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> bool:
        pair = (reader["name"], writer["name"])
        if pair in self.in_progress:
            return True
        self.in_progress.add(pair)
        try:
            if reader["type"] == "enum":
                return self._enum(reader, writer, path)
            if reader["type"] == "fixed":
                return self._fixed(reader, writer, path)
            return self._record(reader, writer, path)
        finally:
            self.in_progress.discard(pair)

    def _record(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> bool:
        writer_fields = {f["name"]: f for f in writer["fields"]}
        ok = True
        for index, reader_field in enumerate(reader["fields"]):
            names = [reader_field["name"], *reader_field.get("aliases", ())]
            written = next((writer_fields[n] for n in names if n in writer_fields), None)
            if written is not None:
                ok = self.check(reader_field["type"], written["type"], f"{path}/fields/{index}/type") and ok
            elif "default" not in reader_field:
                ok = self._fail(
                    f"{path}/fields/{index}",
                    f"reader field '{reader_field['name']}' has no default value"
                    " and is missing in the writer",
                )
        return ok

    def _enum(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> bool:
        if "default" in reader:
            return True
        missing = [s for s in writer["symbols"] if s not in set(reader["symbols"])]
        if missing:
            return self._fail(
                f"{path}/symbols", f"reader enum '{reader['name']}' lacks writer symbols {missing}"
            )
        return True

    def _fixed(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> bool:
        if reader["size"] != writer["size"]:
            return self._fail(
                f"{path}/size",
                f"reader fixed '{reader['name']}' has size {reader['size']}, writer size {writer['size']}",
            )
        return True

    def _writer_union(self, reader: AvroSchema, writer: list[Any], path: str) -> bool:
        # Every branch the writer may have used must be readable (spec: "if writer's is a union").
        ok = True
        for index, branch in enumerate(writer):
            ok = self.check(reader, branch, f"{path}/{index}") and ok
        return ok

    def _reader_union(self, reader: list[Any], writer: AvroSchema, path: str) -> bool:
        for branch in reader:
            probe = _Checker(self.reader_names, self.writer_names, in_progress=self.in_progress)
            if probe.check(branch, writer, path):
                return True
        return self._fail(
            path,
            f"reader union {_describe(reader)} has no branch that can read writer type '{_describe(writer)}'",
        )

    def _fail(self, path: str, message: str) -> bool:
        self.errors.append(f"{path or '/'}: {message}")
        return False


def _resolve(schema: AvroSchema, names: Mapping[str, Mapping[str, Any]]) -> AvroSchema:
    """A named-type reference replaced by its definition; a bare {"type": "int"} by "int"."""
    if isinstance(schema, str):
        return names.get(schema, schema)
    if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
        return schema["type"]
    return schema


def _type_name(schema: AvroSchema) -> str:
    return schema if isinstance(schema, str) else str(schema["type"])


def _kind(type_name: str) -> str:
    """Records and errors resolve against each other."""
    return "record" if type_name == "error" else type_name


def _simple_name(full_name: str) -> str:
    return full_name.rpartition(".")[2]


def _aliases(named: Mapping[str, Any]) -> set[str]:
    """Reader aliases as full names: an unqualified alias takes the type's namespace (Avro spec)."""
    namespace = named["name"].rpartition(".")[0]
    return {
        alias if "." in alias or not namespace else f"{namespace}.{alias}"
        for alias in named.get("aliases", ())
    }


def _names_match(reader: Mapping[str, Any], writer: Mapping[str, Any]) -> bool:
    # Avro Java (and so Confluent) compares unqualified names, then the reader's aliases.
    return _simple_name(reader["name"]) == _simple_name(writer["name"]) or writer["name"] in _aliases(reader)


def _describe(schema: AvroSchema) -> str:
    if isinstance(schema, list):
        return "[" + ", ".join(_describe(branch) for branch in schema) + "]"
    if isinstance(schema, dict):
        return str(schema.get("name", schema["type"]))
    return str(schema)


def reader_errors(reader: ParsedAvro, writer: ParsedAvro) -> list[str]:
    """Why `reader` cannot read data written with `writer` (path-prefixed messages); empty when it can."""
    checker = _Checker(reader.names, writer.names)
    checker.check(reader.schema, writer.schema, "")
    return checker.errors


def compatibility_errors(
    level: Compatibility | str, new: ParsedAvro, previous: Sequence[ParsedAvro]
) -> list[str]:
    """Why `new` breaks `level` against `previous` (oldest first); only the newest unless transitive."""
    level = Compatibility(level)
    if level is Compatibility.NONE or not previous:
        return []
    against = previous if level.transitive else previous[-1:]
    errors: list[str] = []
    for old in reversed(against):
        if level.backward:
            errors.extend(f"new schema cannot read old: {e}" for e in reader_errors(new, old))
        if level.forward:
            errors.extend(f"old schema cannot read new: {e}" for e in reader_errors(old, new))
    return errors


class _Versioned(Protocol):
    """A version of a subject as far as choosing what to check it against goes: its metadata properties."""

    @property
    def properties(self) -> Mapping[str, str]: ...


_V = TypeVar("_V", bound=_Versioned)


def compatibility_level(config: Mapping[str, Any]) -> Compatibility:
    """The level a subject's effective config sets; BACKWARD (Confluent's default) when it sets none.
    ValueError when the level is unknown."""
    return Compatibility(str(config.get("compatibility", Compatibility.BACKWARD.value)).upper())


def checked_against(level: Compatibility, group: str | None, new: _V, earlier: Sequence[_V]) -> list[_V]:
    """The earlier versions (oldest first) a registry checks `new` against: only those with its value
    of the `group` metadata property (the config's compatibilityGroup), all of them under a transitive
    level, else the newest; none under NONE."""
    if level is Compatibility.NONE:
        return []
    if group:
        value = new.properties.get(group)
        earlier = [old for old in earlier if old.properties.get(group) == value]
    return list(earlier if level.transitive else earlier[-1:])
