"""The example contracts load and compile as `make demo` uses them (the demo itself runs its own session)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contracts import DataContract, LocalRegistry

REGISTRY = Path(__file__).resolve().parent.parent / "examples" / "registry"


def test_every_example_version_compiles_natively(spark: Any) -> None:
    registry = LocalRegistry(REGISTRY)
    assert registry.get_versions("orders-value") == [1, 2, 3]
    for version in (1, 2, 3):
        contract = DataContract(registry, "orders-value", version=version)
        for mode in ("WRITE", "READ"):
            assert "(python)" not in contract.explain(mode)
    latest = DataContract(
        registry, "orders-value", use_latest_with_metadata={"application.major.version": "1"}
    )
    assert latest.version == 2
    assert "maskPii" in DataContract(registry, "orders-value").explain("READ")


def test_the_example_migrates_a_major_1_record_to_major_2(spark: Any) -> None:
    registry = LocalRegistry(REGISTRY)
    reader = DataContract(registry, "orders-value", version=3)
    columns = (
        "orderId string, customerEmail string, amount double, currency string, channel string, note string"
    )
    df = spark.createDataFrame([("o-1", "a@b.example", 12.5, "EUR", "app", None)], columns)
    (row,) = reader.read(df, writer_version=1).collect()
    assert (row["orderId"], row["email"], row["coupon"]) == ("o-1", "<masked>", None)


def test_the_json_example_routes_bad_keys_and_values_and_masks_pii(spark: Any, tmp_path: Path) -> None:
    path = Path(__file__).resolve().parent.parent / "examples" / "payments_json.py"
    spec = importlib.util.spec_from_file_location("payments_json", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    counts = example.run(spark, tmp_path, n=30)

    # Amounts 3, 10, 17, 24 are not positive; keys 4, 13, 22 are malformed.
    assert counts == {"valid": 23, "payments-bad-keys": 3, "payments-rejected": 4}
    (row,) = spark.read.parquet(str(tmp_path / "topic")).where("key is not null").limit(1).collect()
    assert row["value"][0] == 0 and row["key"][0] == 0


@pytest.mark.one_pass  # the example's own process and session
def test_an_example_prints_its_own_output_only_no_spark_start_up_lines_or_warnings(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "payments_json.py"
    env = {key: value for key, value in os.environ.items() if key not in ("SPARK_REMOTE", "PYSPARK_PYTHON")}
    ran = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stderr == ""
    assert "READ rule outcomes of the values (payments-value):" in ran.stdout
    assert "READ rule outcomes of the keys (payments-key):" in ran.stdout
