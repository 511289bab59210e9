"""The registry's one dispatch by schema type (contracts/registry/checkers.py), which LocalRegistry
and `spark-contracts lint` both use."""

from __future__ import annotations

import json

import pytest

from contracts.registry.checkers import CHECKERS, UnreadableSchema, checker_for, incompatibilities
from contracts.registry.compatibility import Compatibility

_V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
_V2 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "b", "type": "int"}]})


def test_each_schema_type_the_registry_stores_has_a_checker_in_any_case() -> None:
    assert sorted(CHECKERS) == ["AVRO", "JSON", "PROTOBUF"]
    assert checker_for("avro") is CHECKERS["AVRO"]
    assert checker_for("TOY") is None


def test_a_new_field_without_default_breaks_backward_on_avro() -> None:
    avro = CHECKERS["AVRO"]
    errors = incompatibilities(
        Compatibility.BACKWARD, "AVRO", avro.read(_V2, []), [("AVRO", avro.read(_V1, []))]
    )
    assert errors and "b" in errors[0]
    assert incompatibilities(Compatibility.NONE, "AVRO", avro.read(_V2, []), []) == []


def test_a_changed_schema_type_is_one_incompatibility_whatever_the_level() -> None:
    document = CHECKERS["JSON"].read('{"type": "object"}', [])
    errors = incompatibilities(Compatibility.NONE, "json", document, [("AVRO", None)])
    assert errors == ["the schema type changed from AVRO to JSON"]


def test_an_unreadable_reference_is_named_by_its_index() -> None:
    with pytest.raises(UnreadableSchema) as raised:
        CHECKERS["AVRO"].read(_V1, [("ok.avsc", '"string"'), ("bad.avsc", '{"type": "nope"}')])
    assert raised.value.reference == 1


def test_a_json_schema_is_read_without_its_references_and_must_be_valid() -> None:
    assert not CHECKERS["JSON"].reads_references
    with pytest.raises(UnreadableSchema, match=r"is not valid under any of the given schemas|not of type"):
        CHECKERS["JSON"].read('{"type": 5}', [])
