"""The CEL_FIELD executor: a rule's `guard ; expr` applied to every primitive field, as Confluent runs it.

Each rule compiles once into a native step — the schema walk unrolled into Column expressions,
with every guard that reads only `name`, `fullName`, `typeName` or `tags` decided per field at
plan time — carrying its Python twin (the reference's walk over Avro-shaped records). A rule
whose expressions cannot all compile natively runs as that Python step instead (docs/semantics.md §4).
In a migration the walk follows the schema of the record the rule receives, as Confluent's Java
client walks a migration's record (docs/semantics.md §4.7); there a result that may not fit its
field keeps the rule in Python, which makes such a record undecodable rather than failing the rule.
On Protobuf records the rule compiles natively the same way over the message's tree
(executors/cel_field/protobuf_tree.py), its Python twin the Protobuf walk (§4.9); on JSON Schema
records it runs the JSON walk in Python (§4.8).
"""

from __future__ import annotations

import dataclasses

from contracts.errors import ContractError
from contracts.model import Rule, RuleKind
from executors.cel import _runtime
from executors.cel._native_types import NotNativeCel
from executors.cel_field.batch import CelFieldBatch
from executors.cel_field.json_walk import CelFieldJsonBatch
from executors.cel_field.native import NativePlanner
from executors.cel_field.protobuf_tree import protobuf_tree
from executors.cel_field.protobuf_walk import CelFieldProtobufBatch
from executors.cel_field.schema import Node, schema_tree
from executors.protocol import (
    BatchStep,
    MigrationResult,
    NativeStep,
    RuleContext,
    Step,
    condition_failure_message,
)

__all__ = ["CelFieldExecutor", "same_tag_transforms"]


def same_tag_transforms(rule: Rule, other: Rule) -> bool:
    """The reference's field rules (CEL_FIELD, ENCRYPT): a TRANSFORM is superseded by another of
    the same type and mode with the same non-empty tags that runs before it (docs/semantics.md §4.5)."""
    return (
        bool(rule.tags)
        and rule.kind is RuleKind.TRANSFORM
        and other.kind is RuleKind.TRANSFORM
        and rule.mode is other.mode
        and rule.type == other.type
        and tuple(rule.tags) == tuple(other.tags)
    )


class CelFieldExecutor:
    """Compiles CEL_FIELD rules: natively when every visited field's expression compiles, else in Python."""

    type = "CEL_FIELD"
    native_migration = MigrationResult.RECORD

    def supersedes(self, rule: Rule, other: Rule) -> bool:
        return same_tag_transforms(rule, other)

    def compile(self, ctx: RuleContext) -> Step:
        rule = ctx.rule
        schema_type = ctx.schema_format.schema_type
        if schema_type not in ("AVRO", "JSON", "PROTOBUF"):
            raise ContractError(
                f"CEL_FIELD rules on {schema_type} records are not supported yet", position="type"
            )
        expr = rule.expr or ""
        # Compiling on the driver reports syntax errors at load, with their position.
        _runtime.compile_program(expr, subject=ctx.subject, version=ctx.version, rule=rule.name)
        walked = f"fields tagged {', '.join(sorted(rule.tags))}" if rule.tags else "every field"
        if schema_type == "JSON":
            walk_batch = CelFieldJsonBatch(
                expr,
                rule.kind,
                frozenset(rule.tags),
                ctx.schema.document,
                dict(ctx.metadata_tags),
                condition_failure_message(rule),
            )
            return BatchStep(
                walk_batch,
                explain=f"touches {walked} its guard accepts, decided per record",
                why_not_native="no native form for records of a JSON schema (Avro and Protobuf only)",
            )
        twin = CelFieldProtobufBatch if schema_type == "PROTOBUF" else CelFieldBatch
        batch = BatchStep(
            twin(
                expr,
                rule.kind,
                frozenset(rule.tags),
                ctx.schema,
                dict(ctx.metadata_tags),
                condition_failure_message(rule),
            )
        )
        tree: Node = (
            protobuf_tree(ctx.schema, ctx.metadata_tags)
            if schema_type == "PROTOBUF"
            else schema_tree(ctx.schema, ctx.metadata_tags)
        )
        try:
            planner = NativePlanner(
                expr,
                rule.kind,
                frozenset(rule.tags),
                fitting_only=ctx.mode.is_migration,
                protobuf=schema_type == "PROTOBUF",
            )
            build = planner.plan(tree, ctx.spark_type)
        except NotNativeCel as unsupported:
            return dataclasses.replace(
                batch,
                explain=f"touches {walked} its guard accepts, decided per record",
                why_not_native=f"no native form for {unsupported}",
            )
        return NativeStep(build, batch=batch, explain=f"touches {', '.join(planner.touched) or 'no field'}")
