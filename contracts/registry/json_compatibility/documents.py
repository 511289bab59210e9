"""A JSON Schema document loaded into nodes as the registry's loader (Everit) reads it: its draft,
its keywords, every `$ref` resolved."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

from contracts.registry.json_compatibility.changes import JsonSchema
from contracts.registry.json_compatibility.nodes import (
    ArrayNode,
    BooleanNode,
    CombinedNode,
    ConditionalNode,
    ConstNode,
    EmptyNode,
    EnumNode,
    FalseNode,
    Node,
    NotNode,
    NullNode,
    NumberNode,
    ObjectNode,
    RefNode,
    StringNode,
    TrueNode,
    canonical,
)


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


class Document:
    """One schema document loaded whole, every `$ref` in it resolved; ValueError names `name` and the
    JSON pointer of what is wrong."""

    def __init__(self, raw: Any, name: str) -> None:
        self.name = name
        if not isinstance(raw, (Mapping, bool)):
            raise ValueError(f"{name}: a JSON Schema must be a JSON object or boolean, not {_json_type(raw)}")
        self.raw = raw
        self.dialect = _dialect(raw)
        self._nodes: dict[int, Node] = {}
        self._refs: list[tuple[RefNode, Any, str]] = []
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

    def _load(self, raw: Any, pointer: str, pending: list[tuple[Any, str]]) -> Node:
        loaded = self._nodes.get(id(raw))
        if loaded is not None:
            return loaded
        if isinstance(raw, bool):
            node: Node = TrueNode() if raw else FalseNode()
        elif isinstance(raw, Mapping):
            node = self._load_object(raw, pointer, pending)
        else:
            raise self._error(pointer, f"a schema must be a JSON object or boolean, not {_json_type(raw)}")
        self._nodes[id(raw)] = node
        return node

    def _load_object(self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]) -> Node:
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
            node = RefNode(meta=raw, ident=ident, ref=ref)
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
            return EmptyNode(meta=raw, ident=ident)
        if len(parts) == 1:
            return replace(parts[0], meta=raw, ident=ident)
        return CombinedNode(meta=raw, ident=ident, criterion="allOf", subschemas=parts)

    def _typed_parts(
        self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]], consumed: set[str]
    ) -> list[Node]:
        if "type" not in raw:
            return []
        declared = raw["type"]
        if isinstance(declared, str):
            return [self._typed(declared, raw, pointer, pending, consumed)]
        if isinstance(declared, list):
            branches = [self._typed(name, raw, pointer, pending, consumed) for name in declared]
            return [CombinedNode(criterion="anyOf", subschemas=branches)]
        raise self._error(f"{pointer}/type", "type must be a string or an array of strings")

    def _typed(
        self,
        name: Any,
        raw: Mapping[str, Any],
        pointer: str,
        pending: list[tuple[Any, str]],
        consumed: set[str],
    ) -> Node:
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
            return BooleanNode()
        if name == "null":
            return NullNode()
        raise self._error(f"{pointer}/type", f"unknown type {canonical(name)}")

    def _other_parts(
        self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]
    ) -> list[Node]:
        parts: list[Node] = []
        if "enum" in raw:
            parts.append(EnumNode(values=frozenset(canonical(v) for v in self._list(raw, "enum", pointer))))
        if self.dialect.const and "const" in raw:
            parts.append(ConstNode(value=canonical(raw["const"])))
        if "not" in raw:
            parts.append(NotNode(schema=self._load(raw["not"], f"{pointer}/not", pending)))
        for criterion in _COMBINERS:
            if criterion in raw:
                listed = self._list(raw, criterion, pointer)
                subschemas = [
                    self._load(s, f"{pointer}/{criterion}/{i}", pending) for i, s in enumerate(listed)
                ]
                parts.append(CombinedNode(criterion=criterion, subschemas=subschemas))
        return parts

    def _sniffed_parts(
        self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]], consumed: set[str]
    ) -> list[Node]:
        """Kinds that keywords no `type` claimed imply (the loader's "property sniffing")."""

        def left(keywords: Sequence[str]) -> bool:
            return any(k in raw and k not in consumed for k in keywords)

        parts: list[Node] = []
        if left(_ARRAY_KEYWORDS):
            parts.append(self._array(raw, pointer, pending))
        if left(_OBJECT_KEYWORDS):
            parts.append(self._object(raw, pointer, pending))
        if left(_NUMBER_KEYWORDS):
            parts.append(self._number(raw, pointer, integer=False))
        if left(_STRING_KEYWORDS):
            parts.append(self._string(raw, pointer))
        if self.dialect.conditionals and left(("if", "then", "else")):
            parts.append(ConditionalNode())
        return parts

    def _string(self, raw: Mapping[str, Any], pointer: str) -> StringNode:
        pattern = raw.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            raise self._error(f"{pointer}/pattern", "pattern must be a string")
        return StringNode(
            min_length=self._count(raw, "minLength", pointer),
            max_length=self._count(raw, "maxLength", pointer),
            pattern=pattern,
        )

    def _number(self, raw: Mapping[str, Any], pointer: str, integer: bool) -> NumberNode:
        multiple_of = self._limit(raw, "multipleOf", pointer)
        if multiple_of is not None and multiple_of <= 0:
            raise self._error(f"{pointer}/multipleOf", "multipleOf must be greater than 0")
        return NumberNode(
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

    def _object(self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]) -> ObjectNode:
        properties = self._members(raw, "properties", pointer)
        additional = raw.get("additionalProperties", True)
        return ObjectNode(
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

    def _array(self, raw: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]) -> ArrayNode:
        # `items` is one schema for every item (true and false too), or a list: one per position.
        items = raw.get("items")
        tuple_items = items if isinstance(items, list) else []
        additional = raw.get("additionalItems", True)
        unique = raw.get("uniqueItems", False)
        if not isinstance(unique, bool):
            raise self._error(f"{pointer}/uniqueItems", "uniqueItems must be a boolean")
        return ArrayNode(
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

    def _optional_schema(self, raw: Any, pointer: str, pending: list[tuple[Any, str]]) -> Node | None:
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

    def _check_ref_chain(self, ref: RefNode, pointer: str) -> None:
        seen: set[int] = set()
        node: Node | None = ref
        while isinstance(node, RefNode):
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
