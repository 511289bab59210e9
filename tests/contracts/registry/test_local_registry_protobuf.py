"""LocalRegistry stores Protobuf schemas: compiled by protoc on registration (42201 with protoc's
message when invalid), references by import path, compatibility by field number as Confluent
checks PROTOBUF subjects, a schema type that does not change."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import LocalRegistry, Schema
from contracts.codes import INCOMPATIBLE_SCHEMA
from contracts.errors import RegistryError

SUBJECT = "orders-value"
ORDER = """syntax = "proto3";
package acme;
message Order {
  int64 id = 1;
  string customer = 2;
  Status status = 3;
  message Line { string sku = 1; int32 quantity = 2; }
  repeated Line lines = 4;
  enum Status { NEW = 0; PAID = 1; }
}
"""


def proto(text: str, references: list[dict[str, object]] | None = None) -> Schema:
    return Schema.from_dict({"schemaType": "PROTOBUF", "schema": text, "references": references or []})


def changed(old: str, new: str) -> str:
    assert old in ORDER
    return ORDER.replace(old, new)


def test_protobuf_schemas_register_and_reload(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    registered = registry.register_schema(SUBJECT, proto(ORDER))
    reloaded = LocalRegistry(tmp_path).get_schema(registered)
    assert (reloaded.schema_type, reloaded.schema_str) == ("PROTOBUF", ORDER)
    assert registry.register_schema(SUBJECT, proto(ORDER)) == registered  # the same schema, the same id


def test_an_invalid_proto_is_42201_with_what_protoc_said() -> None:
    registry = LocalRegistry()
    for text, said in [
        ('syntax = "proto3"; message Order { int64 id = 1 }', 'Expected ";"'),
        ('syntax = "proto3"; message Order { Missing id = 1; }', '"Missing" is not defined'),
        ('syntax = "proto3"; import "nowhere.proto"; message Order { int64 id = 1; }', "nowhere.proto"),
    ]:
        with pytest.raises(RegistryError, match="Invalid schema of type PROTOBUF") as refused:
            registry.register_schema(SUBJECT, proto(text))
        assert (refused.value.status, refused.value.error_code) == (422, 42201)
        assert said in str(refused.value), str(refused.value)


def test_references_resolve_by_import_path_and_well_known_types_need_none() -> None:
    registry = LocalRegistry()
    registry.register_schema(
        "money", proto('syntax = "proto3"; package common; message Money { int64 units = 1; }')
    )
    priced = """syntax = "proto3";
import "common/money.proto";
import "google/protobuf/timestamp.proto";
message Priced { common.Money price = 1; google.protobuf.Timestamp at = 2; }
"""
    reference = {"name": "common/money.proto", "subject": "money", "version": 1}
    assert registry.register_schema("priced", proto(priced, [reference])) > 0
    with pytest.raises(RegistryError, match="cannot be resolved"):
        registry.register_schema("other", proto(priced, [{**reference, "version": 2}]))
    with pytest.raises(RegistryError, match=r"common/money\.proto"):
        registry.register_schema("other", proto(priced))


@pytest.mark.parametrize(
    ("old", "new", "level"),
    [
        ("  string customer = 2;\n", "", "FULL_TRANSITIVE"),  # removing a field
        ("  string customer = 2;\n", "  string buyer = 2;\n", "FULL"),  # renaming one
        ("int32 quantity = 2;", "int32 quantity = 2; string note = 3;", "FULL"),  # adding one
        ("int32 quantity = 2;", "int64 quantity = 2;", "FULL"),  # the same wire type
        ("  string customer = 2;\n", "  bytes customer = 2;\n", "FULL"),
    ],
)
def test_changes_that_keep_the_wire_readable_are_compatible(old: str, new: str, level: str) -> None:
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibility=level)
    registry.register_schema(SUBJECT, proto(ORDER))
    assert registry.register_schema(SUBJECT, proto(changed(old, new))) > 0


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("  int64 id = 1;\n", "  string id = 1;\n", "FIELD_SCALAR_KIND_CHANGED: acme.Order field 1 (id)"),
        ("  int64 id = 1;\n", "  sint64 id = 1;\n", "FIELD_SCALAR_KIND_CHANGED"),
        ("  int64 id = 1;\n", "  repeated int64 id = 1;\n", "FIELD_LABEL_CHANGED"),
        ("  string customer = 2;\n", "  Line customer = 2;\n", "FIELD_KIND_CHANGED"),
        ("  repeated Line lines = 4;\n", "  repeated Status lines = 4;\n", "FIELD_KIND_CHANGED"),
        ("package acme;", "package shop;", "PACKAGE_CHANGED"),
        (
            "  message Line { string sku = 1; int32 quantity = 2; }\n  repeated Line lines = 4;\n",
            "",
            "MESSAGE_REMOVED: Order.Line",
        ),
    ],
)
def test_changes_that_break_the_wire_are_refused_backward(old: str, new: str, error: str) -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, proto(ORDER))  # BACKWARD by default
    with pytest.raises(RegistryError) as refused:
        registry.register_schema(SUBJECT, proto(changed(old, new)))
    assert refused.value.error_code == INCOMPATIBLE_SCHEMA
    assert error in str(refused.value) and "new schema cannot read old" in str(refused.value)


def test_adding_a_message_is_backward_but_not_forward_compatible() -> None:
    added = ORDER + "message Refund { int64 order_id = 1; }\n"
    backward = LocalRegistry()
    backward.register_schema(SUBJECT, proto(ORDER))
    backward.register_schema(SUBJECT, proto(added))
    assert backward.get_latest_version(SUBJECT).version == 2
    forward = LocalRegistry()
    forward.set_config(SUBJECT, compatibility="FORWARD")
    forward.register_schema(SUBJECT, proto(ORDER))
    with pytest.raises(RegistryError, match="old schema cannot read new: MESSAGE_REMOVED: Refund"):
        forward.register_schema(SUBJECT, proto(added))


def test_proto2_required_fields_may_not_come_or_go() -> None:
    v1 = 'syntax = "proto2"; message Order { required int64 id = 1; optional string note = 2; }'
    v2 = 'syntax = "proto2"; message Order { optional string note = 2; required string code = 3; }'
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, proto(v1))
    with pytest.raises(RegistryError) as refused:
        registry.register_schema(SUBJECT, proto(v2))
    assert "REQUIRED_FIELD_REMOVED: Order field 1 (id)" in str(refused.value)
    assert "REQUIRED_FIELD_ADDED: Order field 3 (code)" in str(refused.value)


def test_the_schema_type_may_not_change_and_none_allows_any_change() -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict({"schema": '"string"'}))
    with pytest.raises(RegistryError, match="the schema type changed from AVRO to PROTOBUF"):
        registry.register_schema(SUBJECT, proto(ORDER))
    registry.set_config("free", compatibility="NONE")
    registry.register_schema("free", proto(ORDER))
    registry.register_schema("free", proto(changed("  int64 id = 1;\n", "  string id = 1;\n")))
    assert registry.get_latest_version("free").version == 2


def test_normalize_keeps_the_proto_text() -> None:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, proto(ORDER), normalize=True)
    assert registry.get_latest_version(SUBJECT).schema.schema_str == ORDER
