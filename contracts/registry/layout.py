"""LocalRegistry's directory layout: subject names as directory names, version file names, the id
high-water mark, and atomic writes.

A subject's directory is its name percent-encoded (`urllib.parse.quote(subject, safe="")`, so
`orders-value` stays `orders-value` and `a/b` is `a%2Fb`), with a leading `.` written `%2E` so no
name is hidden, `.` or `..`, and `config.json` written `config%2Ejson` (the global config file sits
beside the subject directories). A name that would be empty or longer than `_READABLE_MAX`
becomes `<readable prefix>+<sha256 of the subject>` and holds a `subject.json` naming the subject
(`+` never survives percent-encoding, so these names cannot collide with readable ones). Every
subject without control characters or lone surrogates has a directory, always directly under the
root; reading one back gives the same subject. Directories written by hand or by older releases
(any name that percent-decodes to a legal subject) load too, and keep taking that subject's writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import quote, unquote

from contracts.codes import INVALID_SUBJECT, STORE_ERROR
from contracts.errors import ContractError, RegistryError

CONFIG_FILE = "config.json"
SUBJECT_FILE = "subject.json"
# Hidden, so no subject directory name can ever be it; written only when a purge removes ids.
HIGH_WATER_FILE = ".highest-id.json"
MAX_ID = 2**31 - 1
"""Schema ids and version numbers are Java ints in Confluent's registry: 1 to 2^31-1."""

# eCryptfs allows 143 bytes per name, most filesystems 255; a hashed name is 64 + 1 + 64 bytes.
_READABLE_MAX = 143
_HASHED_PREFIX = 64
_VERSION_FILE = re.compile(r"[0-9]+\.json")
# ISO control characters (what Java's Character.isISOControl matches) and UTF-16 surrogates.
_ILLEGAL_IN_SUBJECT = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def invalid_subject(subject: object) -> str | None:
    """Why Confluent's registry would refuse `subject` (it answers 42208), or None when it is legal:
    any string without ISO control characters; lone surrogates cannot be stored or sent either."""
    if not isinstance(subject, str):
        return f"a subject is a string, not {type(subject).__name__}"
    bad = _ILLEGAL_IN_SUBJECT.search(subject)
    if bad is None:
        return None
    if unicodedata.category(bad.group()) == "Cs":
        return f"it holds the lone surrogate {bad.group()!r}, which is not Unicode text"
    return f"it holds the control character {bad.group()!r}"


def check_subject(subject: str) -> None:
    """Refuse a subject Confluent's registry would refuse, with its error (422, 42208)."""
    reason = invalid_subject(subject)
    if reason is not None:
        raise RegistryError(
            f"The specified subject {subject!r} is not valid: {reason}",
            status=422,
            error_code=INVALID_SUBJECT,
        )


def directory_name(subject: str) -> str:
    """The directory a legal subject gets when it has none yet (see the module docstring)."""
    name = quote(subject, safe="")
    if name.startswith("."):
        name = "%2E" + name[1:]
    if name == CONFIG_FILE:
        name = "config%2Ejson"
    if name and len(name) <= _READABLE_MAX:
        return name
    prefix = name[:_HASHED_PREFIX]
    escape = prefix.rfind("%", len(prefix) - 2)
    if escape >= 0:  # never cut a %XX escape in two
        prefix = prefix[:escape]
    return f"{prefix}+{hashlib.sha256(subject.encode('utf-8')).hexdigest()}"


def subject_of(directory: Path) -> str:
    """The subject a directory holds: its `subject.json`, else its name percent-decoded; a
    ContractError naming the directory when that is no legal subject."""
    named = directory / SUBJECT_FILE
    if named.is_file():
        payload = read_json(named, None, None)
        subject = payload.get("subject") if isinstance(payload, dict) else None
        if not isinstance(subject, str):
            raise ContractError(f'{SUBJECT_FILE} must hold {{"subject": "<name>"}}', position=str(named))
    else:
        try:
            subject = unquote(directory.name, errors="strict")
        except UnicodeDecodeError as error:
            raise ContractError(
                f"directory {directory.name!r} does not percent-decode to UTF-8 text: {error}",
                position=str(directory),
            ) from error
    reason = invalid_subject(subject)
    if reason is not None:
        raise ContractError(
            f"directory {directory.name!r} does not name a legal subject: {reason}", position=str(directory)
        )
    return subject


