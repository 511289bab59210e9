"""The contract model: schemas, metadata and rule sets as the Schema Registry's JSON carries them.

Names and meanings mirror confluent-kafka-python's `schema_registry` so Confluent users need no
glossary. Every class reads and writes the registry's camelCase JSON with `from_dict`/`to_dict`
and round-trips it exactly: keys we do not model are kept in `extra`, and a key that was present
with its default value is written back (docs/semantics.md §1).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts.errors import ContractError


class RuleKind(str, enum.Enum):
    """CONDITION rules test a record; TRANSFORM rules replace it."""

    CONDITION = "CONDITION"
    TRANSFORM = "TRANSFORM"


class RuleMode(str, enum.Enum):
    """When a rule runs: migrations (UPGRADE/DOWNGRADE/UPDOWN) or domain (WRITE/READ/WRITEREAD)."""

    UPGRADE = "UPGRADE"
    DOWNGRADE = "DOWNGRADE"
    UPDOWN = "UPDOWN"
    WRITE = "WRITE"
    READ = "READ"
    WRITEREAD = "WRITEREAD"

    def matches(self, phase: RuleMode) -> bool:
        """Whether a rule declared with this mode runs in `phase` (docs/semantics.md §2)."""
        if self is phase:
            return True
        if self is RuleMode.WRITEREAD:
            return phase in (RuleMode.WRITE, RuleMode.READ)
        if self is RuleMode.UPDOWN:
            return phase in (RuleMode.UPGRADE, RuleMode.DOWNGRADE)
        return False

    @property
    def is_migration(self) -> bool:
        return self in _MIGRATION_MODES

    @property
    def is_pair(self) -> bool:
        """Modes whose actions may be an "A,B" pair, one per direction."""
        return self in (RuleMode.WRITEREAD, RuleMode.UPDOWN)


_MIGRATION_MODES = frozenset({RuleMode.UPGRADE, RuleMode.DOWNGRADE, RuleMode.UPDOWN})
_SECOND_DIRECTION = frozenset({RuleMode.READ, RuleMode.DOWNGRADE})


@dataclass(frozen=True)
class _Context:
    """Where a dict came from, so validation errors can say it."""

    subject: str | None = None
    version: int | None = None

    def error(self, message: str, *, rule: str | None = None, position: str | None = None) -> ContractError:
        return ContractError(
            message, subject=self.subject, version=self.version, rule=rule, position=position
        )


def _expect_mapping(value: Any, what: str, ctx: _Context, *, rule: str | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ctx.error(f"{what} must be a JSON object, got {type(value).__name__}", rule=rule, position=what)
    return value


def _string_list(value: Any, what: str, ctx: _Context, *, rule: str | None = None) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ctx.error(f"{what} must be a list of strings", rule=rule, position=what)
    return tuple(value)


def _string_map(value: Any, what: str, ctx: _Context, *, rule: str | None = None) -> dict[str, str]:
    mapping = _expect_mapping(value, what, ctx, rule=rule)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
        raise ctx.error(f"{what} must map strings to strings", rule=rule, position=what)
    return dict(mapping)


def _emit(out: dict[str, Any], key: str, value: Any, default: Any, present: frozenset[str]) -> None:
    """Write `key` when it differs from its default or the source JSON carried it."""
    if key in present or value != default:
        out[key] = value


@dataclass(frozen=True)
class Rule:
    """One data-contract rule (docs/semantics.md §1).

    A registry stores a rule without `kind` as TRANSFORM and without `mode` as WRITEREAD, which
    are therefore the defaults here.
    """

    name: str
    kind: RuleKind = RuleKind.TRANSFORM
    mode: RuleMode = RuleMode.WRITEREAD
    type: str = ""
    expr: str | None = None
    tags: tuple[str, ...] = ()
    params: dict[str, str] = field(default_factory=dict)
    on_success: str | None = None
    on_failure: str | None = None
    disabled: bool = False
    doc: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    _KEYS = (
        "name",
        "doc",
        "kind",
        "mode",
        "type",
        "tags",
        "params",
        "expr",
        "onSuccess",
        "onFailure",
        "disabled",
    )

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, subject: str | None = None, version: int | None = None
    ) -> Rule:
        ctx = _Context(subject, version)
        data = _expect_mapping(data, "rule", ctx)
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ctx.error("rule has no name", position="name")
        rule_type = data.get("type")
        if not isinstance(rule_type, str) or not rule_type:
            raise ctx.error("rule has no type", rule=name, position="type")
        kind = _enum(RuleKind, data.get("kind", RuleKind.TRANSFORM.value), "kind", ctx, name)
        mode = _enum(RuleMode, data.get("mode", RuleMode.WRITEREAD.value), "mode", ctx, name)
        for key in ("expr", "doc", "onSuccess", "onFailure"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise ctx.error(f"{key} must be a string", rule=name, position=key)
        disabled = data.get("disabled", False)
        if not isinstance(disabled, bool):
            raise ctx.error("disabled must be true or false", rule=name, position="disabled")
        rule = cls(
            name=name,
            kind=kind,
            mode=mode,
            type=rule_type,
            expr=data.get("expr"),
            tags=_string_list(data.get("tags", []), "tags", ctx, rule=name),
            params=_string_map(data.get("params", {}), "params", ctx, rule=name),
            on_success=data.get("onSuccess"),
            on_failure=data.get("onFailure"),
            disabled=disabled,
            doc=data.get("doc"),
            extra={k: v for k, v in data.items() if k not in cls._KEYS},
            present=frozenset(k for k in data if k in cls._KEYS),
        )
        rule.validate(subject=subject, version=version)
        return rule

    def validate(self, *, subject: str | None = None, version: int | None = None) -> None:
        """Reject actions that cannot be resolved: an "A,B" pair is only meaningful for WRITEREAD/UPDOWN."""
        ctx = _Context(subject, version)
        for key, action in (("onSuccess", self.on_success), ("onFailure", self.on_failure)):
            if action is not None and "," in action and not self.mode.is_pair:
                raise ctx.error(
                    f"{key} {action!r} is an action pair, allowed only for WRITEREAD and UPDOWN rules,"
                    f" not {self.mode.value}",
                    rule=self.name,
                    position=key,
                )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        p = self.present
        _emit(out, "doc", self.doc, None, p)
        _emit(out, "kind", self.kind.value, RuleKind.TRANSFORM.value, p)
        _emit(out, "mode", self.mode.value, RuleMode.WRITEREAD.value, p)
        out["type"] = self.type
        _emit(out, "tags", list(self.tags), [], p)
        _emit(out, "params", dict(self.params), {}, p)
        _emit(out, "expr", self.expr, None, p)
        _emit(out, "onSuccess", self.on_success, None, p)
        _emit(out, "onFailure", self.on_failure, None, p)
        _emit(out, "disabled", self.disabled, False, p)
        out.update(self.extra)
        return out

    def action_for(self, phase: RuleMode, outcome_failed: bool) -> str:
        """The action name to run in `phase`: defaults NONE on success and ERROR on failure; an
        "A,B" pair gives A for WRITE/UPGRADE and B for READ/DOWNGRADE, split but not trimmed
        (docs/semantics.md §2.3)."""
        declared = self.on_failure if outcome_failed else self.on_success
        default = "ERROR" if outcome_failed else "NONE"
        if not declared:
            return default
        if self.mode.is_pair and "," in declared:
            first, _, second = declared.partition(",")
            chosen = second if phase in _SECOND_DIRECTION else first
            return chosen or default
        return declared


def _enum(enum_type: type[enum.Enum], value: Any, key: str, ctx: _Context, rule: str) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        raise ctx.error(
            f"unknown {key} {value!r}; expected one of {allowed}", rule=rule, position=key
        ) from None


def _rule_list(data: Any, key: str, ctx: _Context) -> tuple[Rule, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ctx.error(f"{key} must be a list of rules", position=key)
    rules = tuple(Rule.from_dict(item, subject=ctx.subject, version=ctx.version) for item in data)
    seen: set[str] = set()
    for rule in rules:
        if rule.name in seen:
            raise ctx.error(f"duplicate rule name {rule.name!r} in {key}", rule=rule.name, position=key)
        seen.add(rule.name)
    return rules


@dataclass(frozen=True)
class RuleSet:
    """Migration rules (UPGRADE/DOWNGRADE/UPDOWN), domain rules (WRITE/READ/WRITEREAD), encoding
    rules, and `enableAt`: where the set runs (absent, ALL or CLIENT: on clients such as this
    engine; any other value, e.g. SERVER or GATEWAY: not on a client, which skips every rule)."""

    migration_rules: tuple[Rule, ...] = ()
    domain_rules: tuple[Rule, ...] = ()
    encoding_rules: tuple[Rule, ...] = ()
    enable_at: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    _KEYS = ("migrationRules", "domainRules", "encodingRules", "enableAt")
    _CLIENT_VALUES = (None, "ALL", "CLIENT")

    @property
    def runs_on_client(self) -> bool:
        """Whether a client runs this set's rules; the values are compared exactly, as the
        Confluent clients compare them."""
        return self.enable_at in self._CLIENT_VALUES

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, subject: str | None = None, version: int | None = None
    ) -> RuleSet:
        ctx = _Context(subject, version)
        data = _expect_mapping(data, "ruleSet", ctx)
        migration = _rule_list(data.get("migrationRules"), "migrationRules", ctx)
        domain = _rule_list(data.get("domainRules"), "domainRules", ctx)
        encoding = _rule_list(data.get("encodingRules"), "encodingRules", ctx)
        enable_at = data.get("enableAt")
        if enable_at is not None and not isinstance(enable_at, str):
            raise ctx.error("enableAt must be a string", position="enableAt")
        for rule in migration:
            if not rule.mode.is_migration:
                raise ctx.error(
                    f"migration rule has domain mode {rule.mode.value};"
                    " expected UPGRADE, DOWNGRADE or UPDOWN",
                    rule=rule.name,
                    position="mode",
                )
        for rule in domain:
            if rule.mode.is_migration:
                raise ctx.error(
                    f"domain rule has migration mode {rule.mode.value}; expected WRITE, READ or WRITEREAD",
                    rule=rule.name,
                    position="mode",
                )
        return cls(
            migration_rules=migration,
            domain_rules=domain,
            encoding_rules=encoding,
            enable_at=enable_at,
            extra={k: v for k, v in data.items() if k not in cls._KEYS},
            present=frozenset(k for k in data if k in cls._KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, rules in (
            ("migrationRules", self.migration_rules),
            ("domainRules", self.domain_rules),
            ("encodingRules", self.encoding_rules),
        ):
            _emit(out, key, [rule.to_dict() for rule in rules], [], self.present)
        _emit(out, "enableAt", self.enable_at, None, self.present)
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class Metadata:
    """Free-form properties, path-pattern tags and the names of sensitive properties."""

    tags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    sensitive: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    _KEYS = ("tags", "properties", "sensitive")

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, subject: str | None = None, version: int | None = None
    ) -> Metadata:
        ctx = _Context(subject, version)
        data = _expect_mapping(data, "metadata", ctx)
        tags = _expect_mapping(data.get("tags", {}), "metadata.tags", ctx)
        return cls(
            tags={path: _string_list(names, f"metadata.tags[{path!r}]", ctx) for path, names in tags.items()},
            properties=_string_map(data.get("properties", {}), "metadata.properties", ctx),
            sensitive=_string_list(data.get("sensitive", []), "metadata.sensitive", ctx),
            extra={k: v for k, v in data.items() if k not in cls._KEYS},
            present=frozenset(k for k in data if k in cls._KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        _emit(out, "tags", {path: list(names) for path, names in self.tags.items()}, {}, self.present)
        _emit(out, "properties", dict(self.properties), {}, self.present)
        _emit(out, "sensitive", list(self.sensitive), [], self.present)
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class SchemaReference:
    """A named reference to a type registered under another subject and version."""

    name: str
    subject: str
    version: int

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, subject: str | None = None, version: int | None = None
    ) -> SchemaReference:
        ctx = _Context(subject, version)
        data = _expect_mapping(data, "reference", ctx)
        try:
            return cls(name=str(data["name"]), subject=str(data["subject"]), version=int(data["version"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ctx.error(f"reference needs name, subject and version: {e}", position="references") from e

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema as registered: its text, type, references, metadata and rule set."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    metadata: Metadata | None = None
    rule_set: RuleSet | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    _KEYS = ("schema", "schemaType", "references", "metadata", "ruleSet")

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, subject: str | None = None, version: int | None = None
    ) -> Schema:
        ctx = _Context(subject, version)
        data = _expect_mapping(data, "schema", ctx)
        schema_str = data.get("schema")
        if not isinstance(schema_str, str):
            raise ctx.error("payload has no 'schema' string", position="schema")
        references = data.get("references") or []
        if not isinstance(references, list):
            raise ctx.error("references must be a list", position="references")
        metadata = data.get("metadata")
        rule_set = data.get("ruleSet")
        return cls(
            schema_str=schema_str,
            schema_type=str(data.get("schemaType", "AVRO")),
            references=tuple(
                SchemaReference.from_dict(r, subject=subject, version=version) for r in references
            ),
            metadata=None
            if metadata is None
            else Metadata.from_dict(metadata, subject=subject, version=version),
            rule_set=None
            if rule_set is None
            else RuleSet.from_dict(rule_set, subject=subject, version=version),
            extra={k: v for k, v in data.items() if k not in cls._KEYS and k not in _REGISTERED_KEYS},
            present=frozenset(k for k in data if k in cls._KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        _emit(out, "schemaType", self.schema_type, "AVRO", self.present)
        out["schema"] = self.schema_str
        _emit(out, "references", [r.to_dict() for r in self.references], [], self.present)
        if self.metadata is not None:
            out["metadata"] = self.metadata.to_dict()
        if self.rule_set is not None:
            out["ruleSet"] = self.rule_set.to_dict()
        out.update(self.extra)
        return out

    @property
    def rules(self) -> RuleSet:
        """The rule set, empty when the schema has none."""
        return self.rule_set if self.rule_set is not None else RuleSet()

    @property
    def properties(self) -> dict[str, str]:
        """Metadata properties, empty when the schema has no metadata."""
        return dict(self.metadata.properties) if self.metadata is not None else {}

    def with_changes(self, **changes: Any) -> Schema:
        """A copy with some fields replaced (metadata or rule set merged by the registry, say)."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "present"}
        values.update(changes)
        return Schema(**values, present=self.present)


