"""The loader: resolve a contract version in the registry and compile its rules once.

A contract that cannot run fails here, before Spark does anything, with a ContractError naming
subject, version, rule and position (docs/semantics.md §9.9). A rule whose type no executor
handles is the exception: the Confluent clients treat it as a failure of that rule for every
record (docs/semantics.md §2.1), and so does the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts import formats
from contracts.errors import ContractError
from contracts.formats.protocol import Reference, SchemaFormat, choose_record
from contracts.model import RegisteredSchema, Rule, RuleMode, Schema
from contracts.plugins import PluginRegistry
from contracts.registry import Registry
from contracts.registry.references import registry_references
from executors.protocol import Executor, RuleContext, Step, supersedes_rule

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class ContractVersion:
    """One registered version of a subject, parsed by its format: the parsed schema (whatever the
    format's `parse` returns), Spark type and rules."""

    subject: str
    version: int
    schema_id: int
    schema: Schema
    parsed: Any
    named_schemas: tuple[Reference, ...]
    spark_type: StructType
    format: SchemaFormat
    guid: str | None = None
    """The schema's GUID, when the registry gave one."""

    @property
    def properties(self) -> dict[str, str]:
        return self.schema.properties

    @property
    def metadata_tags(self) -> dict[str, tuple[str, ...]]:
        return dict(self.schema.metadata.tags) if self.schema.metadata is not None else {}


def resolve(
    registry: Registry,
    subject: str,
    version: int | None = None,
    use_latest_with_metadata: Mapping[str, str] | None = None,
) -> RegisteredSchema:
    """The target version: an explicit one, else the latest matching the metadata, else the latest."""
    if version is not None and use_latest_with_metadata:
        raise ContractError("give either version or use_latest_with_metadata, not both", subject=subject)
    if version is not None:
        return registry.get_version(subject, version)
    if use_latest_with_metadata:
        return registry.get_latest_with_metadata(subject, dict(use_latest_with_metadata))
    return registry.get_latest_version(subject)


def load_version(
    registry: Registry, registered: RegisteredSchema, protobuf_message: str | None = None
) -> ContractVersion:
    """Parse a registered version (with its references) with the format of its schema type; a
    Protobuf schema's record is the message `protobuf_message` names (default: the file's first)."""
    schema = registered.schema
    where = {"subject": registered.subject, "version": registered.version}
    try:
        schema_format = _format(schema.schema_type, protobuf_message)
        # Dependencies first, each fetched once, within bounds (docs/semantics.md §1.1).
        named = tuple(found.named() for found in registry_references(registry, schema))
    except ContractError as e:
        raise e.at(**where) from e.__cause__
    try:
        parsed = schema_format.parse(schema.schema_str, named)
        spark_type = schema_format.spark_type(parsed)
    except ContractError as e:
        raise e.at(**where) from e.__cause__
    except Exception as e:
        raise ContractError(
            f"invalid {schema_format.schema_type} schema: {e}", position="schema", **where
        ) from e
    return ContractVersion(
        subject=registered.subject,
        version=registered.version,
        schema_id=registered.schema_id,
        schema=schema,
        parsed=parsed,
        named_schemas=named,
        spark_type=spark_type,
        format=schema_format,
        guid=registered.guid,
    )


def _format(schema_type: str, protobuf_message: str | None) -> SchemaFormat:
    """The format of `schema_type`, choosing the record (a Protobuf message) when one is named."""
    schema_format = formats.get(schema_type)
    return schema_format if protobuf_message is None else choose_record(schema_format, protobuf_message)


def rules_for(version: ContractVersion, mode: RuleMode, executors: PluginRegistry[Executor]) -> list[Rule]:
    """The domain rules that run in WRITE or READ, in running order (docs/semantics.md §2); none when
    the rule set's `enableAt` leaves it to the server."""
    if mode not in (RuleMode.WRITE, RuleMode.READ):
        raise ContractError(f"mode must be WRITE or READ, not {mode.value}", subject=version.subject)
    rule_set = version.schema.rules
    return running_order(rule_set.domain_rules, mode, executors) if rule_set.runs_on_client else []


def encoding_rules_for(
    version: ContractVersion, mode: RuleMode, executors: PluginRegistry[Executor]
) -> list[Rule]:
    """The encoding rules (on the serialized payload) that run in WRITE or READ, in running order
    (docs/semantics.md §11.5); none when the rule set's `enableAt` leaves it to the server."""
    rule_set = version.schema.rules
    return running_order(rule_set.encoding_rules, mode, executors) if rule_set.runs_on_client else []


def migration_rules_for(
    version: ContractVersion, mode: RuleMode, executors: PluginRegistry[Executor]
) -> list[Rule]:
    """The migration rules of `version` that run in UPGRADE or DOWNGRADE, in running order; none
    when the rule set's `enableAt` leaves it to the server."""
    rule_set = version.schema.rules
    return running_order(rule_set.migration_rules, mode, executors) if rule_set.runs_on_client else []


def skipped_rules(
    version: ContractVersion, mode: RuleMode, executors: PluginRegistry[Executor]
) -> list[Rule]:
    """The domain rules of WRITE or READ that the rule set's `enableAt` makes a client skip (none
    when the set runs on clients), in running order."""
    rule_set = version.schema.rules
    return [] if rule_set.runs_on_client else running_order(rule_set.domain_rules, mode, executors)


def running_order(rules: Sequence[Rule], mode: RuleMode, executors: PluginRegistry[Executor]) -> list[Rule]:
    """The rules of one ruleSet list that run in `mode`, in running order.

    READ and DOWNGRADE run the list backwards. A rule its executor says is superseded by another
    (CEL_FIELD's transforms with the same tags) is dropped, judged on the whole list as the
    reference does — disabled rules and other modes included — before those are filtered out
    (docs/semantics.md §2, §4.5).
    """
    ordered = _in_running_order(rules, mode)
    superseded = superseded_rules(ordered, mode, executors)
    return [
        rule
        for index, rule in enumerate(ordered)
        if index not in superseded and not rule.disabled and rule.mode.matches(mode)
    ]


def left_out_rules(
    rules: Sequence[Rule], mode: RuleMode, executors: PluginRegistry[Executor]
) -> list[tuple[Rule, str]]:
    """The rules of one ruleSet list written for `mode` that do not run in it, with why: disabled,
    or superseded by another rule (named), in running order — what `explain()` lists besides the
    rules that run."""
    ordered = _in_running_order(rules, mode)
    superseding = superseding_rules(ordered, mode, executors)
    left_out = []
    for index, rule in enumerate(ordered):
        if not rule.mode.matches(mode):
            continue
        if rule.disabled:
            left_out.append((rule, "disabled"))
        elif index in superseding:
            left_out.append((rule, f"superseded by rule {ordered[superseding[index]].name!r}"))
    return left_out


def _in_running_order(rules: Sequence[Rule], mode: RuleMode) -> list[Rule]:
    """READ and DOWNGRADE run a ruleSet list backwards, WRITE and UPGRADE forwards."""
    return list(rules)[::-1] if mode in (RuleMode.READ, RuleMode.DOWNGRADE) else list(rules)


def superseded_rules(
    rules: Sequence[Rule], mode: RuleMode, executors: PluginRegistry[Executor]
) -> frozenset[int]:
    """Indexes of the rules (in running order for `mode`) that another one supersedes: in WRITE and
    UPGRADE a rule that runs before it, in READ and DOWNGRADE one that runs after it (the list is
    reversed there, so the reference's "earlier" is the original order's), as each rule's executor
    judges (`supersedes`); no supersession in the other modes."""
    return frozenset(superseding_rules(rules, mode, executors))


def superseding_rules(
    rules: Sequence[Rule], mode: RuleMode, executors: PluginRegistry[Executor]
) -> dict[int, int]:
    """`superseded_rules`, each with the index of the first rule that supersedes it."""
    if mode in (RuleMode.WRITE, RuleMode.UPGRADE):
        others = lambda index: range(index)  # noqa: E731
    elif mode in (RuleMode.READ, RuleMode.DOWNGRADE):
        others = lambda index: range(index + 1, len(rules))  # noqa: E731
    else:
        return {}
    superseding = {}
    for index, rule in enumerate(rules):
        executor = executors.find(rule.type, rule_name=rule.name)
        if executor is None:
            continue
        by = next((o for o in others(index) if supersedes_rule(executor, rule, rules[o])), None)
        if by is not None:
            superseding[index] = by
    return superseding


def rule_context(
    version: ContractVersion,
    mode: RuleMode,
    rule: Rule,
    record: ContractVersion | None = None,
    registry: Registry | None = None,
    rule_config: Mapping[str, str] | None = None,
    read_only: bool = False,
    lint: bool = False,
    target: ContractVersion | None = None,
) -> RuleContext:
    """The context of `rule`, registered in `version`, over records of `record` (by default the
    version's own; a migration rule runs on the record it migrates), with the contract's registry
    and rule config; its parameters fall back to the metadata properties of `target` (by default
    `version`; a DOWNGRADE step's the version it leads to, as the reference's)."""
    shape = record or version
    return RuleContext(
        rule=rule,
        subject=version.subject,
        version=version.version,
        mode=mode,
        schema=shape.parsed,
        spark_type=shape.spark_type,
        metadata_tags=version.metadata_tags,
        properties=(target or version).properties,
        named_schemas=shape.named_schemas,
        schema_format=shape.format,
        registry=registry,
        rule_config=rule_config if rule_config is not None else {},
        read_only=read_only,
        lint=lint,
    )


def compile_rules(
    version: ContractVersion,
    mode: RuleMode,
    rules: list[Rule],
    executors: PluginRegistry[Executor],
    record: ContractVersion | None = None,
    registry: Registry | None = None,
    rule_config: Mapping[str, str] | None = None,
    read_only: bool = False,
    lint: bool = False,
    target: ContractVersion | None = None,
) -> list[tuple[RuleContext, Step | None]]:
    """Compile each rule once with the executor for its name or type; None where there is none.

    `record` is the version whose records the rules receive, when not `version`'s own: a
    migration rule runs on the record of the version it migrates from. `read_only` compiles to
    check or show only, changing nothing in the registry; `lint` (read-only too) also refuses a
    rule that would fail every record. `target` is as for `rule_context`."""
    compiled: list[tuple[RuleContext, Step | None]] = []
    for rule in rules:
        ctx = rule_context(
            version, mode, rule, record, registry, rule_config, read_only or lint, lint, target
        )
        executor = executors.find(rule.type, rule_name=rule.name)
        if executor is None:
            compiled.append((ctx, None))
            continue
        try:
            step = executor.compile(ctx)
        except ContractError as e:
            reason = e.reason
            if record is not None and record.version != version.version:
                reason += f" (in {mode.value} the rule receives records of version {record.version})"
            raise ContractError(
                reason,
                subject=version.subject,
                version=version.version,
                rule=rule.name,
                position=e.position,
            ) from e
        compiled.append((ctx, step))
    return compiled
