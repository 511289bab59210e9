"""LocalRegistry behaves like Confluent's Schema Registry: ids, versions, config, errors, files."""

from __future__ import annotations

import hashlib
import json
import pickle
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts.errors import ContractError, RegistryError
from contracts.model import Metadata, RuleSet, Schema, SchemaReference
from contracts.registry import Registry
from contracts.registry.guid import schema_guid
from contracts.registry.local import LocalRegistry


def avro(*fields: tuple[str, Any] | dict[str, Any], name: str = "User") -> str:
    spec = [field if isinstance(field, dict) else {"name": field[0], "type": field[1]} for field in fields]
    return json.dumps({"type": "record", "name": name, "fields": spec})


V1 = avro(("id", "long"))
V2 = avro(("id", "long"), {"name": "email", "type": "string", "default": ""})


def rule(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "CEL", "expr": "true", **extra}


def contract(text: str = V1, *, rules: list[dict[str, Any]] | None = None, **properties: str) -> Schema:
    return Schema.from_dict(
        {
            "schema": text,
            **({"metadata": {"properties": properties}} if properties else {}),
            **({"ruleSet": {"domainRules": rules}} if rules is not None else {}),
        }
    )


def code_of(error: pytest.ExceptionInfo[RegistryError]) -> tuple[int | None, int | None]:
    return error.value.status, error.value.error_code


