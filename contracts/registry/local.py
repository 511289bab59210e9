"""LocalRegistry: the embedded registry, backed by a directory of JSON contracts or by memory alone.

It assigns ids and versions, merges config metadata/rule sets, checks compatibility and answers
errors the way Confluent's Schema Registry does (docs/semantics.md §1), so code tested against it
behaves the same against the real one. What it keeps where: the files and the lock in
`local_files` (their layout in `layout`), the index and the ids files get on load in
`local_state`, what a registered schema is stored as in `stored_schemas`, the reading and
comparing of each schema type in `checkers`. Registering through the API writes the version file
with its "id" and "guid"; a soft-deleted version carries "deleted": true. A permanent delete first
records the highest id handed out, so a later process never hands it out again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
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
from contracts.model import RegisteredSchema, Schema, SchemaReference
from contracts.registry.checkers import UnreadableSchema, checker_for, incompatibilities, known_types
from contracts.registry.compatibility import Compatibility, checked_against, compatibility_level
from contracts.registry.dek import DEFAULT_ALGORITHM, Dek, Kek
from contracts.registry.guid import canonical_guid, schema_guid
from contracts.registry.layout import MAX_ID, check_subject
from contracts.registry.local_dek import LocalDekStore
from contracts.registry.local_files import DirectoryContents, RegistryFiles
from contracts.registry.local_state import RegistryState, StoredVersion, state_of
from contracts.registry.references import Resolved, referenced_schemas
from contracts.registry.stored_schemas import (
    config_metadata,
    config_rule_set,
    effective,
    normalized,
    schema_identity,
)

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


def _not_found(kind: str, message: str) -> RegistryError:
    codes = {"subject": SUBJECT_NOT_FOUND, "version": VERSION_NOT_FOUND, "schema": SCHEMA_NOT_FOUND}
    return RegistryError(message, status=404, error_code=codes[kind])


def _invalid_schema(message: str) -> RegistryError:
    return RegistryError(message, status=422, error_code=INVALID_SCHEMA)


def _unknown_type(schema: Schema) -> RegistryError:
    """42201 for a schema type no checker reads (contracts/registry/checkers.py)."""
    return _invalid_schema(
        f"Invalid schema type {schema.schema_type}: LocalRegistry stores {', '.join(known_types())}"
    )


def _invalid_version(version: object) -> RegistryError:
    return RegistryError(
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
        status=422,
        error_code=INVALID_VERSION,
    )


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


class LocalRegistry:
    """A Schema Registry in a directory of JSON files (or in memory when `path` is None).

    A relative `path` is resolved once, here: Spark workers (on Spark Connect, on another machine's
    working directory) get the absolute one. The directory must exist unless `create` is True, so
    a mistyped path is an error rather than an empty registry.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, create: bool = False) -> None:
        self._files = RegistryFiles(path, create)
        self._lock = self._files.lock
        self._state = RegistryState()
        self._copy = False
        self._deks = LocalDekStore(self._files.path, self.exclusive)
        self._refresh()

    @property
    def path(self) -> Path | None:
        """The registry's directory; None when it lives in memory."""
        return self._files.path

    @property
    def is_copy(self) -> bool:
        """Whether this is an unpickled copy of a registry in memory (what a Spark task gets), which
        holds nothing the original registers or creates after it was taken."""
        return self._copy

    def __repr__(self) -> str:
        path = self._files.path
        return f"LocalRegistry({str(path) if path else None!r})"

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            path = self._files.path
            return {"path": path, "state": None if path else self._state, "deks": self._deks}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._files = RegistryFiles(state["path"])
        self._lock = self._files.lock
        self._state = state["state"] or RegistryState()
        self._copy = state["state"] is not None
        self._deks = state["deks"]
        self._deks.bind(self.exclusive)
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
            key = schema_identity(candidate)
            for entry in live:
                if schema_identity(entry.schema) == key:
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
            entry = StoredVersion(number, schema_id, stored, self._guid_of(schema_id, stored))
            # Re-registering a soft-deleted schema removes its deleted version (Confluent does).
            for old in [v for v in versions if v.deleted and v.schema_id == schema_id]:
                versions.remove(old)
                self._files.remove_version(subject, old.version)
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
                key = schema_identity(candidate)
                for entry in reversed(live):
                    if schema_identity(entry.schema) == key:
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
            self._files.remove_config(subject)
            self._files.settle()
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
            self._files.settle()
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
            self._files.write_config(subject, current)
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

    # -- registration helpers ----------------------------------------------------------------

    def _prepare(
        self, schema: Schema, config: Mapping[str, Any], previous: Schema | None, normalize: bool
    ) -> Schema:
        """The schema as it would be stored: validated, metadata/rule set merged, normalized if asked."""
        if checker_for(schema.schema_type) is None:
            raise _unknown_type(schema)
        candidate = effective(schema, config, previous)
        self._check(candidate)
        return normalized(candidate) if normalize or config.get("normalize") else candidate

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
            return checker.read(schema.schema_str, [resolved.named() for resolved in found])
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
        self, candidate: Schema, existing: list[StoredVersion], config: Mapping[str, Any]
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

    def _live_or_404(self, subject: str) -> list[StoredVersion]:
        live = self._state.live(subject)
        if not live:
            raise _not_found("subject", f"Subject '{subject}' not found.")
        return live

    @staticmethod
    def _registered(subject: str, entry: StoredVersion) -> RegisteredSchema:
        return RegisteredSchema(entry.schema_id, entry.schema, subject, entry.version, entry.guid)

    def _guid_of(self, schema_id: int, schema: Schema) -> str:
        """The GUID of the schema with this id: the one it already has, else derived from `schema`."""
        known = self._state.guid_by_id.get(schema_id)
        return known if known is not None else schema_guid(schema)

    def _purge(self, subject: str, versions: list[StoredVersion]) -> list[int]:
        if any(not entry.deleted for entry in versions):
            raise RegistryError(
                f"Subject '{subject}' was not deleted first before being permanently deleted",
                status=404,
                error_code=SUBJECT_NOT_SOFT_DELETED,
            )
        deleted = [entry.version for entry in versions]
        self._files.record_high_water(self._state.max_id)
        for entry in versions:
            self._files.remove_version(subject, entry.version)
        del self._state.subjects[subject]
        self._state.reindex()
        self._files.remove_subject(subject)
        self._files.settle()
        return deleted

    def _purge_version(self, subject: str, entry: StoredVersion) -> None:
        if not entry.deleted:
            raise RegistryError(
                f"Subject '{subject}' Version {entry.version} was not deleted first before being"
                " permanently deleted",
                status=404,
                error_code=SCHEMA_VERSION_NOT_SOFT_DELETED,
            )
        self._files.record_high_water(self._state.max_id)
        self._files.remove_version(subject, entry.version)
        self._state.subjects[subject].remove(entry)
        self._state.reindex()

    def _write_version(self, subject: str, entry: StoredVersion) -> None:
        self._files.write_version(
            subject, entry.version, entry.schema, entry.schema_id, entry.guid, entry.deleted
        )

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Hold the registry for a change, or for a lookup and the registration that follows it:
        this process's threads, and on a directory every process too (an advisory lock on the
        directory), so two Spark tasks registering at once cannot give two schemas one id. Reentrant."""
        return self._files.exclusive()

    def _refresh(self) -> None:
        """Reload from disk when the directory changed since we last read or wrote it."""
        self._files.reload(self._load)

    def _load(self, contents: DirectoryContents) -> None:
        """Take what the directory holds as the registry's state, once every schema in it parses
        (references need the whole state first)."""
        state = state_of(contents)
        state.max_id = max(state.max_id, self._state.max_id)
        self._state = state
        for subject, entries in state.subjects.items():
            for entry in entries:
                self._parse_loaded(subject, entry)

    def _parse_loaded(self, subject: str, entry: StoredVersion) -> None:
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
            config_metadata(config, key)
        for key in ("defaultRuleSet", "overrideRuleSet"):
            config_rule_set(config, key)
    except ContractError as error:
        raise RegistryError(f"Invalid config: {error}", status=422, error_code=422) from error
