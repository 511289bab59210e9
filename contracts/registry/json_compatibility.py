"""JSON Schema compatibility: can a reader schema read every document a writer schema accepts, decided
as Confluent Schema Registry decides it for JSON subjects.

The decision is the registry's JSON Schema diff (`io.confluent.kafka.schemaregistry.json.diff`, default
STRICT policy): writer and reader schemas are walked together, each difference gets a type (`Change`,
named as Confluent's `Difference.Type`) and a JSON path, and the reader can read the writer when every
difference is one of `COMPATIBLE_CHANGES`. Schemas are read as the registry's loader (Everit; draft 7
unless `$schema` names draft 4 or 6) reads them: a `type` list is an anyOf, several kinds of keyword in
one object an allOf, and a `$ref` within the document (`#/definitions/..`, `#/$defs/..`, any JSON
pointer) stands for its target; recursive references end as the registry's do (a pair of schemas met
again while being compared is assumed compatible, then re-checked until the verdicts settle).
BACKWARD means the new schema reads the old; FORWARD the old reads the new; FULL both.

As in the registry, some keywords are never compared: format, contains, propertyNames, if/then/else,
readOnly/writeOnly, and the schemas of patternProperties (these only decide whether an added or removed
property is covered). Where the registry's diff slips, this module does what was meant: a `$ref` to a
`$ref` is followed to its end (the registry follows one step), and a lower exclusiveMaximum is compared
with the other exclusiveMaximum (the registry reads `maximum` there).

Not supported, each a ValueError: `$ref` to another document or by `$id`/anchor, and the keywords only
JSON Schema 2019-09/2020-12 have (prefixItems, unevaluatedProperties, ...) in a schema whose `$schema`
names those drafts; the other keywords of such schemas are read as in draft 7. Also out of scope: the
registry's LENIENT policy and its other knobs.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, ClassVar
from urllib.parse import unquote

from contracts.registry.compatibility import Compatibility

JsonSchema = Mapping[str, Any] | bool
"""A JSON Schema document as JSON data: an object, or true/false."""


class Change(enum.Enum):
    """A kind of difference between a writer and a reader schema (Confluent's `Difference.Type`)."""

    ID_CHANGED = enum.auto()
    DESCRIPTION_CHANGED = enum.auto()
    TITLE_CHANGED = enum.auto()
    DEFAULT_CHANGED = enum.auto()
    SCHEMA_ADDED = enum.auto()
    SCHEMA_REMOVED = enum.auto()
    TYPE_EXTENDED = enum.auto()
    TYPE_NARROWED = enum.auto()
    TYPE_CHANGED = enum.auto()

    MAX_LENGTH_ADDED = enum.auto()
    MAX_LENGTH_REMOVED = enum.auto()
    MAX_LENGTH_INCREASED = enum.auto()
    MAX_LENGTH_DECREASED = enum.auto()
    MIN_LENGTH_ADDED = enum.auto()
    MIN_LENGTH_REMOVED = enum.auto()
    MIN_LENGTH_INCREASED = enum.auto()
    MIN_LENGTH_DECREASED = enum.auto()
    PATTERN_ADDED = enum.auto()
    PATTERN_REMOVED = enum.auto()
    PATTERN_CHANGED = enum.auto()

    MAXIMUM_ADDED = enum.auto()
    MAXIMUM_REMOVED = enum.auto()
    MAXIMUM_INCREASED = enum.auto()
    MAXIMUM_DECREASED = enum.auto()
    MINIMUM_ADDED = enum.auto()
    MINIMUM_REMOVED = enum.auto()
    MINIMUM_INCREASED = enum.auto()
    MINIMUM_DECREASED = enum.auto()
    EXCLUSIVE_MAXIMUM_ADDED = enum.auto()
    EXCLUSIVE_MAXIMUM_REMOVED = enum.auto()
    EXCLUSIVE_MAXIMUM_INCREASED = enum.auto()
    EXCLUSIVE_MAXIMUM_DECREASED = enum.auto()
    EXCLUSIVE_MINIMUM_ADDED = enum.auto()
    EXCLUSIVE_MINIMUM_REMOVED = enum.auto()
    EXCLUSIVE_MINIMUM_INCREASED = enum.auto()
    EXCLUSIVE_MINIMUM_DECREASED = enum.auto()
    MULTIPLE_OF_ADDED = enum.auto()
    MULTIPLE_OF_REMOVED = enum.auto()
    MULTIPLE_OF_EXPANDED = enum.auto()
    MULTIPLE_OF_REDUCED = enum.auto()
    MULTIPLE_OF_CHANGED = enum.auto()

    REQUIRED_ATTRIBUTE_ADDED = enum.auto()
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED = enum.auto()
    REQUIRED_ATTRIBUTE_REMOVED = enum.auto()
    MAX_PROPERTIES_ADDED = enum.auto()
    MAX_PROPERTIES_REMOVED = enum.auto()
    MAX_PROPERTIES_INCREASED = enum.auto()
    MAX_PROPERTIES_DECREASED = enum.auto()
    MIN_PROPERTIES_ADDED = enum.auto()
    MIN_PROPERTIES_REMOVED = enum.auto()
    MIN_PROPERTIES_INCREASED = enum.auto()
    MIN_PROPERTIES_DECREASED = enum.auto()
    ADDITIONAL_PROPERTIES_ADDED = enum.auto()
    ADDITIONAL_PROPERTIES_REMOVED = enum.auto()
    ADDITIONAL_PROPERTIES_EXTENDED = enum.auto()
    ADDITIONAL_PROPERTIES_NARROWED = enum.auto()
    DEPENDENCY_ARRAY_ADDED = enum.auto()
    DEPENDENCY_ARRAY_REMOVED = enum.auto()
    DEPENDENCY_ARRAY_EXTENDED = enum.auto()
    DEPENDENCY_ARRAY_NARROWED = enum.auto()
    DEPENDENCY_ARRAY_CHANGED = enum.auto()
    DEPENDENCY_SCHEMA_ADDED = enum.auto()
    DEPENDENCY_SCHEMA_REMOVED = enum.auto()
    REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL = enum.auto()
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL = enum.auto()
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()

    MAX_ITEMS_ADDED = enum.auto()
    MAX_ITEMS_REMOVED = enum.auto()
    MAX_ITEMS_INCREASED = enum.auto()
    MAX_ITEMS_DECREASED = enum.auto()
    MIN_ITEMS_ADDED = enum.auto()
    MIN_ITEMS_REMOVED = enum.auto()
    MIN_ITEMS_INCREASED = enum.auto()
    MIN_ITEMS_DECREASED = enum.auto()
    MAX_CONTAINS_ADDED = enum.auto()
    MAX_CONTAINS_REMOVED = enum.auto()
    MAX_CONTAINS_INCREASED = enum.auto()
    MAX_CONTAINS_DECREASED = enum.auto()
    MIN_CONTAINS_ADDED = enum.auto()
    MIN_CONTAINS_REMOVED = enum.auto()
    MIN_CONTAINS_INCREASED = enum.auto()
    MIN_CONTAINS_DECREASED = enum.auto()
    UNIQUE_ITEMS_ADDED = enum.auto()
    UNIQUE_ITEMS_REMOVED = enum.auto()
    ADDITIONAL_ITEMS_ADDED = enum.auto()
    ADDITIONAL_ITEMS_REMOVED = enum.auto()
    ADDITIONAL_ITEMS_EXTENDED = enum.auto()
    ADDITIONAL_ITEMS_NARROWED = enum.auto()
    ITEM_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_ADDED_TO_CLOSED_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()
    ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = enum.auto()

    ENUM_ARRAY_EXTENDED = enum.auto()
    ENUM_ARRAY_NARROWED = enum.auto()
    ENUM_ARRAY_CHANGED = enum.auto()

    COMBINED_TYPE_EXTENDED = enum.auto()
    COMBINED_TYPE_CHANGED = enum.auto()
    PRODUCT_TYPE_EXTENDED = enum.auto()
    PRODUCT_TYPE_NARROWED = enum.auto()
    SUM_TYPE_EXTENDED = enum.auto()
    SUM_TYPE_NARROWED = enum.auto()
    COMBINED_TYPE_SUBSCHEMAS_CHANGED = enum.auto()
    NOT_TYPE_EXTENDED = enum.auto()
    NOT_TYPE_NARROWED = enum.auto()


COMPATIBLE_CHANGES: frozenset[Change] = frozenset(
    {
        Change.ID_CHANGED,
        Change.DESCRIPTION_CHANGED,
        Change.TITLE_CHANGED,
        Change.DEFAULT_CHANGED,
        Change.SCHEMA_REMOVED,
        Change.TYPE_EXTENDED,
        Change.MAX_LENGTH_INCREASED,
        Change.MAX_LENGTH_REMOVED,
        Change.MIN_LENGTH_DECREASED,
        Change.MIN_LENGTH_REMOVED,
        Change.PATTERN_REMOVED,
        Change.MAXIMUM_INCREASED,
        Change.MAXIMUM_REMOVED,
        Change.MINIMUM_DECREASED,
        Change.MINIMUM_REMOVED,
        Change.EXCLUSIVE_MAXIMUM_INCREASED,
        Change.EXCLUSIVE_MAXIMUM_REMOVED,
        Change.EXCLUSIVE_MINIMUM_DECREASED,
        Change.EXCLUSIVE_MINIMUM_REMOVED,
        Change.MULTIPLE_OF_REDUCED,
        Change.MULTIPLE_OF_REMOVED,
        Change.REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED,
        Change.REQUIRED_ATTRIBUTE_REMOVED,
        Change.DEPENDENCY_ARRAY_NARROWED,
        Change.DEPENDENCY_ARRAY_REMOVED,
        Change.DEPENDENCY_SCHEMA_REMOVED,
        Change.MAX_PROPERTIES_INCREASED,
        Change.MAX_PROPERTIES_REMOVED,
        Change.MIN_PROPERTIES_DECREASED,
        Change.MIN_PROPERTIES_REMOVED,
        Change.ADDITIONAL_PROPERTIES_ADDED,
        Change.ADDITIONAL_PROPERTIES_EXTENDED,
        Change.PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL,
        Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL,
        Change.OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
        Change.PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        Change.PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL,
        Change.PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.MAX_ITEMS_INCREASED,
        Change.MAX_ITEMS_REMOVED,
        Change.MIN_ITEMS_DECREASED,
        Change.MIN_ITEMS_REMOVED,
        Change.MAX_CONTAINS_INCREASED,
        Change.MAX_CONTAINS_REMOVED,
        Change.MIN_CONTAINS_DECREASED,
        Change.MIN_CONTAINS_REMOVED,
        Change.UNIQUE_ITEMS_REMOVED,
        Change.ADDITIONAL_ITEMS_ADDED,
        Change.ADDITIONAL_ITEMS_EXTENDED,
        Change.ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL,
        Change.ITEM_ADDED_TO_CLOSED_CONTENT_MODEL,
        Change.ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        Change.ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL,
        Change.ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        Change.ENUM_ARRAY_EXTENDED,
        Change.COMBINED_TYPE_EXTENDED,
        Change.PRODUCT_TYPE_NARROWED,
        Change.SUM_TYPE_EXTENDED,
        Change.NOT_TYPE_NARROWED,
    }
)
"""The changes after which the reader still reads everything the writer wrote (the registry's STRICT set).
Notably absent: adding an optional property to an open object (the writer may have written it with any
value), narrowing or closing additionalProperties."""


@dataclass(frozen=True)
class Difference:
    """One difference between a writer and a reader schema, at a path in them (`#/properties/a/...`)."""

    change: Change
    path: tuple[str, ...] = ()
    detail: str = ""

    @property
    def location(self) -> str:
        return "#/" + "/".join(self.path)

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.location}: {self.change.name}{detail}"