@pytest.fixture(params=["memory", "directory"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> LocalRegistry:
    if request.param == "memory":
        return LocalRegistry()
    return LocalRegistry(tmp_path / "contracts", create=True)


# -- ids and versions --------------------------------------------------------------------------


def test_satisfies_the_registry_protocol() -> None:
    assert isinstance(LocalRegistry(), Registry)


def test_ids_are_global_and_versions_per_subject(registry: LocalRegistry) -> None:
    assert registry.register_schema("a", contract(V1)) == 1
    assert registry.register_schema("a", contract(V2)) == 2
    assert registry.register_schema("b", contract(avro(("x", "int"), name="B"))) == 3
    assert registry.get_versions("a") == [1, 2]
    assert registry.get_versions("b") == [1]
    assert registry.get_subjects() == ["a", "b"]


def test_re_registering_the_same_schema_returns_its_id_without_a_new_version(registry: LocalRegistry) -> None:
    first = registry.register_schema("a", contract(V1))
    registry.register_schema("a", contract(V2))
    assert registry.register_schema("a", contract(V1)) == first
    assert registry.get_versions("a") == [1, 2]


def test_the_same_schema_in_two_subjects_shares_its_id(registry: LocalRegistry) -> None:
    schema_id = registry.register_schema("a", contract(V1, owner="x"))
    assert registry.register_schema("b", contract(V1, owner="x")) == schema_id
    assert registry.get_version("b", 1).schema_id == schema_id


def test_a_changed_rule_set_is_a_new_version_and_a_new_id(registry: LocalRegistry) -> None:
    first = registry.register_schema("a", contract(V1, rules=[rule("r1")]))
    second = registry.register_schema("a", contract(V1, rules=[rule("r1", expr="false")]))
    assert second != first
    assert registry.get_versions("a") == [1, 2]
    assert registry.get_schema(second).rules.domain_rules[0].expr == "false"


def test_changed_metadata_is_a_new_id(registry: LocalRegistry) -> None:
    assert registry.register_schema("a", contract(V1, owner="x")) != registry.register_schema(
        "a", contract(V1, owner="y")
    )


def test_rules_are_stored_with_kind_and_mode_written_out(registry: LocalRegistry) -> None:
    registry.register_schema("a", contract(V1, rules=[rule("r")]))
    stored = registry.get_latest_version("a").schema.to_dict()["ruleSet"]["domainRules"][0]
    assert stored["kind"] == "TRANSFORM"
    assert stored["mode"] == "WRITEREAD"
    # A rule spelling the defaults out is the same rule: no new version.
    registry.register_schema("a", contract(V1, rules=[rule("r", kind="TRANSFORM", mode="WRITEREAD")]))
    assert registry.get_versions("a") == [1]


def test_get_version_latest_and_number(registry: LocalRegistry) -> None:
    registry.register_schema("a", contract(V1))
    registry.register_schema("a", contract(V2))
    latest = registry.get_version("a", "latest")
    assert (latest.version, latest.schema_id, latest.subject) == (2, 2, "a")
    assert registry.get_latest_version("a") == latest
    assert registry.get_version("a", -1) == latest
    assert registry.get_version("a", 1).schema.schema_str == V1


def test_lookup_finds_the_version_holding_a_schema(registry: LocalRegistry) -> None:
    registry.register_schema("a", contract(V1))
    registry.register_schema("a", contract(V2))
    found = registry.lookup_schema("a", contract(V1))
    assert (found.version, found.schema_id) == (1, 1)


def test_lookup_without_rules_finds_the_version_that_has_them(registry: LocalRegistry) -> None:
    # Confluent fills metadata and ruleSet from the latest version before a second lookup.
    registry.register_schema("a", contract(V1, rules=[rule("r")], owner="x"))
    assert registry.lookup_schema("a", contract(V1)).version == 1


# -- errors ------------------------------------------------------------------------------------


def test_not_found_errors_carry_confluent_codes(registry: LocalRegistry) -> None:
    with pytest.raises(RegistryError) as error:
        registry.get_latest_version("missing")
    assert code_of(error) == (404, 40401)
    with pytest.raises(RegistryError) as error:
        registry.get_versions("missing")
    assert code_of(error) == (404, 40401)
    registry.register_schema("a", contract(V1))
    with pytest.raises(RegistryError) as error:
        registry.get_version("a", 7)
    assert code_of(error) == (404, 40402)
    with pytest.raises(RegistryError) as error:
        registry.get_schema(99)
    assert code_of(error) == (404, 40403)
    with pytest.raises(RegistryError) as error:
        registry.lookup_schema("a", contract(V2))
    assert code_of(error) == (404, 40403)
    with pytest.raises(RegistryError) as error:
        registry.lookup_schema("missing", contract(V1))
    assert code_of(error) == (404, 40401)


@pytest.mark.parametrize("version", [0, -2, "two", 2**31, True])
def test_invalid_versions_are_42202(registry: LocalRegistry, version: Any) -> None:
    registry.register_schema("a", contract(V1))
    with pytest.raises(RegistryError) as error:
        registry.get_version("a", version)
    assert code_of(error) == (422, 42202)


@pytest.mark.parametrize(
    "text",
    ["{not json", json.dumps({"type": "record", "name": "R"}), json.dumps({"type": "nope"})],
)
def test_unparsable_avro_is_42201(registry: LocalRegistry, text: str) -> None:
    with pytest.raises(RegistryError) as error:
        registry.register_schema("a", Schema(text))
    assert code_of(error) == (422, 42201)
    with pytest.raises(RegistryError):
        registry.get_versions("a")


def test_an_unresolvable_reference_is_42201(registry: LocalRegistry) -> None:
    schema = Schema(
        avro(("home", "com.acme.Address")), references=(SchemaReference("com.acme.Address", "addr", 1),)
    )
    with pytest.raises(RegistryError) as error:
        registry.register_schema("a", schema)
    assert code_of(error) == (422, 42201)


# -- references --------------------------------------------------------------------------------

ADDRESS = json.dumps(
    {
        "type": "record",
        "name": "Address",
        "namespace": "com.acme",
        "fields": [{"name": "city", "type": "string"}],
    }
)


def test_references_resolve_named_types_from_other_subjects(registry: LocalRegistry) -> None:
    registry.register_schema("addr", Schema(ADDRESS))
    ref = SchemaReference("com.acme.Address", "addr", 1)
    text = avro(("home", "com.acme.Address"))
    with_ref = registry.register_schema("user", Schema(text, references=(ref,)))
    assert registry.get_schema(with_ref).references == (ref,)
    # References are part of identity: the same text pointing elsewhere is another schema.
    registry.set_config("addr", compatibility="NONE")
    registry.register_schema("addr", Schema(ADDRESS.replace('"city"', '"town"')))
    registry.set_config("user", compatibility="NONE")
    other = registry.register_schema(
        "user", Schema(text, references=(SchemaReference("com.acme.Address", "addr", 2),))
    )
    assert other != with_ref


# -- metadata ----------------------------------------------------------------------------------


def test_latest_with_metadata_picks_the_newest_matching_version(registry: LocalRegistry) -> None:
    registry.set_config("orders", compatibility="NONE")
    registry.register_schema("orders", contract(V1, **{"application.major.version": "1", "owner": "a"}))
    registry.register_schema("orders", contract(V2, **{"application.major.version": "1", "owner": "b"}))
    registry.register_schema("orders", contract(avro(("n", "int")), **{"application.major.version": "2"}))
    assert registry.get_latest_with_metadata("orders", {"application.major.version": "1"}).version == 2
    assert (
        registry.get_latest_with_metadata("orders", {"application.major.version": "1", "owner": "a"}).version
        == 1
    )
    assert registry.get_latest_with_metadata("orders", {}).version == 3
    with pytest.raises(RegistryError) as error:
        registry.get_latest_with_metadata("orders", {"application.major.version": "3"})
    assert code_of(error) == (404, 40403)
    with pytest.raises(RegistryError) as error:
        registry.get_latest_with_metadata("missing", {"application.major.version": "1"})
    assert code_of(error) == (404, 40401)


# -- config ------------------------------------------------------------------------------------


def test_config_defaults_to_backward_and_subject_falls_back_key_by_key(registry: LocalRegistry) -> None:
    assert registry.get_config() == {"compatibility": "BACKWARD"}
    registry.set_config(compatibility="FULL", compatibilityGroup="application.major.version")
    registry.set_config("a", compatibility="NONE")
    assert registry.get_config("a") == {
        "compatibility": "NONE",
        "compatibilityGroup": "application.major.version",
    }
    assert registry.get_config("b")["compatibility"] == "FULL"
    assert registry.set_config("a", compatibility=None)["compatibility"] == "FULL"


def test_bad_config_is_rejected(registry: LocalRegistry) -> None:
    with pytest.raises(RegistryError) as error:
        registry.set_config(compatibility="SIDEWAYS")
    assert code_of(error) == (422, 42203)
    with pytest.raises(RegistryError):
        registry.set_config(compatibilty="FULL")


def test_default_and_override_rule_sets_are_merged_on_register(registry: LocalRegistry) -> None:
    registry.set_config(
        "a",
        defaultRuleSet={"domainRules": [rule("fromDefault"), rule("shared", expr="default")]},
        overrideRuleSet={"domainRules": [rule("fromOverride")]},
        defaultMetadata={"properties": {"owner": "platform", "tier": "gold"}},
        overrideMetadata={"properties": {"tier": "silver"}},
    )
    registry.register_schema("a", contract(V1, rules=[rule("own"), rule("shared", expr="own")], owner="team"))
    stored = registry.get_latest_version("a").schema
    assert [r.name for r in stored.rules.domain_rules] == ["fromDefault", "own", "shared", "fromOverride"]
    assert next(r for r in stored.rules.domain_rules if r.name == "shared").expr == "own"
    assert stored.properties == {"owner": "team", "tier": "silver"}


def test_a_new_schema_without_rules_keeps_the_previous_versions(registry: LocalRegistry) -> None:
    registry.register_schema("a", contract(V1, rules=[rule("keepMe")], owner="x"))
    schema_id = registry.register_schema("a", contract(V2))
    stored = registry.get_schema(schema_id)
    assert [r.name for r in stored.rules.domain_rules] == ["keepMe"]
    assert stored.properties == {"owner": "x"}
    # ...so re-sending v1's text without rules is v1 again, not a new version.
    assert registry.register_schema("a", contract(V1)) == 1
    assert registry.get_versions("a") == [1, 2]


def test_normalize_makes_whitespace_and_key_order_irrelevant(registry: LocalRegistry) -> None:
    compact = '{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}'
    spaced = '{ "fields": [ {"type": "long", "name": "id"} ],\n  "name": "User", "type": "record" }'
    schema_id = registry.register_schema("a", Schema(compact), normalize=True)
    assert registry.register_schema("a", Schema(spaced), normalize=True) == schema_id
    assert registry.get_versions("a") == [1]
    # Without normalize the text is the identity, as the registry stores it.
    registry.set_config("b", compatibility="NONE")
    registry.register_schema("b", Schema(compact))
    registry.register_schema("b", Schema(spaced))
    assert registry.get_versions("b") == [1, 2]


def test_normalize_from_config(registry: LocalRegistry) -> None:
    registry.set_config(normalize=True)
    first = registry.register_schema("a", Schema('{"type": "string"}'))
    assert registry.register_schema("a", Schema('{ "type" : "string" }')) == first


# -- compatibility on register -----------------------------------------------------------------

OLD = avro(("id", "long"), ("name", "string"))
ADD_DEFAULT = avro(("id", "long"), ("name", "string"), {"name": "n", "type": "int", "default": 0})
ADD_REQUIRED = avro(("id", "long"), ("name", "string"), ("n", "int"))
REMOVE_NAME = avro(("id", "long"))
PROMOTED = avro(("id", "long"), ("name", "bytes"))
ENUM_V1 = avro(("c", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}))
ENUM_ADDED = avro(("c", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}))
UNION_NARROW = avro(("v", ["null", "string"]))
UNION_WIDE = avro(("v", ["null", "string", "long"]))
NESTED_V1 = avro(("a", {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]}))
NESTED_ZIP = avro(
    (
        "a",
        {
            "type": "record",
            "name": "Addr",
            "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "string"}],
        },
    )
)