_REGISTERED_KEYS = ("id", "subject", "version", "guid")


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema together with where it is registered: its global id, subject and version, and its
    GUID when the registry gives one (Confluent Schema Registry 8 and LocalRegistry do)."""

    schema_id: int
    schema: Schema
    subject: str
    version: int
    guid: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegisteredSchema:
        ctx = _Context(data.get("subject") if isinstance(data, Mapping) else None)
        data = _expect_mapping(data, "registered schema", ctx)
        try:
            subject, version, schema_id = str(data["subject"]), int(data["version"]), int(data["id"])
        except (KeyError, TypeError, ValueError) as e:
            raise ctx.error(f"registered schema needs id, subject and version: {e}") from e
        guid = data.get("guid")
        if guid is not None and not isinstance(guid, str):
            raise ctx.error(f"registered schema's guid must be a string, not {guid!r}")
        return cls(
            schema_id=schema_id,
            schema=Schema.from_dict(data, subject=subject, version=version),
            subject=subject,
            version=version,
            guid=guid,
        )

    def to_dict(self) -> dict[str, Any]:
        guid = {} if self.guid is None else {"guid": self.guid}
        return {
            "subject": self.subject,
            "version": self.version,
            "id": self.schema_id,
            **guid,
            **self.schema.to_dict(),
        }


def merge_metadata(*layers: Metadata | None) -> Metadata | None:
    """Merge metadata layers, later ones winning key by key (registry default < schema < override)."""
    present = [layer for layer in layers if layer is not None]
    if not present:
        return None
    tags: dict[str, tuple[str, ...]] = {}
    properties: dict[str, str] = {}
    sensitive: list[str] = []
    extra: dict[str, Any] = {}
    for layer in present:
        tags.update(layer.tags)
        properties.update(layer.properties)
        sensitive.extend(name for name in layer.sensitive if name not in sensitive)
        extra.update(layer.extra)
    return Metadata(tags=tags, properties=properties, sensitive=tuple(sensitive), extra=extra)


def merge_rule_sets(*layers: RuleSet | None) -> RuleSet | None:
    """Merge rule sets list by list (registry default < schema < override); the last layer that
    says where the set runs (`enableAt`) decides it."""
    present = [layer for layer in layers if layer is not None]
    if not present:
        return None

    def merged(lists: Iterable[tuple[Rule, ...]]) -> tuple[Rule, ...]:
        # As the registry does: a later layer's rule drops the earlier rule of its name and is
        # appended after the earlier layer's remaining rules.
        result: list[Rule] = []
        for rules in lists:
            names = {rule.name for rule in rules}
            result = [rule for rule in result if rule.name not in names] + list(rules)
        return tuple(result)

    return RuleSet(
        migration_rules=merged(layer.migration_rules for layer in present),
        domain_rules=merged(layer.domain_rules for layer in present),
        encoding_rules=merged(layer.encoding_rules for layer in present),
        enable_at=next((layer.enable_at for layer in reversed(present) if layer.enable_at is not None), None),
    )
