"""CEL_FIELD in Python: a rule's expression on each field its format's walk visits (docs/semantics.md §4).

This is the fallback when a rule's per-field expressions cannot compile to Spark, and the Python
twin of every native step (migrations inside a decode run rules in Python). The walk is the
format's (`FieldWalking.field_walk`, the reference's walk for Avro, JSON Schema and Protobuf);
the expression sees the values of the reference's primitive field types, with `name`, `fullName`,
`typeName`, `tags` and `message` (the record holding the field, with the new values of the fields
a transform visited before it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.formats.fields import PRIMITIVE_TYPE_NAMES, ConditionFailed, FieldWalking, WalkedField
from contracts.model import RuleKind
from executors.cel.runtime import compile_program, evaluation_reason, field_activation
from executors.protocol import BatchEvaluator, Outcome


def _message(field: WalkedField) -> Any:
    """The record holding the field, as CEL reads it (with its format's presence, §3.6)."""
    return field.containing if field.view is None else field.view(field.containing)


class _EvaluationFailed(Exception):
    """A visited field's guard or expression raised a CEL error: the rule fails with its text."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class CelFieldBatch:
    """Picklable factory of the Python evaluator of one CEL_FIELD rule over records of `schema`,
    walked by `schema_format`."""

    expr: str
    kind: RuleKind
    rule_tags: frozenset[str]
    schema: Any
    schema_format: FieldWalking
    metadata_tags: Mapping[str, tuple[str, ...]]
    failure_message: str

    def __call__(self) -> BatchEvaluator:
        return _Evaluator(self)


class _Evaluator:
    """Evaluates the rule over records, each walked from the top-level record."""

    def __init__(self, spec: CelFieldBatch) -> None:
        self.spec = spec
        self.condition = spec.kind is RuleKind.CONDITION
        # The shared CEL runtime: compiled once per worker, with the Confluent builtins (§3).
        self.program = compile_program(spec.expr)
        # Converting the containing record per field is the walk's main cost: only when it is read.
        self.reads_message = "message" in spec.expr
        self.walk = spec.schema_format.field_walk(
            spec.schema, spec.metadata_tags, spec.rule_tags, self._visit, self.condition
        )

    def __call__(self, records: Sequence[Any]) -> Sequence[Outcome]:
        return [self._one(record) for record in records]

    def _one(self, record: Any) -> Outcome:
        try:
            result = self.walk(record)
        except ConditionFailed as failed:
            # The reference's text, and the field that failed (docs/semantics.md §4.4).
            where = f" (field {failed.field})" if failed.field else ""
            return Outcome(False, record, self.spec.failure_message + where)
        except _EvaluationFailed as e:
            return Outcome(False, record, e.reason)
        except Exception as e:  # an evaluation error is a rule failure (docs/semantics.md §2.2)
            return Outcome(False, record, evaluation_reason(e))
        return Outcome(True, record if self.condition else result)

    def _visit(self, field: WalkedField, value: Any) -> Any:
        # The reference's executor hands back an enum, a fixed or a container unchanged.
        if field.type_name not in PRIMITIVE_TYPE_NAMES:
            return value
        activation = field_activation(
            value,
            field.name,
            field.full_name,
            field.type_name,
            sorted(field.tags),
            _message(field) if self.reads_message else None,
        )
        outcome = self.program.field(activation, value, condition=self.condition)
        if not outcome.passed:
            raise _EvaluationFailed(f"{outcome.reason} (field {field.full_name})")
        return outcome.value
