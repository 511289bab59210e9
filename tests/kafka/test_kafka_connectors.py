"""The Spark connectors `make jars` fetches load into the test session (classic and Connect) and work
with this PySpark: spark-avro reads and writes the Avro bodies of Confluent frames."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.wire import HEADER_SIZE

SUBJECT = "tiny-value"
TINY = {
    "type": "record",
    "name": "Tiny",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "score", "type": "double"},
    ],
}


def test_spark_avro_reads_and_writes_the_body_of_a_frame_serialize_wrote(spark: Any) -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict({"schema": json.dumps(TINY)}))
    contract = DataContract(registry, SUBJECT)
    rows = [(1, "one", 0.5), (2, None, -3.25), (3, "três", 1e300)]
    df = spark.createDataFrame(rows, "id long, name string, score double")
    schema = json.dumps(TINY)
    bodies = contract.serialize(df).select(F.substring("value", HEADER_SIZE + 1, 1 << 20).alias("body"))
    decoded = bodies.select("body", from_avro("body", schema).alias("record"))
    encoded = decoded.select("body", "record.*", to_avro("record", schema).alias("spark_body"))
    result = encoded.orderBy("id").collect()
    assert [(r["id"], r["name"], r["score"]) for r in result] == rows
    # spark-avro's encoder writes the same bytes as the project's (fastavro) frame body.
    assert all(r["body"] == r["spark_body"] for r in result)
