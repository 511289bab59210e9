"""JSON Schema as a `SchemaFormat` (docs/semantics.md §1.5, §8): records are the JSON values the
reference clients hand to rules (dicts of plain values), bodies are UTF-8 JSON, and every record
decoded, encoded or returned by a transform is validated against its schema with `jsonschema`,
as the reference serializer and deserializer do by default.

In Spark a property that is absent and one that is null are both a null field. Read back, a null
field is left out of the record (the property absent) unless the property's schema accepts null
and it is required, or optional and not listed in the record's `ABSENT_FIELD` (the JSON pointers
of the optional properties that accept null and are absent, docs/semantics.md §1.5): a record
keeps what its document had, and a record that was valid stays valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from contracts.bounded import BoundedCache
from contracts.formats.arrow_text import lone_surrogate, printable, struct_values
from contracts.formats.dlq_value import record_value_bytes
from contracts.formats.fields import FieldTree, FieldVisit
from contracts.formats.json_schema.fields import JsonFieldWalk
from contracts.formats.json_schema.layouts import absent_in_text
from contracts.formats.json_schema.patterns import on_re2, re2_validator
from contracts.formats.json_schema.types import JsonSchema, Shape, parse_json_schema
from contracts.formats.markers import ABSENT_FIELD, pointer
from contracts.formats.protocol import Records, Reference

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

_SHOWN_LENGTH = 200
"""How much of a validation message an error (and a DLQ record's reason) shows."""

_VALIDATORS: BoundedCache[str, Any] = BoundedCache(256)
"""Per process: jsonschema's validator per schema text."""

_FAST_VALIDATORS: BoundedCache[str, tuple[Callable[[Any], Any] | None]] = BoundedCache(256)
"""Per process: fastjsonschema's compiled validator per schema text (None where it does not apply)."""

_FAST_DRAFTS = re.compile(r".*draft-0[467]")
"""The `$schema` values fastjsonschema validates as jsonschema does (none: draft 7, as both assume)."""


class JsonSchemaFormat:
    """The JSON schema type: JSON Schema documents, UTF-8 JSON bodies."""

    schema_type = "JSON"

    def parse(self, schema_str: str, references: Sequence[Reference]) -> JsonSchema:
        return parse_json_schema(schema_str, references)

    def spark_type(self, parsed: JsonSchema) -> StructType:
        return parsed.struct_type()

    def read_struct(self, column: pa.Array, parsed: JsonSchema, tagged: bool = False) -> Records:
        """Each struct as the JSON object it stands for (None for a null struct)."""
        values, unreadable = struct_values(column)
        shape = parsed.shape
        records = [None if value is None else _record_from_spark(value, shape) for value in values]
        return Records(records, unreadable)

    def needs_tags(self, parsed: JsonSchema) -> bool:
        return False

    def to_struct(
        self, records: list[Any], parsed: JsonSchema, record_type: pa.DataType, tagged: bool = False
    ) -> pa.Array:
        import pyarrow as pa

        from contracts.errors import SerializationError

        masked = parsed.shape.has_optional_nulls
        values = [
            None if record is None else _record_to_spark(record, parsed.shape, masked) for record in records
        ]
        try:
            return pa.array(values, type=record_type)
        except (TypeError, ValueError, pa.ArrowException) as e:
            raise SerializationError(f"records do not match the JSON Schema's Spark type: {e!r}") from e

    def conform(self, record: Any, parsed: JsonSchema) -> Any:
        """The record as it is, once valid and held by its Spark type (JSON Schema has no defaults a
        writer fills in)."""
        validate(record, parsed)
        check_fits(record, parsed.shape)
        return record

    def project(self, value: Any, parsed: JsonSchema) -> Any:
        """The migrated value as it is, once it is an object valid against the target's schema."""
        from contracts.errors import SerializationError

        if not isinstance(value, Mapping):
            raise SerializationError(f"migrated record is a {type(value).__name__}, not a JSON object")
        try:
            validate(value, parsed)
            check_fits(value, parsed.shape)
        except ValueError as e:
            raise SerializationError(f"migrated record does not fit the target schema: {e}") from e
        return value

    def to_json_view(self, record: Any, parsed: JsonSchema) -> Any:
        return record

    def from_json_view(self, value: Any, parsed: JsonSchema) -> Any:
        return value

    def decode(self, body: bytes, writer: JsonSchema, reader: JsonSchema | None, tagged: bool = False) -> Any:
        """The body's JSON value, validated against the writer's schema (JSON has no schema
        resolution: a reader sees the record as written)."""
        record = json.loads(body.decode("utf-8"))
        validate(record, writer)
        check_fits(record, writer.shape)
        return record

    def encode(self, record: Any, parsed: JsonSchema) -> bytes:
        """Compact UTF-8 JSON, as the reference serializer writes it, once valid."""
        validate(record, parsed)
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def dlq_value(self, record: Any, parsed: JsonSchema) -> bytes:
        """The record as JSON, as the reference's DLQ action writes it."""
        return record_value_bytes(record) or b""

    def field_tree(
        self, parsed: JsonSchema, metadata_tags: Mapping[str, tuple[str, ...]]
    ) -> FieldTree | None:
        """None: the walk's branches (`oneOf`, a `type` list) are chosen by validating values."""
        return None

    def field_walk(
        self,
        parsed: JsonSchema,
        metadata_tags: Mapping[str, tuple[str, ...]],
        rule_tags: frozenset[str],
        visit: FieldVisit,
        condition: bool = False,
    ) -> Callable[[Any], Any]:
        return JsonFieldWalk(parsed.document, metadata_tags, rule_tags, visit, condition)

    def read_dlq_value(self, value: Column, parsed: JsonSchema) -> Column:
        """Natively, by `from_json`: the DLQ value is the record's own JSON document, whose every
        value (strings, numbers, booleans, objects, arrays; "NaN" and "Infinity" as strings) Spark
        reads as the field's type. A document that does not fit fails the job (FAILFAST). The
        properties it leaves out that accept null are its `ABSENT_FIELD` (docs/semantics.md §1.5)."""
        from pyspark.sql import functions as F

        text = value.cast("string")
        record = F.from_json(text, parsed.struct_type(), {"mode": "FAILFAST"})
        if parsed.shape.has_optional_nulls:
            record = record.withField(ABSENT_FIELD, absent_in_text(text, parsed.shape))
        return F.when(text.startswith("{"), record)

    def __repr__(self) -> str:
        return "JsonSchemaFormat()"


def validate(record: Any, parsed: JsonSchema) -> None:
    """ValueError naming the first place `record` breaks the schema, and why.

    `jsonschema` (the reference's validator) decides; a record fastjsonschema's code compiled from
    the schema finds valid is valid without asking it, which spares most of the time (a property
    test holds the two to the same verdicts on the schemas the engine maps)."""
    fast = _fast_validator(parsed)
    if fast is not None:
        try:
            fast(record)
            return
        except Exception:  # invalid, or the generated code failed: jsonschema decides, and says why
            pass
    validator = _VALIDATORS.get(parsed.text)
    if validator is None:
        from jsonschema.validators import validator_for

        checking = re2_validator(validator_for(parsed.document))
        validator = _VALIDATORS.put(parsed.text, checking(parsed.document))
    error = next(iter(validator.iter_errors(record)), None)
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        message = error.message
        if len(message) > _SHOWN_LENGTH:  # jsonschema quotes the whole offending value
            message = message[:_SHOWN_LENGTH] + "…"
        raise ValueError(printable(f"the record does not match its JSON Schema at /{where}: {message}"))


def _fast_validator(parsed: JsonSchema) -> Callable[[Any], Any] | None:
    """The schema compiled by fastjsonschema (per process), or None where it does not apply: a
    draft other than 4, 6 or 7, a `$ref` outside the document (which it would fetch), or a schema
    it refuses. Compiled as jsonschema validates by default: no defaults filled in, no formats;
    its patterns matched by RE2 (`patterns.on_re2`)."""
    cached = _FAST_VALIDATORS.get(parsed.text)
    if cached is not None:
        return cached[0]
    compiled = None
    draft = str(parsed.document.get("$schema", "draft-07"))
    if _FAST_DRAFTS.match(draft) and not _remote_refs(parsed.document):
        import fastjsonschema

        try:
            compiled = fastjsonschema.compile(parsed.document, use_default=False, use_formats=False)
        except Exception:  # a schema it refuses (or cannot generate code for): jsonschema alone
            compiled = None
        if compiled is not None:
            compiled = on_re2(compiled, parsed.document)
    return _FAST_VALIDATORS.put(parsed.text, (compiled,))[0]


def _remote_refs(node: Any) -> bool:
    """Whether a `$ref` anywhere in the document points outside it."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return True
        return any(_remote_refs(child) for child in node.values())
    if isinstance(node, list):
        return any(_remote_refs(child) for child in node)
    return False


_LONG_RANGE = (-(2**63), 2**63 - 1)


def check_fits(value: Any, shape: Shape, path: str = "") -> None:
    """ValueError naming the place where a valid JSON value has no Spark value of the shape's
    type: an integer beyond 64 bits, a number beyond a double, a string (or a map's key) holding a
    lone surrogate, which a JSON escape can spell but no Spark string holds (docs/semantics.md §8.6)."""
    if value is None:
        return
    if shape.kind == "string" and isinstance(value, str):
        _check_text(value, path)
    elif shape.kind in ("object", "map") and isinstance(value, Mapping):
        if shape.kind == "map":
            for key in value:
                _check_text(key, f"{path}/{key}")
        children = (
            ((name, field) for name, field, _ in shape.fields if name in value)
            if shape.kind == "object"
            else ((key, shape.item) for key in value)
        )
        for name, child in children:
            assert child is not None
            check_fits(value[name], child, f"{path}/{name}")
    elif shape.kind == "array" and isinstance(value, list):
        assert shape.item is not None
        for index, item in enumerate(value):
            check_fits(item, shape.item, f"{path}/{index}")
    elif shape.kind == "integer" and not _LONG_RANGE[0] <= value <= _LONG_RANGE[1]:
        raise ValueError(f"the record's value at {path or '/'}, {value}, does not fit a Spark long (64 bits)")
    elif shape.kind == "number" and isinstance(value, int) and not _fits_double(value):
        raise ValueError(f"the record's value at {path or '/'}, {value}, does not fit a Spark double")


def _check_text(text: str, path: str) -> None:
    why = lone_surrogate(text)
    if why is not None:
        raise ValueError(printable(f"the record's value at {path or '/'} is {why}"))


def _fits_double(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _record_from_spark(value: Mapping[str, Any], shape: Shape) -> Any:
    """A record's Spark value as its JSON object, the properties its `ABSENT_FIELD` lists left out."""
    absent = value.get(ABSENT_FIELD)
    return _from_spark(value, shape, "" if absent else None, frozenset(absent or ()))


def _from_spark(value: Any, shape: Shape, at: str | None, absent: frozenset[str]) -> Any:
    """A Spark value (as pyarrow reads it) as the JSON value it stands for: a null property is left
    out unless it accepts null and is required, or is not among the `absent` JSON pointers (`at`
    is the value's own pointer; None when no pointer is listed)."""
    if value is None:
        return None
    if shape.kind == "object":
        record = {}
        for name, field, required in shape.fields:
            item = value.get(name)
            if item is not None:
                record[name] = _from_spark(item, field, None if at is None else pointer(at, name), absent)
            elif field.nullable and (required or at is None or pointer(at, name) not in absent):
                record[name] = None
        return record
    if shape.kind == "map":
        assert shape.item is not None
        pairs = value.items() if isinstance(value, Mapping) else value
        return {
            key: _from_spark(item, shape.item, None if at is None else pointer(at, key), absent)
            for key, item in pairs
        }
    if shape.kind == "array":
        assert shape.item is not None
        return [
            _from_spark(item, shape.item, None if at is None else pointer(at, str(i)), absent)
            for i, item in enumerate(value)
        ]
    return value


def _record_to_spark(record: Any, shape: Shape, masked: bool) -> Any:
    """A record as pyarrow takes it for its Spark type; `masked`: with `ABSENT_FIELD`, the
    pointers of the optional properties that accept null and are absent (None when none are)."""
    absent: list[str] = []
    value = _to_spark(record, shape, "", absent if masked else None)
    if masked and isinstance(value, dict):
        value[ABSENT_FIELD] = absent or None
    return value


def _to_spark(value: Any, shape: Shape, at: str, absent: list[str] | None) -> Any:
    """A JSON value at JSON pointer `at` as pyarrow takes it for the shape's Spark type (a map as
    key-value pairs), adding to `absent` the optional properties that accept null and are absent."""
    if value is None:
        return None
    if shape.kind == "object" and isinstance(value, Mapping):
        out = {}
        for name, field, required in shape.fields:
            where = pointer(at, name)
            if name not in value and absent is not None and field.nullable and not required:
                absent.append(where)
            out[name] = _to_spark(value.get(name), field, where, absent)
        return out
    if shape.kind == "map" and isinstance(value, Mapping):
        assert shape.item is not None
        return [(key, _to_spark(item, shape.item, pointer(at, key), absent)) for key, item in value.items()]
    if shape.kind == "array" and isinstance(value, list):
        assert shape.item is not None
        return [_to_spark(item, shape.item, pointer(at, str(i)), absent) for i, item in enumerate(value)]
    if shape.kind == "integer" and isinstance(value, float):
        return int(value)  # JSON Schema counts 1.0 as an integer
    if shape.kind == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
