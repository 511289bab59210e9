"""A migrated value read as a record of the target Avro schema, as Java's client re-decodes the
migrated JSON with it: extra fields dropped, a missing field takes its default, JSON-view values
become Avro values; what cannot be is a SerializationError (docs/semantics.md §6.4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastavro.validation import ValidationError, validate

from contracts.errors import SerializationError
from contracts.formats.avro.json_view import from_json_view


def missing_field_message(name: str) -> str:
    return f"migrated record has no field {name!r} and the target schema gives it no default"


def null_field_message(name: str) -> str:
    return f"migrated record has null in field {name!r}, whose type in the target schema allows none"


def project(value: Any, schema: Any) -> Any:
    """`value` (a record, or a rule's result in the JSON view) as a record of `schema`."""
    projected = _project(value, schema)
    try:
        record = from_json_view(projected, schema)
    except SerializationError as e:
        raise SerializationError(f"migrated record: {e}") from e
    try:
        validate(record, schema, raise_errors=True)
    except ValidationError as e:
        why = "; ".join(str(error) for error in e.errors)
        raise SerializationError(f"migrated record does not fit the target schema: {why}") from e
    except (TypeError, ValueError) as e:
        raise SerializationError(f"migrated record does not fit the target schema: {e}") from e
    return record


def _project(value: Any, schema: Any) -> Any:
    if isinstance(schema, dict) and schema.get("type") == "record" and isinstance(value, Mapping):
        out = {}
        for field in schema["fields"]:
            name = field["name"]
            if name in value:
                if value[name] is None and not _allows_null(field["type"]):
                    raise SerializationError(null_field_message(name))
                out[name] = _project(value[name], field["type"])
            elif "default" in field:
                out[name] = field["default"]
            else:
                raise SerializationError(missing_field_message(name))
        return out
    if isinstance(schema, list):
        records = [branch for branch in schema if isinstance(branch, dict) and branch.get("type") == "record"]
        if len(records) == 1 and isinstance(value, Mapping):
            return _project(value, records[0])
    if isinstance(schema, dict) and schema.get("type") == "array" and isinstance(value, list):
        return [_project(item, schema["items"]) for item in value]
    if isinstance(schema, dict) and schema.get("type") == "map" and isinstance(value, Mapping):
        return {key: _project(item, schema["values"]) for key, item in value.items()}
    return value


def _allows_null(schema: Any) -> bool:
    if isinstance(schema, list):
        return any(_allows_null(branch) for branch in schema)
    return schema == "null" or (isinstance(schema, dict) and schema.get("type") == "null")
