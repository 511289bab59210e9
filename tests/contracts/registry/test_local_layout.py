"""LocalRegistry on disk: every legal subject name round-trips, nothing lands outside the root,
ids are never handed out twice, and malformed version files are refused with a clear error."""

from __future__ import annotations

import io
import json
import os
import pickle
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts import remap_schema_ids
from contracts.errors import ContractError, RegistryError
from contracts.formats.wire import decode_frame, encode_frame
from contracts.model import Schema
from contracts.registry.local import LocalRegistry


def avro(field: str) -> Schema:
    return Schema.from_dict(
        {"schema": json.dumps({"type": "record", "name": "R", "fields": [{"name": field, "type": "int"}]})}
    )


def write(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))


def outside(container: Path, root: Path) -> list[str]:
    """What exists in `container` besides the registry root (a file escaping the root lands here)."""
    return sorted(name for name in os.listdir(container) if name != root.name)


def everything_under(root: Path) -> list[Path]:
    return [Path(folder, name) for folder, dirs, files in os.walk(root) for name in dirs + files]


# Confluent accepts any subject without ISO control characters (it answers 42208 otherwise),
# the empty one included; Kafka topics are [a-zA-Z0-9._-]{1,249}, and TopicNameStrategy appends
# "-key" or "-value".
ANY_SUBJECT = st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=40)
TOPIC_SUBJECT = st.builds(
    "{}-{}".format,
    st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True),
    st.sampled_from(["key", "value"]),
)
AWKWARD_SUBJECT = st.sampled_from(
    [
        "",
        ".",
        "..",
        "../x",
        "../../etc",
        ".events-value",
        "..-value",
        "a/b",
        "config.json",
        "subject.json",
        "1.json",
        "%2E",
        "%",
        "+",
        "~",
        "x" * 300,
        "é" * 200,
        "🦆" * 70,
        ".hidden/../..",
    ]
)
SUBJECTS = st.lists(
    st.one_of(ANY_SUBJECT, TOPIC_SUBJECT, AWKWARD_SUBJECT), min_size=1, max_size=6, unique=True
)


@given(subjects=SUBJECTS, purged=st.sets(st.integers(0, 5)))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_legal_subject_round_trips_through_a_reload_inside_the_root(
    subjects: list[str], purged: set[int]
) -> None:
    with tempfile.TemporaryDirectory() as container:
        root = Path(container) / "registry"
        registry = LocalRegistry(root, create=True)
        registry.set_config(compatibility="NONE")
        ids = {
            subject: registry.register_schema(subject, avro(f"f{n}")) for n, subject in enumerate(subjects)
        }
        registry.set_config(subjects[0], compatibility="FULL")
        gone = {subjects[n] for n in purged if n < len(subjects)}
        for subject in gone:
            registry.delete_subject(subject)
            registry.delete_subject(subject, permanent=True)

        reloaded = LocalRegistry(root)
        kept = [subject for subject in subjects if subject not in gone]
        assert reloaded.get_subjects() == sorted(kept)
        for n, subject in enumerate(subjects):
            if subject in kept:
                assert reloaded.lookup_schema(subject, avro(f"f{n}")).schema_id == ids[subject]
                assert reloaded.get_schema(ids[subject]) == registry.get_schema(ids[subject])
        if subjects[0] in kept:
            assert reloaded.get_config(subjects[0])["compatibility"] == "FULL"
        assert reloaded.get_config()["compatibility"] == "NONE"
        # Ids are never handed out twice, purged ones included.
        assert reloaded.register_schema("fresh\u2028", avro("fresh")) == max(ids.values()) + 1
        assert outside(Path(container), root) == []
        assert all(path.resolve().is_relative_to(root.resolve()) for path in everything_under(root))


