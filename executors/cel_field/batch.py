"""CEL_FIELD in Python: the reference's field walk over Avro-shaped records, one rule at a time.

This is the fallback when a rule's per-field expressions cannot compile to Spark, and the Python
twin of every native step (migrations inside a decode run rules in Python). It mirrors
confluent-kafka 2.16.1's `common/avro.py` walk (docs/semantics.md §4): records field by field with the
record being rebuilt as `message`, arrays element by element, maps value by value, unions by the
first branch that validates the value, a null in a nullable union visited as typeName NULL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.model import RuleKind
from executors.cel import _runtime
from executors.cel_field.schema import Array, Field, Leaf, Map, Node, Record, Union, schema_tree
from executors.protocol import BatchEvaluator, Outcome


class _ConditionFailed(Exception):
    """A visited field's expression returned a plain false: the CONDITION fails (RuleConditionError)."""


class _EvaluationFailed(Exception):
    """A visited field's guard or expression raised a CEL error: the rule fails with its text."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class CelFieldBatch:
    """Picklable factory of the Python evaluator of one CEL_FIELD rule."""

    expr: str
    kind: RuleKind
    rule_tags: frozenset[str]
    schema: Any
    metadata_tags: Mapping[str, tuple[str, ...]]
    failure_message: str

    def __call__(self) -> BatchEvaluator:
        tree = schema_tree(self.schema, self.metadata_tags)
        return _Walker(self, tree)


class _Walker:
    """Evaluates the rule over records, each walked from the top-level record."""

    def __init__(self, spec: CelFieldBatch, tree: Node) -> None:
        self.spec = spec
        self.tree = tree
        self.condition = spec.kind is RuleKind.CONDITION
        # The shared CEL runtime: compiled once per worker, with the Confluent builtins
        # (docs/semantics.md §3).
        self.program = _runtime.compile_program(spec.expr)
        # Converting the containing record per field is the walk's main cost: only when it is read.
        self.reads_message = "message" in spec.expr

    def __call__(self, records: Sequence[Any]) -> Sequence[Outcome]:
        return [self._one(record) for record in records]

    def _one(self, record: Any) -> Outcome:
        try:
            result = self._visit(self.tree, record, None, None)
        except _ConditionFailed:
            return Outcome(False, record, self.spec.failure_message)
        except _EvaluationFailed as e:
            return Outcome(False, record, e.reason)
        except Exception as e:  # an evaluation error is a rule failure (docs/semantics.md §2.2)
            return Outcome(False, record, _runtime.evaluation_reason(e))
        return Outcome(True, record if self.condition else result)

    def _visit(self, node: Node, value: Any, field: Field | None, message: dict[str, Any] | None) -> Any:
        if isinstance(node, Union):
            branch = node.branch_for(value)
            return value if branch is None else self._visit(node.branches[branch], value, field, message)
        if isinstance(node, Array):
            if not isinstance(value, list):
                return value
            return [self._visit(node.items, item, field, message) for item in value]
        if isinstance(node, Map):
            if not isinstance(value, dict):
                return value
            return {key: self._visit(node.values, item, field, message) for key, item in value.items()}
        if isinstance(node, Record):
            return self._record(node, value) if isinstance(value, dict) else value
        return self._leaf(node, value, field, message)

    def _record(self, node: Record, value: dict[str, Any]) -> dict[str, Any]:
        # A copy, not the reference's in-place update, so a failed rule leaves the record as it was;
        # later fields still see earlier fields' new values through `message`.
        current = value if self.condition else dict(value)
        for field in node.fields:
            if field.name not in value:
                continue
            result = self._visit(field.node, current[field.name], field, current)
            if self.condition:
                # Only a plain false at field level fails: an array's list of results never does.
                if result is False:
                    raise _ConditionFailed
            else:
                current[field.name] = result
        return current

    def _leaf(self, leaf: Leaf, value: Any, field: Field | None, message: dict[str, Any] | None) -> Any:
        if field is None or not leaf.primitive:
            return value
        if self.spec.rule_tags and self.spec.rule_tags.isdisjoint(field.tags):
            return value
        activation = _runtime.field_activation(
            value,
            field.name,
            field.full_name,
            leaf.type_name,
            sorted(field.tags),
            message if self.reads_message else None,
        )
        outcome = self.program.field(activation, value, condition=self.condition)
        if not outcome.passed:
            raise _EvaluationFailed(outcome.reason)
        return outcome.value
