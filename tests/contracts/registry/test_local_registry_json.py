"""LocalRegistry stores JSON Schemas: validity, compatibility as Confluent checks JSON subjects,
a schema type that does not change, and normalization."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts import LocalRegistry, Schema
from contracts.codes import INCOMPATIBLE_SCHEMA
from contracts.errors import RegistryError

SUBJECT = "orders-value"
OPEN: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["id"],
}


def json_schema(document: dict[str, Any]) -> Schema:
    return Schema.from_dict({"schemaType": "JSON", "schema": json.dumps(document)})


def test_json_schemas_register_and_reload(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registered = registry.register_schema(SUBJECT, json_schema(OPEN))
    reloaded = LocalRegistry(tmp_path).get_schema(registered)
    assert reloaded.schema_type == "JSON" and json.loads(reloaded.schema_str) == OPEN


def test_an_invalid_json_schema_is_42201() -> None:
    registry = LocalRegistry()
    for text in ("{not json", json.dumps({"type": "strnig"})):
        with pytest.raises(RegistryError) as refused:
            registry.register_schema(SUBJECT, Schema.from_dict({"schemaType": "JSON", "schema": text}))
        assert (refused.value.status, refused.value.error_code) == (422, 42201)
        assert "Invalid schema of type JSON" in str(refused.value)


def test_backward_compatibility_is_checked_as_for_json_subjects() -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, json_schema(OPEN))
    # A new required property breaks BACKWARD (old data lacks it); an optional one does not here.
    required = {
        **OPEN,
        "properties": {**OPEN["properties"], "qty": {"type": "integer"}},
        "required": ["id", "qty"],
    }
    with pytest.raises(RegistryError) as refused:
        registry.register_schema(SUBJECT, json_schema(required))
    assert (refused.value.status, refused.value.error_code) == (409, INCOMPATIBLE_SCHEMA)
    assert "new schema cannot read old" in str(refused.value)
    assert not registry.test_compatibility(SUBJECT, json_schema(required))
    narrowed = {**OPEN, "properties": {**OPEN["properties"], "note": {"type": "string", "maxLength": 5}}}
    assert not registry.test_compatibility(SUBJECT, json_schema(narrowed))
    widened = {**OPEN, "required": []}
    assert registry.test_compatibility(SUBJECT, json_schema(widened))
    assert registry.register_schema(SUBJECT, json_schema(widened)) == 2


def test_the_schema_type_of_a_subject_does_not_change() -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, json_schema(OPEN))
    avro = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
    with pytest.raises(RegistryError, match="the schema type changed from JSON to AVRO"):
        registry.register_schema(
            SUBJECT, Schema.from_dict({"schemaType": "AVRO", "schema": json.dumps(avro)})
        )


def test_a_json_schema_is_normalized_to_canonical_json() -> None:
    registry = LocalRegistry()
    text = '{"type": "object",  "properties": {"id": {"type": "integer"}}}'
    schema = Schema.from_dict({"schemaType": "JSON", "schema": text})
    registered = registry.register_schema(SUBJECT, schema, normalize=True)
    assert (
        registry.get_schema(registered).schema_str
        == '{"properties":{"id":{"type":"integer"}},"type":"object"}'
    )