def test_dot_subjects_are_stored_under_the_root_and_never_touch_the_global_config(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    registry = LocalRegistry(root, create=True)
    registry.set_config(compatibility="FULL")
    for subject in (".", "..", "../x", ".events-value", ""):
        registry.register_schema(subject, avro("a"))
        registry.set_config(subject, compatibility="NONE")

    assert outside(tmp_path, root) == []
    assert json.loads((root / "config.json").read_text()) == {"compatibility": "FULL"}
    reloaded = LocalRegistry(root)
    assert reloaded.get_subjects() == ["", ".", "..", "../x", ".events-value"]
    assert reloaded.get_config()["compatibility"] == "FULL"
    assert reloaded.get_config("..")["compatibility"] == "NONE"
    # Names stay readable: a leading dot is percent-encoded, so no directory is hidden.
    assert (root / "%2Eevents-value" / "1.json").is_file()
    assert (root / "%2E." / "1.json").is_file()


def test_a_new_process_never_reuses_the_id_of_a_subject_starting_with_a_dot(tmp_path: Path) -> None:
    first = LocalRegistry(tmp_path)
    dotted = first.register_schema(".events-value", avro("a"))
    other = LocalRegistry(tmp_path).register_schema("orders-value", avro("b"))
    assert other != dotted
    assert LocalRegistry(tmp_path).get_schema(dotted) == avro("a")


def test_a_long_subject_gets_a_hashed_directory_that_names_it(tmp_path: Path) -> None:
    long_subject = "topic." + "x" * 300 + "-value"
    schema_id = LocalRegistry(tmp_path).register_schema(long_subject, avro("a"))
    [directory] = [path for path in tmp_path.iterdir() if path.is_dir()]
    assert len(directory.name) < 150 and directory.name.startswith("topic.xxx")
    assert json.loads((directory / "subject.json").read_text()) == {"subject": long_subject}
    assert LocalRegistry(tmp_path).get_latest_version(long_subject).schema_id == schema_id


@pytest.mark.parametrize("subject", ["a\x00b", "line\nbreak", "\x7f", "bell\x07", "\ud800", "a\udcffb"])
def test_subjects_confluent_refuses_are_42208_and_write_nothing(tmp_path: Path, subject: str) -> None:
    registry = LocalRegistry(tmp_path / "registry", create=True)
    for call in (
        lambda: registry.register_schema(subject, avro("a")),
        lambda: registry.set_config(subject, compatibility="NONE"),
    ):
        with pytest.raises(RegistryError) as error:
            call()
        assert (error.value.status, error.value.error_code) == (422, 42208)
    assert list((tmp_path / "registry").iterdir()) == []


# -- ids survive deletions ---------------------------------------------------------------------


def test_purging_the_highest_id_does_not_let_a_reload_hand_it_out_again(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registry.register_schema("a", avro("a"))
    highest = registry.register_schema("b", avro("b"))
    registry.delete_subject("b")
    registry.delete_subject("b", permanent=True)
    assert LocalRegistry(tmp_path).register_schema("c", avro("c")) == highest + 1


def test_purging_every_subject_does_not_let_a_reload_start_again_at_one(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registry.register_schema("a", avro("a"))
    registry.delete_subject("a")
    registry.delete_subject("a", permanent=True)
    assert [path.name for path in tmp_path.iterdir()] == [".highest-id.json"]
    assert LocalRegistry(tmp_path).register_schema("b", avro("b")) == 2


def test_purging_the_highest_version_does_not_let_a_reload_hand_its_id_out_again(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registry.set_config(compatibility="NONE")
    registry.register_schema("a", avro("a"))
    highest = registry.register_schema("a", avro("b"))
    registry.delete_version("a", 2)
    registry.delete_version("a", 2, permanent=True)
    reloaded = LocalRegistry(tmp_path)
    with pytest.raises(RegistryError):
        reloaded.get_schema(highest)
    assert reloaded.register_schema("a", avro("c")) == highest + 1
    assert LocalRegistry(tmp_path).register_schema("z", avro("z")) == highest + 2


# -- version files -----------------------------------------------------------------------------

SCHEMA_TEXT = avro("a").schema_str


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"s/1.json": {"schema": SCHEMA_TEXT, "id": True}}, "id must be"),
        ({"s/1.json": {"schema": SCHEMA_TEXT, "id": 2**31}}, "id must be"),
        ({"s/1.json": {"schema": SCHEMA_TEXT, "id": 1.0}}, "id must be"),
        ({"s/1.json": {"schema": SCHEMA_TEXT, "deleted": "false"}}, "deleted must be"),
        ({"s/0.json": {"schema": SCHEMA_TEXT}}, "0.json"),
        ({"s/2147483648.json": {"schema": SCHEMA_TEXT}}, "2147483648.json"),
        ({"s/99999999999999999999.json": {"schema": SCHEMA_TEXT}}, "99999999999999999999.json"),
        ({"s/1.json": {"schema": SCHEMA_TEXT}, "s/01.json": {"schema": SCHEMA_TEXT}}, "01.json"),
        ({"s/\u0661.json": {"schema": SCHEMA_TEXT}}, "\u0661.json"),
        ({"s/subject.json": {"subject": 7}, "s/1.json": {"schema": SCHEMA_TEXT}}, "subject.json"),
        ({"s/subject.json": {"subject": "a\x00"}, "s/1.json": {"schema": SCHEMA_TEXT}}, "subject"),
        ({"a%00/1.json": {"schema": SCHEMA_TEXT}}, "a%00"),
        ({"%FF/1.json": {"schema": SCHEMA_TEXT}}, "%FF"),
        ({"a b/1.json": {"schema": SCHEMA_TEXT}, "a%20b/2.json": {"schema": SCHEMA_TEXT}}, "a%20b"),
        ({".highest-id.json": {"highestId": "7"}}, "highest"),
    ],
)
def test_malformed_files_are_refused_at_load_naming_the_file(
    tmp_path: Path, files: dict[str, Any], message: str
) -> None:
    for name, payload in files.items():
        write(tmp_path / name, payload)
    with pytest.raises(ContractError, match=message.replace("+", r"\+")):
        LocalRegistry(tmp_path)


