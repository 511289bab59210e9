"""LocalRegistry: the embedded registry, backed by a directory of JSON contracts or by memory alone.

It assigns ids and versions, merges config metadata/rule sets, checks compatibility and answers
errors the way Confluent's Schema Registry does (docs/semantics.md §1), so code tested against it
behaves the same against the real one. Directory layout::

    <root>/config.json                 optional global config, e.g. {"compatibility": "BACKWARD"}
    <root>/<subject>/config.json       optional per-subject config (same keys)
    <root>/<subject>/<version>.json    one version: the REST register payload {"schemaType", "schema",
                                       "references", "metadata", "ruleSet"}, plus "id" and "guid"
                                       once assigned

Subject directory names are percent-encoded, a leading dot too; empty or very long names are
hashed, with a `subject.json` naming the subject (`_layout` says how). Version files written by
hand may omit "id": ids are then assigned on load as registering the files in order would
(subjects sorted, versions ascending; a schema seen before shares its id; explicit ids are never
reused). A version file without "guid" (written by hand, or by a release before GUIDs) gets the
GUID Confluent's registry derives from the schema's content (`contracts.registry.guid`), which is
the one registering it would write, so nothing needs rewriting; a file's own "guid" (as `pull`
writes the remote registry's) is kept. Registering through the API writes the version file with
its "id" and "guid"; a soft-deleted version carries "deleted": true. A permanent delete first
records the highest id handed out, so a later process never hands it out again. Every write is
atomic (temp file, fsync, rename).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.codes import (
    INVALID_COMPATIBILITY_LEVEL,
    INVALID_SCHEMA,
    INVALID_VERSION,
    SCHEMA_NOT_FOUND,
    SCHEMA_VERSION_NOT_SOFT_DELETED,
    SCHEMA_VERSION_SOFT_DELETED,
    SUBJECT_NOT_FOUND,
    SUBJECT_NOT_SOFT_DELETED,
    SUBJECT_SOFT_DELETED,
    VERSION_NOT_FOUND,
)
from contracts.errors import ContractError, RegistryError
from contracts.registry.references import Resolved, referenced_schemas

try:
    import fcntl
except ImportError:  # not POSIX: only threads of one process are kept apart
    fcntl = None  # type: ignore[assignment]
from contracts.model import (
    Metadata,
    RegisteredSchema,
    Rule,
    RuleSet,
    Schema,
    SchemaReference,
    merge_metadata,
    merge_rule_sets,
)
from contracts.registry.checkers import CHECKERS, UnreadableSchema, checker_for, incompatibilities
from contracts.registry.compatibility import (
    Compatibility,
    checked_against,
    compatibility_level,
)
from contracts.registry.dek import DEFAULT_ALGORITHM, Dek, Kek
from contracts.registry.guid import canonical_guid, schema_guid
from contracts.registry.layout import (
    CONFIG_FILE,
    MAX_ID,
    SUBJECT_FILE,
    check_subject,
    is_id,
    json_files,
    new_subject_directory,
    read_high_water,
    read_json,
    registry_files,
    storage_error,
    subject_directories,
    version_of,
    write_high_water,
    write_json,
)
from contracts.registry.local_dek import LocalDekStore

_DEFAULT_CONFIG: dict[str, Any] = {"compatibility": Compatibility.BACKWARD.value}
_CONFIG_KEYS = frozenset(
    {
        "compatibility",
        "compatibilityGroup",
        "defaultMetadata",
        "overrideMetadata",
        "defaultRuleSet",
        "overrideRuleSet",
        "normalize",
    }
)
_PRIMITIVE_NAMES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


@dataclass
class _Version:
    """One version of a subject as stored."""

    version: int
    schema_id: int
    schema: Schema
    guid: str
    deleted: bool = False


@dataclass
class _State:
    """Everything the registry knows; rebuilt from disk whenever the directory changes."""

    subjects: dict[str, list[_Version]] = field(default_factory=dict)
    schemas: dict[int, Schema] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    guids: dict[str, int] = field(default_factory=dict)
    """Schema id by GUID, and GUID by schema id: one each way."""
    guid_by_id: dict[int, str] = field(default_factory=dict)
    config: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    directories: dict[str, Path] = field(default_factory=dict)
    max_id: int = 0

    def live(self, subject: str) -> list[_Version]:
        return [v for v in self.subjects.get(subject, []) if not v.deleted]

    def add(self, subject: str, entry: _Version) -> None:
        self.subjects.setdefault(subject, []).append(entry)
        self.schemas.setdefault(entry.schema_id, entry.schema)
        self.ids.setdefault(_identity(entry.schema), entry.schema_id)
        self.guids.setdefault(entry.guid, entry.schema_id)
        self.guid_by_id.setdefault(entry.schema_id, entry.guid)
        self.max_id = max(self.max_id, entry.schema_id)


def _not_found(kind: str, message: str) -> RegistryError:
    codes = {"subject": SUBJECT_NOT_FOUND, "version": VERSION_NOT_FOUND, "schema": SCHEMA_NOT_FOUND}
    return RegistryError(message, status=404, error_code=codes[kind])


def _is_avro(schema: Schema) -> bool:
    return schema.schema_type.upper() == "AVRO"


def _is_protobuf(schema: Schema) -> bool:
    return schema.schema_type.upper() == "PROTOBUF"


def _invalid_schema(message: str) -> RegistryError:
    return RegistryError(message, status=422, error_code=INVALID_SCHEMA)


def _unknown_type(schema: Schema) -> RegistryError:
    """42201 for a schema type no checker reads (contracts/registry/checkers.py)."""
    return _invalid_schema(
        f"Invalid schema type {schema.schema_type}: LocalRegistry stores {', '.join(CHECKERS)}"
    )


def _invalid_version(version: object) -> RegistryError:
    return RegistryError(
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
        status=422,
        error_code=INVALID_VERSION,
    )


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _identity(schema: Schema) -> str:
    """What makes two registrations "the same schema": text, type, references, metadata, ruleSet."""
    return _canonical_json(
        [
            schema.schema_type,
            schema.schema_str,
            [r.to_dict() for r in schema.references],
            None if schema.metadata is None else schema.metadata.to_dict(),
            None if schema.rule_set is None else schema.rule_set.to_dict(),
        ]
    )


def _explicit_rule(rule: Rule) -> Rule:
    return dataclasses.replace(rule, present=rule.present | {"kind", "mode"})


def _as_stored(schema: Schema) -> Schema:
    """Rules with `kind` and `mode` written out, as the registry stores them (docs/semantics.md §1)."""
    rules = schema.rule_set
    if rules is None:
        return schema
    stored = dataclasses.replace(
        rules,
        migration_rules=tuple(_explicit_rule(r) for r in rules.migration_rules),
        domain_rules=tuple(_explicit_rule(r) for r in rules.domain_rules),
        encoding_rules=tuple(_explicit_rule(r) for r in rules.encoding_rules),
    )
    return schema.with_changes(rule_set=stored)


def _normalized_text(schema: Any) -> str:
    """Canonical text: full names, no namespace keys, sorted keys, no whitespace."""
    return _canonical_json(_normalize_node(schema, ""))


def _normalize_node(node: Any, namespace: str) -> Any:
    if isinstance(node, list):
        return [_normalize_node(branch, namespace) for branch in node]
    if isinstance(node, str):
        return _full_name(node, namespace) if node not in _PRIMITIVE_NAMES else node
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "namespace"}
    if node.get("type") in ("record", "error", "enum", "fixed"):
        full = _full_name(node["name"], node.get("namespace", namespace))
        out["name"] = full
        namespace = full.rpartition(".")[0]
    if "fields" in node:
        out["fields"] = [{**f, "type": _normalize_node(f["type"], namespace)} for f in node["fields"]]
    for key in ("items", "values"):
        if key in node:
            out[key] = _normalize_node(node[key], namespace)
    if isinstance(node.get("type"), list | dict):
        out["type"] = _normalize_node(node["type"], namespace)
    return out


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _metadata(config: Mapping[str, Any], key: str) -> Metadata | None:
    value = config.get(key)
    return None if value is None else Metadata.from_dict(value)


def _rule_set(config: Mapping[str, Any], key: str) -> RuleSet | None:
    value = config.get(key)
    return None if value is None else RuleSet.from_dict(value)


def _effective(schema: Schema, config: Mapping[str, Any], previous: Schema | None) -> Schema:
    """The schema with config defaults under and overrides over its own metadata and rule set; a
    schema that gives none keeps the previous version's (docs/semantics.md §1, Confluent 7.4+)."""
    own_metadata = schema.metadata
    own_rules = schema.rule_set
    if previous is not None:
        own_metadata = previous.metadata if own_metadata is None else own_metadata
        own_rules = previous.rule_set if own_rules is None else own_rules
    metadata = _layered(
        merge_metadata,
        _metadata(config, "defaultMetadata"),
        own_metadata,
        _metadata(config, "overrideMetadata"),
    )
    rule_set = _layered(
        merge_rule_sets,
        _rule_set(config, "defaultRuleSet"),
        own_rules,
        _rule_set(config, "overrideRuleSet"),
    )
    return _as_stored(schema.with_changes(metadata=metadata, rule_set=rule_set))


