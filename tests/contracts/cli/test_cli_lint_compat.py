"""`spark-contracts lint` checks each version's schema against the earlier ones of its subject under
the subject's compatibility level, as registering it would."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from registry_server import RegistryServer, running_registry

from contracts import LocalRegistry, RegisteredSchema, Schema
from contracts.cli.lint import Problem, lint_registry
from contracts.cli.main import run

SUBJECT = "users-value"
NO_DEFAULT = "has no default value and is missing in the writer"


def record(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "User", "fields": list(fields)}


def field(name: str, avro_type: str = "int", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": avro_type, **extra}


def cli(*argv: str) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), stdout=out, stderr=err)
    return status, out.getvalue().splitlines(), err.getvalue()


def write_versions(root: Path, *schemas: dict[str, Any], majors: tuple[str, ...] = ()) -> list[Path]:
    """Version files written directly (LocalRegistry would refuse an incompatible one)."""
    paths = []
    for version, schema in enumerate(schemas, start=1):
        payload: dict[str, Any] = {"schemaType": "AVRO", "schema": json.dumps(schema)}
        if majors:
            payload["metadata"] = {"properties": {"major": majors[version - 1]}}
        path = root / SUBJECT / f"{version}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload))
        paths.append(path)
    return paths


def write_config(directory: Path, **config: Any) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))


@pytest.fixture
def server() -> Iterator[RegistryServer]:
    with running_registry(LocalRegistry()) as running:
        yield running


@pytest.mark.parametrize(
    ("level", "v1", "v2", "message"),
    [
        # No config file anywhere: the global default, BACKWARD.
        (
            None,
            record(field("id")),
            record(field("id"), field("age")),
            f"new schema cannot read old: /fields/1: reader field 'age' {NO_DEFAULT}",
        ),
        (
            "FORWARD",
            record(field("id"), field("age")),
            record(field("id")),
            f"old schema cannot read new: /fields/1: reader field 'age' {NO_DEFAULT}",
        ),
        (
            "FULL",
            record(field("id"), field("age", "int")),
            record(field("id"), field("age", "long")),
            "old schema cannot read new: /fields/1/type: reader type 'int' cannot read writer type 'long'",
        ),
    ],
)
def test_lint_reports_a_version_incompatible_with_the_one_before(
    tmp_path: Path, level: str | None, v1: dict[str, Any], v2: dict[str, Any], message: str
) -> None:
    _, path = write_versions(tmp_path, v1, v2)
    if level is not None:
        write_config(tmp_path / SUBJECT, compatibility=level)

    status, out, err = cli("lint", str(tmp_path))

    assert status == 1
    assert out == [
        f"{path}: subject={SUBJECT} version=2 rule=- position=schema: incompatible with version 1"
        f" under {level or 'BACKWARD'}: {message}"
    ]
    assert "lint: 1 problem(s)" in err


@pytest.mark.parametrize("scope", ["subject", "global"])
def test_lint_passes_the_same_versions_under_none(tmp_path: Path, scope: str) -> None:
    write_versions(tmp_path, record(field("id")), record(field("id"), field("age")))
    write_config(tmp_path / SUBJECT if scope == "subject" else tmp_path, compatibility="NONE")

    assert cli("lint", str(tmp_path)) == (0, [], "lint: no problems\n")


@pytest.mark.parametrize(
    ("level", "reported"),
    [
        ("BACKWARD", False),
        ("FORWARD", False),
        ("FULL", False),
        ("FORWARD_TRANSITIVE", False),
        ("BACKWARD_TRANSITIVE", True),
        ("FULL_TRANSITIVE", True),
    ],
)
def test_a_transitive_level_checks_every_earlier_version(tmp_path: Path, level: str, reported: bool) -> None:
    # Version 2 adds `age` with a default, version 3 drops the default: fine against version 2,
    # but version 3 cannot read what version 1 wrote.
    _, _, path = write_versions(
        tmp_path,
        record(field("id")),
        record(field("id"), field("age", default=0)),
        record(field("id"), field("age")),
    )
    write_config(tmp_path, compatibility=level)

    status, out, _ = cli("lint", str(tmp_path))

    expected = [
        f"{path}: subject={SUBJECT} version=3 rule=- position=schema: incompatible with version 1"
        f" under {level}: new schema cannot read old: /fields/1: reader field 'age' {NO_DEFAULT}"
    ]
    assert (status, out) == ((1, expected) if reported else (0, []))


def test_versions_in_different_compatibility_groups_are_not_compared(tmp_path: Path) -> None:
    # Version 2 (major 2) breaks version 1 but is in another group; version 3 (major 1) is checked
    # against version 1, the latest in its group, not against version 2.
    _, _, path = write_versions(
        tmp_path,
        record(field("id")),
        record(field("name", "string")),
        record(field("id"), field("age")),
        majors=("1", "2", "1"),
    )
    write_config(tmp_path / SUBJECT, compatibility="BACKWARD", compatibilityGroup="major")

    status, out, _ = cli("lint", str(tmp_path))

    assert status == 1
    assert out == [
        f"{path}: subject={SUBJECT} version=3 rule=- position=schema: incompatible with version 1"
        f" under BACKWARD: new schema cannot read old: /fields/1: reader field 'age' {NO_DEFAULT}"
    ]


def test_lint_reports_an_unknown_compatibility_level(tmp_path: Path) -> None:
    write_versions(tmp_path, record(field("id")), record(field("id"), field("age")))
    write_config(tmp_path / SUBJECT, compatibility="SIDEWAYS")

    status, out, _ = cli("lint", str(tmp_path))

    assert status == 1
    assert out == [
        f"subject={SUBJECT} version=- rule=- position=compatibility: unknown compatibility level 'SIDEWAYS'"
    ]


def test_lint_of_a_registry_url_checks_under_the_subjects_config(server: RegistryServer) -> None:
    registry = server.registry
    registry.set_config(SUBJECT, compatibility="NONE")
    registry.register_schema(SUBJECT, Schema(json.dumps(record(field("id")))))
    registry.register_schema(SUBJECT, Schema(json.dumps(record(field("id"), field("age")))))
    assert cli("lint", "--registry", server.url)[0] == 0

    registry.set_config(SUBJECT, compatibility="BACKWARD_TRANSITIVE")
    status, out, _ = cli("lint", "--registry", server.url, "--subject", SUBJECT)

    assert status == 1
    assert out == [
        f"subject={SUBJECT} version=2 rule=- position=schema: incompatible with version 1 under"
        f" BACKWARD_TRANSITIVE: new schema cannot read old: /fields/1: reader field 'age' {NO_DEFAULT}"
    ]


class _FieldlessVersionTwo(LocalRegistry):
    """Serves version 2 as a record without "fields": fastavro (and so the loader) takes it, Avro
    Java (and so the compatibility checker) does not."""

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        registered = super().get_version(subject, version)
        if registered.version != 2:
            return registered
        fieldless = json.dumps({"type": "record", "name": "User"})
        return RegisteredSchema(registered.schema_id, Schema(fieldless), subject, 2)


def test_a_schema_the_compatibility_check_cannot_read_is_a_problem_and_is_not_compared() -> None:
    # Version 3 cannot read version 1, but BACKWARD checks it against version 2 only, which the
    # checker cannot read: that pair is skipped, not replaced by version 1.
    registry = _FieldlessVersionTwo()
    for schema in (
        record(field("id")),
        record(field("id"), field("age", default=0)),
        record(field("id"), field("age")),
    ):
        registry.register_schema(SUBJECT, Schema(json.dumps(schema)))

    assert lint_registry(registry) == [
        Problem(
            "the compatibility check cannot read the schema: Record has no fields: User",
            SUBJECT,
            2,
            position="schema",
        )
    ]


def test_lint_checks_json_schema_subjects_with_their_own_checker(tmp_path: Path) -> None:
    documents = [
        {"type": "object", "properties": {"id": {"type": "integer"}}},
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "qty": {"type": "integer"}},
            "required": ["qty"],
        },
    ]
    for version, document in enumerate(documents, start=1):
        path = tmp_path / SUBJECT / f"{version}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schemaType": "JSON", "schema": json.dumps(document)}))

    status, out, _ = cli("lint", str(tmp_path))

    assert status == 1 and len(out) == 1, out
    assert (
        f"subject={SUBJECT} version=2 rule=- position=schema: incompatible with version 1 under BACKWARD:"
        in out[0]
    )
    assert "new schema cannot read old" in out[0]
    write_config(tmp_path / SUBJECT, compatibility="NONE")
    assert cli("lint", str(tmp_path)) == (0, [], "lint: no problems\n")


def test_lint_checks_protobuf_subjects_by_field_number(tmp_path: Path) -> None:
    texts = [
        'syntax = "proto3"; message Order { int64 id = 1; string note = 2; }',
        'syntax = "proto3"; message Order { string id = 1; }',
    ]
    for version, text in enumerate(texts, start=1):
        path = tmp_path / SUBJECT / f"{version}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schemaType": "PROTOBUF", "schema": text}))

    status, out, _ = cli("lint", str(tmp_path))

    assert status == 1 and len(out) == 1, out
    assert (
        f"subject={SUBJECT} version=2 rule=- position=schema: incompatible with version 1 under BACKWARD"
        in out[0]
    )
    assert "new schema cannot read old: FIELD_SCALAR_KIND_CHANGED: Order field 1 (id)" in out[0]
    write_config(tmp_path / SUBJECT, compatibility="NONE")
    assert cli("lint", str(tmp_path)) == (0, [], "lint: no problems\n")