def test_a_directory_name_that_is_not_utf8_is_a_contract_error(tmp_path: Path) -> None:
    folder = os.path.join(os.fsencode(tmp_path), b"bad\xff")
    os.mkdir(folder)
    Path(os.fsdecode(folder), "1.json").write_text(json.dumps({"schema": SCHEMA_TEXT}))
    with pytest.raises(ContractError, match="bad"):
        LocalRegistry(tmp_path)


def test_directories_written_before_the_layout_change_still_load_and_take_new_versions(
    tmp_path: Path,
) -> None:
    # Percent-encoded names (the old layout) and hand-written ones load as before; a new version
    # goes into the directory the subject already has.
    write(tmp_path / "a%2Fb" / "1.json", {"schema": SCHEMA_TEXT, "id": 4})
    write(tmp_path / "ünï-value" / "1.json", {"schema": avro("u").schema_str})
    write(tmp_path / "orders-value" / "config.json", {"compatibility": "NONE"})
    write(tmp_path / "orders-value" / "1.json", {"schema": avro("o").schema_str, "id": 2})
    registry = LocalRegistry(tmp_path)
    assert registry.get_subjects() == ["a/b", "orders-value", "ünï-value"]
    assert registry.get_latest_version("a/b").schema_id == 4
    registry.set_config("ünï-value", compatibility="NONE")
    registry.register_schema("ünï-value", avro("v"))
    registry.register_schema("orders-value", avro("p"))
    assert (tmp_path / "ünï-value" / "2.json").is_file()
    assert (tmp_path / "ünï-value" / "config.json").is_file()
    assert (tmp_path / "orders-value" / "2.json").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a%2Fb", "orders-value", "ünï-value"]
    assert LocalRegistry(tmp_path).get_versions("ünï-value") == [1, 2]


def test_a_write_that_fails_is_a_registry_error_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = LocalRegistry(tmp_path)
    registry.set_config(compatibility="FULL")
    before = (tmp_path / "config.json").read_text()

    def crash(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("contracts.registry.layout.os.replace", crash)
    with pytest.raises(RegistryError, match="No space left") as error:
        registry.set_config(compatibility="NONE")
    assert (error.value.status, error.value.error_code) == (500, 50001)
    assert isinstance(error.value.__cause__, OSError)
    assert (tmp_path / "config.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


# -- the path ----------------------------------------------------------------------------------


def test_a_relative_path_is_resolved_once_at_construction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    registry = LocalRegistry("registry", create=True)
    assert registry.path == tmp_path.resolve() / "registry"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    copy = pickle.loads(pickle.dumps(registry))
    copy.register_schema("a", avro("a"))
    assert (tmp_path / "registry" / "a" / "1.json").is_file()
    assert list(elsewhere.iterdir()) == []


def test_spark_workers_write_a_relative_registry_where_the_driver_named_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers' working directory is not the driver's (on Spark Connect not even the same
    # machine); here the driver moves to tmp_path after Spark started, so "registry" differs.
    source = LocalRegistry()
    source_id = source.register_schema("orders-value", avro("a"))
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(json.loads(avro("a").schema_str)), {"a": 7})
    rows = [(encode_frame(source_id, body.getvalue()), "orders")]
    monkeypatch.chdir(tmp_path)
    relative = f"registry-{uuid.uuid4().hex}"
    destination = LocalRegistry(relative, create=True)
    destination.register_schema("other-value", avro("other"))

    moved = remap_schema_ids(
        spark.createDataFrame(rows, "value binary, topic string"), source, destination, key_col=None
    ).collect()

    new_id = decode_frame(moved[0].value)[0]
    assert LocalRegistry(tmp_path / relative).get_version("orders-value", 1).schema_id == new_id == 2
