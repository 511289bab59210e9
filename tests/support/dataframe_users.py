"""The users contract the DataFrame API tests run: its schema, rows and rules, a contract of it, an
executor that keeps a rule in Python, and the one-line failure of a job."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from pyspark import cloudpickle

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from executors.protocol import NativeStep

# PythonOnly runs on Spark workers, which cannot import test helpers.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUBJECT = "users-value"
USER = {
    "type": "record",
    "name": "User",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "age", "type": "int"},
    ],
}
ROWS = [(1, "ann", "ann@example.com", 30), (2, "bob", None, -1), (3, "", "not-an-email", 0)]


def register(registry: LocalRegistry, domain_rules: list[dict[str, Any]], **metadata: str) -> None:
    payload: dict[str, Any] = {"schema": json.dumps(USER), "ruleSet": {"domainRules": domain_rules}}
    if metadata:
        payload["metadata"] = {"properties": metadata}
    registry.register_schema(SUBJECT, Schema.from_dict(payload))


def rule(name: str, expr: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": expr, **fields}


def make_contract(sink: LocalTopicSink, rules: list[dict[str, Any]], **options: Any) -> DataContract:
    registry = LocalRegistry()
    register(registry, rules)
    return DataContract(registry, SUBJECT, dlq_sink=sink, **options)


def ids(df: Any) -> list[int]:
    return sorted(row["id"] for row in df.collect())


@dataclass(frozen=True)
class PythonOnly:
    """A built-in executor whose rules run in the Python pass: its native steps' Python twins."""

    executor: Any

    @property
    def type(self) -> str:
        return str(self.executor.type)

    def compile(self, ctx: Any) -> Any:
        step = self.executor.compile(ctx)
        return step.batch if isinstance(step, NativeStep) else step


def failure(df: Any) -> tuple[str, str, str]:
    """The exception a Spark action on `df` raises: its class name, first line and whole text."""
    with pytest.raises(Exception) as caught:
        df.collect()
    text = str(caught.value)
    return type(caught.value).__name__, text.splitlines()[0], text


def suffix(name: str, suffix: str, mode: str = "WRITEREAD") -> dict[str, Any]:
    """A CEL TRANSFORM rule appending `suffix` to the name."""
    expr = (
        "{'id': message.id, 'name': message.name + '"
        + suffix
        + "', 'email': message.email, 'age': message.age}"
    )
    return {"name": name, "kind": "TRANSFORM", "type": "CEL", "mode": mode, "expr": expr}
