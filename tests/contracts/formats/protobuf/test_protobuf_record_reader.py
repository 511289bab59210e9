"""The compiled message readers (values.record_reader) against a plain walk over the message's
fields, as docs/semantics.md §1.6 words a record: the same keys in the same order, the same values
of the same types (an unsigned integer an `Unsigned`), on random messages of every kind of field."""

from __future__ import annotations

import datetime
from typing import Any

from google.protobuf.message_factory import GetMessageClass
from hypothesis import given, settings
from hypothesis_profiles import examples
from test_protobuf_properties import FORMAT, SCHEMA, orders

from contracts.formats.protobuf.types import DURATION, TIMESTAMP, UNSIGNED, WRAPPERS, is_map, is_repeated
from contracts.formats.protobuf.values import Unsigned, to_message, to_record


def walked(message: Any) -> dict[str, Any]:
    """The record by a field-by-field walk: the oracle."""
    record: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if is_map(field):
            item = field.message_type.fields_by_name["value"]
            record[field.name] = {key: plain(v, item) for key, v in value.items()}
        elif is_repeated(field):
            record[field.name] = [plain(v, field) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            if field.containing_oneof is None:
                record[field.name] = None
        else:
            record[field.name] = plain(value, field)
    return record


def plain(value: Any, field: Any) -> Any:
    message = field.message_type
    if message is None:
        return Unsigned(value) if field.type in UNSIGNED else value
    if message.full_name == TIMESTAMP:
        return value.ToDatetime(tzinfo=datetime.timezone.utc)
    if message.full_name == DURATION:
        return value.ToTimedelta()
    if message.full_name in WRAPPERS:
        return plain(value.value, message.fields_by_name["value"])
    return walked(value)


def shape(value: Any) -> Any:
    """The value with its type at every level, and a dict's keys in order."""
    if isinstance(value, dict):
        return [(type(value), [(key, shape(item)) for key, item in value.items()])]
    if isinstance(value, list):
        return [(list, [shape(item) for item in value])]
    return (type(value), value)


@settings(max_examples=examples(60), deadline=None)
@given(orders())
def test_the_compiled_reader_reads_a_message_as_the_field_walk_does(record: dict[str, Any]) -> None:
    message = to_message(record, SCHEMA.message())
    assert shape(to_record(message)) == shape(walked(message))
    body = message.SerializeToString()
    parsed = GetMessageClass(SCHEMA.message()).FromString(body)  # a map's order is the parsed one's
    assert shape(FORMAT.decode(b"\x00" + body, SCHEMA, None)) == shape(walked(parsed))


def test_message_indexes_written_in_full_decode_as_the_short_form() -> None:
    message = GetMessageClass(SCHEMA.message())(id=7, customer="a", big=2**64 - 1)
    body = message.SerializeToString()
    assert FORMAT.decode(b"\x02\x00" + body, SCHEMA, None) == FORMAT.decode(b"\x00" + body, SCHEMA, None)
    assert FORMAT.decode(b"\x00" + body, SCHEMA, None)["id"] == 7
