"""Secrets a command takes from a file or an environment variable, never from its command line
(where shell history and process listings keep them): read bounded, and reported without quoting."""

from __future__ import annotations

import os

from contracts.cli.errors import UsageError

MAX_SECRET_FILE_BYTES = 1024 * 1024
"""The most a secret file may hold: a rule config or credentials are small, and `/dev/zero` is not."""


def read_secret_file(path: str, where: str) -> str:
    """The UTF-8 text of file `path`; a UsageError starting with `where` when it cannot be read,
    is larger than MAX_SECRET_FILE_BYTES or is not UTF-8 (never quoting its content)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_SECRET_FILE_BYTES + 1)
    except OSError as error:
        raise UsageError(f"{where}: cannot read it: {error.strerror or type(error).__name__}") from None
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise UsageError(f"{where}: holds more than {MAX_SECRET_FILE_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{where}: is not UTF-8 text") from None


def read_secret_variable(name: str, where: str) -> str:
    """The value of environment variable `name`; a UsageError starting with `where` when it is not set."""
    text = os.environ.get(name)
    if text is None:
        raise UsageError(f"{where}: the environment variable {name} is not set")
    return text
