"""JSON Schema compatibility as Confluent Schema Registry decides it: which changes each level accepts."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts.registry.compatibility import Compatibility
from contracts.registry.json_compatibility import (
    COMPATIBLE_CHANGES,
    Change,
    json_schema_compatibility_errors,
    schema_differences,
)


def obj(properties: dict[str, Any] | None = None, **keywords: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties or {}, **keywords}


def closed(properties: dict[str, Any] | None = None, **keywords: Any) -> dict[str, Any]:
    return obj(properties, additionalProperties=False, **keywords)


def tup(*items: Any, **keywords: Any) -> dict[str, Any]:
    return {"type": "array", "items": list(items), **keywords}


STRING: dict[str, Any] = {"type": "string"}
INTEGER: dict[str, Any] = {"type": "integer"}
NUMBER: dict[str, Any] = {"type": "number"}


def s(**keywords: Any) -> dict[str, Any]:
    return {"type": "string", **keywords}


def n(**keywords: Any) -> dict[str, Any]:
    return {"type": "number", **keywords}


def a(**keywords: Any) -> dict[str, Any]:
    return {"type": "array", "items": STRING, **keywords}


def o(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", **keywords}


def changes(old: Any, new: Any) -> set[Change]:
    """The kinds of difference from `old` (the writer) to `new` (the reader)."""
    return {d.change for d in schema_differences(old, new)}


def backward_ok(old: Any, new: Any) -> bool:
    return json_schema_compatibility_errors(Compatibility.BACKWARD, new, [old]) == []


# -- one case per kind of change: (old, new, the change, BACKWARD accepts it) ------------------

PER_CHANGE: list[tuple[Change, Any, Any, bool]] = [
    (Change.ID_CHANGED, {"$id": "a"}, {"$id": "b"}, True),
    (Change.DESCRIPTION_CHANGED, s(description="a"), s(description="b"), True),
    (Change.TITLE_CHANGED, s(title="a"), s(title="b"), True),
    (Change.DEFAULT_CHANGED, s(default="a"), s(default="b"), True),
    (Change.SCHEMA_ADDED, {"type": "array"}, a(), False),
    (Change.SCHEMA_REMOVED, a(), {"type": "array"}, True),
    (Change.TYPE_EXTENDED, INTEGER, NUMBER, True),
    (Change.TYPE_NARROWED, NUMBER, INTEGER, False),
    (Change.TYPE_CHANGED, STRING, INTEGER, False),
    (Change.MAX_LENGTH_ADDED, STRING, s(maxLength=5), False),
    (Change.MAX_LENGTH_REMOVED, s(maxLength=5), STRING, True),
    (Change.MAX_LENGTH_INCREASED, s(maxLength=5), s(maxLength=6), True),
    (Change.MAX_LENGTH_DECREASED, s(maxLength=6), s(maxLength=5), False),
    (Change.MIN_LENGTH_ADDED, STRING, s(minLength=1), False),
    (Change.MIN_LENGTH_REMOVED, s(minLength=1), STRING, True),
    (Change.MIN_LENGTH_INCREASED, s(minLength=1), s(minLength=2), False),
    (Change.MIN_LENGTH_DECREASED, s(minLength=2), s(minLength=1), True),
    (Change.PATTERN_ADDED, STRING, s(pattern="^a"), False),
    (Change.PATTERN_REMOVED, s(pattern="^a"), STRING, True),
    (Change.PATTERN_CHANGED, s(pattern="^a"), s(pattern="^b"), False),
    (Change.MAXIMUM_ADDED, NUMBER, n(maximum=5), False),
    (Change.MAXIMUM_REMOVED, n(maximum=5), NUMBER, True),
    (Change.MAXIMUM_INCREASED, n(maximum=5), n(maximum=6), True),
    (Change.MAXIMUM_DECREASED, n(maximum=6), n(maximum=5.5), False),
    (Change.MINIMUM_ADDED, NUMBER, n(minimum=0), False),
    (Change.MINIMUM_REMOVED, n(minimum=0), NUMBER, True),
    (Change.MINIMUM_INCREASED, n(minimum=0), n(minimum=1), False),
    (Change.MINIMUM_DECREASED, n(minimum=1), n(minimum=0), True),
    (Change.EXCLUSIVE_MAXIMUM_ADDED, NUMBER, n(exclusiveMaximum=5), False),
    (Change.EXCLUSIVE_MAXIMUM_REMOVED, n(exclusiveMaximum=5), NUMBER, True),
    (Change.EXCLUSIVE_MAXIMUM_INCREASED, n(exclusiveMaximum=5), n(exclusiveMaximum=6), True),
    (Change.EXCLUSIVE_MAXIMUM_DECREASED, n(exclusiveMaximum=6), n(exclusiveMaximum=5), False),
    (Change.EXCLUSIVE_MINIMUM_ADDED, NUMBER, n(exclusiveMinimum=0), False),
    (Change.EXCLUSIVE_MINIMUM_REMOVED, n(exclusiveMinimum=0), NUMBER, True),
    (Change.EXCLUSIVE_MINIMUM_INCREASED, n(exclusiveMinimum=0), n(exclusiveMinimum=1), False),
    (Change.EXCLUSIVE_MINIMUM_DECREASED, n(exclusiveMinimum=1), n(exclusiveMinimum=0), True),
    (Change.MULTIPLE_OF_ADDED, NUMBER, n(multipleOf=2), False),
    (Change.MULTIPLE_OF_REMOVED, n(multipleOf=2), NUMBER, True),
    (Change.MULTIPLE_OF_EXPANDED, n(multipleOf=2), n(multipleOf=4), False),
    (Change.MULTIPLE_OF_REDUCED, n(multipleOf=0.5), n(multipleOf=0.25), True),
    (Change.MULTIPLE_OF_CHANGED, n(multipleOf=2), n(multipleOf=3), False),
    (Change.REQUIRED_ATTRIBUTE_ADDED, obj({"a": STRING}), obj({"a": STRING}, required=["a"]), False),
    (
        Change.REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED,
        obj({"a": STRING}),
        obj({"a": s(default="")}, required=["a"]),
        True,
    ),
    (Change.REQUIRED_ATTRIBUTE_REMOVED, obj({"a": STRING}, required=["a"]), obj({"a": STRING}), True),
    (Change.MAX_PROPERTIES_ADDED, o(), o(maxProperties=3), False),
    (Change.MAX_PROPERTIES_REMOVED, o(maxProperties=3), o(), True),
    (Change.MAX_PROPERTIES_INCREASED, o(maxProperties=3), o(maxProperties=4), True),
    (Change.MAX_PROPERTIES_DECREASED, o(maxProperties=4), o(maxProperties=3), False),
    (Change.MIN_PROPERTIES_ADDED, o(), o(minProperties=1), False),
    (Change.MIN_PROPERTIES_REMOVED, o(minProperties=1), o(), True),
    (Change.MIN_PROPERTIES_INCREASED, o(minProperties=1), o(minProperties=2), False),
    (Change.MIN_PROPERTIES_DECREASED, o(minProperties=2), o(minProperties=1), True),
    (Change.ADDITIONAL_PROPERTIES_ADDED, o(additionalProperties=False), o(), True),
    (Change.ADDITIONAL_PROPERTIES_REMOVED, o(), o(additionalProperties=False), False),
    (Change.ADDITIONAL_PROPERTIES_EXTENDED, o(additionalProperties=STRING), o(), True),
    (Change.ADDITIONAL_PROPERTIES_NARROWED, o(), o(additionalProperties=STRING), False),
    (Change.DEPENDENCY_ARRAY_ADDED, o(), o(dependencies={"a": ["b"]}), False),
    (Change.DEPENDENCY_ARRAY_REMOVED, o(dependencies={"a": ["b"]}), o(), True),
    (
        Change.DEPENDENCY_ARRAY_EXTENDED,
        o(dependencies={"a": ["b"]}),
        o(dependencies={"a": ["b", "c"]}),
        False,
    ),
    (Change.DEPENDENCY_ARRAY_NARROWED, o(dependencies={"a": ["b", "c"]}), o(dependencies={"a": ["b"]}), True),
    (Change.DEPENDENCY_ARRAY_CHANGED, o(dependencies={"a": ["b"]}), o(dependencies={"a": ["c"]}), False),
    (Change.DEPENDENCY_SCHEMA_ADDED, o(), o(dependencies={"a": {"required": ["b"]}}), False),
    (Change.DEPENDENCY_SCHEMA_REMOVED, o(dependencies={"a": {"required": ["b"]}}), o(), True),
    (Change.REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL, obj(), obj({"a": STRING}, required=["a"]), False),
    (
        Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL,
        obj(),
        obj({"a": s(default="")}, required=["a"]),
        False,
    ),
    (Change.OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL, obj(), obj({"a": STRING}), False),
    (Change.PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL, obj(), obj({"a": {}}), True),
    (
        Change.REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
        closed(),
        closed({"a": STRING}, required=["a"]),
        False,
    ),
    (
        Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL,
        closed(),
        closed({"a": s(default="")}, required=["a"]),
        True,
    ),
    (Change.OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL, closed(), closed({"a": STRING}), True),
    (Change.PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL, obj({"a": STRING}), obj(), True),
    (Change.PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL, closed({"a": False}), closed(), True),
    (Change.PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL, closed({"a": STRING}), closed(), False),
    (
        Change.PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        closed({"a": STRING}),
        obj(additionalProperties=STRING),
        True,
    ),
    (
        Change.PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        closed({"a": STRING}),
        obj(additionalProperties=INTEGER),
        False,
    ),
    (
        Change.PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        obj(patternProperties={"^s_": STRING}),
        obj({"s_x": STRING}, patternProperties={"^s_": STRING}),
        True,
    ),
    (
        Change.PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        obj(patternProperties={"^s_": STRING}),
        obj({"s_x": INTEGER}, patternProperties={"^s_": STRING}),
        False,
    ),
    (Change.MAX_ITEMS_ADDED, a(), a(maxItems=3), False),
    (Change.MAX_ITEMS_REMOVED, a(maxItems=3), a(), True),
    (Change.MAX_ITEMS_INCREASED, a(maxItems=3), a(maxItems=4), True),
    (Change.MAX_ITEMS_DECREASED, a(maxItems=4), a(maxItems=3), False),
    (Change.MIN_ITEMS_ADDED, a(), a(minItems=1), False),
    (Change.MIN_ITEMS_REMOVED, a(minItems=1), a(), True),
    (Change.MIN_ITEMS_INCREASED, a(minItems=1), a(minItems=2), False),
    (Change.MIN_ITEMS_DECREASED, a(minItems=2), a(minItems=1), True),
    (Change.MAX_CONTAINS_ADDED, a(), a(maxContains=3), False),
    (Change.MAX_CONTAINS_REMOVED, a(maxContains=3), a(), True),
    (Change.MAX_CONTAINS_INCREASED, a(maxContains=3), a(maxContains=4), True),
    (Change.MAX_CONTAINS_DECREASED, a(maxContains=4), a(maxContains=3), False),
    (Change.MIN_CONTAINS_ADDED, a(), a(minContains=1), False),
    (Change.MIN_CONTAINS_REMOVED, a(minContains=1), a(), True),
    (Change.MIN_CONTAINS_INCREASED, a(minContains=1), a(minContains=2), False),
    (Change.MIN_CONTAINS_DECREASED, a(minContains=2), a(minContains=1), True),
    (Change.UNIQUE_ITEMS_ADDED, a(), a(uniqueItems=True), False),
    (Change.UNIQUE_ITEMS_REMOVED, a(uniqueItems=True), a(), True),
    (Change.ADDITIONAL_ITEMS_ADDED, tup(STRING, additionalItems=False), tup(STRING), True),
    (Change.ADDITIONAL_ITEMS_REMOVED, tup(STRING), tup(STRING, additionalItems=False), False),
    (Change.ADDITIONAL_ITEMS_EXTENDED, tup(STRING, additionalItems=STRING), tup(STRING), True),
    (Change.ADDITIONAL_ITEMS_NARROWED, tup(STRING), tup(STRING, additionalItems=STRING), False),
    (Change.ITEM_ADDED_TO_OPEN_CONTENT_MODEL, tup(STRING), tup(STRING, INTEGER), False),
    (Change.ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL, tup(STRING), tup(STRING, {}), True),
    (
        Change.ITEM_ADDED_TO_CLOSED_CONTENT_MODEL,
        tup(STRING, additionalItems=False),
        tup(STRING, INTEGER, additionalItems=False),
        True,
    ),
    (Change.ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL, tup(STRING, INTEGER), tup(STRING), True),
    (
        Change.ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        tup(STRING, False, additionalItems=False),
        tup(STRING, additionalItems=False),
        True,
    ),
    (
        Change.ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        tup(STRING, INTEGER, additionalItems=False),
        tup(STRING, additionalItems=False),
        False,
    ),
    (
        Change.ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        tup(STRING, INTEGER, additionalItems=False),
        tup(STRING, additionalItems=NUMBER),
        True,
    ),
    (
        Change.ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        tup(STRING, INTEGER, additionalItems=False),
        tup(STRING, additionalItems=STRING),
        False,
    ),
    (
        Change.ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        tup(STRING, additionalItems=INTEGER),
        tup(STRING, NUMBER, additionalItems=INTEGER),
        True,
    ),
    (
        Change.ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        tup(STRING, additionalItems=INTEGER),
        tup(STRING, STRING, additionalItems=INTEGER),
        False,
    ),
    (Change.ENUM_ARRAY_EXTENDED, {"enum": ["a"]}, {"enum": ["a", "b"]}, True),
    (Change.ENUM_ARRAY_NARROWED, {"enum": ["a", "b"]}, {"enum": ["a"]}, False),
    (Change.ENUM_ARRAY_CHANGED, {"enum": ["a"]}, {"enum": ["b"]}, False),
    (Change.COMBINED_TYPE_EXTENDED, {"oneOf": [STRING, INTEGER]}, {"anyOf": [STRING, INTEGER]}, True),
    (Change.COMBINED_TYPE_CHANGED, {"anyOf": [STRING, INTEGER]}, {"oneOf": [STRING, INTEGER]}, False),
    (Change.PRODUCT_TYPE_EXTENDED, {"allOf": [STRING]}, {"allOf": [STRING, {"maxLength": 3}]}, False),
    (Change.PRODUCT_TYPE_NARROWED, s(enum=["a"]), STRING, True),
    (Change.SUM_TYPE_EXTENDED, STRING, {"type": ["string", "null"]}, True),
    (Change.SUM_TYPE_NARROWED, {"oneOf": [STRING, INTEGER]}, {"oneOf": [STRING]}, False),
    (
        Change.COMBINED_TYPE_SUBSCHEMAS_CHANGED,
        {"oneOf": [STRING, INTEGER]},
        {"oneOf": [STRING, {"type": "boolean"}]},
        False,
    ),
    (Change.NOT_TYPE_EXTENDED, {"not": STRING}, {"not": {"type": ["string", "integer"]}}, False),
    (Change.NOT_TYPE_NARROWED, {"not": {"type": ["string", "integer"]}}, {"not": STRING}, True),
]


@pytest.mark.parametrize(
    ("change", "old", "new", "compatible"), PER_CHANGE, ids=[row[0].name for row in PER_CHANGE]
)
def test_each_kind_of_change_and_whether_backward_accepts_it(
    change: Change, old: Any, new: Any, compatible: bool
) -> None:
    assert change in changes(old, new)
    assert backward_ok(old, new) is compatible
    assert (change in COMPATIBLE_CHANGES) is compatible


def test_every_kind_of_change_has_a_case() -> None:
    assert {row[0] for row in PER_CHANGE} == set(Change)


# -- levels --------------------------------------------------------------------------------------

CLOSED_V1 = closed({"a": STRING})
LEVEL_CASES = [
    # (old, new, BACKWARD, FORWARD, FULL)
    pytest.param(STRING, s(description="a name"), True, True, True, id="annotation-only"),
    pytest.param(STRING, INTEGER, False, False, False, id="type-changed"),
    pytest.param(s(maxLength=5), s(maxLength=9), True, False, False, id="limit-relaxed"),
    pytest.param({"enum": ["a"]}, {"enum": ["a", "b"]}, True, False, False, id="enum-extended"),
    pytest.param(CLOSED_V1, closed({"a": STRING, "b": STRING}), True, False, False, id="optional-to-closed"),
    pytest.param(obj({"a": STRING}), obj({"a": STRING, "b": {}}), True, True, True, id="any-value-to-open"),
    pytest.param(
        obj({"a": STRING, "b": STRING}), obj({"a": STRING}), True, False, False, id="removed-from-open"
    ),
    pytest.param(
        obj({"a": STRING}, required=["a"]), obj({"a": STRING}), True, False, False, id="required-dropped"
    ),
    pytest.param(NUMBER, INTEGER, False, True, False, id="number-to-integer"),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward", "full"), LEVEL_CASES)
def test_forward_swaps_the_roles_and_full_needs_both(
    old: Any, new: Any, backward: bool, forward: bool, full: bool
) -> None:
    def accepted(level: Compatibility) -> bool:
        return json_schema_compatibility_errors(level, new, [old]) == []

    assert accepted(Compatibility.BACKWARD) is backward
    assert accepted(Compatibility.FORWARD) is forward
    assert accepted(Compatibility.FULL) is full
    assert accepted(Compatibility.NONE)


def test_messages_name_the_direction_path_and_change() -> None:
    old, new = obj({"age": STRING}), obj({"age": INTEGER})
    assert json_schema_compatibility_errors("FULL", new, [old]) == [
        "new schema cannot read old: #/properties/age: TYPE_CHANGED (writer string, reader integer)",
        "old schema cannot read new: #/properties/age: TYPE_CHANGED (writer integer, reader string)",
    ]


def test_forward_messages_put_the_new_schema_in_the_writers_place() -> None:
    old, new = s(maxLength=5), s(maxLength=9)
    assert json_schema_compatibility_errors("FORWARD", new, [old]) == [
        "old schema cannot read new: #/maxLength: MAX_LENGTH_DECREASED (writer 9, reader 5)"
    ]


def test_only_incompatible_changes_are_reported() -> None:
    old = obj({"a": s(maxLength=5)}, title="v1")
    new = obj({"a": s(maxLength=9, pattern="^x")}, title="v2")
    assert json_schema_compatibility_errors("BACKWARD", new, [old]) == [
        'new schema cannot read old: #/properties/a/pattern: PATTERN_ADDED (writer none, reader "^x")'
    ]


def test_transitive_levels_check_every_previous_version() -> None:
    v1 = closed({"a": STRING})
    v2 = closed({"a": STRING, "b": s(default="")}, required=["b"])
    v3 = closed({"a": STRING, "b": STRING}, required=["b"])  # reads v2 (which has b), not v1
    assert json_schema_compatibility_errors(Compatibility.BACKWARD, v2, [v1]) == []
    assert json_schema_compatibility_errors(Compatibility.BACKWARD, v3, [v1, v2]) == []
    assert json_schema_compatibility_errors(Compatibility.BACKWARD_TRANSITIVE, v3, [v1, v2]) == [
        "new schema cannot read old: #/properties/b: REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
        " (the reader requires, without a default, a property the writer does not declare)"
    ]


def test_non_transitive_levels_ignore_all_but_the_newest_previous_version() -> None:
    previous = [INTEGER, STRING]  # the new schema is the newest one again; the oldest differs
    for level in ("BACKWARD", "FORWARD", "FULL"):
        assert json_schema_compatibility_errors(level, STRING, previous) == []
    assert len(json_schema_compatibility_errors("BACKWARD_TRANSITIVE", STRING, previous)) == 1
    assert len(json_schema_compatibility_errors("FORWARD_TRANSITIVE", STRING, previous)) == 1
    assert len(json_schema_compatibility_errors("FULL_TRANSITIVE", STRING, previous)) == 2


def test_transitive_errors_come_newest_version_first() -> None:
    errors = json_schema_compatibility_errors("BACKWARD_TRANSITIVE", INTEGER, [STRING, {"type": "boolean"}])
    assert errors == [
        "new schema cannot read old: #/: TYPE_CHANGED (writer boolean, reader integer)",
        "new schema cannot read old: #/: TYPE_CHANGED (writer string, reader integer)",
    ]


def test_none_and_no_previous_version_check_nothing() -> None:
    assert json_schema_compatibility_errors(Compatibility.NONE, STRING, [INTEGER]) == []
    assert json_schema_compatibility_errors(Compatibility.FULL_TRANSITIVE, STRING, []) == []


# -- reading schemas as the registry does ----------------------------------------------------------


def test_branches_pair_with_their_equals_first() -> None:
    # Each branch can read the other (titles differ only), but the unchanged pairing has no differences.
    union = {"oneOf": [s(title="a"), s(title="b")]}
    assert changes(union, copy.deepcopy(union)) == set()


def test_a_type_list_is_a_union() -> None:
    assert backward_ok(STRING, {"type": ["string", "null"]})
    assert not backward_ok({"type": ["string", "null"]}, STRING)


def test_const_is_compared_by_value() -> None:
    assert changes({"const": 1}, {"const": 1}) == set()
    assert changes({"const": 1}, {"const": True}) == {Change.ENUM_ARRAY_CHANGED}
    assert not backward_ok({"const": "a"}, {"const": "b"})


def test_enum_values_keep_their_json_types_apart() -> None:
    assert changes({"enum": [1, "x"]}, {"enum": ["x", 1]}) == set()
    assert changes({"enum": [1]}, {"enum": [True]}) == {Change.ENUM_ARRAY_CHANGED}


def test_keywords_of_several_kinds_in_one_object_are_an_all_of() -> None:
    found = schema_differences(s(enum=["a"]), s(enum=["a", "b"]))
    assert [(d.change, d.location) for d in found] == [(Change.ENUM_ARRAY_EXTENDED, "#/allOf/1/enum")]


def test_keywords_without_a_type_imply_one() -> None:
    assert changes({"maxLength": 3}, {"maxLength": 2}) == {Change.MAX_LENGTH_DECREASED}
    assert changes({"properties": {"a": STRING}}, obj({"a": STRING})) == set()


def test_kafka_connect_bytes_may_change_schema_type() -> None:
    old = {"type": "string", "connect.type": "bytes"}
    assert backward_ok(old, {"type": "array", "items": INTEGER, "connect.type": "bytes"})
    assert not backward_ok(STRING, {"type": "array", "items": INTEGER})


def test_true_and_false_schemas() -> None:
    assert backward_ok(STRING, True)
    assert backward_ok(False, STRING)
    assert not backward_ok(True, STRING)
    assert changes(obj({"a": STRING}), obj({"a": True})) == set()


def test_draft_4_reads_id_and_boolean_exclusive_limits() -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#"}
    old = {**draft4, "id": "a", "type": "number", "maximum": 5, "exclusiveMaximum": True}
    new = {**draft4, "id": "b", "type": "number", "maximum": 5}
    assert changes(old, new) == {Change.ID_CHANGED}


def test_draft_4_has_no_const() -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#"}
    assert changes({**draft4, "const": 1}, {**draft4, "const": 2}) == set()


def test_draft_6_has_no_if_then_else() -> None:
    draft6, draft7 = (
        {"$schema": "http://json-schema.org/draft-06/schema#"},
        {"$schema": "http://json-schema.org/draft-07/schema#"},
    )
    conditional = {"if": {"minLength": 1}, "then": {"maxLength": 3}}
    assert changes({**draft6, **STRING}, {**draft6, **STRING, **conditional}) == set()
    assert changes({**draft7, **STRING}, {**draft7, **STRING, **conditional}) == {Change.TYPE_CHANGED}


def test_2020_12_schemas_are_read_with_the_shared_keywords() -> None:
    modern = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    old = {**modern, "$defs": {"name": STRING}, **obj({"a": {"$ref": "#/$defs/name"}})}
    assert not backward_ok(old, {**modern, **obj({"a": INTEGER})})
    assert backward_ok(old, {**modern, **obj({"a": s(description="x")})})


# -- $ref --------------------------------------------------------------------------------------------


def with_definitions(bucket: str, definitions: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {bucket: definitions, **schema}


@pytest.mark.parametrize(
    ("bucket", "ref"), [("definitions", "#/definitions/name"), ("$defs", "#/$defs/name")]
)
def test_refs_stand_for_their_target(bucket: str, ref: str) -> None:
    old = with_definitions(bucket, {"name": s(maxLength=5)}, **obj({"a": {"$ref": ref}}))
    new = with_definitions(bucket, {"name": s(maxLength=3)}, **obj({"a": {"$ref": ref}}))
    found = schema_differences(old, new)
    assert [(d.change, d.location) for d in found] == [
        (Change.MAX_LENGTH_DECREASED, "#/properties/a/maxLength")
    ]


def test_defs_refs_also_find_definitions_entries() -> None:
    old = with_definitions("definitions", {"name": STRING}, **obj({"a": {"$ref": "#/$defs/name"}}))
    assert changes(old, obj({"a": STRING})) == set()
    assert changes(old, obj({"a": INTEGER})) == {Change.TYPE_CHANGED}


def test_inlining_or_extracting_a_definition_changes_nothing() -> None:
    inline = obj({"a": STRING})
    extracted = with_definitions("definitions", {"s": STRING}, **obj({"a": {"$ref": "#/definitions/s"}}))
    assert changes(inline, extracted) == set()
    assert changes(extracted, inline) == set()


def test_refs_may_point_anywhere_in_the_document_and_through_other_refs() -> None:
    schema = with_definitions(
        "definitions",
        {"alias": {"$ref": "#/properties/a"}, "escaped/name": INTEGER},
        **obj(
            {"a": STRING, "b": {"$ref": "#/definitions/alias"}, "c": {"$ref": "#/definitions/escaped~1name"}}
        ),
    )
    changed = copy.deepcopy(schema)
    changed["definitions"]["escaped/name"] = STRING
    assert [(d.change, d.location) for d in schema_differences(schema, changed)] == [
        (Change.TYPE_CHANGED, "#/properties/c")
    ]


def recursive_list(value_type: str) -> dict[str, Any]:
    node = obj({"value": {"type": value_type}, "next": {"$ref": "#/definitions/node"}})
    return with_definitions("definitions", {"node": node}, **{"$ref": "#/definitions/node"})


def test_recursive_refs_end() -> None:
    assert changes(recursive_list("string"), recursive_list("string")) == set()
    assert backward_ok(recursive_list("integer"), recursive_list("number"))
    assert not backward_ok(recursive_list("number"), recursive_list("integer"))


def chain(length: int, last_type: str) -> dict[str, Any]:
    """Definitions d0 .. d{length-1}, each an object whose `next` is the following one."""
    definitions = {f"d{i}": obj({"next": {"$ref": f"#/definitions/d{i + 1}"}}) for i in range(length - 1)}
    definitions[f"d{length - 1}"] = {"type": last_type}
    return with_definitions("definitions", definitions, **{"$ref": "#/definitions/d0"})


def test_deep_schemas_do_not_exhaust_python_recursion() -> None:
    assert changes(chain(1500, "string"), chain(1500, "string")) == set()
    found = schema_differences(chain(1500, "string"), chain(1500, "integer"))
    assert [d.change for d in found] == [Change.TYPE_CHANGED]
    assert found[0].location == "#/" + "/".join(["properties", "next"] * 1499)


def union_of(types: list[str]) -> dict[str, Any]:
    return {"oneOf": [{"$ref": f"#/definitions/{t}"} for t in types]}


def trade(types: list[str], id_types: dict[str, str]) -> dict[str, Any]:
    """Definitions that each refer to all of them through oneOf unions (Confluent's recursion test)."""
    definitions = {
        t: obj(
            {"id": {"type": id_types.get(t, "string")}, "underlying": union_of(types), "ref": union_of(types)}
        )
        for t in types
    }
    return with_definitions("definitions", definitions, **obj({"product": union_of(types)}))


def test_recursive_unions_end_and_still_find_changes() -> None:
    types = ["Asset", "Bond", "Swap", "Loan", "Repo", "Index"]
    assert changes(trade(types, {}), trade(types, {})) == set()
    assert not backward_ok(trade(types, {}), trade(types, {"Bond": "number"}))


def test_an_incompatible_pair_met_again_in_a_cycle_is_not_assumed_compatible() -> None:
    # Confluent's memoization regression: T0 -> T2 -> T0 is a cycle behind single-branch oneOfs, and
    # the root oneOf[T0, T1] pairs up only if an optimistic guess about (T0, T0) were kept.
    def schema(t0_id: str, t1_id: str) -> dict[str, Any]:
        def node(id_type: str, target: str) -> dict[str, Any]:
            return obj({"id": {"type": id_type}, "ref": {"oneOf": [{"$ref": f"#/definitions/{target}"}]}})

        definitions = {"T0": node(t0_id, "T2"), "T1": node(t1_id, "T2"), "T2": node("integer", "T0")}
        return with_definitions("definitions", definitions, **obj({"root": union_of(["T0", "T1"])}))

    assert not backward_ok(schema("integer", "boolean"), schema("boolean", "number"))


# -- what is not a schema ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (["string"], "new schema: a JSON Schema must be a JSON object or boolean, not an array"),
        (
            obj({"a": 3}),
            "new schema at #/properties/a: a schema must be a JSON object or boolean, not a number",
        ),
        ({"type": "text"}, 'new schema at #/type: unknown type "text"'),
        ({"type": 3}, "new schema at #/type: type must be a string or an array of strings"),
        (
            obj({"a": {"$ref": "other.json#/definitions/x"}}),
            "new schema at #/properties/a: $ref 'other.json#/definitions/x' is not within the schema"
            " (only #/... references are supported)",
        ),
        (
            obj({"a": {"$ref": "#name"}}),
            "new schema at #/properties/a: $ref '#name' names an anchor (only JSON pointers are supported)",
        ),
        (
            obj({"a": {"$ref": "#/definitions/missing"}}),
            "new schema at #/properties/a: $ref '#/definitions/missing' points at nothing in the schema",
        ),
        (
            with_definitions(
                "definitions",
                {"x": {"$ref": "#/definitions/y"}, "y": {"$ref": "#/definitions/x"}},
                **{"$ref": "#/definitions/x"},
            ),
            "new schema at #: $ref '#/definitions/x' only leads to other $refs, in a cycle",
        ),
        (obj({"a": {"$ref": 3}}), "new schema at #/properties/a: $ref must be a string"),
        (obj({"a": {"$ref": "#/properties/a/$ref"}}), "new schema at #/properties/a/$ref: a schema must be"),
        (s(maxLength=-1), "new schema at #/maxLength: maxLength must be a non-negative integer"),
        (s(minLength=1.5), "new schema at #/minLength: minLength must be a non-negative integer"),
        (n(minimum="0"), "new schema at #/minimum: minimum must be a number"),
        (n(multipleOf=0), "new schema at #/multipleOf: multipleOf must be greater than 0"),
        (s(pattern=3), "new schema at #/pattern: pattern must be a string"),
        (o(required="a"), "new schema at #/required: must be an array of strings"),
        (o(properties=[]), "new schema at #/properties: properties must be an object"),
        ({"enum": "a"}, "new schema at #/enum: enum must be an array"),
        ({"oneOf": {}}, "new schema at #/oneOf: oneOf must be an array"),
        (a(uniqueItems="yes"), "new schema at #/uniqueItems: uniqueItems must be a boolean"),
        (
            o(patternProperties={"(": STRING}),
            "new schema at #/patternProperties: pattern '(' is not a regular",
        ),
        (
            {"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [STRING]},
            "new schema at #: keyword 'prefixItems' (JSON Schema 2019-09/2020-12) is not supported",
        ),
        (
            {"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3},
            "new schema at #/exclusiveMinimum: exclusiveMinimum must be a boolean in draft 4",
        ),
    ],
)
def test_what_is_not_a_schema_fails_naming_the_schema_and_pointer(schema: Any, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        json_schema_compatibility_errors("BACKWARD", schema, [STRING])
    assert str(raised.value).startswith(message)


def test_a_bad_previous_schema_is_named_by_its_position() -> None:
    with pytest.raises(ValueError, match=r"^previous schema 1 of 2 at #/type: unknown type \"strng\""):
        json_schema_compatibility_errors("FULL_TRANSITIVE", STRING, [{"type": "strng"}, STRING])


def test_modern_keywords_are_fine_under_older_drafts_as_the_registry_ignores_them() -> None:
    assert backward_ok(obj(unevaluatedProperties=False), obj())


# -- properties --------------------------------------------------------------------------------------

_LEAF = st.one_of(
    st.builds(s, maxLength=st.integers(0, 9), pattern=st.sampled_from(["^a", "b$"])),
    st.builds(n, minimum=st.integers(-5, 5), multipleOf=st.sampled_from([1, 0.5, 3])),
    st.just(INTEGER),
    st.just({"type": "boolean"}),
    st.just({"type": ["string", "null"]}),
    st.builds(lambda values: {"enum": values}, st.lists(st.sampled_from(["x", 1, None, True]), min_size=1)),
    st.builds(lambda value: {"const": value}, st.sampled_from(["x", 1, None])),
    st.booleans(),
)


def _schemas(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        st.builds(
            lambda props, required, extra: obj(props, required=sorted(set(required) & set(props)), **extra),
            st.dictionaries(names, children, max_size=3),
            st.lists(names, max_size=3),
            st.sampled_from([{}, {"additionalProperties": False}, {"additionalProperties": STRING}]),
        ),
        st.builds(lambda items, extra: {"type": "array", "items": items, **extra}, children, st.just({})),
        st.builds(lambda items: tup(*items, additionalItems=False), st.lists(children, max_size=3)),
        st.builds(
            lambda k, branches: {k: branches},
            st.sampled_from(["oneOf", "anyOf", "allOf"]),
            st.lists(children, min_size=1, max_size=3),
        ),
        st.builds(lambda inner: {"not": inner}, children),
    )


SCHEMAS = st.recursive(_LEAF, _schemas, max_leaves=8)


@given(SCHEMAS)
@settings(max_examples=examples(200), deadline=None)
def test_a_schema_is_compatible_with_itself_in_every_level(schema: Any) -> None:
    # The registry reports NOT_TYPE_NARROWED for every `not`, changed or not; nothing else may differ.
    assert changes(schema, copy.deepcopy(schema)) <= {Change.NOT_TYPE_NARROWED}
    for level in Compatibility:
        assert json_schema_compatibility_errors(level, schema, [schema, copy.deepcopy(schema)]) == []


_RELAXABLE = ("maxLength", "pattern", "minimum", "multipleOf", "required", "additionalProperties", "minItems")


def _relaxations(schema: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """Where in `schema` (outside combinators and `not`) a constraint keyword could be dropped."""
    if not isinstance(schema, dict):
        return []
    found = [(path, k) for k in _RELAXABLE if k in schema and schema[k] not in ([], True)]
    for name, child in schema.get("properties", {}).items():
        found += _relaxations(child, (*path, "properties", name))
    if isinstance(schema.get("items"), dict):
        found += _relaxations(schema["items"], (*path, "items"))
    return found


@given(SCHEMAS, st.data())
@settings(max_examples=examples(200), deadline=None)
def test_dropping_a_constraint_is_backward_but_not_forward_compatible(
    inner: Any, data: st.DataObject
) -> None:
    schema = obj({"p": inner, "q": s(maxLength=3)}, required=["p"])
    path, keyword = data.draw(st.sampled_from(_relaxations(schema)))
    relaxed = copy.deepcopy(schema)
    node = relaxed
    for step in path:
        node = node[step]
    del node[keyword]
    assert json_schema_compatibility_errors("BACKWARD", relaxed, [schema]) == []
    assert json_schema_compatibility_errors("FORWARD", relaxed, [schema]) != []
