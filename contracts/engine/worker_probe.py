"""The function `workers.check_workers` runs on a Python worker: pickled by value, it needs nothing
but the standard library there, so it answers on a worker that cannot import this package."""

from __future__ import annotations


def describe() -> str:
    """The worker's interpreter, whether it finds the package and which release, as JSON."""
    import importlib.metadata
    import importlib.util
    import json
    import sys

    found = all(importlib.util.find_spec(name) is not None for name in ("contracts", "executors", "actions"))
    try:
        version: str | None = importlib.metadata.version("spark-data-contracts")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return json.dumps({"python": sys.executable, "found": found, "version": version})
