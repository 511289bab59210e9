"""The command line against a registry answering what it was not asked: one line on stderr and a
non-zero exit, never a traceback (`--debug` adds it) (docs/semantics.md §9.9, §10.13)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_server import RegistryServer, json_reply, running_registry

from contracts import LocalRegistry, Schema
from contracts.cli.main import run
from contracts.errors import RegistryError
from contracts.registry.http import SchemaRegistryClient

USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]})
MIGRATION = {"name": "same", "kind": "TRANSFORM", "type": "JSONATA", "mode": "UPDOWN", "expr": "$"}


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def server() -> Iterator[RegistryServer]:
    registry = LocalRegistry()
    schema = Schema.from_dict({"schema": USER, "ruleSet": {"migrationRules": [MIGRATION]}})
    registry.register_schema("users-value", schema)
    with running_registry(registry) as running:
        yield running


def version_answer(version: int, subject: str = "users-value") -> dict[str, object]:
    return {"subject": subject, "version": version, "id": 1, "schema": USER}


def test_lint_against_a_registry_answering_version_zero_as_one_ends_cleanly(server: RegistryServer) -> None:
    # Linting a migration rule of version 1 asked for version 0 (the one below); this registry
    # answers with version 1 again, which ended in `KeyError: 0` and 28 lines of traceback. Versions
    # count from 1: version 0 is never asked for.
    server.override("/subjects/users-value/versions/0", json_reply(200, version_answer(1)))
    status, out, err = cli("lint", "--registry", server.url)
    assert (status, out, err) == (0, "", "lint: no problems\n")
    assert server.count("GET", "/subjects/users-value/versions/0") == 0


def test_lint_reports_a_version_answered_as_another_one_in_one_line(server: RegistryServer) -> None:
    server.override("/subjects/users-value/versions/1", json_reply(200, version_answer(2)))
    status, out, err = cli("lint", "--registry", server.url)
    assert (status, err) == (1, "lint: 1 problem(s)\n")
    [line] = out.splitlines()
    assert "version 1 with subject 'users-value' version 2" in line


@pytest.mark.parametrize(
    ("path", "answer", "named"),
    [
        ("/subjects", {"0": "users-value"}, "GET /subjects with {'0': 'users-value'}; expected a list"),
        ("/subjects/users-value/versions", [0], "expected a list of version numbers"),
    ],
)
def test_an_answer_of_an_unexpected_shape_is_one_line_and_exit_1(
    server: RegistryServer, path: str, answer: object, named: str
) -> None:
    server.override(path, json_reply(200, answer))
    status, out, err = cli("lint", "--registry", server.url)
    assert status == 1
    if path == "/subjects":
        [line] = err.splitlines()
        assert line.startswith("spark-contracts lint: RegistryError: the schema registry answered")
        assert named in line
        debug_status, _, debug_err = cli("lint", "--registry", server.url, "--debug")
        assert debug_status == 1 and "Traceback (most recent call last)" in debug_err
    else:
        assert err == "lint: 1 problem(s)\n" and named in out


def test_pull_names_the_version_a_registry_answered_for_another_subject(
    server: RegistryServer, tmp_path: Path
) -> None:
    server.override("/subjects/users-value/versions/1", json_reply(200, version_answer(1, "other-value")))
    status, out, err = cli("pull", "--registry", server.url, str(tmp_path))
    assert status == 1 and err == ""
    assert "for subject 'users-value' version 1 with subject 'other-value' version 1" in out


def test_a_kek_of_an_unexpected_shape_is_a_registry_error_naming_the_call(server: RegistryServer) -> None:
    client = SchemaRegistryClient(server.url, max_retries=0)
    for kek in (
        {"name": "k", "kmsType": "local-kms", "kmsKeyId": "x", "shared": "false"},
        {"name": "k", "kmsType": "local-kms", "kmsKeyId": "x", "kmsProps": ["a"]},
        {"name": "k", "kmsType": "local-kms", "kmsKeyId": "x", "ts": "yesterday"},
    ):
        server.inject(json_reply(200, kek))
        with pytest.raises(RegistryError, match=r"GET /dek-registry/v1/keks/\{name\}"):
            client.get_kek("k")
    dek = {"kekName": "k", "subject": "s", "version": 1, "algorithm": "AES256_GCM", "keyMaterial": 12345678}
    server.inject(json_reply(200, dek))
    with pytest.raises(RegistryError, match="'keyMaterial' must be a string, not int") as error:
        client.get_dek("k", "s")
    assert "12345678" not in str(error.value)