# --- Loading: JSON data into the schema kinds the registry's loader makes of it -------------------------


@dataclass(eq=False, kw_only=True)
class _Node:
    """A loaded schema. `meta` is the JSON object it was read from (title, default, ...), empty for the
    parts the loader splits one object into; nodes compare by identity, as the pairs of a walk do."""

    meta: Mapping[str, Any] = field(default_factory=dict)
    ident: Any = None
    kind: ClassVar[str]

    def describe(self) -> str:
        return self.kind


@dataclass(eq=False, kw_only=True)
class _Empty(_Node):
    kind = "{}"


@dataclass(eq=False, kw_only=True)
class _True(_Empty):
    kind = "true"


@dataclass(eq=False, kw_only=True)
class _False(_Node):
    kind = "false"


@dataclass(eq=False, kw_only=True)
class _Boolean(_Node):
    kind = "boolean"


@dataclass(eq=False, kw_only=True)
class _Null(_Node):
    kind = "null"


@dataclass(eq=False, kw_only=True)
class _Conditional(_Node):
    kind = "if/then/else"


@dataclass(eq=False, kw_only=True)
class _String(_Node):
    kind = "string"
    min_length: int | None
    max_length: int | None
    pattern: str | None


@dataclass(eq=False, kw_only=True)
class _Number(_Node):
    kind = "number"
    integer: bool
    minimum: float | None
    maximum: float | None
    exclusive_minimum: float | None
    exclusive_maximum: float | None
    multiple_of: Decimal | None

    def describe(self) -> str:
        return "integer" if self.integer else "number"


@dataclass(eq=False, kw_only=True)
class _Object(_Node):
    kind = "object"
    properties: Mapping[str, _Node]
    required: frozenset[str]
    permits_additional: bool
    additional: _Node | None
    pattern_properties: Sequence[tuple[re.Pattern[str], _Node]]
    property_dependencies: Mapping[str, frozenset[str]]
    schema_dependencies: Mapping[str, _Node]
    min_properties: int | None
    max_properties: int | None