@pytest.mark.parametrize(
    ("level", "old", "new", "accepted"),
    [
        ("BACKWARD", OLD, ADD_DEFAULT, True),
        ("BACKWARD", OLD, ADD_REQUIRED, False),
        ("BACKWARD", OLD, REMOVE_NAME, True),
        ("BACKWARD", avro(("id", "int")), avro(("id", "long")), True),
        ("BACKWARD", avro(("id", "long")), avro(("id", "int")), False),
        ("BACKWARD", OLD, PROMOTED, True),
        ("BACKWARD", ENUM_V1, ENUM_ADDED, True),
        ("BACKWARD", ENUM_ADDED, ENUM_V1, False),
        ("BACKWARD", UNION_NARROW, UNION_WIDE, True),
        ("BACKWARD", UNION_WIDE, UNION_NARROW, False),
        ("BACKWARD", NESTED_V1, NESTED_ZIP, False),
        ("FORWARD", OLD, REMOVE_NAME, False),
        ("FORWARD", OLD, ADD_REQUIRED, True),
        ("FORWARD", ENUM_V1, ENUM_ADDED, False),
        ("FORWARD", UNION_WIDE, UNION_NARROW, True),
        ("FORWARD", NESTED_V1, NESTED_ZIP, True),
        ("FULL", OLD, ADD_DEFAULT, True),
        ("FULL", OLD, ADD_REQUIRED, False),
        ("FULL", OLD, REMOVE_NAME, False),
        ("BACKWARD_TRANSITIVE", OLD, ADD_DEFAULT, True),
        ("BACKWARD_TRANSITIVE", OLD, ADD_REQUIRED, False),
        ("FORWARD_TRANSITIVE", OLD, ADD_REQUIRED, True),
        ("FORWARD_TRANSITIVE", OLD, REMOVE_NAME, False),
        ("FULL_TRANSITIVE", OLD, ADD_DEFAULT, True),
        ("FULL_TRANSITIVE", OLD, PROMOTED, True),
        ("FULL_TRANSITIVE", avro(("id", "int")), avro(("id", "long")), False),
        ("NONE", OLD, avro(("other", "boolean")), True),
    ],
)
def test_compatibility_levels_accept_and_reject_evolutions(
    registry: LocalRegistry, level: str, old: str, new: str, accepted: bool
) -> None:
    registry.set_config("s", compatibility=level)
    registry.register_schema("s", Schema(old))
    assert registry.test_compatibility("s", Schema(new)) is accepted
    if accepted:
        registry.register_schema("s", Schema(new))
        assert registry.get_versions("s") == [1, 2]
    else:
        with pytest.raises(RegistryError) as error:
            registry.register_schema("s", Schema(new))
        assert code_of(error) == (409, 409)
        assert "/fields/" in error.value.reason and level in error.value.reason
        assert registry.get_versions("s") == [1]


