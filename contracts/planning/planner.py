"""A contract's planner: compiles its plans, and the writer versions its records may come from,
each with its migrations to the target (docs/semantics.md §6, §11.2)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Protocol

from actions.builtin import checked_topic
from actions.dlq.redaction import Redaction, redaction_for
from actions.protocol import Action, ActionContext, ActionPlan, Effect
from contracts.codes import NOT_REGISTERED, VERSION_NOT_FOUND
from contracts.errors import ContractError, RegistryError, SerializationError
from contracts.formats.protocol import SchemaFormat
from contracts.formats.wire import SchemaRef, describe, writer_schema
from contracts.model import RegisteredSchema, RuleMode
from contracts.planning import loader, migration
from contracts.planning.migration import Resolver
from contracts.planning.plan import Plan, SkippedRuleSet, build_plan
from contracts.plugins import ACTION_GROUP, EXECUTOR_GROUP, PluginRegistry, load_group, with_overrides
from contracts.registry import Registry
from executors import as_executor
from executors.config import RuleConfig


class NativeMigrating(Protocol):
    """A writer version's migration compiled to Spark expressions (the engine's
    `NativeMigration`): `resolved` analyses it on a session, None when it must run in Python."""

    def resolved(self, spark: Any) -> Any: ...


class NativeCompiler(Protocol):
    """What compiles a migration to Spark expressions where exact (the engine's
    `native_migration`): the planner is handed it, as planning lies below the engine."""

    def __call__(
        self,
        versions: Mapping[int, loader.ContractVersion],
        writer: int,
        target: int,
        executors: Any,
        resolve_action: Resolver,
    ) -> NativeMigrating | None: ...


@dataclass(frozen=True)
class WriterVersion:
    """A version records may have been written with: its parsed schema and the migrations to the
    target, as plans for the Python passes and, where exact, as Columns (`native`)."""

    version: int
    schema: Any
    schema_format: SchemaFormat
    migrations: tuple[Plan, ...] = ()
    native: NativeMigrating | None = None
    failure: str | None = None
    """Why its records cannot reach the target (a version in between was deleted), if they cannot."""
    payload: Plan | None = None
    """Its READ encoding rules, which turn a payload into the body its format reads (§11.5); None
    when it has none."""

    @cached_property
    def chooses_branches(self) -> bool:
        """Whether a plain value may not tell its type (an Avro union's branch): see `needs_tags`."""
        return self.schema_format.needs_tags(self.schema)


@dataclass(frozen=True)
class LateWriters:
    """Resolves a schema id or GUID that was not prefetched (registered later) through the registry,
    and builds its migrations with the contract's plugins; the decoder caches it per worker."""

    registry: Registry
    subject: str
    build: Callable[[RegisteredSchema], WriterVersion]
    """A picklable callable: the planner's `writer`."""

    def resolve(self, schema: SchemaRef) -> WriterVersion:
        """Raise SerializationError when the id or GUID is unknown ("unknown schema guid …") or
        belongs to another subject."""
        found = writer_schema(self.registry, schema)
        try:
            registered = self.registry.lookup_schema(self.subject, found)
        except RegistryError as e:
            if e.error_code in NOT_REGISTERED:
                raise SerializationError(
                    f"{describe(schema)} is not registered under subject {self.subject!r}"
                ) from e
            raise
        return self.build(registered)


@dataclass(frozen=True)
class ContractPlanner:
    """The contract's registry and plugins: compiles plans on the driver and, for schema ids first
    seen while decoding, on the workers (so it must pickle)."""

    registry: Registry
    subject: str
    target: loader.ContractVersion
    executors: PluginRegistry[Any]
    actions: PluginRegistry[Any]
    # What executors get besides the schema: the rule config (its values never print) and the
    # registry holding the DEKs (the contract's own, also when a replay wraps `registry`).
    rule_config: RuleConfig = field(default_factory=RuleConfig)
    keys: Registry | None = field(default=None, repr=False)
    protobuf_message: str | None = None
    """The Protobuf record message every version is read with (None: each file's first)."""
    natives: NativeCompiler | None = field(default=None, repr=False)
    """What compiles a writer's migration to Spark expressions (None: none is, as in `lint`)."""

    def resolve_action(self, name: str, ctx: ActionContext) -> ActionPlan:
        action = self.actions.find(name)
        if action is None:
            raise ContractError(
                f"unknown action {name!r} (known: {', '.join(self.actions.names())})",
                subject=ctx.subject,
                version=ctx.version,
                rule=ctx.rule.name,
                position="onFailure/onSuccess",
            )
        planned = action.plan(ctx)
        if planned.effect is not Effect.FAIL and planned.topic is not None:
            # A custom action's topic (a DLQ, or a copy's) is checked as the DLQ action checks its own.
            position = f"actions.{name}.topic"
            checked_topic(
                planned.topic, position, subject=ctx.subject, version=ctx.version, rule=ctx.rule.name
            )
        return planned

    def plan(self, mode: RuleMode, read_only: bool = False) -> Plan:
        """The target's plan for `mode`; `read_only` compiles it to be shown, creating nothing."""
        version = self.target
        rules = loader.rules_for(version, mode, self.executors)
        keys = self.keys if self.keys is not None else self.registry
        compiled = loader.compile_rules(
            version, mode, rules, self.executors, None, keys, self.rule_config, read_only
        )
        skipped = tuple(rule.name for rule in loader.skipped_rules(version, mode, self.executors))
        where = (version.subject, version.version, mode, version.spark_type)
        note = SkippedRuleSet(version.schema.rules.enable_at, skipped) if skipped else None
        left_out = [
            (rule.name, why)
            for rule, why in loader.left_out_rules(version.schema.rules.domain_rules, mode, self.executors)
        ]
        redaction = dlq_redaction(version, self.rule_config)
        return build_plan(
            *where, compiled, self.resolve_action, skipped=note, left_out=left_out, redaction=redaction
        )

    def payload(self, version: loader.ContractVersion, mode: RuleMode, read_only: bool = False) -> Plan:
        """The encoding rules of `version` in WRITE or READ, compiled and planned (§11.5);
        `read_only` as for `plan`. A ContractError for an action sending copies, which they cannot."""
        rules = loader.encoding_rules_for(version, mode, self.executors)
        keys = self.keys if self.keys is not None else self.registry
        compiled = loader.compile_rules(
            version, mode, rules, self.executors, None, keys, self.rule_config, read_only
        )
        where = (version.subject, version.version, mode, version.spark_type)
        plan = build_plan(*where, compiled, self.resolve_action)
        for copy in plan.copies:
            raise ContractError(
                f"action {copy.action.name!r} sends copies to topic {copy.action.topic!r}, which"
                " encoding rules cannot do",
                subject=plan.subject,
                version=plan.version,
                rule=copy.rule.rule.name,
                position="onFailure/onSuccess",
            )
        return plan

    def load(self, version: int) -> loader.ContractVersion:
        if version == self.target.version:
            return self.target
        registered = self.registry.get_version(self.subject, version)
        return loader.load_version(self.registry, registered, self.protobuf_message)

    def writer(self, registered: RegisteredSchema) -> WriterVersion:
        """A writer version with its migration plans to the target (docs/semantics.md §6)."""
        writer = registered.version
        target = self.target.version
        low, high = sorted((writer, target))
        try:
            versions = {number: self.load(number) for number in range(low, high + 1)}
        except RegistryError as e:
            if e.error_code != VERSION_NOT_FOUND:
                raise
            # A deleted version in between fails only the records whose migration crosses it.
            failure = f"cannot migrate from version {writer} to {target}: {e}"
            loaded = self.load(writer)
            return WriterVersion(writer, loaded.parsed, loaded.format, failure=failure)
        except ContractError as e:
            if e.position != "protobuf_message":
                raise
            # A version without the chosen message fails only the records whose migration crosses it.
            failure = f"cannot read version {writer}'s records as version {target}'s: {e}"
            loaded = loader.load_version(self.registry, registered)  # its first message: never decoded
            return WriterVersion(writer, loaded.parsed, loaded.format, failure=failure)
        plans = migration.migration_plans(versions, writer, target, self.executors, self.resolve_action)
        compile_native = self.natives
        native = (
            None
            if compile_native is None
            else compile_native(versions, writer, target, self.executors, self.resolve_action)
        )
        loaded = versions[writer]
        payload = self.payload(loaded, RuleMode.READ)
        return WriterVersion(
            writer, loaded.parsed, loaded.format, plans, native, payload=payload if payload.rules else None
        )

    def explain_migration(self, writer_version: int) -> str:
        """How `writer_version`'s records reach the target: its migration steps and where they run."""
        writer = self.writer(self.registry.get_version(self.subject, writer_version))
        target = self.target.version
        header = f"Migration of subject {self.subject!r} from version {writer_version} to {target}"
        if writer.failure is not None:
            return f"{header}: impossible, {writer.failure}"
        if not any(plan.rules for plan in writer.migrations):
            return f"{header}: no migration rules"
        how = "as Spark expressions" if writer.native is not None else "in Python (a mapInArrow pass)"
        steps = [plan.explain() for plan in writer.migrations if plan.rules]
        indented = ["  " + line for step in steps for line in step.splitlines()]
        return "\n".join([f"{header}, run {how}:", *indented])

    def versions(self) -> list[RegisteredSchema]:
        """Every version of the subject, as the registry holds them now."""
        return [self.registry.get_version(self.subject, v) for v in self.registry.get_versions(self.subject)]

    def writers(self, versions: Iterable[RegisteredSchema] | None = None) -> dict[int, WriterVersion]:
        """Every version of the subject (or of `versions`) by schema id, prefetched on the driver."""
        chosen = self.versions() if versions is None else versions
        return {registered.schema_id: self.writer(registered) for registered in chosen}


class CompiledPlans:
    """A contract's plans, each compiled once, when first needed (docs/semantics.md §11.2). A plan
    is first compiled read-only (to check the contract at load, and to show it), creating nothing;
    a mode's plan whose steps cannot run as compiled read-only (ENCRYPT's WRITE, which looks for
    no DEK) is compiled again when the mode first runs, so a reader never creates a writer's keys.
    Shared by the copies of a contract that pin a run id, and by threads."""

    def __init__(self, planner: ContractPlanner) -> None:
        self._planner = planner
        self._lock = threading.Lock()
        self._rules: dict[tuple[RuleMode, bool], Plan] = {}
        self._encoding: dict[tuple[RuleMode, bool], Plan] = {}

    def __getstate__(self) -> dict[str, Any]:
        # A contract travels to Spark Connect's server inside a foreachBatch function: its plans go
        # along, its lock (which does not pickle) is made anew there.
        return {key: value for key, value in self.__dict__.items() if key != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def rules(self, mode: RuleMode, run: bool = True) -> Plan:
        """The domain rules' plan of `mode`: the one that runs, or (not `run`) one to show."""
        return self._once(self._rules, mode, run, lambda read_only: self._planner.plan(mode, read_only))

    def encoding(self, mode: RuleMode, run: bool = True) -> Plan:
        """The target's encoding rules of `mode` (§11.5), as `rules` compiles them."""
        target = self._planner.target
        return self._once(
            self._encoding, mode, run, lambda read_only: self._planner.payload(target, mode, read_only)
        )

    def _once(
        self,
        cache: dict[tuple[RuleMode, bool], Plan],
        mode: RuleMode,
        run: bool,
        compile: Callable[[bool], Plan],
    ) -> Plan:
        with self._lock:
            running = cache.get((mode, True))
            if running is not None:
                return running
            shown = cache.get((mode, False))
            if shown is None:
                shown = cache[(mode, False)] = compile(True)
            if not run:
                return shown
            cache[(mode, True)] = running = shown if shown.runnable else compile(False)
            return running


def executor_registry(executors: Iterable[Any] | Mapping[str, Any] | None) -> PluginRegistry[Any]:
    """The executors a contract runs with: every registered one, with `executors` added or replacing
    (a sequence by type, a mapping by rule name)."""
    base = load_group(EXECUTOR_GROUP, attrgetter("type"), as_executor)
    if isinstance(executors, Mapping):
        return with_overrides(base, {name: as_executor(e) for name, e in executors.items()})
    return with_overrides(base, [as_executor(e) for e in executors] if executors else None)


def action_registry(actions: Iterable[Action] | None) -> PluginRegistry[Any]:
    """The actions a contract runs with: every registered one, with `actions` added or replacing."""
    return with_overrides(load_group(ACTION_GROUP, attrgetter("name")), actions)


def dlq_redaction(target: loader.ContractVersion, config: Mapping[str, str]) -> Redaction | None:
    """What a WRITE-side DLQ value of `target` redacts: the fields its ENCRYPT rules tag, unless
    the rule config's `dlq.redact.rule.types` names other types (or none)."""
    rules = target.schema.rules.domain_rules
    return redaction_for(rules, target.parsed, target.format, target.metadata_tags, config)