def _layered(merge: Callable[..., Any], default: Any, own: Any, override: Any) -> Any:
    """`own` untouched when the config has neither layer, else default < own < override."""
    if default is None and override is None:
        return own
    return merge(default, own, override)


def _parse_version(version: int | str) -> int | None:
    """A version number, or None for "latest" (also -1, as the REST API accepts); else 42202."""
    if version in ("latest", -1, "-1"):
        return None
    if isinstance(version, bool):
        raise _invalid_version(version)
    if isinstance(version, str) and version.isascii() and version.isdigit():
        version = int(version)
    if isinstance(version, int) and 1 <= version <= MAX_ID:
        return version
    raise _invalid_version(version)


def _check_creatable(given: str, path: Path, create: bool) -> None:
    """RegistryError unless `path`, not a directory, may be created: `create` and nothing else there."""
    if path.exists():
        raise RegistryError(f"registry directory {given!r} is not a directory")
    if not create:
        raise RegistryError(f"registry directory {given!r} does not exist")


class LocalRegistry:
    """A Schema Registry in a directory of JSON files (or in memory when `path` is None).

    A relative `path` is resolved once, here: Spark workers (on Spark Connect, on another machine's
    working directory) get the absolute one. The directory must exist unless `create` is True, so
    a mistyped path is an error rather than an empty registry.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, create: bool = False) -> None:
        self._path = None if path is None else Path(path).resolve()
        self._lock = threading.RLock()
        self._held = False
        self._state = _State()
        self._copy = False
        self._signature: tuple[Any, ...] | None = None  # None: never read
        self._deks = LocalDekStore(self._path, self.exclusive)
        if self._path is not None:
            if not self._path.is_dir():
                _check_creatable(str(path), self._path, create)
                try:
                    self._path.mkdir(parents=True, exist_ok=True)
                except OSError as error:
                    raise storage_error(self._path, error, "create") from error
            self._refresh()

    @property
    def path(self) -> Path | None:
        """The registry's directory; None when it lives in memory."""
        return self._path

    @property
    def is_copy(self) -> bool:
        """Whether this is an unpickled copy of a registry in memory (what a Spark task gets), which
        holds nothing the original registers or creates after it was taken."""
        return self._copy

    def __repr__(self) -> str:
        return f"LocalRegistry({str(self._path) if self._path else None!r})"

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"path": self._path, "state": None if self._path else self._state, "deks": self._deks}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._path = state["path"]
        self._lock = threading.RLock()
        self._held = False
        self._state = state["state"] or _State()
        self._copy = state["state"] is not None
        self._signature = None
        self._deks = state["deks"]
        self._deks.bind(self.exclusive)
        if self._path is not None:
            self._refresh()

    # -- protocol ----------------------------------------------------------------------------

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        """Register `schema` under `subject` (a new version unless already there); return its id."""
        check_subject(subject)
        with self.exclusive():
            self._refresh()
            state = self._state
            config = self.get_config(subject)
            live = state.live(subject)
            candidate = self._prepare(schema, config, live[-1].schema if live else None, normalize)
            key = _identity(candidate)
            for entry in live:
                if _identity(entry.schema) == key:
                    return entry.schema_id
            errors = self._incompatibilities(candidate, live, config)
            if errors:
                raise RegistryError(
                    f'Schema being registered is incompatible with an earlier schema for subject "{subject}",'
                    f" details: [{'; '.join(errors)}]",
                    status=409,
                    error_code=409,
                )
            schema_id = state.ids.get(key, state.max_id + 1)
            stored = state.schemas.get(schema_id, candidate)
            versions = state.subjects.get(subject, [])
            number = max((v.version for v in versions), default=0) + 1
            entry = _Version(number, schema_id, stored, self._guid_of(schema_id, stored))
            # Re-registering a soft-deleted schema removes its deleted version (Confluent does).
            for old in [v for v in versions if v.deleted and v.schema_id == schema_id]:
                versions.remove(old)
                self._remove(self._version_file(subject, old.version))
            state.add(subject, entry)
            self._write_version(subject, entry)
            return schema_id

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        """Find the version of `subject` holding `schema`, as registered or once the subject's config
        and latest version have filled in its metadata and rule set; 40401/40403 if none."""
        with self._lock:
            self._refresh()
            live = self._live_or_404(subject)
            config = self.get_config(subject)
            normalize = bool(config.get("normalize"))
            exact = self._prepare(schema, {}, None, normalize)
            filled = self._prepare(schema, config, live[-1].schema, normalize)
            for candidate in (exact, filled):
                key = _identity(candidate)
                for entry in reversed(live):
                    if _identity(entry.schema) == key:
                        return self._registered(subject, entry)
            raise _not_found("schema", "Schema not found")

    def get_schema(self, schema_id: int) -> Schema:
        """The schema with this global id (soft-deleted versions still resolve); 40403 if unknown."""
        with self._lock:
            self._refresh()
            if schema_id not in self._state.schemas:
                raise _not_found("schema", f"Schema {schema_id} not found")
            return self._state.schemas[schema_id]

    def get_schema_by_guid(self, guid: str) -> Schema:
        """The schema with this GUID (soft-deleted versions still resolve); 40403 if unknown."""
        with self._lock:
            self._refresh()
            schema_id = self._state.guids.get(canonical_guid(guid) or "")
            if schema_id is None:
                raise _not_found("schema", f"Schema {guid} not found")
            return self._state.schemas[schema_id]

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        """One version of a subject (a number, or "latest"/-1)."""
        number = _parse_version(version)
        with self._lock:
            self._refresh()
            live = self._live_or_404(subject)
            if number is None:
                return self._registered(subject, live[-1])
            for entry in live:
                if entry.version == number:
                    return self._registered(subject, entry)
            raise _not_found("version", f"Version {number} not found.")

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The newest version of a subject."""
        return self.get_version(subject, "latest")

    def get_latest_with_metadata(self, subject: str, metadata: dict[str, str]) -> RegisteredSchema:
        """The newest version whose metadata properties include every pair; 40401 when the subject
        has no versions, 40403 when none matches (as GET /subjects/{subject}/metadata answers)."""
        with self._lock:
            self._refresh()
            for entry in reversed(self._live_or_404(subject)):
                if metadata.items() <= entry.schema.properties.items():
                    return self._registered(subject, entry)
            raise _not_found("schema", "Schema not found")

    def get_versions(self, subject: str) -> list[int]:
        """The version numbers of a subject, ascending (soft-deleted ones left out)."""
        with self._lock:
            self._refresh()
            return [entry.version for entry in self._live_or_404(subject)]

    def get_subjects(self) -> list[str]:
        """Every subject with at least one version that is not soft-deleted, sorted."""
        with self._lock:
            self._refresh()
            return sorted(subject for subject in self._state.subjects if self._state.live(subject))

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft-delete a subject (ids keep resolving; its config goes), or permanently delete a
        soft-deleted one (files removed); returns the versions deleted. As Confluent: a permanent
        delete needs a soft delete first (40405), a second soft delete is 40404."""
        with self.exclusive():
            self._refresh()
            versions = self._state.subjects.get(subject, [])
            if not versions:
                raise _not_found("subject", f"Subject '{subject}' not found.")
            if permanent:
                return self._purge(subject, versions)
            live = [entry for entry in versions if not entry.deleted]
            if not live:
                raise RegistryError(
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
                    status=404,
                    error_code=SUBJECT_SOFT_DELETED,
                )
            for entry in live:
                entry.deleted = True
                self._write_version(subject, entry)
            self._state.config.pop(subject, None)
            if self._path is not None:
                self._remove(self._subject_dir(subject) / CONFIG_FILE)
                self._signature = self._scan()
            return [entry.version for entry in live]

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> int:
        """Soft-delete one version (its schema id keeps resolving; it leaves the versions list and
        migrations through it fail), or permanently delete a soft-deleted one. As Confluent: 40406
        for a second soft delete, 40407 for a permanent delete without a soft one first."""
        number = _parse_version(version)
        with self.exclusive():
            self._refresh()
            versions = self._state.subjects.get(subject, [])
            if not versions:
                raise _not_found("subject", f"Subject '{subject}' not found.")
            if number is None:
                live = self._state.live(subject)
                entry = live[-1] if live else None
            else:
                entry = next((v for v in versions if v.version == number), None)
            if entry is None:
                raise _not_found("version", f"Version {version} not found.")
            if permanent:
                self._purge_version(subject, entry)
            elif entry.deleted:
                raise RegistryError(
                    f"Subject '{subject}' Version {entry.version} was soft deleted.Set permanent=true"
                    " to delete permanently",
                    status=404,
                    error_code=SCHEMA_VERSION_SOFT_DELETED,
                )
            else:
                entry.deleted = True
                self._write_version(subject, entry)
            if self._path is not None:
                self._signature = self._scan()
            return entry.version

    def get_config(self, subject: str | None = None, default_to_global: bool = True) -> dict[str, Any]:
        """The subject's config falling back, key by key, to the global one and then the defaults
        (or, with `default_to_global=False`, only the keys set on the subject itself)."""
        with self._lock:
            self._refresh()
            scoped = self._state.config.get(subject, {}) if subject is not None else {}
            if subject is not None and not default_to_global:
                return dict(scoped)
            return {**_DEFAULT_CONFIG, **self._state.config.get(None, {}), **scoped}

    def set_config(self, subject: str | None = None, **config: Any) -> dict[str, Any]:
        """Update config keys (camelCase, as the REST API names them; None removes one); returns
        the effective config."""
        _validate_config(config)
        if subject is not None:
            check_subject(subject)
        with self.exclusive():
            self._refresh()
            current = {**self._state.config.get(subject, {}), **config}
            current = {k: v for k, v in current.items() if v is not None}
            self._state.config[subject] = current
            if self._path is not None:
                target = self._path if subject is None else self._subject_dir(subject)
                write_json(target / CONFIG_FILE, current)
                self._signature = self._scan()
            return self.get_config(subject)

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        """Whether `schema` is compatible with one version of `subject` ("latest": the newest; none
        registered: True) under the subject's compatibility level, as POST
        /compatibility/subjects/{subject}/versions/{version} answers; nothing is registered."""
        number = _parse_version(version)
        with self._lock:
            self._refresh()
            live = self._state.live(subject)
            if number is None:
                against = live[-1:]
            else:
                against = [entry for entry in live if entry.version == number]
                if not against:
                    raise _not_found("version", f"Version {number} not found.")
            config = self.get_config(subject)
            candidate = self._prepare(schema, config, live[-1].schema if live else None, False)
            return not self._incompatibilities(candidate, against, config)

    # -- registration helpers ----------------------------------------------------------------

    # -- the DEK registry (contracts.registry.dek.DekRegistry) -------------------------------

    def register_kek(
        self,
        name: str,
        kms_type: str,
        kms_key_id: str,
        shared: bool = False,
        kms_props: Mapping[str, str] | None = None,
        doc: str | None = None,
        context: str | None = None,
    ) -> Kek:
        """Create a KEK (an identical one already there is returned); 40972 if a different one is."""
        return self._deks.register_kek(name, kms_type, kms_key_id, shared, kms_props, doc, context)

    def get_kek(self, name: str, deleted: bool = False, context: str | None = None) -> Kek:
        """The KEK called `name`; RegistryError 40470 if none."""
        return self._deks.get_kek(name, deleted, context)

    def register_dek(
        self,
        kek_name: str,
        subject: str,
        encrypted_key_material: str | None,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
    ) -> Dek:
        """Store a DEK version, wrapped (base64); plaintext key material is never stored."""
        return self._deks.register_dek(kek_name, subject, encrypted_key_material, algorithm, version)

    def get_dek(
        self,
        kek_name: str,
        subject: str,
        algorithm: str = DEFAULT_ALGORITHM,
        version: int = 1,
        deleted: bool = False,
    ) -> Dek:
        """One DEK version (-1: the newest); RegistryError 40470 if none."""
        return self._deks.get_dek(kek_name, subject, algorithm, version, deleted)

    def _prepare(
        self, schema: Schema, config: Mapping[str, Any], previous: Schema | None, normalize: bool
    ) -> Schema:
        """The schema as it would be stored: validated, metadata/rule set merged, normalized if asked."""
        if checker_for(schema.schema_type) is None:
            raise _unknown_type(schema)
        candidate = _effective(schema, config, previous)
        self._check(candidate)
        if (normalize or config.get("normalize")) and not _is_protobuf(candidate):
            document = json.loads(candidate.schema_str)
            normalized = _normalized_text(document) if _is_avro(candidate) else _canonical_json(document)
            candidate = candidate.with_changes(schema_str=normalized)
        return candidate

    def _check(self, schema: Schema) -> None:
        """42201 when the schema is no valid schema of its type."""
        self._read(schema)

    def _read(self, schema: Schema) -> Any:
        """The schema as its type's compatibility check reads it (contracts/registry/checkers.py),
        its references resolved; 42201 when it cannot be read."""
        kind = schema.schema_type.upper()
        checker = checker_for(kind)
        if checker is None:
            raise _unknown_type(schema)
        found = self._references(schema) if checker.reads_references else []
        try:
            return checker.read(schema.schema_str, [(f.reference.name, f.schema.schema_str) for f in found])
        except UnreadableSchema as error:
            details = error.details
            if error.reference is not None:
                ref = found[error.reference].reference
                details = (
                    f"reference '{ref.name}' to subject '{ref.subject}' version {ref.version}: {details}"
                )
            raise _invalid_schema(f"Invalid schema of type {kind}, details: {details}") from error

    def _references(self, schema: Schema) -> list[Resolved]:
        """The schemas `schema` references, theirs too, dependencies first, each version once
        (contracts/registry/references.py); 42201 when one is missing, or the references form a
        cycle or exceed the bounds."""

        def fetch(ref: SchemaReference) -> Schema:
            target = next((v for v in self._state.live(ref.subject) if v.version == ref.version), None)
            if target is None:
                raise _invalid_schema(
                    f"Invalid schema: reference '{ref.name}' to subject '{ref.subject}' version"
                    f" {ref.version} cannot be resolved"
                )
            return target.schema

        try:
            return referenced_schemas(schema, fetch)
        except ContractError as error:
            raise _invalid_schema(f"Invalid schema: {error.reason}") from error

    def _incompatibilities(
        self, candidate: Schema, existing: list[_Version], config: Mapping[str, Any]
    ) -> list[str]:
        """Why `candidate` breaks the configured compatibility against `existing` versions."""
        try:
            level = compatibility_level(config)
        except ValueError as error:
            raise RegistryError(
                f"Invalid compatibility level {config.get('compatibility')!r}",
                status=422,
                error_code=INVALID_COMPATIBILITY_LEVEL,
            ) from error
        group = config.get("compatibilityGroup")
        against = checked_against(level, group, candidate, [v.schema for v in existing])
        if not against:
            return []
        earlier = [(s.schema_type, self._read(s)) for s in against]
        try:
            errors = incompatibilities(level, candidate.schema_type, self._read(candidate), earlier)
        except UnreadableSchema as error:  # a schema the compatibility check cannot compare
            kind = candidate.schema_type.upper()
            raise _invalid_schema(f"Invalid schema of type {kind}, details: {error.details}") from error
        return [*errors, f"{{compatibility: '{level.value}'}}"] if errors else []

    def _live_or_404(self, subject: str) -> list[_Version]:
        live = self._state.live(subject)
        if not live:
            raise _not_found("subject", f"Subject '{subject}' not found.")
        return live

    @staticmethod
    def _registered(subject: str, entry: _Version) -> RegisteredSchema:
        return RegisteredSchema(entry.schema_id, entry.schema, subject, entry.version, entry.guid)

    def _guid_of(self, schema_id: int, schema: Schema) -> str:
        """The GUID of the schema with this id: the one it already has, else derived from `schema`."""
        known = self._state.guid_by_id.get(schema_id)
        return known if known is not None else schema_guid(schema)

    def _purge(self, subject: str, versions: list[_Version]) -> list[int]:
        if any(not entry.deleted for entry in versions):
            raise RegistryError(
                f"Subject '{subject}' was not deleted first before being permanently deleted",
                status=404,
                error_code=SUBJECT_NOT_SOFT_DELETED,
            )
        deleted = [entry.version for entry in versions]
        self._record_high_water()
        for entry in versions:
            self._remove(self._version_file(subject, entry.version))
        del self._state.subjects[subject]
        self._reindex()
        if self._path is not None:
            self._remove_if_empty(subject)
            self._signature = self._scan()
        return deleted

    def _purge_version(self, subject: str, entry: _Version) -> None:
        if not entry.deleted:
            raise RegistryError(
                f"Subject '{subject}' Version {entry.version} was not deleted first before being"
                " permanently deleted",
                status=404,
                error_code=SCHEMA_VERSION_NOT_SOFT_DELETED,
            )
        self._record_high_water()
        self._remove(self._version_file(subject, entry.version))
        self._state.subjects[subject].remove(entry)
        self._reindex()

    def _reindex(self) -> None:
        """Schemas by id and ids by schema, after versions were removed."""
        self._state.schemas = {
            v.schema_id: v.schema for entries in self._state.subjects.values() for v in entries
        }
        self._state.ids = {_identity(s): i for i, s in self._state.schemas.items()}
        versions = [v for entries in self._state.subjects.values() for v in entries]
        self._state.guids = {v.guid: v.schema_id for v in reversed(versions)}
        self._state.guid_by_id = {v.schema_id: v.guid for v in reversed(versions)}

    # -- files -------------------------------------------------------------------------------

    def _subject_dir(self, subject: str) -> Path:
        """The subject's directory: the one it has on disk, else a new one."""
        assert self._path is not None
        directory = self._state.directories.get(subject)
        if directory is None:
            directory = self._state.directories[subject] = new_subject_directory(self._path, subject)
        return directory

    def _version_file(self, subject: str, version: int) -> Path | None:
        return None if self._path is None else self._subject_dir(subject) / f"{version}.json"

    def _write_version(self, subject: str, entry: _Version) -> None:
        path = self._version_file(subject, entry.version)
        if path is None:
            return
        payload = {**entry.schema.to_dict(), "id": entry.schema_id, "guid": entry.guid}
        if entry.deleted:
            payload["deleted"] = True
        write_json(path, payload)
        self._signature = self._scan()

    def _remove(self, path: Path | None) -> None:
        if path is not None:
            try:
                path.unlink(missing_ok=True)
            except OSError as error:
                raise storage_error(path, error, "remove") from error

    def _remove_if_empty(self, subject: str) -> None:
        """Remove a purged subject's directory (and the file naming it) unless something else is in it."""
        directory = self._state.directories.pop(subject, None)
        if directory is None:
            return
        try:
            if all(path.name == SUBJECT_FILE for path in directory.iterdir()):
                (directory / SUBJECT_FILE).unlink(missing_ok=True)
                directory.rmdir()
        except OSError as error:
            raise storage_error(directory, error, "remove") from error

    def _record_high_water(self) -> None:
        """Before ids leave the directory, write down the highest one handed out (never reused)."""
        if self._path is not None:
            write_high_water(self._path, self._state.max_id)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the registry for a change, or for a lookup and the registration that follows it:
        this process's threads, and on a directory every process too (an advisory lock on the
        directory), so two Spark tasks registering at once cannot give two schemas one id. Reentrant."""
        with self._lock:
            try:
                if self._path is None or fcntl is None or self._held:
                    yield
                else:
                    with self._directory_lock(self._path):
                        yield
            except BaseException:
                # A change may have failed half-way: the files are the truth, so read them again.
                self._signature = None
                raise

    @contextlib.contextmanager
    def _directory_lock(self, path: Path) -> Iterator[None]:
        """The advisory lock every process takes on the directory before changing it."""
        assert fcntl is not None
        try:
            handle = os.open(path, os.O_RDONLY)
        except OSError as error:
            raise storage_error(path, error, "open") from error
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            self._held = True
            try:
                yield
            finally:
                self._held = False
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            os.close(handle)

    def _scan(self) -> tuple[Any, ...]:
        """What the directory holds now (names, sizes, mtimes): a change means another writer."""
        assert self._path is not None
        return tuple(
            (str(p.relative_to(self._path)), stat.st_mtime_ns, stat.st_size)
            for p, stat in registry_files(self._path)
        )

    def _refresh(self) -> None:
        """Reload from disk when the directory changed since we last read or wrote it."""
        if self._path is None:
            return
        signature = self._scan()
        if signature != self._signature:
            state = _load(self._path)
            state.max_id = max(state.max_id, self._state.max_id)
            self._state, self._signature = state, None  # until every schema parses (references need it)
            for subject, entries in state.subjects.items():
                for entry in entries:
                    self._parse_loaded(subject, entry)
            self._signature = signature

    def _parse_loaded(self, subject: str, entry: _Version) -> None:
        try:
            self._check(entry.schema)
        except RegistryError as error:
            raise ContractError(
                error.reason, subject=subject, version=entry.version, position="schema"
            ) from error


def copy_note(registry: object, schema_id: int | None = None) -> str:
    """Why `registry` may lack what it was asked for, when it is a task's copy of a LocalRegistry
    in memory (docs/semantics.md §1.3): for a schema id, only one newer than any the copy holds
    (ids are never reused, so an older one is missing everywhere); else nothing."""
    if not isinstance(registry, LocalRegistry) or not registry.is_copy:
        return ""
    if schema_id is not None and schema_id <= registry._state.max_id:
        return ""
    return f" ({COPY_NOTE})"


COPY_NOTE = (
    "the registry is a LocalRegistry in memory, which reaches each Spark task as a copy taken when the"
    " DataFrame was built, without what was registered or created since: give it a directory to share it"
)


def _validate_config(config: Mapping[str, Any]) -> None:
    unknown = sorted(set(config) - _CONFIG_KEYS)
    if unknown:
        raise RegistryError(f"Unrecognized config keys {unknown}", status=422, error_code=422)
    level = config.get("compatibility")
    if level is not None and level not in Compatibility.__members__:
        raise RegistryError(
            f"Invalid compatibility level {level!r}", status=422, error_code=INVALID_COMPATIBILITY_LEVEL
        )
    try:
        for key in ("defaultMetadata", "overrideMetadata"):
            _metadata(config, key)
        for key in ("defaultRuleSet", "overrideRuleSet"):
            _rule_set(config, key)
    except ContractError as error:
        raise RegistryError(f"Invalid config: {error}", status=422, error_code=422) from error


def _load(root: Path) -> _State:
    """Read a registry directory; versions without an "id" get the ids registering them in order would."""
    state = _State()
    if (root / CONFIG_FILE).is_file():
        state.config[None] = _loaded_config(root / CONFIG_FILE, None)
    pending: list[tuple[str, int, dict[str, Any]]] = []
    for subject, directory in subject_directories(root):
        state.directories[subject] = directory
        for path, _ in json_files(directory):
            if path.name == CONFIG_FILE:
                state.config[subject] = _loaded_config(path, subject)
            elif path.name != SUBJECT_FILE:
                version = version_of(path, subject)
                pending.append((subject, version, read_json(path, subject, version)))
    pending.sort(key=lambda item: (item[0], item[1]))
    parsed = [
        (subject, version, _loaded_version(subject, version, payload))
        for subject, version, payload in pending
    ]
    explicit = _explicit_ids(parsed)
    taken = set(explicit.values())
    counter = 0
    assigned: list[tuple[str, int, Schema, int, bool, str | None]] = []
    schemas: dict[int, Schema] = {}
    ids: dict[str, int] = {}
    for subject, version, (schema, schema_id, deleted, guid) in parsed:
        key = _identity(schema)
        if schema_id is None:
            schema_id = explicit.get(key) or ids.get(key)
        if schema_id is None:
            counter = next(n for n in itertools.count(counter + 1) if n not in taken)
            schema_id = counter
            taken.add(schema_id)
        schemas.setdefault(schema_id, schema)
        ids.setdefault(key, schema_id)
        assigned.append((subject, version, schema, schema_id, deleted, guid))
    guids = _explicit_guids(assigned)
    for subject, version, schema, schema_id, deleted, _ in assigned:
        guid = guids.get(schema_id) or schema_guid(schemas[schema_id])
        state.add(subject, _Version(version, schema_id, schema, guid, deleted))
    state.max_id = max(state.max_id, read_high_water(root))
    return state


def _loaded_config(path: Path, subject: str | None) -> dict[str, Any]:
    config = read_json(path, subject, None)
    if not isinstance(config, dict):
        raise ContractError("a config file must hold a JSON object", subject=subject, position=str(path))
    return config


def _loaded_version(subject: str, version: int, payload: Any) -> tuple[Schema, int | None, bool, str | None]:
    if not isinstance(payload, dict):
        raise ContractError("a version file must hold a JSON object", subject=subject, version=version)
    deleted = payload.get("deleted", False)
    if not isinstance(deleted, bool):
        raise ContractError(
            f"deleted must be true or false, not {deleted!r}",
            subject=subject,
            version=version,
            position="deleted",
        )
    schema_id = payload.get("id")
    if schema_id is not None and not is_id(schema_id):
        raise ContractError(
            f"id must be an integer from 1 to {MAX_ID}, not {schema_id!r}",
            subject=subject,
            version=version,
            position="id",
        )
    guid = payload.get("guid")
    if guid is not None and (not isinstance(guid, str) or canonical_guid(guid) is None):
        raise ContractError(
            f"guid must be a UUID string (such as 6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d), not {guid!r}",
            subject=subject,
            version=version,
            position="guid",
        )
    body = {k: v for k, v in payload.items() if k != "deleted"}
    schema = _as_stored(Schema.from_dict(body, subject=subject, version=version))
    return schema, schema_id, deleted, None if guid is None else canonical_guid(guid)


def _explicit_ids(
    parsed: Iterable[tuple[str, int, tuple[Schema, int | None, bool, str | None]]],
) -> dict[str, int]:
    """Identity -> id for the files that carry one; the same id on two different schemas is an error."""
    by_key: dict[str, int] = {}
    by_id: dict[int, str] = {}
    for subject, version, (schema, schema_id, _, _) in parsed:
        if schema_id is None:
            continue
        key = _identity(schema)
        if by_id.setdefault(schema_id, key) != key:
            raise ContractError(
                f"id {schema_id} is already used by a different schema", subject=subject, version=version
            )
        by_key.setdefault(key, schema_id)
    return by_key


def _explicit_guids(assigned: Iterable[tuple[str, int, Schema, int, bool, str | None]]) -> dict[int, str]:
    """Schema id -> GUID for the files that carry one: one GUID per id and one id per GUID, else
    an error naming the file that breaks it."""
    by_id: dict[int, str] = {}
    by_guid: dict[str, int] = {}
    for subject, version, _, schema_id, _, guid in assigned:
        if guid is None:
            continue
        if by_guid.setdefault(guid, schema_id) != schema_id:
            raise ContractError(
                f"guid {guid} is already used by schema id {by_guid[guid]}, not {schema_id}",
                subject=subject,
                version=version,
                position="guid",
            )
        if by_id.setdefault(schema_id, guid) != guid:
            raise ContractError(
                f"schema id {schema_id} already has guid {by_id[schema_id]}, not {guid}",
                subject=subject,
                version=version,
                position="guid",
            )
    return by_id