@dataclass(eq=False, kw_only=True)
class _Array(_Node):
    kind = "array"
    all_items: _Node | None
    item_list: Sequence[_Node]
    permits_additional: bool
    additional: _Node | None
    min_items: int | None
    max_items: int | None
    unique: bool


@dataclass(eq=False, kw_only=True)
class _Enum(_Node):
    kind = "enum"
    values: frozenset[str]
    """Each value as canonical JSON text, so 1, 1.0 and true stay apart."""


@dataclass(eq=False, kw_only=True)
class _Const(_Node):
    kind = "const"
    value: str
    """The value as canonical JSON text."""


@dataclass(eq=False, kw_only=True)
class _Combined(_Node):
    kind = "combined"
    criterion: str
    subschemas: Sequence[_Node]

    def describe(self) -> str:
        return self.criterion


@dataclass(eq=False, kw_only=True)
class _Not(_Node):
    kind = "not"
    schema: _Node


@dataclass(eq=False, kw_only=True)
class _Ref(_Node):
    """A `$ref`; `target` is filled in once the whole document is loaded."""

    kind = "$ref"
    ref: str
    target: _Node | None = None


@dataclass(frozen=True)
class _Dialect:
    """What the JSON Schema drafts the registry's loader distinguishes change in loading."""

    id_keyword: str
    const: bool
    numeric_exclusive_limits: bool
    conditionals: bool
    modern: bool


_DRAFT_4 = _Dialect("id", const=False, numeric_exclusive_limits=False, conditionals=False, modern=False)
_DRAFT_6 = _Dialect("$id", const=True, numeric_exclusive_limits=True, conditionals=False, modern=False)
_DRAFT_7 = _Dialect("$id", const=True, numeric_exclusive_limits=True, conditionals=True, modern=False)
_MODERN = replace(_DRAFT_7, modern=True)

_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_OBJECT_KEYWORDS = (
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "dependencies",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
)
_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains")
_COMBINERS = ("allOf", "anyOf", "oneOf")
_MODERN_ONLY = frozenset(
    {
        "prefixItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "dependentRequired",
        "dependentSchemas",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "$anchor",
    }
)


