"""The reference's JSON Schema field walk (docs/semantics.md §4.8), for CEL_FIELD and ENCRYPT rules on
JSON records: confluent-kafka 2.16.1's `common/json_schema.py` walk.

From the root `$`, an object's `properties` field by field (full names `$.a.b`), array `items`
element by element, a `type` list by the first type the value validates against, `oneOf` by the
first valid branch, `anyOf` every valid branch, `allOf` each part, `$ref` followed; the field's
type name is the innermost schema's (ENUM for `enum`/`const`, RECORD, MAP, ARRAY, STRING, INT,
DOUBLE, BOOLEAN, NULL), and ENUM, STRING, INT, DOUBLE and BOOLEAN values go to the field's rule;
maps' values are not walked, nor is a property that is absent or null. Tags are the property's
`confluent:tags` plus the metadata tag paths matching its full name.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from contracts.formats.fields import ConditionFailed, FieldVisit, WalkedField, selects, tags_of

TAGS_PROP = "confluent:tags"
WALKED_TYPES = frozenset({"ENUM", "STRING", "INT", "DOUBLE", "BOOLEAN"})
"""The type names whose values the walk hands to the field's rule."""
_TYPE_NAMES = {
    "array": "ARRAY",
    "string": "STRING",
    "integer": "INT",
    "number": "DOUBLE",
    "boolean": "BOOLEAN",
}


def type_name(schema: Any) -> str:
    """The FieldType name the reference gives a JSON schema node."""
    if isinstance(schema, bool):
        return "COMBINED"
    if schema.get("const") is not None or schema.get("enum") is not None:
        return "ENUM"
    declared = schema.get("type")
    if declared == "object":
        return "RECORD" if schema.get("properties") else "MAP"
    if declared == "null":
        return "NULL"
    if isinstance(declared, str) and declared in _TYPE_NAMES:
        return _TYPE_NAMES[declared]
    return "RECORD" if schema.get("properties") is not None else "NULL"


class JsonFieldWalk:
    """The reference's JSON walk of one schema (its references bundled, every `$ref` local): calls
    `visit` on each ENUM, STRING, INT, DOUBLE or BOOLEAN value of a field `rule_tags` select (none:
    every field). A condition's walk changes nothing and raises ConditionFailed on a plain false;
    a transform's walks a copy of the record, so a failed one leaves the record as it was."""

    def __init__(
        self,
        document: Any,
        metadata_tags: Mapping[str, tuple[str, ...]],
        rule_tags: frozenset[str],
        visit: FieldVisit,
        condition: bool = False,
    ) -> None:
        from jsonschema.validators import validator_for
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        self.document = document
        self.metadata_tags = metadata_tags
        self.rule_tags = rule_tags
        self.visit = visit
        self.condition = condition
        # Draft 7 unless the schema says otherwise, as the reference and the format's validation.
        self.validator = validator_for(document)
        self.resolver = Registry().resolver_with_root(
            Resource.from_contents(document, default_specification=DRAFT7)
        )

    def __call__(self, record: Any) -> Any:
        walked = record if self.condition else copy.deepcopy(record)
        return self._transform(self.document, self.resolver, "$", walked, None)

    def _transform(
        self, schema: Any, resolver: Any, path: str, message: Any, field: WalkedField | None
    ) -> Any:
        if message is None or schema is None or isinstance(schema, bool):
            return message
        if field is not None:
            field.type_name = type_name(schema)
        declared = schema.get("type")
        if isinstance(declared, list) and declared:
            narrowed = self._first_type(schema, declared, message, resolver)
            if narrowed is not None:
                return self._transform(narrowed, resolver, path, message, field)
        if any(key in schema for key in ("allOf", "anyOf", "oneOf")):
            return self._combined(schema, resolver, path, message, field)
        items = schema.get("items")
        if items is not None and isinstance(message, list):
            return [self._transform(items, resolver, path, item, field) for item in message]
        ref = schema.get("$ref")
        if ref is not None:
            resolved = resolver.lookup(ref)
            return self._transform(resolved.contents, resolved.resolver, path, message, field)
        kind = type_name(schema)
        if kind == "RECORD":
            if isinstance(message, dict):
                self._properties(schema, resolver, path, message)
            return message
        if kind in WALKED_TYPES and field is not None and self._selects(field):
            return self.visit(field, message)
        return message

    def _selects(self, field: WalkedField) -> bool:
        """Whether the rule's tags (none: every field) select the field."""
        return selects(self.rule_tags, field.tags)

    def _combined(
        self, schema: Mapping[str, Any], resolver: Any, path: str, message: Any, field: WalkedField | None
    ) -> Any:
        """allOf each part; oneOf the first valid branch; anyOf every valid branch; then the
        sibling `properties` and `items` of this level."""
        if schema.get("allOf") is not None:
            for part in schema["allOf"]:
                message = self._transform(part, resolver, path, message, field)
        elif schema.get("oneOf") is not None:
            for branch in schema["oneOf"]:
                resolved = self._valid_branch(branch, message, resolver)
                if resolved is not None:
                    message = self._transform(resolved[0], resolved[1], path, message, field)
                    break
        elif schema.get("anyOf") is not None:
            for branch in schema["anyOf"]:
                resolved = self._valid_branch(branch, message, resolver)
                if resolved is not None:
                    message = self._transform(resolved[0], resolved[1], path, message, field)
        if schema.get("properties") is not None and isinstance(message, dict):
            self._properties(schema, resolver, path, message)
        items = schema.get("items")
        if items is not None and isinstance(message, list):
            message = [self._transform(items, resolver, path, item, field) for item in message]
        return message

    def _properties(
        self, schema: Mapping[str, Any], resolver: Any, path: str, message: dict[str, Any]
    ) -> None:
        for name, property_schema in schema["properties"].items():
            if not isinstance(property_schema, dict):
                continue
            full_name = f"{path}.{name}"
            tags = tags_of(full_name, property_schema.get(TAGS_PROP), self.metadata_tags)
            field = WalkedField(name, full_name, tags, message, type_name(property_schema))
            value = message.get(name)
            if value is None:
                continue
            result = self._transform(property_schema, resolver, full_name, value, field)
            if self.condition:
                if result is False:
                    raise ConditionFailed(full_name)
            else:
                message[name] = result

    def _first_type(self, schema: Mapping[str, Any], types: list[Any], message: Any, resolver: Any) -> Any:
        for declared in types:
            narrowed = {**schema, "type": declared}
            if self.validator(narrowed, _resolver=resolver).is_valid(message):
                return narrowed
        return None

    def _valid_branch(self, branch: Any, message: Any, resolver: Any) -> tuple[Any, Any] | None:
        """The branch (its `$ref` followed) and its resolver when `message` is valid against it."""
        if not isinstance(branch, dict):
            return None
        if branch.get("$ref") is not None:
            resolved = resolver.lookup(branch["$ref"])
            branch, resolver = resolved.contents, resolved.resolver
        return (branch, resolver) if self.validator(branch, _resolver=resolver).is_valid(message) else None
