"""Property tests of JSON Schema records: random schemas in the mapped subset and records valid for
them go through bodies, Arrow and Spark and come back as they were, an absent property and a null one
apart (docs/semantics.md §1.5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from json_strategies import schemas_and_records

from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.avro import arrow_type
from contracts.formats.json_schema import JsonSchemaFormat, validate

JSON = JsonSchemaFormat()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_records())
def test_records_survive_bodies_and_arrow(drawn: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    schema, records = drawn
    parsed = JSON.parse(json.dumps(schema), ())
    record_type = arrow_type(JSON.spark_type(parsed))
    for record in records:
        validate(record, parsed)
        assert JSON.decode(JSON.encode(record, parsed), parsed, None) == record
    read = JSON.read_struct(JSON.to_struct(records, parsed, record_type), parsed)
    assert read.records == records  # absent and null properties apart (docs/semantics.md §1.5)
    for record in read.records:
        validate(record, parsed)


@pytest.mark.spark
@settings(
    max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(schemas_and_records(count=4))
def test_serialize_then_deserialize_gives_the_rows_back(
    spark: Any, tmp_path: Path, drawn: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    schema, records = drawn
    registry = LocalRegistry()
    registry.register_schema(
        "drawn-value", Schema.from_dict({"schemaType": "JSON", "schema": json.dumps(schema)})
    )
    contract = DataContract(registry, "drawn-value")
    parsed = JSON.parse(json.dumps(schema), ())
    column = JSON.to_struct(records, parsed, arrow_type(contract.spark_schema))
    df = spark.createDataFrame(pa.Table.from_batches([pa.RecordBatch.from_struct_array(column)]))
    # deserialize adds the `_absent` mask after the record's fields (docs/semantics.md §1.5).
    assert contract.deserialize(contract.serialize(df)).select(*df.columns).collect() == df.collect()


CONSTRAINED = st.one_of(
    st.builds(lambda n: {"type": "string", "minLength": n}, st.integers(0, 3)),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 3)),
    st.sampled_from([{"type": "string", "pattern": "^[a-c]+$"}, {"type": "string", "pattern": "[0-9]"}]),
    st.builds(lambda n: {"type": "integer", "minimum": n}, st.integers(-3, 3)),
    st.builds(lambda n: {"type": "number", "exclusiveMaximum": n}, st.floats(-3, 3)),
    st.builds(lambda n: {"type": "integer", "multipleOf": n}, st.integers(1, 4)),
    st.sampled_from([{"const": 1}, {"const": "a"}, {"enum": [1, "1", True, None]}, {"type": "null"}]),
    st.builds(lambda n: {"type": "array", "items": {"type": "integer"}, "maxItems": n}, st.integers(0, 2)),
    st.just({"type": "array", "items": {"type": ["integer", "boolean"]}, "uniqueItems": True}),
)
ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.text("abc1", max_size=3),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text("abq", max_size=2), children, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def constrained_objects(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    properties = draw(st.dictionaries(st.sampled_from(["a", "b", "q"]), CONSTRAINED, min_size=1, max_size=3))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if draw(st.booleans()):
        schema["required"] = sorted(properties)[:1]
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    value = draw(
        st.one_of(ANY_JSON, st.dictionaries(st.sampled_from(["a", "b", "q", "z"]), ANY_JSON, max_size=4))
    )
    return schema, value


@settings(max_examples=examples(400), deadline=None)
@given(constrained_objects())
def test_the_fast_validator_never_accepts_what_jsonschema_refuses(drawn: tuple[dict[str, Any], Any]) -> None:
    """`validate` takes fastjsonschema's "valid" without asking jsonschema: the two must agree there."""
    from fastjsonschema import JsonSchemaValueException, compile
    from jsonschema.validators import validator_for

    schema, value = drawn
    fast = compile(schema, use_default=False, use_formats=False)
    try:
        fast(value)
    except JsonSchemaValueException:
        return
    assert validator_for(schema)(schema).is_valid(value), (schema, value)
