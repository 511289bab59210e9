"""Avro schema-resolution compatibility: which reader schemas can read which writer schemas."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts.registry.compatibility import (
    Compatibility,
    compatibility_errors,
    parse_avro,
    reader_errors,
)


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, avro_type: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": avro_type, **extra}


def reads(reader: Any, writer: Any) -> bool:
    return not reader_errors(parse_avro(reader), parse_avro(writer))


def errors(reader: Any, writer: Any) -> list[str]:
    return reader_errors(parse_avro(reader), parse_avro(writer))


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    ],
)
def test_promotions_read_the_narrower_writer_type(writer: str, reader: str) -> None:
    assert reads(reader, writer)


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("long", "int"), ("double", "float"), ("float", "long"), ("string", "int"), ("boolean", "int")],
)
def test_no_demotion_or_unrelated_primitive(writer: str, reader: str) -> None:
    assert errors(reader, writer) == [f"/: reader type '{reader}' cannot read writer type '{writer}'"]


def test_error_names_the_field_path() -> None:
    writer = record(f("a", "string"), f("b", "string"), f("c", "long"))
    reader = record(f("a", "string"), f("b", "string"), f("c", "int"))
    assert errors(reader, writer) == ["/fields/2/type: reader type 'int' cannot read writer type 'long'"]


def test_added_field_needs_a_default_for_the_reader() -> None:
    old = record(f("a", "int"))
    assert reads(record(f("a", "int"), f("b", "string", default="")), old)
    assert errors(record(f("a", "int"), f("b", "string")), old) == [
        "/fields/1: reader field 'b' has no default value and is missing in the writer"
    ]


def test_writer_fields_missing_in_the_reader_are_ignored() -> None:
    assert reads(record(f("a", "int")), record(f("a", "int"), f("gone", "string")))


def test_reader_field_alias_matches_a_renamed_writer_field() -> None:
    writer = record(f("ssn", "string"))
    assert reads(record(f("socialSecurityNumber", "string", aliases=["ssn"])), writer)
    assert not reads(record(f("socialSecurityNumber", "string")), writer)


def test_enum_reader_needs_every_writer_symbol_unless_it_has_a_default() -> None:
    small = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    large = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
    assert reads(large, small)
    assert errors(small, large) == ["/symbols: reader enum 'Color' lacks writer symbols ['BLUE']"]
    assert reads({**small, "default": "RED"}, large)


def test_fixed_needs_same_size_and_name() -> None:
    fixed = {"type": "fixed", "name": "Hash", "size": 16}
    assert reads(fixed, fixed)
    assert errors({**fixed, "size": 32}, fixed) == ["/size: reader fixed 'Hash' has size 32, writer size 16"]
    assert not reads({**fixed, "name": "Other"}, fixed)


def test_named_types_match_by_name_or_reader_alias() -> None:
    writer = record(f("a", "int"), name="OldName", namespace="com.acme")
    assert not reads(record(f("a", "int"), name="NewName", namespace="com.acme"), writer)
    assert reads(record(f("a", "int"), name="NewName", namespace="com.acme", aliases=["OldName"]), writer)
    assert reads(record(f("a", "int"), name="NewName", aliases=["com.acme.OldName"]), writer)
    # Avro Java compares unqualified names, so a namespace change alone is readable.
    assert reads(record(f("a", "int"), name="OldName", namespace="org.other"), writer)


def test_arrays_and_maps_compare_items_and_values() -> None:
    assert reads({"type": "array", "items": "long"}, {"type": "array", "items": "int"})
    assert errors({"type": "array", "items": "int"}, {"type": "array", "items": "long"}) == [
        "/items: reader type 'int' cannot read writer type 'long'"
    ]
    assert errors({"type": "map", "values": "int"}, {"type": "map", "values": "string"}) == [
        "/values: reader type 'int' cannot read writer type 'string'"
    ]
    assert not reads({"type": "map", "values": "int"}, {"type": "array", "items": "int"})


def test_unions_every_writer_branch_must_be_readable() -> None:
    narrow = ["null", "string"]
    wide = ["null", "string", "int"]
    assert reads(wide, narrow)
    assert errors(narrow, wide) == [
        "/2: reader union [null, string] has no branch that can read writer type 'int'"
    ]


def test_non_union_writer_and_reader_union() -> None:
    assert reads(["null", "long"], "int")
    assert not reads(["null", "string"], "int")
    assert reads("long", ["int", "long"])
    assert not reads("long", ["null", "long"])


def test_nested_record_changes_are_found_with_their_path() -> None:
    address_v1 = record(f("city", "string"), name="Address")
    address_v2 = record(f("city", "string"), f("zip", "string"), name="Address")
    writer = record(f("id", "long"), f("address", address_v1))
    reader = record(f("id", "long"), f("address", address_v2))
    assert errors(reader, writer) == [
        "/fields/1/type/fields/1: reader field 'zip' has no default value and is missing in the writer"
    ]
    assert reads(writer, reader)


def test_recursive_types_terminate() -> None:
    node = record(f("value", "int"), f("next", ["null", "Node"], default=None), name="Node")
    wider = record(f("value", "long"), f("next", ["null", "Node"], default=None), name="Node")
    assert reads(node, node)
    assert reads(wider, node)
    assert errors(node, wider) == ["/fields/0/type: reader type 'int' cannot read writer type 'long'"]


def test_named_types_from_references_are_resolved() -> None:
    address = parse_avro(record(f("city", "string"), name="Address", namespace="com.acme"))
    writer = parse_avro(record(f("home", "com.acme.Address")), address.names)
    reader = parse_avro(record(f("home", "com.acme.Address")), address.names)
    assert reader_errors(reader, writer) == []


def evolve(*versions: Any) -> list[Any]:
    return [parse_avro(v) for v in versions]


ADD_REQUIRED = evolve(record(f("a", "int")), record(f("a", "int"), f("b", "int")))
ADD_OPTIONAL = evolve(record(f("a", "int")), record(f("a", "int"), f("b", "int", default=0)))
REMOVE_REQUIRED = evolve(record(f("a", "int"), f("b", "int")), record(f("a", "int")))


@pytest.mark.parametrize(
    ("level", "old_new", "compatible"),
    [
        ("BACKWARD", ADD_OPTIONAL, True),
        ("BACKWARD", ADD_REQUIRED, False),
        ("BACKWARD", REMOVE_REQUIRED, True),
        ("FORWARD", REMOVE_REQUIRED, False),
        ("FORWARD", ADD_REQUIRED, True),
        ("FULL", ADD_OPTIONAL, True),
        ("FULL", ADD_REQUIRED, False),
        ("FULL", REMOVE_REQUIRED, False),
        ("NONE", ADD_REQUIRED, True),
    ],
)
def test_levels_check_the_right_direction(level: str, old_new: list[Any], compatible: bool) -> None:
    old, new = old_new
    assert (compatibility_errors(level, new, [old]) == []) is compatible


def test_transitive_levels_check_every_previous_version() -> None:
    v1 = record(f("a", "int"))
    v2 = record(f("a", "int"), f("b", "int", default=0))
    v3 = record(f("a", "int"), f("b", "int"))  # readable from v2 (has b), not from v1
    previous, new = evolve(v1, v2), parse_avro(v3)
    assert compatibility_errors(Compatibility.BACKWARD, new, previous) == []
    assert compatibility_errors(Compatibility.BACKWARD_TRANSITIVE, new, previous) != []


# -- properties --------------------------------------------------------------------------------

_PRIMITIVE = st.sampled_from(["null", "boolean", "int", "long", "float", "double", "bytes", "string"])


@st.composite
def avro_types(draw: st.DrawFn, depth: int = 0, names: list[str] | None = None) -> Any:
    names = names if names is not None else []
    if depth >= 2:
        return draw(_PRIMITIVE)
    kind = draw(st.sampled_from(["primitive", "record", "enum", "fixed", "array", "map", "union"]))
    if kind == "primitive":
        return draw(_PRIMITIVE)
    if kind in ("record", "enum", "fixed"):
        names.append(f"T{len(names)}")
        name = names[-1]
        if kind == "enum":
            symbols = draw(st.lists(st.sampled_from("ABCDE"), min_size=1, max_size=4, unique=True))
            return {"type": "enum", "name": name, "symbols": symbols}
        if kind == "fixed":
            return {"type": "fixed", "name": name, "size": draw(st.integers(1, 8))}
        count = draw(st.integers(0, 3))
        fields = [f(f"f{i}", draw(avro_types(depth + 1, names))) for i in range(count)]
        return {"type": "record", "name": name, "fields": fields}
    if kind == "array":
        return {"type": "array", "items": draw(avro_types(depth + 1, names))}
    if kind == "map":
        return {"type": "map", "values": draw(avro_types(depth + 1, names))}
    branches = draw(st.lists(_PRIMITIVE, min_size=1, max_size=3, unique=True))
    return branches


@given(avro_types())
@settings(max_examples=examples(150), deadline=None)
def test_a_schema_is_compatible_with_itself_in_every_level(schema: Any) -> None:
    parsed = parse_avro(schema)
    for level in Compatibility:
        assert compatibility_errors(level, parsed, [parsed, parsed]) == []


@given(avro_types(), st.sampled_from(["int", "string", ["null", "long"]]))
@settings(max_examples=examples(100), deadline=None)
def test_adding_a_field_with_a_default_is_fully_compatible(field_type: Any, added: Any) -> None:
    default: Any = {"int": 0, "string": ""}.get(added) if isinstance(added, str) else None
    old = parse_avro(record(f("x", field_type)))
    new = parse_avro(record(f("x", field_type), f("added", added, default=default)))
    assert compatibility_errors("FULL_TRANSITIVE", new, [old]) == []