def _dialect(root: JsonSchema) -> _Dialect:
    """The draft the registry loads a schema with: the one `$schema` names, draft 7 when none."""
    uri = root.get("$schema") if isinstance(root, Mapping) else None
    if not isinstance(uri, str):
        return _DRAFT_7
    if "draft-04" in uri:
        return _DRAFT_4
    if "draft-06" in uri:
        return _DRAFT_6
    if "2019-09" in uri or "2020-12" in uri:
        return _MODERN
    return _DRAFT_7


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class _Document:
    """One schema document loaded whole, every `$ref` in it resolved; ValueError names `name` and the
    JSON pointer of what is wrong."""

    def __init__(self, raw: Any, name: str) -> None:
        self.name = name
        if not isinstance(raw, (Mapping, bool)):
            raise ValueError(f"{name}: a JSON Schema must be a JSON object or boolean, not {_json_type(raw)}")
        self.raw = raw
        self.dialect = _dialect(raw)
        self._nodes: dict[int, _Node] = {}
        self._refs: list[tuple[_Ref, Any, str]] = []
        pending: list[tuple[Any, str]] = []
        self.root = self._load(raw, "#", pending)
        while pending:
            self._load(*pending.pop(), pending)
        for ref, target, _ in self._refs:
            ref.target = self._nodes[id(target)]
        for ref, _, at in self._refs:
            self._check_ref_chain(ref, at)

    def _error(self, pointer: str, message: str) -> ValueError:
        return ValueError(f"{self.name} at {pointer}: {message}")

    def _load(self, raw: Any, pointer: str, pending: list[tuple[Any, str]]) -> _Node:
        loaded = self._nodes.get(id(raw))
        if loaded is not None:
            return loaded
        if isinstance(raw, bool):
            node: _Node = _True() if raw else _False()
        elif isinstance(raw, Mapping):
            node = self._load_object(raw, pointer, pending)
        else:
            raise self._error(pointer, f"a schema must be a JSON object or boolean, not {_json_type(raw)}")
        self._nodes[id(raw)] = node
        return node

    def _load_object(self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]) -> _Node:
        """The Everit loader's reading of one object: a `$ref` alone, else every kind of keyword it holds,
        an allOf when there are several."""
        unsupported = sorted(_MODERN_ONLY.intersection(raw)) if self.dialect.modern else []
        if unsupported:
            raise self._error(
                pointer, f"keyword '{unsupported[0]}' (JSON Schema 2019-09/2020-12) is not supported"
            )
        ident = raw.get(self.dialect.id_keyword)
        if "$ref" in raw:
            ref = raw["$ref"]
            if not isinstance(ref, str):
                raise self._error(pointer, "$ref must be a string")
            target, target_pointer = self._lookup(ref, pointer)
            node = _Ref(meta=raw, ident=ident, ref=ref)
            self._refs.append((node, target, pointer))
            pending.append((target, target_pointer))
            return node
        consumed: set[str] = set()
        parts = [
            *self._typed_parts(raw, pointer, pending, consumed),
            *self._other_parts(raw, pointer, pending),
            *self._sniffed_parts(raw, pointer, pending, consumed),
        ]
        if not parts:
            return _Empty(meta=raw, ident=ident)
        if len(parts) == 1:
            return replace(parts[0], meta=raw, ident=ident)
        return _Combined(meta=raw, ident=ident, criterion="allOf", subschemas=parts)

    def _typed_parts(
        self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]], consumed: set[str]
    ) -> list[_Node]:
        if "type" not in raw:
            return []
        declared = raw["type"]
        if isinstance(declared, str):
            return [self._typed(declared, raw, pointer, pending, consumed)]
        if isinstance(declared, list):
            branches = [self._typed(name, raw, pointer, pending, consumed) for name in declared]
            return [_Combined(criterion="anyOf", subschemas=branches)]
        raise self._error(f"{pointer}/type", "type must be a string or an array of strings")

    def _typed(
        self,
        name: Any,
        raw: Mapping[str, Any],
        pointer: str,
        pending: list[tuple[Any, str]],
        consumed: set[str],
    ) -> _Node:
        if name == "string":
            consumed.update(_STRING_KEYWORDS)
            return self._string(raw, pointer)
        if name in ("integer", "number"):
            consumed.update(_NUMBER_KEYWORDS)
            return self._number(raw, pointer, integer=name == "integer")
        if name == "object":
            consumed.update(_OBJECT_KEYWORDS)
            return self._object(raw, pointer, pending)
        if name == "array":
            consumed.update(_ARRAY_KEYWORDS)
            return self._array(raw, pointer, pending)
        if name == "boolean":
            return _Boolean()
        if name == "null":
            return _Null()
        raise self._error(f"{pointer}/type", f"unknown type {_canonical(name)}")

    def _other_parts(
        self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]
    ) -> list[_Node]:
        parts: list[_Node] = []
        if "enum" in raw:
            parts.append(_Enum(values=frozenset(_canonical(v) for v in self._list(raw, "enum", pointer))))
        if self.dialect.const and "const" in raw:
            parts.append(_Const(value=_canonical(raw["const"])))
        if "not" in raw:
            parts.append(_Not(schema=self._load(raw["not"], f"{pointer}/not", pending)))
        for criterion in _COMBINERS:
            if criterion in raw:
                listed = self._list(raw, criterion, pointer)
                subschemas = [
                    self._load(s, f"{pointer}/{criterion}/{i}", pending) for i, s in enumerate(listed)
                ]
                parts.append(_Combined(criterion=criterion, subschemas=subschemas))
        return parts

    def _sniffed_parts(
        self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]], consumed: set[str]
    ) -> list[_Node]:
        """Kinds that keywords no `type` claimed imply (the loader's "property sniffing")."""

        def left(keywords: Sequence[str]) -> bool:
            return any(k in raw and k not in consumed for k in keywords)

        parts: list[_Node] = []
        if left(_ARRAY_KEYWORDS):
            parts.append(self._array(raw, pointer, pending))
        if left(_OBJECT_KEYWORDS):
            parts.append(self._object(raw, pointer, pending))
        if left(_NUMBER_KEYWORDS):
            parts.append(self._number(raw, pointer, integer=False))
        if left(_STRING_KEYWORDS):
            parts.append(self._string(raw, pointer))
        if self.dialect.conditionals and left(("if", "then", "else")):
            parts.append(_Conditional())
        return parts

    def _string(self, raw: Mapping[str, Any], pointer: str) -> _String:
        pattern = raw.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            raise self._error(f"{pointer}/pattern", "pattern must be a string")
        return _String(
            min_length=self._count(raw, "minLength", pointer),
            max_length=self._count(raw, "maxLength", pointer),
            pattern=pattern,
        )

    def _number(self, raw: Mapping[str, Any], pointer: str, integer: bool) -> _Number:
        multiple_of = self._limit(raw, "multipleOf", pointer)
        if multiple_of is not None and multiple_of <= 0:
            raise self._error(f"{pointer}/multipleOf", "multipleOf must be greater than 0")
        return _Number(
            integer=integer,
            minimum=self._limit(raw, "minimum", pointer),
            maximum=self._limit(raw, "maximum", pointer),
            exclusive_minimum=self._exclusive(raw, "exclusiveMinimum", pointer),
            exclusive_maximum=self._exclusive(raw, "exclusiveMaximum", pointer),
            multiple_of=None if multiple_of is None else Decimal(str(multiple_of)),
        )

    def _exclusive(self, raw: Mapping[str, Any], keyword: str, pointer: str) -> float | None:
        """Draft 6 on: a number. Draft 4: a flag on minimum/maximum, which the registry does not compare."""
        if self.dialect.numeric_exclusive_limits:
            return self._limit(raw, keyword, pointer)
        if keyword in raw and not isinstance(raw[keyword], bool):
            raise self._error(f"{pointer}/{keyword}", f"{keyword} must be a boolean in draft 4")
        return None

    def _object(self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]) -> _Object:
        properties = self._members(raw, "properties", pointer)
        additional = raw.get("additionalProperties", True)
        return _Object(
            properties={
                name: self._load(schema, f"{pointer}/properties/{name}", pending)
                for name, schema in properties.items()
            },
            required=frozenset(self._names(raw.get("required", []), f"{pointer}/required")),
            permits_additional=additional is not False,
            additional=self._optional_schema(additional, f"{pointer}/additionalProperties", pending),
            pattern_properties=[
                (
                    self._regex(pattern, f"{pointer}/patternProperties"),
                    self._load(schema, f"{pointer}/patternProperties/{pattern}", pending),
                )
                for pattern, schema in self._members(raw, "patternProperties", pointer).items()
            ],
            property_dependencies={
                name: frozenset(self._names(names, f"{pointer}/dependencies/{name}"))
                for name, names in self._members(raw, "dependencies", pointer).items()
                # An empty list adds no dependency, as the registry's loader reads it.
                if isinstance(names, list) and names
            },
            schema_dependencies={
                name: self._load(schema, f"{pointer}/dependencies/{name}", pending)
                for name, schema in self._members(raw, "dependencies", pointer).items()
                if not isinstance(schema, list)
            },
            min_properties=self._count(raw, "minProperties", pointer),
            max_properties=self._count(raw, "maxProperties", pointer),
        )

    def _array(self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]) -> _Array:
        # `items` is one schema for every item (true and false too), or a list: one per position.
        items = raw.get("items")
        tuple_items = items if isinstance(items, list) else []
        additional = raw.get("additionalItems", True)
        unique = raw.get("uniqueItems", False)
        if not isinstance(unique, bool):
            raise self._error(f"{pointer}/uniqueItems", "uniqueItems must be a boolean")
        return _Array(
            all_items=None
            if items is None or isinstance(items, list)
            else self._load(items, f"{pointer}/items", pending),
            item_list=[self._load(s, f"{pointer}/items/{i}", pending) for i, s in enumerate(tuple_items)],
            permits_additional=additional is not False,
            additional=self._optional_schema(additional, f"{pointer}/additionalItems", pending),
            min_items=self._count(raw, "minItems", pointer),
            max_items=self._count(raw, "maxItems", pointer),
            unique=unique,
        )

    def _optional_schema(self, raw: Any, pointer: str, pending: list[tuple[Any, str]]) -> _Node | None:
        """A schema-valued keyword whose boolean form is a flag, not a schema (additionalProperties, ...)."""
        if raw is None or isinstance(raw, bool):
            return None
        return self._load(raw, pointer, pending)

    def _list(self, raw: Mapping[str, Any], keyword: str, pointer: str) -> list[Any]:
        value = raw[keyword]
        if not isinstance(value, list):
            raise self._error(f"{pointer}/{keyword}", f"{keyword} must be an array")
        return value

    def _members(self, raw: Mapping[str, Any], keyword: str, pointer: str) -> Mapping[str, Any]:
        value = raw.get(keyword, {})
        if not isinstance(value, Mapping):
            raise self._error(f"{pointer}/{keyword}", f"{keyword} must be an object")
        return value

    def _names(self, raw: Any, pointer: str) -> list[str]:
        if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
            raise self._error(pointer, "must be an array of strings")
        return raw

    def _count(self, raw: Mapping[str, Any], keyword: str, pointer: str) -> int | None:
        value = raw.get(keyword)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
            raise self._error(f"{pointer}/{keyword}", f"{keyword} must be a non-negative integer")
        return int(value)

    def _limit(self, raw: Mapping[str, Any], keyword: str, pointer: str) -> float | None:
        value = raw.get(keyword)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._error(f"{pointer}/{keyword}", f"{keyword} must be a number")
        return value

    def _regex(self, pattern: str, pointer: str) -> re.Pattern[str]:
        try:
            return re.compile(pattern)
        except re.error as e:
            raise self._error(
                pointer, f"pattern '{pattern}' is not a regular expression Python reads: {e}"
            ) from e

    def _lookup(self, ref: str, pointer: str) -> tuple[Any, str]:
        """The value a same-document `$ref` points at, and its pointer. `#/$defs/X` also finds a top-level
        `definitions` entry X, as the registry bridges the two."""
        if not ref.startswith("#"):
            raise self._error(
                pointer, f"$ref '{ref}' is not within the schema (only #/... references are supported)"
            )
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            raise self._error(pointer, f"$ref '{ref}' names an anchor (only JSON pointers are supported)")
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in fragment.split("/")[1:]]
        defs = self.raw.get("$defs") if isinstance(self.raw, Mapping) else None
        if len(tokens) > 1 and tokens[0] == "$defs" and not (isinstance(defs, Mapping) and tokens[1] in defs):
            tokens[0] = "definitions"
        value: Any = self.raw
        for token in tokens:
            if isinstance(value, Mapping) and token in value:
                value = value[token]
            elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
                value = value[int(token)]
            else:
                raise self._error(pointer, f"$ref '{ref}' points at nothing in the schema")
        return value, "#" + fragment

    def _check_ref_chain(self, ref: _Ref, pointer: str) -> None:
        seen: set[int] = set()
        node: _Node | None = ref
        while isinstance(node, _Ref):
            if id(node) in seen:
                raise self._error(pointer, f"$ref '{ref.ref}' only leads to other $refs, in a cycle")
            seen.add(id(node))
            node = node.target


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def _follow(node: _Node) -> _Node:
    """A `$ref`'s target (through chains of them; `_Document` rejected cycles of bare refs)."""
    while isinstance(node, _Ref):
        assert node.target is not None
        node = node.target
    return node


