"""The `spark-contracts` command: `main` parses the arguments and runs one command module."""

from __future__ import annotations

from contracts.cli.main import main

__all__ = ["main"]
