"""The CLI's registry argument: an http(s) URL is a Schema Registry, else a LocalRegistry directory;
and its credentials, from a file or an environment variable rather than the command line."""

from __future__ import annotations

import argparse

from contracts.cli.errors import UsageError
from contracts.cli.secrets import read_secret_file, read_secret_variable
from contracts.errors import RegistryError
from contracts.registry import LocalRegistry, Registry, SchemaRegistryClient

Credentials = tuple[str, str]


def is_url(spec: str) -> bool:
    """Whether `spec` names a REST registry (one URL, or several comma-separated for failover)."""
    return spec.split(",", 1)[0].strip().lower().startswith(("http://", "https://"))


def add_registry_auth_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --registry-auth-file and --registry-auth-env to a command that takes --registry."""
    parser.add_argument(
        "--registry-auth-file",
        metavar="PATH",
        help="a file holding the registry's KEY:SECRET (Confluent's basic.auth.user.info), so the"
        " secret is not on the command line",
    )
    parser.add_argument(
        "--registry-auth-env",
        metavar="NAME",
        help="an environment variable holding the registry's KEY:SECRET (e.g."
        " SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO)",
    )


def registry_auth(args: argparse.Namespace) -> Credentials | None:
    """The registry's credentials from --registry-auth-file or --registry-auth-env (one of them),
    None without either; a UsageError naming the file or variable, never its value."""
    path, name = args.registry_auth_file, args.registry_auth_env
    if path is not None and name is not None:
        raise UsageError("give --registry-auth-file or --registry-auth-env, not both")
    if path is not None:
        where = f"--registry-auth-file {path}"
        return _user_info(read_secret_file(path, where).strip(), where)
    if name is not None:
        where = f"--registry-auth-env {name}"
        return _user_info(read_secret_variable(name, where).strip(), where)
    return None


def _user_info(text: str, where: str) -> Credentials:
    key, sep, secret = text.partition(":")
    if not sep or not key or "\n" in text:
        raise UsageError(f"{where}: must hold one line KEY:SECRET")
    return key, secret


def open_registry(spec: str, *, must_exist: bool = True, auth: Credentials | None = None) -> Registry:
    """The registry `spec` names. Credentials come in `auth` or in the URL
    (`https://key:secret@host`), as the client accepts them; a directory must already exist unless
    `must_exist` is False, so a typo does not silently create an empty registry."""
    if auth is not None and not is_url(spec):
        raise UsageError("--registry-auth-file/--registry-auth-env go with a registry URL, not a directory")
    try:
        if is_url(spec):
            return SchemaRegistryClient(spec, basic_auth=auth)
        return LocalRegistry(spec, create=not must_exist)
    except ValueError as e:
        # A URL the client refuses ('http://'), a directory LocalRegistry cannot read: the
        # client's message names what is wrong and leaves any credential out.
        raise RegistryError(str(e)) from e