# --- Walking a writer and a reader schema together -------------------------------------------------------

_Pair = tuple[_Node, _Node]

_Steps = Iterator[Any]
"""Part of a walk, run by `_run`. Comparing a pair of schemas yields the walk of that pair, which `_run`
finishes first, so recursive schemas nest on `_run`'s list rather than on Python's call stack."""


def _run(steps: _Steps) -> None:
    stack = [steps]
    while stack:
        try:
            nested = next(stack[-1])
        except StopIteration:
            stack.pop()
        else:
            stack.append(nested)


@dataclass
class _Walk:
    """State one pass shares: results per pair of schemas (paths relative to the pair), the pairs being
    compared up the stack, and pairs an earlier pass found incompatible."""

    known_incompatible: Mapping[_Pair, tuple[Difference, ...]]
    memo: dict[_Pair, tuple[Difference, ...]] = field(default_factory=dict)
    active: set[_Pair] = field(default_factory=set)
    assumed: bool = False
    """Whether a pair met again on its own stack was assumed compatible (so the pass may be optimistic)."""


class _Diff:
    """Differences found at and under one path of a walk."""

    def __init__(self, walk: _Walk, path: Sequence[str] = ()) -> None:
        self.walk = walk
        self.path = list(path)
        self.found: list[Difference] = []

    def probe(self) -> _Diff:
        """A fresh collector at the same path, for comparisons whose outcome decides what is kept."""
        return _Diff(self.walk, self.path)

    @contextmanager
    def at(self, *segments: str) -> Iterator[None]:
        self.path.extend(segments)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(segments) :]

    def add(self, change: Change, *segments: str, detail: str = "") -> None:
        self.found.append(Difference(change, (*self.path, *segments), detail))

    def extend(self, found: Sequence[Difference]) -> None:
        self.found.extend(found)

    def rebased(self, found: Sequence[Difference]) -> None:
        self.found.extend(replace(d, path=(*self.path, *d.path)) for d in found)

    @property
    def compatible(self) -> bool:
        return _all_compatible(self.found)


def _all_compatible(found: Sequence[Difference]) -> bool:
    return all(d.change in COMPATIBLE_CHANGES for d in found)


def _differences(writer: _Node, reader: _Node) -> list[Difference]:
    """Every difference from `writer` to `reader`. Pairs met again while being compared are assumed
    compatible; passes repeat, feeding back the pairs found incompatible, until no new ones appear."""
    known: dict[_Pair, tuple[Difference, ...]] = {}
    while True:
        walk = _Walk(known)
        diff = _Diff(walk)
        _run(_compare(diff, writer, reader))
        incompatible = {pair: found for pair, found in walk.memo.items() if not _all_compatible(found)}
        if not walk.assumed or incompatible.keys() <= known.keys():
            return diff.found
        known = {**known, **incompatible}


def _compare(diff: _Diff, writer: _Node | None, reader: _Node | None) -> _Steps:
    if writer is None and reader is None:
        return
    if writer is None:
        diff.add(Change.SCHEMA_ADDED, detail="the reader constrains what the writer left unconstrained")
        return
    if reader is None:
        diff.add(Change.SCHEMA_REMOVED)
        return
    pair = (_follow(writer), _follow(reader))
    walk = diff.walk
    found = walk.memo.get(pair)
    if found is None:
        if pair in walk.active:
            if pair not in walk.known_incompatible:
                walk.assumed = True
            diff.rebased(walk.known_incompatible.get(pair, ()))
            return
        walk.active.add(pair)
        try:
            inner = _Diff(walk)
            yield _compare_kinds(inner, *pair)
        finally:
            walk.active.discard(pair)
        found = walk.memo[pair] = tuple(inner.found)
    diff.rebased(found)


def _compare_kinds(diff: _Diff, writer: _Node, reader: _Node) -> _Steps:
    if not isinstance(writer, _Combined) and isinstance(reader, _Combined):
        if (yield from _reader_branch_reads(diff, writer, reader)):
            return
    elif (
        isinstance(writer, _Combined)
        and not isinstance(reader, _Combined)
        and (yield from _writer_branch_read(diff, writer, reader))
    ):
        return
    if type(writer) is not type(reader):
        if isinstance(writer, _False) or isinstance(reader, _Empty) or _both_connect_bytes(writer, reader):
            return
        diff.add(Change.TYPE_CHANGED, detail=f"writer {writer.describe()}, reader {reader.describe()}")
        return
    _compare_annotations(diff, writer, reader)
    if isinstance(writer, _String):
        _compare_strings(diff, writer, reader)
    elif isinstance(writer, _Number):
        _compare_numbers(diff, writer, reader)
    elif isinstance(writer, _Const):
        _compare_consts(diff, writer, reader)
    elif isinstance(writer, _Enum):
        _compare_enums(diff, writer, reader)
    elif isinstance(writer, _Combined):
        yield from _compare_combined(diff, writer, reader)
    elif isinstance(writer, _Not):
        yield from _compare_nots(diff, writer, reader)
    elif isinstance(writer, _Object):
        yield from _compare_objects(diff, writer, reader)
    elif isinstance(writer, _Array):
        yield from _compare_arrays(diff, writer, reader)


