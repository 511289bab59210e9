"""Structured Streaming: a `foreachBatch` function that enforces a contract on each micro-batch.

Each micro-batch's rejected rows go to their DLQ topics while its valid rows are computed, and the
valid rows are handed to the caller's writer. The DLQ output of a micro-batch is named by the
query's name and the batch id, so a micro-batch that Spark runs again after a restart replaces
what it wrote instead of duplicating it (docs/semantics.md §9.4).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from contracts.engine.read_twice import read_once
from contracts.errors import ContractError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


APPLY = ("write", "read", "deserialize", "serialize")
_NAME = re.compile(r"[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,99}")


class BatchEnforcer(Protocol):
    """What a micro-batch writer needs of a contract (DataContract is one): its subject, a copy
    whose DLQ output is named by a run id, and `write`/`read`/`deserialize`/`serialize` by name."""

    subject: str

    def _with_run_id(self, run_id: str) -> BatchEnforcer: ...


@dataclass(frozen=True)
class MicroBatchWriter:
    """The picklable `foreachBatch` function made by `DataContract.foreach_batch`."""

    contract: BatchEnforcer
    write_valid: Callable[[DataFrame, int], None]
    name: str
    apply: str = "write"
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.apply not in APPLY:
            raise ContractError(
                f"foreach_batch applies one of {', '.join(APPLY)}, not {self.apply!r}",
                subject=self.contract.subject,
            )
        if any(option == "run_id" for option, _ in self.options):
            raise ContractError(
                "foreach_batch names each micro-batch's run itself (its name and the batch id):"
                " do not pass run_id",
                subject=self.contract.subject,
            )
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ContractError(
                f"foreach_batch name must be 1-100 letters, digits, '.', '_' or '-', not {self.name!r}",
                subject=self.contract.subject,
            )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Enforce the contract on one micro-batch and write its valid rows."""
        contract = self.contract._with_run_id(f"{self.name}-b{batch_id}")
        with read_once():
            valid = getattr(contract, self.apply)(batch, **dict(self.options))
        self.write_valid(valid, batch_id)
