"""LocalRegistry's persistence: its directory read and written as JSON files, kept apart by a lock
between threads and processes, or nothing at all when the registry lives in memory.

The files a directory holds (contracts/registry/layout.py names them)::

    <root>/config.json                 optional global config, e.g. {"compatibility": "BACKWARD"}
    <root>/<subject>/config.json       optional per-subject config (same keys)
    <root>/<subject>/<version>.json    one version: the REST register payload {"schemaType", "schema",
                                       "references", "metadata", "ruleSet"}, plus "id" and "guid"
                                       once assigned, and "deleted": true once soft-deleted

Every write is atomic (temp file, fsync, rename); a change of the files (names, sizes, mtimes)
since this process last read or wrote them means another writer, and they are read again.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.errors import ContractError, RegistryError
from contracts.model import Schema
from contracts.registry.guid import canonical_guid
from contracts.registry.layout import (
    CONFIG_FILE,
    MAX_ID,
    SUBJECT_FILE,
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
from contracts.registry.stored_schemas import as_stored

try:
    import fcntl
except ImportError:  # not POSIX: only threads of one process are kept apart
    fcntl = None  # type: ignore[assignment]


@dataclass(frozen=True)
class VersionFile:
    """One version file as read: its schema, and its "id", "deleted" and "guid" (None when unset)."""

    subject: str
    version: int
    schema: Schema
    schema_id: int | None
    deleted: bool
    guid: str | None


@dataclass
class DirectoryContents:
    """What a registry directory holds: configs by subject (None: the global one), the version
    files sorted by subject and version, and the highest id a purge recorded."""

    config: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    versions: list[VersionFile] = field(default_factory=list)
    high_water: int = 0


class RegistryFiles:
    """One registry's directory, resolved and checked as `LocalRegistry(path, create=…)` says
    (None: the registry lives in memory and nothing is written)."""

    def __init__(self, path: str | os.PathLike[str] | None, create: bool = False) -> None:
        self.path = None if path is None else Path(path).resolve()
        self.lock = threading.RLock()
        """Held for every read and change of the registry by this process's threads."""
        self._held = False
        self._signature: tuple[Any, ...] | None = None  # None: never read
        self._directories: dict[str, Path] = {}
        if self.path is not None and not self.path.is_dir():
            _check_creatable(str(path), self.path, create)
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise storage_error(self.path, error, "create") from error

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the registry for a change, or for a lookup and the registration that follows it:
        this process's threads, and on a directory every process too (an advisory lock on the
        directory), so two Spark tasks registering at once cannot give two schemas one id. Reentrant."""
        with self.lock:
            try:
                if self.path is None or fcntl is None or self._held:
                    yield
                else:
                    with self._directory_lock(self.path):
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

    def reload(self, load: Callable[[DirectoryContents], None]) -> None:
        """Give `load` what the directory holds when its files changed since they were last read or
        written here (in memory: never); when `load` raises they count as unread, and are read again."""
        if self.path is None:
            return
        signature = self._scan()
        if signature != self._signature:
            self._signature = None
            load(self._read(self.path))
            self._signature = signature

    def write_version(
        self, subject: str, version: int, schema: Schema, schema_id: int, guid: str, deleted: bool
    ) -> None:
        """Write one version's file, with its id and GUID (and `"deleted": true` once soft-deleted)."""
        if self.path is None:
            return
        payload = {**schema.to_dict(), "id": schema_id, "guid": guid}
        if deleted:
            payload["deleted"] = True
        write_json(self._subject_directory(subject) / f"{version}.json", payload)
        self._signature = self._scan()

    def remove_version(self, subject: str, version: int) -> None:
        """Remove one version's file."""
        if self.path is not None:
            self._remove(self._subject_directory(subject) / f"{version}.json")

    def write_config(self, subject: str | None, config: dict[str, Any]) -> None:
        """Write the config of `subject` (None: the global one)."""
        if self.path is None:
            return
        target = self.path if subject is None else self._subject_directory(subject)
        write_json(target / CONFIG_FILE, config)
        self._signature = self._scan()

    def remove_config(self, subject: str) -> None:
        """Remove a subject's config file."""
        if self.path is not None:
            self._remove(self._subject_directory(subject) / CONFIG_FILE)

    def remove_subject(self, subject: str) -> None:
        """Remove a purged subject's directory (and the file naming it) unless something else is in it."""
        directory = self._directories.pop(subject, None)
        if directory is None:
            return
        try:
            if all(path.name == SUBJECT_FILE for path in directory.iterdir()):
                (directory / SUBJECT_FILE).unlink(missing_ok=True)
                directory.rmdir()
        except OSError as error:
            raise storage_error(directory, error, "remove") from error

    def record_high_water(self, highest_id: int) -> None:
        """Before ids leave the directory, write down the highest one handed out (never reused)."""
        if self.path is not None:
            write_high_water(self.path, highest_id)

    def settle(self) -> None:
        """Count the files as read: what this process changed is what they now hold."""
        if self.path is not None:
            self._signature = self._scan()

    def _remove(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            raise storage_error(path, error, "remove") from error

    def _subject_directory(self, subject: str) -> Path:
        """The subject's directory: the one it has on disk, else a new one."""
        assert self.path is not None
        directory = self._directories.get(subject)
        if directory is None:
            directory = self._directories[subject] = new_subject_directory(self.path, subject)
        return directory

    def _scan(self) -> tuple[Any, ...]:
        """What the directory holds now (names, sizes, mtimes): a change means another writer."""
        assert self.path is not None
        return tuple(
            (str(p.relative_to(self.path)), stat.st_mtime_ns, stat.st_size)
            for p, stat in registry_files(self.path)
        )

    def _read(self, root: Path) -> DirectoryContents:
        """Every config and version file under `root`, versions sorted by subject and version."""
        contents = DirectoryContents()
        if (root / CONFIG_FILE).is_file():
            contents.config[None] = _read_config(root / CONFIG_FILE, None)
        pending: list[tuple[str, int, Any]] = []
        directories: dict[str, Path] = {}
        for subject, directory in subject_directories(root):
            directories[subject] = directory
            for path, _ in json_files(directory):
                if path.name == CONFIG_FILE:
                    contents.config[subject] = _read_config(path, subject)
                elif path.name != SUBJECT_FILE:
                    version = version_of(path, subject)
                    pending.append((subject, version, read_json(path, subject, version)))
        pending.sort(key=lambda item: (item[0], item[1]))
        contents.versions = [_version_file(subject, version, found) for subject, version, found in pending]
        contents.high_water = read_high_water(root)
        self._directories = directories
        return contents


def _check_creatable(given: str, path: Path, create: bool) -> None:
    """RegistryError unless `path`, not a directory, may be created: `create` and nothing else there."""
    if path.exists():
        raise RegistryError(f"registry directory {given!r} is not a directory")
    if not create:
        raise RegistryError(f"registry directory {given!r} does not exist")


def _read_config(path: Path, subject: str | None) -> dict[str, Any]:
    config = read_json(path, subject, None)
    if not isinstance(config, dict):
        raise ContractError("a config file must hold a JSON object", subject=subject, position=str(path))
    return config


def _version_file(subject: str, version: int, payload: Any) -> VersionFile:
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
    schema = as_stored(Schema.from_dict(body, subject=subject, version=version))
    return VersionFile(
        subject, version, schema, schema_id, deleted, None if guid is None else canonical_guid(guid)
    )
