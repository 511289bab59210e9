"""The registry's one dispatch by schema type: how a schema's text (with its references' texts)
is read as its type's compatibility check reads it, and how two readings compare under a level.

`LocalRegistry` (registering a version) and `spark-contracts lint` (checking a registry directory)
both go through it, so the two cannot disagree about a schema type. AVRO, JSON and PROTOBUF have
checks of their own; a schema type a plugin format reads (`contracts.plugins.FORMATS`) is read
with that format's `parse`, and its versions are not compared (docs/semantics.md §1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from contracts import plugins
from contracts.errors import ContractError, DataContractError
from contracts.registry.compatibility import Compatibility, compatibility_errors, parse_avro
from contracts.registry.json_compatibility import json_schema_compatibility_errors
from contracts.registry.protobuf_compatibility import protobuf_compatibility_errors
from contracts.registry.protobuf_schema import parse_proto
from contracts.registry.references import Reference


class UnreadableSchema(DataContractError, ValueError):
    """A schema its type's check cannot read; `reference` is the index of the referenced schema at
    fault, None when the schema itself is."""

    def __init__(self, details: str, reference: int | None = None) -> None:
        super().__init__(details)
        self.details = details
        self.reference = reference


@dataclass(frozen=True)
class SchemaChecker:
    """One schema type's registry semantics."""

    read: Callable[[str, Sequence[Reference]], Any]
    """The schema's text (with the schemas it references, dependencies first) as `errors` reads it;
    UnreadableSchema if it is none."""
    errors: Callable[[Compatibility, Any, Sequence[Any]], list[str]]
    """Why the new reading breaks the level against the earlier ones (none: compatible)."""
    reads_references: bool = True
    """Whether `read` needs the referenced schemas' texts (a JSON Schema's check reads its own
    document only, so its references are not resolved for it)."""


def _read_avro(text: str, references: Sequence[Reference]) -> Any:
    named: dict[str, Any] = {}
    for index, referenced in enumerate(references):
        try:
            named.update(parse_avro(json.loads(referenced.schema_str), named).names)
        except Exception as error:  # fastavro raises several exception types for bad schemas
            raise UnreadableSchema(str(error), reference=index) from error
    try:
        return parse_avro(json.loads(text), named)
    except Exception as error:  # fastavro raises several exception types for bad schemas
        raise UnreadableSchema(str(error)) from error


def _read_json(text: str, references: Sequence[Reference]) -> Any:
    """The JSON Schema's document, once it is JSON and a valid schema of its dialect."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        document = json.loads(text)
        validator_for(document).check_schema(document)
    except json.JSONDecodeError as error:
        raise UnreadableSchema(str(error)) from error
    except SchemaError as error:
        raise UnreadableSchema(error.message) from error
    return document


def _json_errors(level: Compatibility, new: Any, earlier: Sequence[Any]) -> list[str]:
    try:
        return json_schema_compatibility_errors(level, new, list(earlier))
    except ValueError as error:  # a construct the JSON diff cannot compare
        raise UnreadableSchema(str(error)) from error


def _read_protobuf(text: str, references: Sequence[Reference]) -> Any:
    try:
        return parse_proto(text, [(reference.name, reference.schema_str) for reference in references])
    except ContractError as error:
        raise UnreadableSchema(error.reason) from error


CHECKERS: dict[str, SchemaChecker] = {
    "AVRO": SchemaChecker(
        _read_avro, lambda level, new, earlier: compatibility_errors(level, new, list(earlier))
    ),
    "JSON": SchemaChecker(_read_json, _json_errors, reads_references=False),
    "PROTOBUF": SchemaChecker(
        _read_protobuf, lambda level, new, earlier: protobuf_compatibility_errors(level, new, list(earlier))
    ),
}
"""The schema types the registry reads and compares, by their upper-case names."""


def checker_for(schema_type: str) -> SchemaChecker | None:
    """The checker of a schema type (any case), None for a type the registry does not know: its
    own, else one reading the type with the plugin format registered for it."""
    checker = CHECKERS.get(schema_type.upper())
    if checker is not None:
        return checker
    schema_format = plugins.FORMATS.find(schema_type)
    return None if schema_format is None else _plugin_checker(schema_format)


def known_types() -> list[str]:
    """The schema types the registry reads: its own, then those of plugin formats."""
    return [*CHECKERS, *sorted({name.upper() for name in plugins.FORMATS.names()} - set(CHECKERS))]


def _plugin_checker(schema_format: Any) -> SchemaChecker:
    """A plugin format's schemas read by its `parse`; they have no compatibility rules here."""

    def read(text: str, references: Sequence[Reference]) -> Any:
        try:
            return schema_format.parse(text, references)
        except ContractError as error:
            raise UnreadableSchema(error.reason) from error
        except Exception as error:  # a plugin may raise any exception for a schema it cannot read
            raise UnreadableSchema(str(error)) from error

    return SchemaChecker(read, lambda level, new, earlier: [])


def incompatibilities(
    level: Compatibility, schema_type: str, new: Any, earlier: Sequence[tuple[str, Any]]
) -> list[str]:
    """Why `new` (a reading of `schema_type`) breaks `level` against the earlier versions, each its
    schema type and reading; a change of schema type is one. UnreadableSchema when the check
    cannot compare them."""
    new_type = schema_type.upper()
    changed = [old_type.upper() for old_type, _ in earlier if old_type.upper() != new_type]
    if changed:
        return [f"the schema type changed from {changed[0]} to {new_type}"]
    checker = checker_for(new_type)
    if checker is None or not earlier:
        return []
    return checker.errors(level, new, [reading for _, reading in earlier])
