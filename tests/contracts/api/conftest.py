"""Fixtures of the DataFrame API tests: a local DLQ sink, the users DataFrame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dataframe_users import ROWS

from actions.dlq.local_topic import LocalTopicSink


@pytest.fixture
def sink(tmp_path: Path) -> LocalTopicSink:
    return LocalTopicSink(tmp_path / "dlq")


@pytest.fixture
def users(spark: Any) -> Any:
    return spark.createDataFrame(ROWS, "id long, name string, email string, age int")
