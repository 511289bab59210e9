"""Protobuf compatibility as the registry checks PROTOBUF subjects: the rules of Confluent's
documentation that data written with one version can be read with another by field number.

Sound changes: adding or removing fields (except proto2 `required` ones), renaming fields,
adding messages (for BACKWARD). Breaking changes: removing a message, changing the package,
changing a field between scalar, enum, message and map, between singular and repeated, to a
scalar type whose wire form differs (int32/uint32/int64/uint64/bool share one, sint32/sint64,
fixed32/sfixed32, fixed64/sfixed64 and string/bytes others), to another message or enum type,
and adding or removing a `required` field. BACKWARD checks the new schema reading the old;
FORWARD the old reading the new; FULL both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from contracts.registry.compatibility import Compatibility
from contracts.registry.protobuf_schema import ProtoSchema

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor

_WIRE_GROUPS = ({3, 4, 5, 8, 13}, {17, 18}, {7, 15}, {6, 16}, {9, 12})
"""Scalar types (FieldDescriptor.TYPE_*) a reader may read each other as: int64, uint64, int32,
bool, uint32; sint32, sint64; fixed32, sfixed32; fixed64, sfixed64; string, bytes."""


def protobuf_compatibility_errors(
    level: Compatibility | str, new: ProtoSchema, previous: Sequence[ProtoSchema]
) -> list[str]:
    """Why `new` breaks `level` against `previous` (oldest first); only the newest unless transitive."""
    level = Compatibility(level)
    if level is Compatibility.NONE or not previous:
        return []
    first = 0 if level.transitive else len(previous) - 1
    errors: list[str] = []
    for old in reversed(previous[first:]):
        if level.backward:
            errors.extend(f"new schema cannot read old: {e}" for e in reader_errors(new, old))
        if level.forward:
            errors.extend(f"old schema cannot read new: {e}" for e in reader_errors(old, new))
    return errors


def reader_errors(reader: ProtoSchema, writer: ProtoSchema) -> list[str]:
    """What keeps `reader` from reading, field number by field number, data `writer` wrote."""
    read_file, written_file = _file(reader), _file(writer)
    errors = []
    if read_file.package != written_file.package:
        errors.append(f"PACKAGE_CHANGED: {written_file.package!r} became {read_file.package!r}")
    read_messages = _messages(read_file)
    for name, written in _messages(written_file).items():
        read = read_messages.get(name)
        if read is None:
            errors.append(f"MESSAGE_REMOVED: {name}")
        else:
            errors.extend(_field_errors(read, written))
    return errors


def _file(schema: ProtoSchema) -> FileDescriptor:
    return schema.pool().FindFileByName(schema.file_name)


def _messages(file: FileDescriptor) -> dict[str, Descriptor]:
    """Every message declared in the file, nested ones too (map entries left out), by name inside
    the package."""
    found: dict[str, Descriptor] = {}
    prefix = f"{file.package}." if file.package else ""

    def walk(message: Descriptor) -> None:
        if message.GetOptions().map_entry:
            return
        found[message.full_name.removeprefix(prefix)] = message
        for nested in message.nested_types:
            walk(nested)

    for message in file.message_types_by_name.values():
        walk(message)
    return found


def _field_errors(reader: Descriptor, writer: Descriptor) -> list[str]:
    errors = []
    read_fields = reader.fields_by_number
    for number, written in writer.fields_by_number.items():
        read = read_fields.get(number)
        where = f"{writer.full_name} field {number}"
        if read is None:
            if _required(written):
                errors.append(f"REQUIRED_FIELD_REMOVED: {where} ({written.name})")
            continue
        change = _type_change(read, written)
        if change is not None:
            errors.append(
                f"{change}: {where} ({written.name}): {_describe(written)} became {_describe(read)}"
            )
    for number, read in read_fields.items():
        if _required(read) and number not in writer.fields_by_number:
            errors.append(f"REQUIRED_FIELD_ADDED: {reader.full_name} field {number} ({read.name})")
    return errors


def _type_change(read: FieldDescriptor, written: FieldDescriptor) -> str | None:
    if _kind(read) != _kind(written):
        return "FIELD_KIND_CHANGED"
    if _repeated(read) != _repeated(written):
        return "FIELD_LABEL_CHANGED"
    kind = _kind(read)
    if kind == "map":
        key_change = _type_change(read.message_type.fields[0], written.message_type.fields[0])
        return key_change or _type_change(read.message_type.fields[1], written.message_type.fields[1])
    if kind in ("message", "enum"):
        read_type = read.message_type or read.enum_type
        written_type = written.message_type or written.enum_type
        return None if read_type.full_name == written_type.full_name else "FIELD_NAMED_TYPE_CHANGED"
    if read.type != written.type and not any({read.type, written.type} <= group for group in _WIRE_GROUPS):
        return "FIELD_SCALAR_KIND_CHANGED"
    return None


def _kind(field: FieldDescriptor) -> str:
    if field.message_type is not None:
        return "map" if field.message_type.GetOptions().map_entry else "message"
    return "enum" if field.enum_type is not None else "scalar"


def _repeated(field: FieldDescriptor) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf 7 dropped `label`
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _required(field: FieldDescriptor) -> bool:
    required = getattr(field, "is_required", None)
    return bool(required) if required is not None else field.label == field.LABEL_REQUIRED


def _describe(field: FieldDescriptor) -> str:
    named = field.message_type or field.enum_type
    what = named.full_name if named is not None else f"scalar type {field.type}"
    return f"repeated {what}" if _repeated(field) and _kind(field) != "map" else what
