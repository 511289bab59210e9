"""The reference's JSON Schema field walk (docs/semantics.md §4.8), for CEL_FIELD (and ENCRYPT) rules
on JSON records, in Python.

It mirrors confluent-kafka 2.16.1's `common/json_schema.py` walk: from the root `$`, an object's
`properties` field by field (full names `$.a.b`), array `items` element by element, a `type` list
by the first type the value validates against, `oneOf` by the first valid branch, `anyOf` every
valid branch, `allOf` each part, `$ref` followed; the field's type name is the innermost schema's
(ENUM for `enum`/`const`, RECORD, MAP, ARRAY, STRING, INT, DOUBLE, BOOLEAN, NULL), and ENUM,
STRING, INT, DOUBLE and BOOLEAN values go to the field's rule (CEL_FIELD's expression sees all but
enums); maps' values are not walked. Tags are the property's `confluent:tags` plus the metadata
tag paths matching its full name. `CelFieldWalkEvaluator` runs a CEL_FIELD rule through such a
walk, this one or the Protobuf walk (executors/cel_field/protobuf_walk.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from contracts.model import RuleKind
from executors.cel import _runtime
from executors.cel_field.schema import tag_matches
from executors.protocol import BatchEvaluator, Outcome

TAGS_PROP = "confluent:tags"
WALKED_TYPES = frozenset({"ENUM", "STRING", "INT", "DOUBLE", "BOOLEAN"})
"""The type names whose values the walk hands to the field's rule."""
CEL_VISITED_TYPES = frozenset({"STRING", "INT", "DOUBLE", "BOOLEAN"})
"""Those a CEL_FIELD expression sees: the reference's executor returns an enum unchanged (not primitive)."""
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


class ConditionFailed(Exception):
    """A visited field's result was a plain false in a condition's walk: the CONDITION fails."""


class _EvaluationFailed(Exception):
    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class JsonField:
    """The field being walked: its names and tags, the record holding it, and its current type name."""

    name: str
    full_name: str
    tags: frozenset[str]
    containing: dict[str, Any]
    type_name: str


FieldVisit = Callable[[JsonField, Any], Any]
"""What a walk does to a value its rule's tags select: the field (its type name that of the
value's innermost schema) and the value, to the new value."""


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

    def _transform(self, schema: Any, resolver: Any, path: str, message: Any, field: JsonField | None) -> Any:
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

    def _selects(self, field: JsonField) -> bool:
        """Whether the rule's tags (none: every field) select the field."""
        return not self.rule_tags or not self.rule_tags.isdisjoint(field.tags)

    def _combined(
        self, schema: Mapping[str, Any], resolver: Any, path: str, message: Any, field: JsonField | None
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
            tags = self._tags(property_schema, full_name)
            field = JsonField(name, full_name, tags, message, type_name(property_schema))
            value = message.get(name)
            if value is None:
                continue
            result = self._transform(property_schema, resolver, full_name, value, field)
            if self.condition:
                if result is False:
                    raise ConditionFailed
            else:
                message[name] = result

    def _tags(self, property_schema: Mapping[str, Any], full_name: str) -> frozenset[str]:
        tags = set(property_schema.get(TAGS_PROP) or ())
        for path, path_tags in self.metadata_tags.items():
            if tag_matches(full_name, path):
                tags.update(path_tags)
        return frozenset(tags)

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


@dataclass(frozen=True)
class CelFieldJsonBatch:
    """Picklable factory of the Python evaluator of one CEL_FIELD rule on JSON records; `document`
    is the parsed schema with its references bundled (every `$ref` local)."""

    expr: str
    kind: RuleKind
    rule_tags: frozenset[str]
    document: Any
    metadata_tags: Mapping[str, tuple[str, ...]]
    failure_message: str
    visited_types: frozenset[str] = CEL_VISITED_TYPES

    def walk(self, visit: Callable[[Any, Any], Any], condition: bool) -> JsonFieldWalk:
        return JsonFieldWalk(self.document, self.metadata_tags, self.rule_tags, visit, condition)

    def __call__(self) -> BatchEvaluator:
        return CelFieldWalkEvaluator(self)


class WalkedRule(Protocol):
    """What a CEL_FIELD rule evaluated through a format's field walk says about itself."""

    expr: str
    kind: RuleKind
    failure_message: str
    visited_types: frozenset[str]

    def walk(self, visit: Callable[[Any, Any], Any], condition: bool) -> Callable[[Any], Any]: ...


class CelFieldWalkEvaluator:
    """Evaluates one CEL_FIELD rule over records through its format's walk (JSON or Protobuf):
    each field the walk visits gets the expression when its type is one the expression sees."""

    def __init__(self, spec: WalkedRule) -> None:
        self.spec = spec
        self.condition = spec.kind is RuleKind.CONDITION
        self.program = _runtime.compile_program(spec.expr)
        self.reads_message = "message" in spec.expr
        self.walk = spec.walk(self._visit, self.condition)

    def __call__(self, records: Sequence[Any]) -> Sequence[Outcome]:
        return [self._one(record) for record in records]

    def _one(self, record: Any) -> Outcome:
        try:
            result = self.walk(record)
        except ConditionFailed:
            return Outcome(False, record, self.spec.failure_message)
        except _EvaluationFailed as e:
            return Outcome(False, record, e.reason)
        except Exception as e:  # an evaluation error is a rule failure (docs/semantics.md §2.2)
            return Outcome(False, record, _runtime.evaluation_reason(e))
        return Outcome(True, record if self.condition else result)

    def _visit(self, field: Any, value: Any) -> Any:
        if field.type_name not in self.spec.visited_types:
            return value
        activation = _runtime.field_activation(
            value,
            field.name,
            field.full_name,
            field.type_name,
            sorted(field.tags),
            field.containing if self.reads_message else None,
        )
        outcome = self.program.field(activation, value, condition=self.condition)
        if not outcome.passed:
            raise _EvaluationFailed(outcome.reason)
        return outcome.value
