"""A pass-through Arrow function that counts the partitions Spark reads, by marker files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pyspark import cloudpickle

# Spark's Python workers cannot import the tests' helpers: the class travels by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class ReadCounter:
    """Passes batches through and leaves one marker file per partition it reads."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def __call__(self, batches: Any) -> Any:
        import uuid

        Path(self.directory, uuid.uuid4().hex).touch()
        yield from batches
