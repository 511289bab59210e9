"""What the deserialize benchmarks share: Kafka-shaped input on Parquet, the noop sink, and timing."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def kafka_topic(spark: Any, frames: list[bytes], path: str, name: str) -> Any:
    """Kafka-shaped rows (key, value, topic `name`, partition, offset) written once to two Parquet
    files, read back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(frames)
    table = pa.table(
        {
            "key": pa.nulls(n, pa.binary()),
            "value": pa.array(frames, pa.binary()),
            "topic": pa.array([name] * n),
            "partition": pa.array([i % 2 for i in range(n)], pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
        }
    )
    os.makedirs(path)
    half = n // 2
    pq.write_table(table.slice(0, half), os.path.join(path, "part-0.parquet"))
    pq.write_table(table.slice(half), os.path.join(path, "part-1.parquet"))
    return spark.read.parquet(path)


def best(run: Callable[[], Any], repeats: int = 3) -> float:
    """Seconds of the fastest of `repeats` runs, after one warm-up (codegen, Python workers, caches)."""
    run()
    seconds = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds = min(seconds, time.perf_counter() - start)
    return seconds


def noop(df: Any) -> Callable[[], None]:
    """A run writing `df` to Spark's noop sink: every row computed, nothing kept."""
    return lambda: df.write.format("noop").mode("overwrite").save()
