"""Benchmark: Avro bodies decoded and encoded in the JVM by spark-avro vs fastavro (issue 16).

Run: `.venv/bin/python benchmarks/jvm_avro.py [rows]` (default 300,000; spark-avro from `make jars`).

The 8-field order record of benchmarks/deserialize.py, framed with schema id prefixes, on Parquet:
(a) `deserialize` + one READ CEL condition (native) with SPARK_CONTRACTS_AVRO_PATH=jvm, (b) the
ceiling: `from_avro` alone on the same bodies (`substring(value, 6)`), (c) the same `deserialize`
with SPARK_CONTRACTS_AVRO_PATH=python (fastavro in a `mapInArrow` pass); then (d) `serialize` + one
WRITE CEL condition on the JVM path, (e) its ceiling, `concat(prefix, to_avro(struct))` alone, and
(f) the same `serialize` on the fastavro path. Spark runs `local[2]` into the `noop` sink, each
way timed best of three after a warm-up.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _measure import best, kafka_topic, noop
from _session import session
from deserialize import READ_EXPR, V1, bodies, payload, records

from contracts import DataContract, LocalRegistry, Schema
from contracts.engine import jvm_avro
from contracts.formats.wire import encode_frame, encode_prefix

RULES = {
    "domainRules": [
        {
            "name": f"validOrder{mode.title()}",
            "kind": "CONDITION",
            "type": "CEL",
            "mode": mode,
            "expr": READ_EXPR,
        }
        for mode in ("READ", "WRITE")
    ]
}


def on_path(path: str, build: Callable[[], Any]) -> Any:
    """The DataFrame `build` makes with SPARK_CONTRACTS_AVRO_PATH=`path` (the path is chosen when
    the call plans it)."""
    os.environ[jvm_avro.PATH_ENV] = path
    try:
        return build()
    finally:
        del os.environ[jvm_avro.PATH_ENV]


def plan_text(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain()
    return out.getvalue()


def main() -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    spark = session("jvm-avro-benchmark", connectors=True)
    registry = LocalRegistry()
    schema_id = registry.register_schema("orders-value", Schema.from_dict(payload(V1, {}, RULES)))
    data = records(rows)
    frames = [encode_frame(schema_id, b) for b in bodies(data, V1)]
    work = tempfile.mkdtemp(prefix="jvm-avro-bench-")
    topic = kafka_topic(spark, frames, os.path.join(work, "topic"), "orders")
    contract = DataContract(registry, "orders-value")
    spark.createDataFrame(data, contract.spark_schema).write.parquet(os.path.join(work, "records"))
    records_df = spark.read.parquet(os.path.join(work, "records"))
    avro_json = json.dumps(V1)

    jvm_read = on_path("jvm", lambda: contract.deserialize(topic))
    python_read = on_path("python", lambda: contract.deserialize(topic))
    jvm_write = on_path("jvm", lambda: contract.serialize(records_df))
    python_write = on_path("python", lambda: contract.serialize(records_df))
    for df, used in [(jvm_read, "from_avro"), (jvm_write, "to_avro"), (python_read, "_DecodePass")]:
        assert used in plan_text(df), f"{used} is not in the plan"
    sample = jvm_read.where("id = 12345").collect()
    assert sample and sample[0]["ssn"] == data[12345]["ssn"], sample
    differ = jvm_write.exceptAll(python_write).count() + python_write.exceptAll(jvm_write).count()
    assert differ == 0, f"{differ} frames differ between to_avro and fastavro"

    ceiling_read = topic.select(from_avro(F.substring("value", 6, 2**31 - 1), avro_json).alias("r"), "offset")
    fields = [F.col(f"`{name}`") for name in contract.spark_schema.fieldNames()]
    ceiling_write = records_df.select(
        F.concat(F.lit(encode_prefix(schema_id)), to_avro(F.struct(*fields), avro_json)).alias("value")
    )

    results: dict[str, float] = {}

    def measure(label: str, run: Callable[[], Any]) -> None:
        seconds = best(run)
        results[label] = rows / seconds
        print(f"{label:<52} {rows:>9,} rows {seconds:7.2f} s {rows / seconds:>12,.0f} rows/s", flush=True)

    measure("(a) deserialize + READ CEL, JVM path", noop(jvm_read))
    measure("(b) from_avro alone", noop(ceiling_read))
    measure("(c) deserialize + READ CEL, fastavro path", noop(python_read))
    measure("(d) serialize + WRITE CEL, JVM path", noop(jvm_write))
    measure("(e) to_avro alone", noop(ceiling_write))
    measure("(f) serialize + WRITE CEL, fastavro path", noop(python_write))
    a, b, c, d, e, f = results.values()
    print()
    print(f"(a)/(b) {a / b:.2f}x (goal >= 0.8x)   (a)/(c) {a / c:.2f}x (goal >= 3x)")
    print(f"(d)/(e) {d / e:.2f}x (goal >= 0.8x)   (d)/(f) {d / f:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
