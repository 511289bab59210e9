"""The reference's Protobuf field walk (docs/semantics.md §4.9), for CEL_FIELD and ENCRYPT rules on
Protobuf records (contracts/formats/protobuf/values.py).

It mirrors confluent-kafka 2.16.1's `common/protobuf.py` `transform`: a message field by field in
declaration order, a field with presence that is unset skipped (an unset message, wrapper, oneof
member or optional scalar), a repeated field element by element, a map value by value (its keys
untouched), a message value walked field by field. Wrappers and Duration are messages there: their
`value` (`seconds`, `nanos`) fields are walked under the well-known type's own full names. Every
other value is a leaf handed to the field's rule when the rule's tags select the field: scalars,
enums (by number), Timestamp and `confluent.type.Decimal` (its message's fields, as one value). A
field's names are its descriptor's (`fullName` is `package.Message.field`), its type name the
reference's FieldType (a map field's values are MAP, a Timestamp LONG, a Decimal BYTES), its tags
the `(confluent.field_meta).tags` option plus the metadata tag paths matching its full name.
"""

from __future__ import annotations

import copy
import datetime
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.formats.fields import ConditionFailed, FieldVisit, WalkedField, selects, tags_of
from contracts.formats.protobuf.options import field_tags
from contracts.formats.protobuf.types import DECIMAL, DURATION, TIMESTAMP, WRAPPERS, is_map, is_repeated
from contracts.formats.protobuf.values import presence_view, to_message
from contracts.registry.protobuf_schema import ProtoSchema

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor

_INT_TYPES = frozenset({5, 17, 13, 7, 15})
"""FieldDescriptor.TYPE_INT32, SINT32, UINT32, FIXED32, SFIXED32: the reference's INT."""
_LONG_TYPES = frozenset({3, 18, 4, 6, 16})
"""TYPE_INT64, SINT64, UINT64, FIXED64, SFIXED64: its LONG."""
_SCALAR_NAMES = {9: "STRING", 12: "BYTES", 2: "FLOAT", 1: "DOUBLE", 8: "BOOLEAN", 14: "ENUM"}
_LEAF_MESSAGES = {TIMESTAMP: "LONG", DECIMAL: "BYTES"}
"""Messages the reference walks as one value, and the type name it gives them (Avro's for the same
logical type)."""


def type_name(field: FieldDescriptor) -> str:
    """The FieldType name the reference gives a Protobuf field."""
    if is_map(field):
        return "MAP"
    if field.message_type is not None:
        return _LEAF_MESSAGES.get(field.message_type.full_name, "RECORD")
    if field.type in _INT_TYPES:
        return "INT"
    if field.type in _LONG_TYPES:
        return "LONG"
    return _SCALAR_NAMES.get(field.type, "NULL")


@dataclass(frozen=True)
class _Plan:
    """One field of a message as the walk meets it, resolved once per descriptor."""

    name: str
    full_name: str
    tags: frozenset[str]
    type_name: str
    repeated: bool
    map: bool
    child: Descriptor | None
    """The message its values are walked as (a map's value message), None for a leaf."""


class ProtobufFieldWalk:
    """The reference's Protobuf walk of one schema's records: calls `visit` on each leaf value of a
    field `rule_tags` select (none: every field). A condition's walk changes nothing and raises
    ConditionFailed on a field whose result is a plain false; a transform's walks a copy, and
    raises ValueError when a result does not fit its field (null included)."""

    def __init__(
        self,
        schema: ProtoSchema,
        metadata_tags: Mapping[str, tuple[str, ...]],
        rule_tags: frozenset[str],
        visit: FieldVisit,
        condition: bool = False,
    ) -> None:
        self.schema = schema
        self.metadata_tags = metadata_tags
        self.rule_tags = rule_tags
        self.visit = visit
        self.condition = condition
        self._plans: dict[str, tuple[_Plan, ...]] = {}

    def __call__(self, record: Any) -> Any:
        if not isinstance(record, dict):
            return record
        if self.condition:
            self._message(self.schema.message(), record)
            return record
        walked = copy.deepcopy(record)
        descriptor = self.schema.message()
        self._message(descriptor, walked)
        # As the reference sets each result on the message: one its field cannot hold fails the rule.
        to_message(walked, descriptor)
        return walked

    def _message(self, descriptor: Descriptor, record: dict[str, Any]) -> None:
        view = functools.partial(presence_view, descriptor=descriptor)
        for plan in self._plan(descriptor):
            value = record.get(plan.name)
            if value is None:  # unset with presence (or left out: an unset oneof member)
                continue
            field = WalkedField(plan.name, plan.full_name, plan.tags, record, plan.type_name, view)
            if plan.map:
                result: Any = {key: self._value(plan, item, field) for key, item in value.items()}
            elif plan.repeated:
                result = [self._value(plan, item, field) for item in value]
            else:
                result = self._value(plan, value, field)
            if self.condition:
                if result is False:
                    raise ConditionFailed(plan.full_name)
            elif result is None:
                raise ValueError(f"the result for field {plan.full_name} is null, which it cannot hold")
            else:
                record[plan.name] = result

    def _value(self, plan: _Plan, value: Any, field: WalkedField) -> Any:
        child = plan.child
        if child is None:
            return self.visit(field, value) if selects(self.rule_tags, field.tags) else value
        special = _SPECIAL.get(child.full_name)
        if special is not None:
            as_message = special[0](value)
            self._message(child, as_message)
            # A condition's result for the field is the message, never a plain false (a BoolValue
            # holding false fails only by its own `value` field, as in the reference).
            return as_message if self.condition else special[1](as_message)
        if isinstance(value, dict):
            self._message(child, value)
        return value

    def _plan(self, descriptor: Descriptor) -> tuple[_Plan, ...]:
        found = self._plans.get(descriptor.full_name)
        if found is None:
            found = tuple(self._field_plan(field) for field in descriptor.fields)
            self._plans[descriptor.full_name] = found
        return found

    def _field_plan(self, field: FieldDescriptor) -> _Plan:
        tags = tags_of(field.full_name, field_tags(field), self.metadata_tags)
        value_field = field.message_type.fields_by_name["value"] if is_map(field) else field
        child = value_field.message_type
        if child is not None and child.full_name in _LEAF_MESSAGES:
            child = None
        return _Plan(
            field.name,
            field.full_name,
            tags,
            type_name(field),
            is_repeated(field),
            is_map(field),
            child,
        )


def _duration_message(value: datetime.timedelta) -> dict[str, Any]:
    from google.protobuf.duration_pb2 import Duration

    message = Duration()
    message.FromTimedelta(value)
    return {"seconds": message.seconds, "nanos": message.nanos}


def _duration_value(record: dict[str, Any]) -> datetime.timedelta:
    from google.protobuf.duration_pb2 import Duration

    return Duration(seconds=record["seconds"], nanos=record["nanos"]).ToTimedelta()


_SPECIAL: dict[str, tuple[Callable[[Any], dict[str, Any]], Callable[[dict[str, Any]], Any]]] = {
    DURATION: (_duration_message, _duration_value),
    **{name: (lambda value: {"value": value}, lambda record: record["value"]) for name in WRAPPERS},
}
"""Well-known messages a record holds as a plain value: that value as the message's fields and back."""