# v3 reads v2 (which has `n` with a default) but not v1 (which lacks `n` entirely).
TRANSITIVE = [OLD, ADD_DEFAULT, ADD_REQUIRED]


@pytest.mark.parametrize(
    ("level", "accepted"),
    [("BACKWARD", True), ("BACKWARD_TRANSITIVE", False), ("FULL", True), ("FULL_TRANSITIVE", False)],
)
def test_transitive_levels_check_all_versions_the_others_only_the_latest(
    registry: LocalRegistry, level: str, accepted: bool
) -> None:
    registry.set_config("s", compatibility=level)
    for text in TRANSITIVE[:2]:
        registry.register_schema("s", Schema(text))
    if accepted:
        registry.register_schema("s", Schema(TRANSITIVE[2]))
    else:
        with pytest.raises(RegistryError, match="409"):
            registry.register_schema("s", Schema(TRANSITIVE[2]))


def test_forward_transitive_differs_from_forward(registry: LocalRegistry) -> None:
    # Old readers must read the new schema: v3 drops `name` which v1 needs but v2 defaults.
    v1 = avro(("id", "long"), ("name", "string"))
    v2 = avro(("id", "long"), {"name": "name", "type": "string", "default": ""})
    v3 = avro(("id", "long"))
    for level, accepted in (("FORWARD", True), ("FORWARD_TRANSITIVE", False)):
        subject = level.lower()
        registry.set_config(subject, compatibility=level)
        registry.register_schema(subject, Schema(v1))
        registry.register_schema(subject, Schema(v2))
        assert registry.test_compatibility(subject, Schema(v3), version=1) is False
        if accepted:
            registry.register_schema(subject, Schema(v3))
        else:
            with pytest.raises(RegistryError, match="409"):
                registry.register_schema(subject, Schema(v3))


def test_compatibility_group_lets_a_new_major_version_break(registry: LocalRegistry) -> None:
    registry.set_config(
        "s", compatibility="BACKWARD_TRANSITIVE", compatibilityGroup="application.major.version"
    )
    registry.register_schema("s", contract(OLD, **{"application.major.version": "1"}))
    breaking = avro(("orderId", "string"))
    with pytest.raises(RegistryError, match="409"):
        registry.register_schema("s", contract(breaking, **{"application.major.version": "1"}))
    registry.register_schema("s", contract(breaking, **{"application.major.version": "2"}))
    assert registry.get_versions("s") == [1, 2]
    # Within major 2 the check applies again.
    with pytest.raises(RegistryError, match="409"):
        registry.register_schema("s", contract(avro(("x", "int")), **{"application.major.version": "2"}))


def test_test_compatibility_registers_nothing_and_checks_a_given_version(registry: LocalRegistry) -> None:
    assert registry.test_compatibility("empty", Schema(OLD)) is True
    registry.register_schema("s", Schema(OLD))
    registry.register_schema("s", Schema(REMOVE_NAME))
    # `name` as an int with a default reads v2 (no name) but not v1 (name is a string).
    int_name = Schema(avro(("id", "long"), {"name": "name", "type": "int", "default": 0}))
    assert registry.test_compatibility("s", int_name, version=2) is True
    assert registry.test_compatibility("s", int_name, version=1) is False
    assert registry.test_compatibility("s", int_name) is True
    assert registry.get_versions("s") == [1, 2]
    with pytest.raises(RegistryError) as error:
        registry.test_compatibility("s", Schema(OLD), version=5)
    assert code_of(error) == (404, 40402)


