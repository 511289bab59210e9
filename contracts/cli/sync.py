"""`spark-contracts push` / `pull`: sync a LocalRegistry directory of contracts with a real registry."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from contracts.codes import NOT_REGISTERED
from contracts.errors import DataContractError, RegistryError
from contracts.model import RegisteredSchema
from contracts.registry import LocalRegistry, Registry
from contracts.registry.layout import (
    CONFIG_FILE,
    MAX_ID,
    is_id,
    new_subject_directory,
    storage_error,
    subject_directories,
    write_json,
)
from contracts.registry.references import registry_references

# Confluent's "subject not found" and "schema not found": the version is not registered yet.


def push(directory: Path, remote: Registry, out: TextIO) -> int:
    """Register every version of every subject in `directory`, in version order, with `remote`.

    A version the registry already holds is skipped (looked up first); one it refuses — an
    incompatible schema (409), an invalid one — is reported and the rest still go. A subject's
    `config.json` (its compatibility, compatibilityGroup, …) is set first, as the versions may need
    it. Returns 1 when anything failed, else 0; a `directory` that does not exist is a RegistryError
    (and is not created).
    """
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise RegistryError(f"the contracts directory {str(directory)!r} {what}")
    local = LocalRegistry(directory)
    failures = 0
    for subject in local.get_subjects():
        config = local.get_config(subject, default_to_global=False)
        if config:
            try:
                remote.set_config(subject, **config)
                print(f"{subject}: config set {json.dumps(config, sort_keys=True)}", file=out)
            except RegistryError as error:
                failures += 1
                print(f"{subject}: config FAILED: {error}", file=out)
        for version in local.get_versions(subject):
            failures += not _push_version(local, remote, subject, version, out)
    print(f"push: {failures} failed" if failures else "push: done", file=out)
    return 1 if failures else 0


def _push_version(local: Registry, remote: Registry, subject: str, version: int, out: TextIO) -> bool:
    """Register one local version unless the registry has it; False when the registry refused it."""
    schema = local.get_version(subject, version).schema
    where = f"{subject} version {version}"
    try:
        found = remote.lookup_schema(subject, schema)
    except RegistryError as error:
        if error.error_code not in NOT_REGISTERED:
            print(f"{where}: FAILED: {error}", file=out)
            return False
    else:
        print(f"{where}: already registered as version {found.version} (id {found.schema_id})", file=out)
        return True
    try:
        schema_id = remote.register_schema(subject, schema)
    except RegistryError as error:
        label = "INCOMPATIBLE" if error.status == 409 else "FAILED"
        print(f"{where}: {label}: {error}", file=out)
        return False
    print(f"{where}: registered (id {schema_id})", file=out)
    return True


def pull(remote: Registry, directory: Path, subjects: Iterable[str] | None, out: TextIO) -> int:
    """Write every version of `subjects` (default: all), and the versions they reference, into
    `directory` in LocalRegistry's layout, ids (and GUIDs) included, so LocalRegistry reads them back as the
    registry serves them; whatever names the registry gives its subjects, nothing is written outside
    `directory`. Returns 1 when a subject could not be exported, else 0."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise storage_error(directory, error, "create") from error
    folders = dict(subject_directories(directory))
    failures = 0
    pending: list[tuple[str, int]] = []
    for subject in remote.get_subjects() if subjects is None else subjects:
        try:
            pending.extend((subject, version) for version in remote.get_versions(subject))
        except RegistryError as error:
            failures += 1
            print(f"{subject}: FAILED: {error}", file=out)
    done: set[tuple[str, int]] = set()
    configured: set[str] = set()
    while pending:
        subject, version = pending.pop(0)
        if (subject, version) in done:
            continue
        done.add((subject, version))
        try:
            registered = _pull_version(remote, directory, folders, subject, version, out)
            referenced = registry_references(remote, registered.schema)
        except DataContractError as error:
            failures += 1
            print(f"{subject} version {version}: FAILED: {error}", file=out)
            continue
        pending.extend((found.reference.subject, found.reference.version) for found in referenced)
        if subject not in configured:
            configured.add(subject)
            failures += _pull_config(remote, directory, folders, subject, out)
    try:
        LocalRegistry(directory, create=True)
    except DataContractError as error:
        failures += 1
        print(f"pull: the directory does not load as a LocalRegistry: {error}", file=out)
    print(f"pull: {failures} failed" if failures else f"pull: {len(done)} versions", file=out)
    return 1 if failures else 0


def _pull_version(
    remote: Registry, directory: Path, folders: dict[str, Path], subject: str, version: int, out: TextIO
) -> RegisteredSchema:
    """Write one version of a subject as the registry serves it; a RegistryError when it cannot be."""
    if not is_id(version):
        raise RegistryError(f"the registry names version {version!r}; versions are 1 to {MAX_ID}")
    registered = remote.get_version(subject, version)
    path = _folder(directory, folders, subject) / f"{version}.json"
    # The registry's own id and GUID, so frames naming either resolve against the directory too.
    guid = {} if registered.guid is None else {"guid": registered.guid}
    write_json(path, {**registered.schema.to_dict(), "id": registered.schema_id, **guid})
    print(f"{subject} version {version} (id {registered.schema_id}) -> {path}", file=out)
    return registered


def _pull_config(
    remote: Registry, directory: Path, folders: dict[str, Path], subject: str, out: TextIO
) -> int:
    """Write the subject's own config (not the global one it falls back to) as its config.json;
    returns 1 when it could not be read or written."""
    try:
        config = remote.get_config(subject, default_to_global=False)
        if config:
            write_json(_folder(directory, folders, subject) / CONFIG_FILE, config)
    except DataContractError as error:
        print(f"{subject}: config FAILED: {error}", file=out)
        return 1
    if config:
        print(f"{subject}: config {json.dumps(config, sort_keys=True)}", file=out)
    return 0


def _folder(directory: Path, folders: dict[str, Path], subject: str) -> Path:
    """The subject's directory: the one it already has in `directory`, else a new one."""
    if subject not in folders:
        folders[subject] = new_subject_directory(directory, subject)
    return folders[subject]