def _reader_branch_reads(diff: _Diff, writer: _Node, reader: _Combined) -> Generator[Any, None, bool]:
    """A reader anyOf/oneOf (or a single-branch combination) with a branch that reads the whole writer."""
    single = len(reader.subschemas) == 1
    if not single and reader.criterion == "allOf":
        return False
    for branch in reader.subschemas:
        probe = diff.probe()
        yield from _compare(probe, writer, branch)
        if probe.compatible:
            diff.extend(probe.found)
            if not single:
                diff.add(Change.SUM_TYPE_EXTENDED)
            return True
    return False


def _writer_branch_read(diff: _Diff, writer: _Combined, reader: _Node) -> Generator[Any, None, bool]:
    """A writer allOf (or a single-branch combination) with a branch the whole reader reads."""
    single = len(writer.subschemas) == 1
    if not single and writer.criterion != "allOf":
        return False
    for branch in writer.subschemas:
        probe = diff.probe()
        yield from _compare(probe, branch, reader)
        if probe.compatible:
            diff.extend(probe.found)
            if not single:
                diff.add(Change.PRODUCT_TYPE_NARROWED)
            return True
    return False


def _both_connect_bytes(writer: _Node, reader: _Node) -> bool:
    """Kafka Connect's bytes, whatever schema type carries them (the registry lets them change)."""
    return writer.meta.get("connect.type") == "bytes" == reader.meta.get("connect.type")


def _compare_annotations(diff: _Diff, writer: _Node, reader: _Node) -> None:
    if writer.ident != reader.ident:
        diff.add(Change.ID_CHANGED)
    if writer.meta.get("title") != reader.meta.get("title"):
        diff.add(Change.TITLE_CHANGED)
    if writer.meta.get("description") != reader.meta.get("description"):
        diff.add(Change.DESCRIPTION_CHANGED)
    if _default(writer) != _default(reader):
        diff.add(Change.DEFAULT_CHANGED)


def _default(node: _Node) -> str | None:
    return _canonical(node.meta["default"]) if "default" in node.meta else None


def _bound(diff: _Diff, keyword: str, family: str, writer: float | None, reader: float | None) -> None:
    """A numeric limit added, removed, increased or decreased: `Change` {family}_{ADDED, ...}."""
    if writer == reader:
        return
    if writer is None:
        suffix = "ADDED"
    elif reader is None:
        suffix = "REMOVED"
    else:
        suffix = "INCREASED" if writer < reader else "DECREASED"
    diff.add(
        Change[f"{family}_{suffix}"], keyword, detail=f"writer {_shown(writer)}, reader {_shown(reader)}"
    )


def _shown(value: Any) -> str:
    return "none" if value is None else _canonical(value)


def _compare_strings(diff: _Diff, writer: _String, reader: _String) -> None:
    _bound(diff, "maxLength", "MAX_LENGTH", writer.max_length, reader.max_length)
    _bound(diff, "minLength", "MIN_LENGTH", writer.min_length, reader.min_length)
    if writer.pattern != reader.pattern:
        change = (
            Change.PATTERN_ADDED
            if writer.pattern is None
            else Change.PATTERN_REMOVED
            if reader.pattern is None
            else Change.PATTERN_CHANGED
        )
        diff.add(
            change, "pattern", detail=f"writer {_shown(writer.pattern)}, reader {_shown(reader.pattern)}"
        )