@given(
    st.sampled_from([OLD, ADD_DEFAULT, ENUM_V1, UNION_WIDE, NESTED_ZIP]),
    st.sampled_from(
        [
            "BACKWARD",
            "BACKWARD_TRANSITIVE",
            "FORWARD",
            "FORWARD_TRANSITIVE",
            "FULL",
            "FULL_TRANSITIVE",
            "NONE",
        ]
    ),
)
@settings(max_examples=examples(40), deadline=None)
def test_a_schema_is_always_compatible_with_itself(text: str, level: str) -> None:
    registry = LocalRegistry()
    registry.set_config(compatibility=level)
    registry.register_schema("s", contract(text, owner="a"))
    # Same Avro, different metadata: a new version that must pass every level.
    registry.register_schema("s", contract(text, owner="b"))
    assert registry.get_versions("s") == [1, 2]


# -- deletes -----------------------------------------------------------------------------------


def test_soft_delete_hides_versions_but_ids_still_resolve(registry: LocalRegistry) -> None:
    registry.set_config("a", compatibility="NONE")
    first = registry.register_schema("a", contract(V1))
    registry.register_schema("a", contract(V2))
    assert registry.delete_subject("a") == [1, 2]
    assert registry.get_subjects() == []
    with pytest.raises(RegistryError) as error:
        registry.get_latest_version("a")
    assert code_of(error) == (404, 40401)
    assert registry.get_schema(first).schema_str == V1
    assert "a" not in registry.get_config("a") and registry.get_config("a")["compatibility"] == "BACKWARD"


