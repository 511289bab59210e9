"""What LocalRegistry knows, indexed: each subject's versions, schemas by id and ids by schema and
GUID; and the ids a directory's files get when read, as registering them in order would give.

Version files written by hand may omit "id": ids are then assigned as registering the files in
order would (subjects sorted, versions ascending; a schema seen before shares its id; explicit
ids are never reused). A file without "guid" (written by hand, or by a release before GUIDs) gets
the GUID Confluent's registry derives from the schema's content (`contracts.registry.guid`),
which is the one registering it would write, so nothing needs rewriting; a file's own "guid" (as
`pull` writes the remote registry's) is kept.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from contracts.errors import ContractError
from contracts.model import Schema
from contracts.registry.guid import schema_guid
from contracts.registry.local_files import DirectoryContents, VersionFile
from contracts.registry.stored_schemas import schema_identity


@dataclass
class StoredVersion:
    """One version of a subject as stored."""

    version: int
    schema_id: int
    schema: Schema
    guid: str
    deleted: bool = False


@dataclass
class RegistryState:
    """Everything the registry knows; rebuilt from disk whenever the directory changes."""

    subjects: dict[str, list[StoredVersion]] = field(default_factory=dict)
    schemas: dict[int, Schema] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    guids: dict[str, int] = field(default_factory=dict)
    """Schema id by GUID, and GUID by schema id: one each way."""
    guid_by_id: dict[int, str] = field(default_factory=dict)
    config: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    max_id: int = 0

    def live(self, subject: str) -> list[StoredVersion]:
        """The subject's versions that are not soft-deleted, ascending."""
        return [v for v in self.subjects.get(subject, []) if not v.deleted]

    def add(self, subject: str, entry: StoredVersion) -> None:
        """Index a new version (a schema id, identity or GUID seen before keeps its first entry)."""
        self.subjects.setdefault(subject, []).append(entry)
        self.schemas.setdefault(entry.schema_id, entry.schema)
        self.ids.setdefault(schema_identity(entry.schema), entry.schema_id)
        self.guids.setdefault(entry.guid, entry.schema_id)
        self.guid_by_id.setdefault(entry.schema_id, entry.guid)
        self.max_id = max(self.max_id, entry.schema_id)

    def reindex(self) -> None:
        """Schemas by id and ids by schema, after versions were removed."""
        self.schemas = {v.schema_id: v.schema for entries in self.subjects.values() for v in entries}
        self.ids = {schema_identity(s): i for i, s in self.schemas.items()}
        versions = [v for entries in self.subjects.values() for v in entries]
        self.guids = {v.guid: v.schema_id for v in reversed(versions)}
        self.guid_by_id = {v.schema_id: v.guid for v in reversed(versions)}


def state_of(contents: DirectoryContents) -> RegistryState:
    """The state a directory's files hold; versions without an "id" get the ids registering them in
    order would."""
    state = RegistryState(config=dict(contents.config))
    explicit = _explicit_ids(contents.versions)
    taken = set(explicit.values())
    counter = 0
    assigned: list[tuple[VersionFile, int]] = []
    schemas: dict[int, Schema] = {}
    ids: dict[str, int] = {}
    for file in contents.versions:
        key = schema_identity(file.schema)
        schema_id = file.schema_id
        if schema_id is None:
            schema_id = explicit.get(key) or ids.get(key)
        if schema_id is None:
            counter = next(n for n in itertools.count(counter + 1) if n not in taken)
            schema_id = counter
            taken.add(schema_id)
        schemas.setdefault(schema_id, file.schema)
        ids.setdefault(key, schema_id)
        assigned.append((file, schema_id))
    guids = _explicit_guids(assigned)
    for file, schema_id in assigned:
        guid = guids.get(schema_id) or schema_guid(schemas[schema_id])
        state.add(file.subject, StoredVersion(file.version, schema_id, file.schema, guid, file.deleted))
    state.max_id = max(state.max_id, contents.high_water)
    return state


def _explicit_ids(files: Iterable[VersionFile]) -> dict[str, int]:
    """Identity -> id for the files that carry one; the same id on two different schemas is an error."""
    by_key: dict[str, int] = {}
    by_id: dict[int, str] = {}
    for file in files:
        if file.schema_id is None:
            continue
        key = schema_identity(file.schema)
        if by_id.setdefault(file.schema_id, key) != key:
            raise ContractError(
                f"id {file.schema_id} is already used by a different schema",
                subject=file.subject,
                version=file.version,
            )
        by_key.setdefault(key, file.schema_id)
    return by_key


def _explicit_guids(assigned: Iterable[tuple[VersionFile, int]]) -> dict[int, str]:
    """Schema id -> GUID for the files that carry one: one GUID per id and one id per GUID, else
    an error naming the file that breaks it."""
    by_id: dict[int, str] = {}
    by_guid: dict[str, int] = {}
    for file, schema_id in assigned:
        guid = file.guid
        if guid is None:
            continue
        if by_guid.setdefault(guid, schema_id) != schema_id:
            raise ContractError(
                f"guid {guid} is already used by schema id {by_guid[guid]}, not {schema_id}",
                subject=file.subject,
                version=file.version,
                position="guid",
            )
        if by_id.setdefault(schema_id, guid) != guid:
            raise ContractError(
                f"schema id {schema_id} already has guid {by_id[schema_id]}, not {guid}",
                subject=file.subject,
                version=file.version,
                position="guid",
            )
    return by_id
