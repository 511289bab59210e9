"""Hypothesis round trip of the wire format (issue 5 §4): random schemas and records → serialize →
deserialize → the same records, and every frame a plain fastavro reader decodes (docs/semantics.md §8)."""

from __future__ import annotations

import decimal
import io
import json
from typing import Any

import fastavro
import pyarrow as pa
from avro_strategies import (
    PRIMITIVE_VALUES,
    SchemaBuilder,
    fastavro_round_trip,
    holds_list_of_nulls,
    values_for,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.avro import parse_schema, records_to_arrow, spark_to_avro_value

SUBJECT = "random-value"
ROW = "row"
"""A pass-through column carrying each record's index, so frames and rows can be matched to inputs."""

INT64 = (-(2**63), 2**63 - 1, -1, 0)
WIDEST = decimal.Decimal(10**38 - 1).scaleb(-9, decimal.Context(prec=40))
EDGE_FIELDS: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    # Fields every random schema also gets, with values drawn toward the edges that break codecs.
    "edgeLong": ("long", st.sampled_from(INT64) | PRIMITIVE_VALUES["long"]),
    "edgeText": (
        "string",
        st.sampled_from(["", "straße ☃", "𝄞 emoji 😀", "nul\x00byte"]) | st.text(max_size=8),
    ),
    "edgeWhen": (
        ["null", {"type": "long", "logicalType": "timestamp-micros"}],
        st.none() | values_for({"type": "long", "logicalType": "timestamp-micros"}, {}),
    ),
    "edgeMillis": (
        {"type": "long", "logicalType": "timestamp-millis"},
        values_for({"type": "long", "logicalType": "timestamp-millis"}, {}),
    ),
    "edgeDay": (
        {"type": "int", "logicalType": "date"},
        values_for({"type": "int", "logicalType": "date"}, {}),
    ),
    "edgeAmount": (
        {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9},
        st.sampled_from([WIDEST, WIDEST.copy_negate(), decimal.Decimal("0E-9")])
        | values_for({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}, {}),
    ),
}


@st.composite
def schemas_with_records(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    """A random record schema's text (nested types, unions, logical types, plus `EDGE_FIELDS`) and
    up to 8 valid records for it."""
    schema = SchemaBuilder(draw).record(0)
    # pyspark's createDataFrame casts the input table, and pyarrow's cast of a list of nulls leaves
    # it invalid ("list offsets larger than values array"): such input cannot be built here. The
    # engine's own passes read and write such lists (test_avro's lists-of-nulls tests).
    assume(not holds_list_of_nulls(schema))
    schema["fields"] += [{"name": name, "type": avro_type} for name, (avro_type, _) in EDGE_FIELDS.items()]
    text = json.dumps(schema)
    parsed = parse_schema(text)
    fields = {
        f["name"]: EDGE_FIELDS[f["name"]][1]
        if f["name"] in EDGE_FIELDS
        else values_for(f["type"], parsed["__named_schemas"])
        for f in parsed["fields"]
    }
    return text, draw(st.lists(st.fixed_dictionaries(fields), min_size=1, max_size=8))


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(case=schemas_with_records())
def test_random_records_survive_serialize_then_deserialize(
    spark: Any, tmp_path_factory: Any, case: tuple[str, list[dict[str, Any]]]
) -> None:
    from pyspark.sql.types import IntegerType, StructField, StructType

    text, generated = case
    parsed = parse_schema(text)
    # What a reader sees: fastavro's choice of union branch and float32 rounding applied once.
    records = fastavro_round_trip(generated, parsed)
    registry = LocalRegistry()
    schema_id = registry.register_schema(SUBJECT, Schema(text))
    sink = LocalTopicSink(tmp_path_factory.mktemp("dlq"))
    contract = DataContract(registry, SUBJECT, dlq_sink=sink)
    names = contract.spark_schema.fieldNames()
    assert names == [f["name"] for f in parsed["fields"]]
    # Through Arrow, not Python rows: Spark Connect's row conversion refuses decimals of more
    # than 28 digits (Python's default decimal context), which the edge amount has.
    batch = records_to_arrow(records, parsed)
    rows = pa.Table.from_batches([batch]).append_column(ROW, pa.array(range(len(records)), pa.int32()))
    df = spark.createDataFrame(
        rows, StructType([*contract.spark_schema.fields, StructField(ROW, IntegerType(), False)])
    )

    framed = contract.serialize(df)
    assert framed.columns == [ROW, "value"]
    frames = {row[ROW]: bytes(row["value"]) for row in framed.collect()}
    assert sorted(frames) == list(range(len(records)))
    for i, frame in frames.items():
        assert frame[:5] == b"\x00" + schema_id.to_bytes(4, "big")
        assert fastavro.schemaless_reader(io.BytesIO(frame[5:]), parsed) == records[i]

    back = contract.deserialize(framed)
    assert back.columns == [*names, ROW]
    read = {
        row[ROW]: spark_to_avro_value({name: row[name] for name in names}, parsed) for row in back.collect()
    }
    assert read == dict(enumerate(records))
    assert sink.topics() == []