def subject_directories(root: Path) -> Iterator[tuple[str, Path]]:
    """Every subject directory under `root` with its subject (names starting with `.` are not
    subjects: temporary files, the id high-water mark); two directories naming one subject fail."""
    seen: dict[str, Path] = {}
    for entry in sorted(_scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        directory = Path(entry.path)
        subject = subject_of(directory)
        if subject in seen:
            raise ContractError(
                f"directories {seen[subject].name!r} and {directory.name!r} both hold this subject",
                subject=subject,
                position=str(directory),
            )
        seen[subject] = directory
        yield subject, directory


def new_subject_directory(root: Path, subject: str) -> Path:
    """Create the directory of a subject that has none under `root` (RegistryError 42208 for a
    subject Confluent refuses); a hashed name gets its `subject.json` first."""
    check_subject(subject)
    directory = root / directory_name(subject)
    try:
        directory.mkdir(exist_ok=True)
    except OSError as error:
        raise storage_error(directory, error) from error
    if unquote(directory.name) != subject:
        named = directory / SUBJECT_FILE
        if not named.exists():
            write_json(named, {"subject": subject})
        elif subject_of(directory) != subject:
            raise RegistryError(
                f"directory {directory.name!r} already holds another subject than {subject!r}",
                status=500,
                error_code=STORE_ERROR,
            )
    return directory


def version_of(path: Path, subject: str) -> int:
    """The version a version file's name holds: ASCII digits, no leading zero, 1 to 2^31-1."""
    name = path.name
    if _VERSION_FILE.fullmatch(name):
        digits = name[: -len(".json")]
        if not digits.startswith("0") and len(digits) <= len(str(MAX_ID)) and int(digits) <= MAX_ID:
            return int(digits)
    raise ContractError(
        f"unexpected file {name!r}: expected {CONFIG_FILE}, {SUBJECT_FILE} or <version>.json with a"
        " version from 1 to 2147483647 written without leading zeros",
        subject=subject,
    )


def read_high_water(root: Path) -> int:
    """The highest schema id this directory ever handed out, as far as purges needed to record it."""
    path = root / HIGH_WATER_FILE
    if not path.exists():
        return 0
    payload = read_json(path, None, None)
    value = payload.get("highestId") if isinstance(payload, dict) else None
    if not is_id(value):
        raise ContractError(
            'the id high-water mark must hold {"highestId": <id from 1 to 2147483647>}', position=str(path)
        )
    return value


def write_high_water(root: Path, highest_id: int) -> None:
    """Record that ids up to `highest_id` were handed out, before a purge removes the files showing it."""
    if highest_id > read_high_water(root):
        write_json(root / HIGH_WATER_FILE, {"highestId": highest_id})


def is_id(value: object) -> TypeGuard[int]:
    """Whether `value` is a schema id (or a version number): an int from 1 to 2^31-1, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ID


def read_json(path: Path, subject: str | None, version: int | None) -> Any:
    """A file's JSON, or a ContractError naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        raise ContractError(
            f"cannot read {path.name}: {error}", subject=subject, version=version, position=str(path)
        ) from error


def write_json(path: Path, payload: Any) -> None:
    """Write atomically: a temp file in the same directory, fsynced, then renamed over `path`; a
    failure is a RegistryError (Confluent's 50001, a backend store error) and leaves the old file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise storage_error(path, error) from error
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(error, OSError):
            raise storage_error(path, error) from error
        raise


def storage_error(path: Path, error: OSError, doing: str = "write") -> RegistryError:
    """A file the registry could not write or read, as Confluent reports its store failing."""
    return RegistryError(
        f"cannot {doing} {path}: {error.strerror or error}", status=500, error_code=STORE_ERROR
    )


def registry_files(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every file the registry reads, with its stat: the root's config.json and the JSON files
    directly in each subject directory (what changes when another process writes)."""
    for entry in sorted(_scandir(root), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            yield from json_files(Path(entry.path))
        elif entry.name == CONFIG_FILE:
            yield from _stat(entry)


def json_files(directory: Path) -> list[tuple[Path, os.stat_result]]:
    """The JSON files directly in a subject directory, sorted by name (hidden ones, such as
    unfinished writes, left out; so are files that vanish meanwhile, removed by another process)."""
    return [
        found
        for entry in sorted(_scandir(directory), key=lambda e: e.name)
        if entry.name.endswith(".json") and not entry.name.startswith(".") and entry.is_file()
        for found in _stat(entry)
    ]


def _stat(entry: os.DirEntry[str]) -> list[tuple[Path, os.stat_result]]:
    try:
        return [(Path(entry.path), entry.stat())]
    except FileNotFoundError:
        return []


def _scandir(root: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(root) as entries:
            return list(entries)
    except OSError as error:
        raise storage_error(root, error, "read") from error
