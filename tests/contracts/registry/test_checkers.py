"""The registry's one dispatch by schema type (contracts/registry/checkers.py), which LocalRegistry
and `spark-contracts lint` both use."""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest

from contracts import plugins
from contracts.errors import ContractError, RegistryError
from contracts.model import Schema, SchemaReference
from contracts.registry.checkers import CHECKERS, UnreadableSchema, checker_for, incompatibilities
from contracts.registry.compatibility import Compatibility
from contracts.registry.local import LocalRegistry
from contracts.registry.references import Reference

_V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
_V2 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "b", "type": "int"}]})


def test_each_schema_type_the_registry_stores_has_a_checker_in_any_case() -> None:
    assert sorted(CHECKERS) == ["AVRO", "JSON", "PROTOBUF"]
    assert checker_for("avro") is CHECKERS["AVRO"]
    assert checker_for("NOPE") is None


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
        CHECKERS["AVRO"].read(
            _V1, [Reference("ok.avsc", '"string"'), Reference("bad.avsc", '{"type": "nope"}')]
        )
    assert raised.value.reference == 1


def test_a_json_schema_is_read_without_its_references_and_must_be_valid() -> None:
    assert not CHECKERS["JSON"].reads_references
    with pytest.raises(UnreadableSchema, match=r"is not valid under any of the given schemas|not of type"):
        CHECKERS["JSON"].read('{"type": 5}', [])


class _WordsFormat:
    """A plugin format's schema reading, all LocalRegistry asks of it: a schema is a JSON list of
    words, plus the words of the schemas it references."""

    schema_type = "WORDS"

    def parse(self, schema_str: str, references: Sequence[Reference]) -> list[str]:
        words = json.loads(schema_str)
        if not isinstance(words, list):
            raise ContractError("a WORDS schema is a list of words", position="schema")
        return [word for ref in references for word in json.loads(ref.schema_str)] + words


@pytest.fixture
def words_format(monkeypatch: pytest.MonkeyPatch) -> _WordsFormat:
    """WORDS registered as a plugin format, for this test only."""
    installed: plugins.InstalledPlugins[Any] = plugins.InstalledPlugins(
        plugins.FORMAT_GROUP, attrgetter("schema_type")
    )
    monkeypatch.setattr(plugins, "FORMATS", installed)
    words = _WordsFormat()
    installed.register(words)
    return words


def test_local_registry_stores_a_plugin_formats_schemas_read_by_its_parse(
    words_format: _WordsFormat, tmp_path: Path
) -> None:
    registry = LocalRegistry(tmp_path)
    base = registry.register_schema("base", Schema('["a"]', "WORDS"))
    ref = SchemaReference("base", "base", 1)
    first = registry.register_schema("s", Schema('["b"]', "WORDS", (ref,)))
    # No compatibility rules for a plugin format: a second version is never refused.
    second = registry.register_schema("s", Schema('["c", "d"]', "words"))
    assert len({base, first, second}) == 3
    with pytest.raises(RegistryError, match="LocalRegistry stores AVRO, JSON, PROTOBUF, WORDS"):
        registry.register_schema("x", Schema("{}", "NOPE"))
    assert checker_for("WORDS").read('["b"]', [Reference("base", '["a"]')]) == ["a", "b"]  # type: ignore[union-attr]
    with pytest.raises(RegistryError, match="a WORDS schema is a list of words") as caught:
        registry.register_schema("s", Schema('{"not": "words"}', "WORDS"))
    assert caught.value.error_code == 42201
    reopened = LocalRegistry(tmp_path)
    assert reopened.get_latest_version("s").schema.schema_str == '["c", "d"]'
    assert reopened.get_version("s", 1).schema.references == (ref,)