def test_deleting_one_version_leaves_a_gap_and_permanent_needs_soft_first(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registry.set_config("a", compatibility="NONE")
    v3 = avro(("id", "long"), ("age", "int"))
    ids = [registry.register_schema("a", contract(text)) for text in (V1, V2, v3)]
    with pytest.raises(RegistryError) as error:
        registry.delete_version("a", 2, permanent=True)
    assert code_of(error) == (404, 40407)
    assert registry.delete_version("a", 2) == 2
    with pytest.raises(RegistryError) as error:
        registry.delete_version("a", 2)
    assert code_of(error) == (404, 40406)
    reopened = LocalRegistry(tmp_path)
    assert reopened.get_versions("a") == [1, 3]
    with pytest.raises(RegistryError) as error:
        reopened.get_version("a", 2)
    assert code_of(error) == (404, 40402)
    assert reopened.get_schema(ids[1]).schema_str == V2
    assert reopened.delete_version("a", 2, permanent=True) == 2
    with pytest.raises(RegistryError) as error:
        reopened.get_schema(ids[1])
    assert code_of(error) == (404, 40403)
    assert reopened.delete_version("a", "latest") == 3
    assert reopened.get_versions("a") == [1]


def test_re_registering_after_a_soft_delete_is_a_new_version_with_the_old_id(registry: LocalRegistry) -> None:
    first = registry.register_schema("a", contract(V1))
    registry.delete_subject("a")
    assert registry.register_schema("a", contract(V1)) == first
    assert registry.get_versions("a") == [2]


def test_permanent_delete_needs_a_soft_delete_first(registry: LocalRegistry) -> None:
    schema_id = registry.register_schema("a", contract(V1))
    with pytest.raises(RegistryError) as error:
        registry.delete_subject("a", permanent=True)
    assert code_of(error) == (404, 40405)
    registry.delete_subject("a")
    with pytest.raises(RegistryError) as error:
        registry.delete_subject("a")
    assert code_of(error) == (404, 40404)
    assert registry.delete_subject("a", permanent=True) == [1]
    with pytest.raises(RegistryError) as error:
        registry.get_schema(schema_id)
    assert code_of(error) == (404, 40403)
    with pytest.raises(RegistryError) as error:
        registry.delete_subject("a")
    assert code_of(error) == (404, 40401)
    assert registry.register_schema("a", contract(V1)) != schema_id
    assert registry.get_versions("a") == [1]


# -- files -------------------------------------------------------------------------------------


def test_a_second_instance_on_the_directory_sees_the_same_registry(tmp_path: Path) -> None:
    first = LocalRegistry(tmp_path)
    first.set_config(compatibility="FULL")
    first.register_schema("orders-value", contract(V1, rules=[rule("r")]))
    first.register_schema("orders-value", contract(V2))
    first.register_schema("other/with slash", contract(V1))
    second = LocalRegistry(tmp_path)
    assert second.get_subjects() == ["orders-value", "other/with slash"]
    assert second.get_latest_version("orders-value") == first.get_latest_version("orders-value")
    assert second.get_config()["compatibility"] == "FULL"
    # ...and sees what the first writes later, without colliding ids.
    third_id = first.register_schema("late", contract(avro(("z", "int"), name="Z")))
    assert second.get_schema(third_id).schema_str == avro(("z", "int"), name="Z")
    assert second.register_schema("later", contract(avro(("q", "int"), name="Q"))) == third_id + 1


def test_files_are_the_rest_payload_with_id_and_guid(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registry.register_schema("a/b", contract(V1, rules=[rule("r")], owner="x"))
    written = json.loads((tmp_path / quote("a/b", safe="") / "1.json").read_text())
    assert written == {
        "guid": registry.get_version("a/b", 1).guid,
        "schema": V1,
        "metadata": {"properties": {"owner": "x"}},
        "ruleSet": {
            "domainRules": [
                {"name": "r", "kind": "TRANSFORM", "mode": "WRITEREAD", "type": "CEL", "expr": "true"}
            ]
        },
        "id": 1,
    }


def test_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registry.set_config(compatibility="NONE")
    registry.set_config("a", compatibility="NONE")
    for n in range(5):
        registry.register_schema("a", contract(avro((f"f{n}", "int"))))
    registry.delete_subject("a")
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert files == ["a", "a/1.json", "a/2.json", "a/3.json", "a/4.json", "a/5.json", "config.json"]


def write(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_hand_written_files_without_ids_get_deterministic_ids(tmp_path: Path) -> None:
    # Registering these in order (subjects sorted, versions ascending) would give exactly these ids.
    write(tmp_path / "b-value" / "1.json", {"schema": V1})
    write(tmp_path / "b-value" / "2.json", {"schema": V2})
    write(tmp_path / "a-value" / "1.json", {"schema": avro(("x", "int"), name="A")})
    write(tmp_path / "c-value" / "1.json", {"schema": V1})
    write(tmp_path / "d-value" / "1.json", {"schema": avro(("d", "int"), name="D"), "id": 2})
    write(tmp_path / "e-value" / "1.json", {"schema": avro(("e", "int"), name="E")})
    registry = LocalRegistry(tmp_path)
    ids = {s: registry.get_latest_version(s).schema_id for s in registry.get_subjects()}
    assert ids == {"a-value": 1, "b-value": 4, "c-value": 3, "d-value": 2, "e-value": 5}
    assert registry.get_version("b-value", 1).schema_id == 3
    assert {s: LocalRegistry(tmp_path).get_latest_version(s).schema_id for s in ids} == ids
    # A new registration never collides with them.
    assert registry.register_schema("f-value", contract(avro(("f", "int"), name="F"))) == 6


def test_a_hand_written_file_shares_the_explicit_id_of_the_same_schema(tmp_path: Path) -> None:
    write(tmp_path / "a-value" / "1.json", {"schema": V1})
    write(tmp_path / "z-value" / "1.json", {"schema": V1, "id": 7})
    registry = LocalRegistry(tmp_path)
    assert registry.get_latest_version("a-value").schema_id == 7


def test_one_explicit_id_on_two_different_schemas_fails_at_load(tmp_path: Path) -> None:
    write(tmp_path / "a" / "1.json", {"schema": V1, "id": 1})
    write(tmp_path / "b" / "1.json", {"schema": V2, "id": 1})
    with pytest.raises(ContractError, match="id 1"):
        LocalRegistry(tmp_path)


def test_hand_written_config_and_rules_are_read(tmp_path: Path) -> None:
    write(tmp_path / "config.json", {"compatibility": "NONE"})
    write(tmp_path / "s" / "config.json", {"compatibility": "FULL"})
    write(tmp_path / "s" / "1.json", {"schema": V1, "ruleSet": {"domainRules": [rule("r")]}})
    registry = LocalRegistry(tmp_path)
    assert registry.get_config()["compatibility"] == "NONE"
    assert registry.get_config("s")["compatibility"] == "FULL"
    assert registry.get_latest_version("s").schema.rules.domain_rules[0].mode.value == "WRITEREAD"


def test_a_bad_hand_written_file_fails_at_load_naming_subject_and_version(tmp_path: Path) -> None:
    write(tmp_path / "s" / "1.json", {"schema": V1})
    write(tmp_path / "s" / "2.json", {"schema": '{"type": "record"}'})
    with pytest.raises(ContractError) as error:
        LocalRegistry(tmp_path)
    assert (error.value.subject, error.value.version) == ("s", 2)


def test_the_example_contracts_load_and_are_compatible_within_their_major() -> None:
    registry = LocalRegistry(Path(__file__).parents[3] / "examples" / "registry")
    assert registry.get_subjects() == ["orders-value"]
    assert [registry.get_version("orders-value", v).schema_id for v in (1, 2, 3)] == [1, 2, 3]
    assert registry.get_config("orders-value")["compatibilityGroup"] == "application.major.version"
    for version in (2, 3):  # each version passes the check it would face when registered again
        assert registry.test_compatibility(
            "orders-value", registry.get_version("orders-value", version).schema
        )


# -- pickling and threads ----------------------------------------------------------------------


def test_pickling_round_trip_keeps_the_contents(registry: LocalRegistry) -> None:
    registry.set_config("a", compatibility="NONE")
    schema_id = registry.register_schema("a", contract(V1, rules=[rule("r")]))
    copy = pickle.loads(pickle.dumps(registry))
    assert copy.get_schema(schema_id) == registry.get_schema(schema_id)
    assert copy.get_config("a") == registry.get_config("a")
    assert copy.register_schema("a", contract(V2)) == schema_id + 1


def test_concurrent_registrations_get_distinct_ids(registry: LocalRegistry) -> None:
    registry.set_config(compatibility="NONE")
    ids: list[int] = []

    def register(n: int) -> None:
        ids.append(registry.register_schema(f"s{n % 3}", contract(avro((f"f{n}", "int")))))

    threads = [threading.Thread(target=register, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(ids) == list(range(1, 13))
    assert sum(len(registry.get_versions(f"s{k}")) for k in range(3)) == 12


def test_metadata_and_rule_set_types_round_trip(registry: LocalRegistry) -> None:
    schema = Schema(V1, metadata=Metadata(properties={"k": "v"}), rule_set=RuleSet())
    schema_id = registry.register_schema("a", schema)
    assert registry.get_schema(schema_id).properties == {"k": "v"}


def _register_after(barrier: Any, root: str, subject: str, field: str, ids: Any) -> None:
    """In another process: wait for the others, then register one schema into the shared directory."""
    registry = LocalRegistry(root)
    barrier.wait()
    ids.put((subject, registry.register_schema(subject, contract(avro((field, "int"))))))


@pytest.mark.parametrize("same_subject", [False, True])
def test_processes_registering_at_once_get_distinct_ids(tmp_path: Path, same_subject: bool) -> None:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    for attempt in range(3):
        root = tmp_path / str(attempt)
        LocalRegistry(root, create=True).set_config(compatibility="NONE")
        barrier, ids = context.Barrier(4), context.Queue()
        processes = [
            context.Process(
                target=_register_after,
                args=(barrier, str(root), "s" if same_subject else f"s{n}", f"f{n}", ids),
            )
            for n in range(4)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
            assert process.exitcode == 0
        registered = [ids.get(timeout=5) for _ in processes]
        assert len({schema_id for _, schema_id in registered}) == 4
        reloaded = LocalRegistry(root)  # the directory still loads: no id given to two schemas
        for subject, schema_id in registered:
            assert reloaded.lookup_schema(subject, reloaded.get_schema(schema_id)).schema_id == schema_id


# -- GUIDs ---------------------------------------------------------------------------------------


def _md5_guid(*parts: bytes) -> str:
    """What Confluent's registry makes of a schema's content: the MD5 of its parts as a UUID."""
    return str(uuid.UUID(bytes=hashlib.md5(b"".join(parts)).digest()))


def test_a_guid_is_the_md5_of_the_schema_text_as_confluent_derives_it(registry: LocalRegistry) -> None:
    registry.register_schema("orders-value", Schema(V1))
    assert registry.get_version("orders-value", 1).guid == _md5_guid(V1.encode())


def test_a_guid_covers_references_metadata_and_rules_in_confluents_order() -> None:
    """Java's Schema.updateHash: the text, each reference (name, subject, 4-byte version), then a
    1 byte and the metadata (sorted tags with sorted values, sorted properties, sorted sensitive
    names), then a 1 byte and each rule (name, doc, kind, mode, type, sorted tags, sorted params,
    expr, onSuccess, onFailure, a 1 byte when disabled) and enableAt."""
    schema = Schema.from_dict(
        {
            "schema": V1,
            "references": [{"name": "Ref", "subject": "ref-value", "version": 2}],
            "metadata": {"tags": {"b": ["y", "x"], "a": ["z"]}, "properties": {"k2": "v2", "k1": "v1"}},
            "ruleSet": {
                "domainRules": [
                    {
                        "name": "r",
                        "kind": "CONDITION",
                        "mode": "WRITE",
                        "type": "CEL",
                        "tags": ["PII", "EMAIL"],
                        "params": {"p": "1"},
                        "expr": "true",
                        "onFailure": "DLQ",
                        "disabled": True,
                    }
                ],
                "enableAt": "CLIENT",
            },
        }
    )
    expected = _md5_guid(
        V1.encode(),
        b"Ref",
        b"ref-value",
        (2).to_bytes(4, "big"),
        b"\x01",
        b"a",
        b"z",
        b"b",
        b"x",
        b"y",
        b"k1",
        b"v1",
        b"k2",
        b"v2",
        b"\x01",
        b"r",
        b"CONDITION",
        b"WRITE",
        b"CEL",
        b"EMAIL",
        b"PII",
        b"p",
        b"1",
        b"true",
        b"DLQ",
        b"\x01",
        b"CLIENT",
    )
    assert schema_guid(schema) == expected
    assert schema_guid(schema.with_changes(metadata=Metadata())) != schema_guid(
        schema.with_changes(metadata=None)
    )


def test_a_guid_finds_its_schema_and_an_unknown_one_is_40403(registry: LocalRegistry) -> None:
    registry.register_schema("orders-value", contract(V1, rules=[rule("r")]))
    registered = registry.get_version("orders-value", 1)
    assert registered.guid is not None
    assert registry.get_schema_by_guid(registered.guid) == registered.schema
    assert registry.get_schema_by_guid(registered.guid.upper()) == registered.schema
    for unknown in ("00000000-0000-4000-8000-000000000000", "not-a-guid"):
        with pytest.raises(RegistryError) as missing:
            registry.get_schema_by_guid(unknown)
        assert code_of(missing) == (404, 40403)


def test_one_schema_has_one_id_and_one_guid_across_subjects(registry: LocalRegistry) -> None:
    registry.register_schema("a-value", Schema(V1))
    registry.register_schema("b-value", Schema(V1))
    registry.register_schema("b-value", Schema(V2))
    a, b1, b2 = (registry.get_version(s, v) for s, v in (("a-value", 1), ("b-value", 1), ("b-value", 2)))
    assert (a.schema_id, a.guid) == (b1.schema_id, b1.guid)
    assert b2.guid not in (None, a.guid)
    assert registry.lookup_schema("b-value", Schema(V2)).guid == b2.guid


def test_guids_survive_a_reload_and_soft_deletes(tmp_path: Path) -> None:
    first = LocalRegistry(tmp_path)
    first.register_schema("orders-value", Schema(V1))
    first.register_schema("orders-value", Schema(V2))
    guids = [first.get_version("orders-value", v).guid for v in (1, 2)]
    first.delete_version("orders-value", 1)

    second = LocalRegistry(tmp_path)

    assert second.get_version("orders-value", 2).guid == guids[1]
    assert second.get_schema_by_guid(guids[0] or "") == Schema(V1)
    second.delete_version("orders-value", 1, permanent=True)
    with pytest.raises(RegistryError):
        second.get_schema_by_guid(guids[0] or "")


def test_a_directory_without_guids_derives_them_and_is_not_rewritten(tmp_path: Path) -> None:
    """Directories of releases before GUIDs: each version gets the GUID registering it would write."""
    (tmp_path / "orders-value").mkdir()
    path = tmp_path / "orders-value" / "1.json"
    path.write_text(json.dumps({"schema": V1, "id": 7}))
    before = path.read_text()

    registry = LocalRegistry(tmp_path)

    assert registry.get_version("orders-value", 1).guid == _md5_guid(V1.encode())
    assert registry.get_schema_by_guid(_md5_guid(V1.encode())) == Schema(V1)
    assert path.read_text() == before
    registry.register_schema("copy-value", Schema(V1))
    assert registry.get_version("copy-value", 1).guid == _md5_guid(V1.encode())


def test_a_files_own_guid_is_kept_and_shared_by_its_id(tmp_path: Path) -> None:
    """As `pull` writes them: the remote registry's GUID, whatever the text hashes to."""
    remote = "6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d"
    (tmp_path / "orders-value").mkdir()
    (tmp_path / "orders-value" / "1.json").write_text(json.dumps({"schema": V1, "id": 4, "guid": remote}))

    registry = LocalRegistry(tmp_path)
    registry.register_schema("copy-value", Schema(V1))

    assert registry.get_version("copy-value", 1).guid == remote
    assert registry.get_schema_by_guid(remote) == Schema(V1)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"1.json": {"schema": V1, "guid": "nope"}}, "guid must be a UUID string"),
        ({"1.json": {"schema": V1, "guid": 5}}, "guid must be a UUID string"),
        (
            {
                "1.json": {"schema": V1, "guid": "6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d"},
                "2.json": {"schema": V2, "guid": "6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d"},
            },
            "guid 6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d is already used by schema id 1, not 2",
        ),
        (
            {
                "1.json": {"schema": V1, "id": 1, "guid": "6a8e5d1c-0f7e-4b5f-9d3a-2c1b0a9f8e7d"},
                "2.json": {"schema": V1, "id": 1, "guid": "00000000-0000-4000-8000-000000000000"},
            },
            "schema id 1 already has guid 6a8e5d1c",
        ),
    ],
)
def test_bad_guids_in_files_are_contract_errors(tmp_path: Path, files: dict[str, Any], message: str) -> None:
    (tmp_path / "orders-value").mkdir()
    for name, payload in files.items():
        (tmp_path / "orders-value" / name).write_text(json.dumps(payload))
    with pytest.raises(ContractError, match=message):
        LocalRegistry(tmp_path)


def test_a_missing_directory_is_an_error_unless_create_is_given(tmp_path: Path) -> None:
    typo = tmp_path / "contarcts"
    with pytest.raises(RegistryError, match=r"registry directory '.*contarcts' does not exist"):
        LocalRegistry(typo)
    assert not typo.exists()
    assert LocalRegistry(typo, create=True).get_subjects() == [] and typo.is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(RegistryError, match="is not a directory"):
        LocalRegistry(tmp_path / "file", create=True)
