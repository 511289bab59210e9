"""The JSON view of Avro values (what JSONata reads): JSON only, and back exactly as written."""

from __future__ import annotations

import io
from typing import Any

from avro_strategies import schemas_and_records
from fastavro import schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis_profiles import examples

from contracts.formats.avro import parse_schema
from contracts.formats.avro.json_view import from_json_view, has_json_view, to_json_view
from executors.jsonata.runtime import Bounds, evaluate, parse


def alike_branches(schema: Any, named: dict[str, Any]) -> bool:
    """Whether some union holds two branches whose JSON views share a JSON type, one of them
    converted (a string and bytes): its values come back as the branch that takes them as they are."""
    if isinstance(schema, str):
        return False
    if isinstance(schema, list):
        resolved = [named.get(b, {"type": b}) if isinstance(b, str) else b for b in schema]
        kinds = [_view_kind(r) for r in resolved]
        converted = [k for k, r in zip(kinds, resolved, strict=True) if k and has_json_view(r)]
        return any(kinds.count(k) > 1 for k in converted) or any(alike_branches(b, named) for b in resolved)
    if schema["type"] == "record":
        return any(alike_branches(f["type"], named) for f in schema["fields"])
    if schema["type"] in ("array", "map"):
        return alike_branches(schema["items" if schema["type"] == "array" else "values"], named)
    return False


def _view_kind(schema: dict[str, Any]) -> str:
    if schema["type"] in ("string", "enum", "bytes", "fixed"):
        return "string"
    return "number" if schema["type"] in ("int", "long", "float", "double") else ""


def avro_bytes(record: Any, schema: Any) -> bytes:
    buffer = io.BytesIO()
    schemaless_writer(buffer, schema, record)
    return buffer.getvalue()


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schemas_and_records())
def test_the_json_view_of_random_records_is_json_and_comes_back_as_written(
    drawn: tuple[Any, list[Any]],
) -> None:
    schema, records = drawn
    for record in records:
        view = to_json_view(record, schema)
        assert evaluate(parse("$"), view, Bounds()) == view
        back = from_json_view(view, schema)
        assert to_json_view(back, schema) == view
        if not alike_branches(schema, schema["__named_schemas"]):
            assert avro_bytes(back, schema) == avro_bytes(record, schema)


def test_a_union_value_comes_back_as_the_branch_that_holds_it_as_it_is() -> None:
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    schema = parse_schema(
        {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "string", millis]}]}
    )
    assert from_json_view({"u": "later"}, schema) == {"u": "later"}
    assert from_json_view({"u": 1000}, schema)["u"].isoformat() == "1970-01-01T00:00:01+00:00"
    # Branches alike in JSON: a string stays a string, so bytes read as JSON come back as one.
    alike = parse_schema(
        {"type": "record", "name": "A", "fields": [{"name": "a", "type": ["string", "bytes"]}]}
    )
    assert to_json_view({"a": b"\xff"}, alike) == {"a": "\xff"}
    assert from_json_view({"a": "\xff"}, alike) == {"a": "\xff"}
