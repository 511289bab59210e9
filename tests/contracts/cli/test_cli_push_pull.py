"""`spark-contracts push` and `pull`: versions, ids, GUIDs and references between a directory and a
registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import cli, write_version
from cli_users import EXAMPLES, RULES, SUBJECT, USER, contract_payload
from registry_server import RegistryServer, running_registry

from contracts import LocalRegistry, Schema

# -- push and pull ---------------------------------------------------------------------------


def test_push_then_pull_round_trips_every_version(server: RegistryServer, tmp_path: Path) -> None:
    ran = cli("push", str(EXAMPLES), "--registry", server.url)
    assert ran.status == 0, ran.out
    assert ran.out.count(": registered (id ") == 3
    assert server.registry.get_versions("orders-value") == [1, 2, 3]
    # The subject's config.json (compatibilityGroup by major version) went first, or 3 would be refused.
    assert server.registry.get_config("orders-value")["compatibilityGroup"] == "application.major.version"

    again = cli("push", str(EXAMPLES), "--registry", server.url)
    assert again.status == 0
    assert again.out.count(": already registered as version ") == 3
    assert server.registry.get_versions("orders-value") == [1, 2, 3]

    pulled = tmp_path / "pulled"
    ran = cli("pull", "--registry", server.url, str(pulled))
    assert ran.status == 0, ran.out
    local = LocalRegistry(pulled)
    for version in (1, 2, 3):
        assert local.get_version("orders-value", version) == server.registry.get_version(
            "orders-value", version
        )
    assert cli("lint", str(pulled)).status == 0
    # The subject's own config came along (not the global one it falls back to): a pushed-back
    # copy would accept version 3 again.
    assert json.loads((pulled / "orders-value" / "config.json").read_text()) == json.loads(
        (EXAMPLES / "orders-value" / "config.json").read_text()
    )
    assert not (pulled / "config.json").exists()


def test_push_reports_an_incompatible_version_and_goes_on(server: RegistryServer, tmp_path: Path) -> None:
    root = tmp_path / "contracts"
    required_phone = {**USER, "fields": [*USER["fields"], {"name": "phone", "type": "string"}]}
    optional_phone = {
        **USER,
        "fields": [*USER["fields"], {"name": "phone", "type": ["null", "string"], "default": None}],
    }
    write_version(root, SUBJECT, 1, contract_payload(RULES))
    write_version(root, SUBJECT, 2, contract_payload(RULES, required_phone))
    write_version(root, SUBJECT, 3, contract_payload(RULES, optional_phone))
    write_version(root, "other-value", 1, contract_payload([]))

    ran = cli("push", str(root), "--registry", server.url)

    assert ran.status == 1
    assert f"{SUBJECT} version 2: INCOMPATIBLE: " in ran.out
    assert "(status 409" in ran.out
    assert f"{SUBJECT} version 3: registered" in ran.out
    assert "other-value version 1: registered" in ran.out
    assert "push: 1 failed" in ran.out
    assert server.registry.get_versions(SUBJECT) == [1, 2]
    assert server.registry.get_version(SUBJECT, 2).schema.schema_str == json.dumps(optional_phone)


def test_pull_exports_the_chosen_subjects_and_the_versions_they_reference(
    server: RegistryServer, tmp_path: Path
) -> None:

    address = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
    server.registry.register_schema("address", Schema.from_dict({"schema": json.dumps(address)}))
    person = {"type": "record", "name": "Person", "fields": [{"name": "home", "type": "Address"}]}
    reference = {"name": "Address", "subject": "address", "version": 1}
    server.registry.register_schema(
        "person-value", Schema.from_dict({"schema": json.dumps(person), "references": [reference]})
    )
    server.registry.register_schema(SUBJECT, Schema.from_dict(contract_payload(RULES)))

    ran = cli("pull", "--registry", server.url, str(tmp_path / "out"), "--subject", "person-value")

    assert ran.status == 0, ran.out
    local = LocalRegistry(tmp_path / "out")
    assert local.get_subjects() == ["address", "person-value"]
    assert local.get_version("person-value", 1) == server.registry.get_version("person-value", 1)
    assert cli("pull", "--registry", server.url, str(tmp_path / "none"), "--subject", "x").status == 1


def test_pull_keeps_the_registrys_own_ids_and_guids(tmp_path: Path) -> None:
    """A GUID the remote gave (not what the text hashes to here) is written, so frames naming the
    schema by GUID resolve against the pulled directory as they do against the remote."""
    guid = "6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d"
    remote = tmp_path / "remote"
    write_version(remote, SUBJECT, 1, {**contract_payload(RULES), "id": 42, "guid": guid})
    with running_registry(LocalRegistry(remote)) as served:
        ran = cli("pull", "--registry", served.url, str(tmp_path / "out"))

    assert ran.status == 0, ran.out
    written = json.loads((tmp_path / "out" / SUBJECT / "1.json").read_text())
    assert (written["id"], written["guid"]) == (42, guid)
    assert LocalRegistry(tmp_path / "out").get_schema_by_guid(guid).schema_str == written["schema"]


@pytest.mark.parametrize("source", ["http", "directory"])
def test_pull_writes_subjects_named_like_paths_inside_the_directory(
    server: RegistryServer, tmp_path: Path, source: str
) -> None:

    registry = server.registry if source == "http" else LocalRegistry(tmp_path / "source", create=True)
    subjects = ["..", ".", "../x", ".events-value", "a/b", "config.json", "versions"]
    ids = {}
    for n, subject in enumerate(subjects):
        record = {"type": "record", "name": f"R{n}", "fields": [{"name": "a", "type": "int"}]}
        ids[subject] = registry.register_schema(subject, Schema.from_dict({"schema": json.dumps(record)}))
    registry.set_config(".", compatibility="NONE")
    container = tmp_path / "container"
    container.mkdir()

    url = server.url if source == "http" else str(tmp_path / "source")
    ran = cli("pull", "--registry", url, str(container / "out"))

    assert ran.status == 0, ran.out
    assert [path.name for path in container.iterdir()] == ["out"]
    local = LocalRegistry(container / "out")
    assert local.get_subjects() == sorted(subjects)
    assert {subject: local.get_latest_version(subject).schema_id for subject in subjects} == ids
    assert local.get_config(".", default_to_global=False) == {"compatibility": "NONE"}
    assert not (container / "out" / "config.json").exists()


def test_push_of_a_missing_directory_is_an_error_that_creates_nothing(
    server: RegistryServer, tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    ran = cli("push", str(missing), "--registry", server.url)
    assert ran.status == 1
    assert ran.err.count("\n") == 1 and str(missing) in ran.err and "does not exist" in ran.err
    assert "push: done" not in ran.out
    assert not missing.exists()
    assert server.count() == 0