def _compare_numbers(diff: _Diff, writer: _Number, reader: _Number) -> None:
    _bound(diff, "maximum", "MAXIMUM", writer.maximum, reader.maximum)
    _bound(diff, "minimum", "MINIMUM", writer.minimum, reader.minimum)
    _bound(diff, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM", writer.exclusive_maximum, reader.exclusive_maximum)
    _bound(diff, "exclusiveMinimum", "EXCLUSIVE_MINIMUM", writer.exclusive_minimum, reader.exclusive_minimum)
    _compare_multiple_of(diff, writer.multiple_of, reader.multiple_of)
    if writer.integer != reader.integer:
        change = Change.TYPE_EXTENDED if writer.integer else Change.TYPE_NARROWED
        diff.add(change, detail=f"writer {writer.describe()}, reader {reader.describe()}")


def _compare_multiple_of(diff: _Diff, writer: Decimal | None, reader: Decimal | None) -> None:
    if writer == reader:
        return
    if writer is None:
        change = Change.MULTIPLE_OF_ADDED
    elif reader is None:
        change = Change.MULTIPLE_OF_REMOVED
    elif reader % writer == 0:
        change = Change.MULTIPLE_OF_EXPANDED
    elif writer % reader == 0:
        change = Change.MULTIPLE_OF_REDUCED
    else:
        change = Change.MULTIPLE_OF_CHANGED
    diff.add(change, "multipleOf", detail=f"writer {_shown_decimal(writer)}, reader {_shown_decimal(reader)}")


def _shown_decimal(value: Decimal | None) -> str:
    return "none" if value is None else str(value)


def _compare_consts(diff: _Diff, writer: _Const, reader: _Const) -> None:
    if writer.value != reader.value:
        diff.add(Change.ENUM_ARRAY_CHANGED, "const", detail=f"writer {writer.value}, reader {reader.value}")


def _compare_enums(diff: _Diff, writer: _Enum, reader: _Enum) -> None:
    if writer.values == reader.values:
        return
    if reader.values >= writer.values:
        diff.add(Change.ENUM_ARRAY_EXTENDED, "enum")
        return
    change = Change.ENUM_ARRAY_NARROWED if writer.values >= reader.values else Change.ENUM_ARRAY_CHANGED
    lacking = ", ".join(sorted(writer.values - reader.values))
    diff.add(change, "enum", detail=f"the reader lacks {lacking}")


def _compare_nots(diff: _Diff, writer: _Not, reader: _Not) -> _Steps:
    # What the reader excludes must be something the writer excluded: compare the other way round.
    with diff.at("not"):
        probe = diff.probe()
        yield from _compare(probe, reader.schema, writer.schema)
        if probe.compatible:
            diff.add(Change.NOT_TYPE_NARROWED)
        else:
            diff.add(Change.NOT_TYPE_EXTENDED, detail="the reader excludes values the writer allows")


def _criteria_change(writer: _Combined, reader: _Combined) -> Change | None:
    """None when both use one criterion; else whether the reader's is at least as permissive."""
    if writer.criterion == reader.criterion:
        return None
    single_writer, single_reader = len(writer.subschemas) == 1, len(reader.subschemas) == 1
    if (
        reader.criterion == "anyOf"
        or (single_writer and (single_reader or reader.criterion == "oneOf"))
        or (single_reader and writer.criterion == "allOf")
    ):
        return Change.COMBINED_TYPE_EXTENDED
    return Change.COMBINED_TYPE_CHANGED


def _compare_combined(diff: _Diff, writer: _Combined, reader: _Combined) -> _Steps:
    criteria = _criteria_change(writer, reader)
    if criteria is not None:
        diff.add(criteria, detail=f"writer {writer.criterion}, reader {reader.criterion}")
        if criteria is Change.COMBINED_TYPE_CHANGED:
            return
    writers, readers = _distinct(writer.subschemas), _distinct(reader.subschemas)
    counts = f"writer {len(writers)} branches, reader {len(readers)}"
    if len(writers) < len(readers):
        diff.add(
            Change.PRODUCT_TYPE_EXTENDED if reader.criterion == "allOf" else Change.SUM_TYPE_EXTENDED,
            detail=counts,
        )
    elif len(writers) > len(readers):
        diff.add(
            Change.PRODUCT_TYPE_NARROWED if writer.criterion == "allOf" else Change.SUM_TYPE_NARROWED,
            detail=counts,
        )
    readable: dict[int, dict[int, list[Difference]]] = {}
    for i, branch in enumerate(writers):
        with diff.at(writer.criterion, str(i)):
            for j, candidate in enumerate(readers):
                probe = diff.probe()
                yield from _compare(probe, branch, candidate)
                if probe.compatible:
                    readable.setdefault(i, {})[j] = probe.found
    matching = _maximum_matching(readable)
    for i, j in sorted(matching.items()):
        diff.extend(readable[i][j])
    if len(matching) < min(len(writers), len(readers)):
        diff.add(
            Change.COMBINED_TYPE_SUBSCHEMAS_CHANGED,
            detail="the branches cannot be paired so that each reader branch reads a writer branch",
        )


def _distinct(subschemas: Sequence[_Node]) -> list[_Node]:
    """Branches without repeats: equal JSON counts once (parts split from one object by identity)."""
    seen: set[Any] = set()
    distinct = []
    for node in subschemas:
        key = _canonical(node.meta) if node.meta else id(node)
        if key not in seen:
            seen.add(key)
            distinct.append(node)
    return distinct


def _maximum_matching(edges: Mapping[int, Mapping[int, Sequence[Difference]]]) -> dict[int, int]:
    """A maximum bipartite matching (augmenting paths): left index -> right index. Edges with fewer
    differences are tried first, so identical branches pair up with each other."""
    owner: dict[int, int] = {}

    def augment(left: int, seen: set[int]) -> bool:
        for right in sorted(edges[left], key=lambda r: (len(edges[left][r]), r)):
            if right not in seen:
                seen.add(right)
                if right not in owner or augment(owner[right], seen):
                    owner[right] = left
                    return True
        return False

    for left in sorted(edges):
        augment(left, set())
    return {left: right for right, left in owner.items()}


def _compare_objects(diff: _Diff, writer: _Object, reader: _Object) -> _Steps:
    _compare_required(diff, writer, reader)
    with diff.at("properties"):
        for name in _union(writer.properties, reader.properties):
            with diff.at(name):
                yield from _compare_property(diff, writer, reader, name)
    yield from _compare_dependencies(diff, writer, reader)
    yield from _compare_additional(
        diff,
        "additionalProperties",
        "ADDITIONAL_PROPERTIES",
        (writer.permits_additional, writer.additional),
        (reader.permits_additional, reader.additional),
    )
    _bound(diff, "maxProperties", "MAX_PROPERTIES", writer.max_properties, reader.max_properties)
    _bound(diff, "minProperties", "MIN_PROPERTIES", writer.min_properties, reader.min_properties)


def _union(first: Mapping[str, Any], second: Mapping[str, Any]) -> list[str]:
    return [*first, *(name for name in second if name not in first)]


def _compare_required(diff: _Diff, writer: _Object, reader: _Object) -> None:
    with diff.at("required"):
        for name in writer.properties:
            if name not in reader.properties:
                continue
            was, now = name in writer.required, name in reader.required
            if was and not now:
                diff.add(Change.REQUIRED_ATTRIBUTE_REMOVED, name)
            elif now and not was:
                if "default" in reader.properties[name].meta:
                    diff.add(Change.REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED, name)
                else:
                    diff.add(
                        Change.REQUIRED_ATTRIBUTE_ADDED,
                        name,
                        detail="the reader requires, without a default, a property the writer left optional",
                    )


def _open(node: _Object) -> bool:
    """Any extra property allowed, with any value: no additionalProperties schema, no patternProperties."""
    return node.permits_additional and node.additional is None and not node.pattern_properties


def _cover(node: _Object, name: str) -> _Node | None:
    """The schema a partially open object gives a property it does not declare, if any."""
    for pattern, schema in node.pattern_properties:
        if pattern.search(name):
            return schema
    return node.additional


def _compare_covered(diff: _Diff, writer: _Node, reader: _Node, covered: Change, uncovered: Change) -> _Steps:
    probe = diff.probe()
    yield from _compare(probe, writer, reader)
    diff.extend(probe.found)
    if probe.compatible:
        diff.add(covered)
    else:
        diff.add(uncovered, detail="the schema the other side gives it does not fit")


def _compare_property(diff: _Diff, writer: _Object, reader: _Object, name: str) -> _Steps:
    written, read = writer.properties.get(name), reader.properties.get(name)
    if read is None:
        assert written is not None
        yield from _property_removed(diff, written, reader, name)
    elif written is None:
        yield from _property_added(diff, writer, reader, read, name)
    else:
        yield from _compare(diff, written, read)


def _property_removed(diff: _Diff, written: _Node, reader: _Object, name: str) -> _Steps:
    if _open(reader):
        diff.add(Change.PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL)
        return
    cover = _cover(reader, name)
    if cover is not None:
        yield from _compare_covered(
            diff,
            written,
            cover,
            Change.PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    elif isinstance(written, _False):
        diff.add(Change.PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL)
    else:
        diff.add(
            Change.PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL,
            detail="the reader allows no additional properties, and the writer may have written this one",
        )


_ANY_PROPERTY = "the writer allows any additional property, so may have written this one with any value"


def _property_added(diff: _Diff, writer: _Object, reader: _Object, read: _Node, name: str) -> _Steps:
    has_default = "default" in read.meta
    if _open(writer):
        if isinstance(read, _Empty):
            diff.add(Change.PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL)
        elif name not in reader.required:
            diff.add(
                Change.OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL,
                detail=_ANY_PROPERTY,
            )
        elif has_default:
            diff.add(
                Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL,
                detail=_ANY_PROPERTY,
            )
        else:
            diff.add(
                Change.REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL,
                detail="the reader requires, without a default, a property the writer does not declare",
            )
        return
    cover = _cover(writer, name)
    if cover is not None:
        yield from _compare_covered(
            diff,
            cover,
            read,
            Change.PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    if name not in reader.required:
        diff.add(Change.OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL)
    elif has_default:
        diff.add(Change.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL)
    else:
        diff.add(
            Change.REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
            detail="the reader requires, without a default, a property the writer does not declare",
        )


def _compare_dependencies(diff: _Diff, writer: _Object, reader: _Object) -> _Steps:
    with diff.at("dependencies"):
        for name in _union(writer.property_dependencies, reader.property_dependencies):
            before, after = writer.property_dependencies.get(name), reader.property_dependencies.get(name)
            if after is None:
                diff.add(Change.DEPENDENCY_ARRAY_REMOVED, name)
            elif before is None:
                diff.add(Change.DEPENDENCY_ARRAY_ADDED, name, detail=f"reader {sorted(after)}")
            elif before != after:
                change = (
                    Change.DEPENDENCY_ARRAY_EXTENDED
                    if after >= before
                    else Change.DEPENDENCY_ARRAY_NARROWED
                    if before >= after
                    else Change.DEPENDENCY_ARRAY_CHANGED
                )
                diff.add(change, name, detail=f"writer {sorted(before)}, reader {sorted(after)}")
        for name in _union(writer.schema_dependencies, reader.schema_dependencies):
            written, read = writer.schema_dependencies.get(name), reader.schema_dependencies.get(name)
            if read is None:
                diff.add(Change.DEPENDENCY_SCHEMA_REMOVED, name)
            elif written is None:
                diff.add(Change.DEPENDENCY_SCHEMA_ADDED, name)
            else:
                with diff.at(name):
                    yield from _compare(diff, written, read)


def _compare_additional(
    diff: _Diff,
    keyword: str,
    family: str,
    writer: tuple[bool, _Node | None],
    reader: tuple[bool, _Node | None],
) -> _Steps:
    """additionalProperties/additionalItems: allowed or not, and the schema extras must match if any."""
    (writer_permits, written), (reader_permits, read) = writer, reader
    with diff.at(keyword):
        if writer_permits != reader_permits:
            suffix = "ADDED" if reader_permits else "REMOVED"
            detail = "" if reader_permits else "the reader forbids what the writer allows"
            diff.add(Change[f"{family}_{suffix}"], detail=detail)
        elif written is None and read is not None:
            diff.add(Change[f"{family}_NARROWED"], detail="the reader constrains what the writer left free")
        elif written is not None and read is None:
            diff.add(Change[f"{family}_EXTENDED"])
        else:
            yield from _compare(diff, written, read)


def _open_items(node: _Array) -> bool:
    return node.permits_additional and node.additional is None


def _compare_arrays(diff: _Diff, writer: _Array, reader: _Array) -> _Steps:
    with diff.at("items"):
        yield from _compare(diff, writer.all_items, reader.all_items)
    yield from _compare_item_lists(diff, writer, reader)
    yield from _compare_additional(
        diff,
        "additionalItems",
        "ADDITIONAL_ITEMS",
        (writer.permits_additional, writer.additional),
        (reader.permits_additional, reader.additional),
    )
    _bound(diff, "maxItems", "MAX_ITEMS", writer.max_items, reader.max_items)
    _bound(diff, "minItems", "MIN_ITEMS", writer.min_items, reader.min_items)
    if writer.unique != reader.unique:
        diff.add(Change.UNIQUE_ITEMS_REMOVED if writer.unique else Change.UNIQUE_ITEMS_ADDED, "uniqueItems")
    # Not keywords the loader reads in these drafts, yet the registry compares them when present.
    _bound(
        diff,
        "maxContains",
        "MAX_CONTAINS",
        _meta_number(writer, "maxContains"),
        _meta_number(reader, "maxContains"),
    )
    _bound(
        diff,
        "minContains",
        "MIN_CONTAINS",
        _meta_number(writer, "minContains"),
        _meta_number(reader, "minContains"),
    )


def _meta_number(node: _Node, keyword: str) -> float | None:
    value = node.meta.get(keyword)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _compare_item_lists(diff: _Diff, writer: _Array, reader: _Array) -> _Steps:
    """Tuple validation (`items` as an array): positions both have, then those only one side has."""
    written, read = writer.item_list, reader.item_list
    for index in range(min(len(written), len(read))):
        with diff.at("items", str(index)):
            yield from _compare(diff, written[index], read[index])
    for index in range(len(read), len(written)):
        with diff.at("items", str(index)):
            yield from _item_removed(diff, written[index], reader)
    for index in range(len(written), len(read)):
        with diff.at("items", str(index)):
            yield from _item_added(diff, writer, read[index])


def _item_removed(diff: _Diff, written: _Node, reader: _Array) -> _Steps:
    if _open_items(reader):
        diff.add(Change.ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL)
    elif reader.additional is not None:
        yield from _compare_covered(
            diff,
            written,
            reader.additional,
            Change.ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    elif isinstance(written, _False):
        diff.add(Change.ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL)
    else:
        diff.add(
            Change.ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL,
            detail="the reader allows no additional items, and the writer may have written this one",
        )


def _item_added(diff: _Diff, writer: _Array, read: _Node) -> _Steps:
    if _open_items(writer):
        if isinstance(read, _Empty):
            diff.add(Change.ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL)
        else:
            diff.add(
                Change.ITEM_ADDED_TO_OPEN_CONTENT_MODEL,
                detail="the writer allows any additional item, so may have written this one with any value",
            )
    elif writer.additional is not None:
        yield from _compare_covered(
            diff,
            writer.additional,
            read,
            Change.ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
            Change.ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        )
    else:
        diff.add(Change.ITEM_ADDED_TO_CLOSED_CONTENT_MODEL)


# --- The public checks -----------------------------------------------------------------------------------


def schema_differences(writer: JsonSchema, reader: JsonSchema) -> list[Difference]:
    """Every difference from `writer` (the schema data was written with) to `reader`, compatible or not;
    ValueError when either is not a schema this module reads."""
    return _differences(_Document(writer, "writer schema").root, _Document(reader, "reader schema").root)


def _reader_errors(reader: _Document, writer: _Document) -> list[str]:
    """Why `reader` cannot read data written with `writer` (path-prefixed messages); empty when it can."""
    return [str(d) for d in _differences(writer.root, reader.root) if d.change not in COMPATIBLE_CHANGES]


def json_schema_compatibility_errors(
    level: Compatibility | str, new: JsonSchema, previous: Sequence[JsonSchema]
) -> list[str]:
    """Why `new` breaks `level` against `previous` (oldest first); only the newest unless transitive.
    ValueError, naming the schema and the JSON pointer, when one is not a schema this module reads."""
    level = Compatibility(level)
    if level is Compatibility.NONE or not previous:
        return []
    first = 0 if level.transitive else len(previous) - 1
    new_document = _Document(new, "new schema")
    errors: list[str] = []
    for index in reversed(range(first, len(previous))):
        old = _Document(previous[index], f"previous schema {index + 1} of {len(previous)}")
        if level.backward:
            errors.extend(f"new schema cannot read old: {e}" for e in _reader_errors(new_document, old))
        if level.forward:
            errors.extend(f"old schema cannot read new: {e}" for e in _reader_errors(old, new_document))
    return errors
