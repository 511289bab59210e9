"""A JSON Schema's records as Spark types (docs/semantics.md §1.5): each schema node becomes a
`Shape` — the Spark type of its values and how a record's JSON value and Spark's value map — or a
ContractError naming the JSON pointer of what has no Spark type.

objects with `properties` are structs (a property is non-nullable when required and not
nullable), objects with only an `additionalProperties` schema are maps, `items` arrays, `string`
strings, `integer` longs, `number` doubles, `boolean` booleans; a type list, `oneOf` or `anyOf`
with `null` and one other schema is that schema, nullable; `enum` and `const` take their values'
type. `$ref` to `#/definitions/…` or `#/$defs/…` is followed, and so is one to a referenced
schema (bundled into the document); a recursive one is refused, as are schemas that allow several
types (Spark columns have one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.errors import ContractError
from contracts.formats.json_schema.patterns import check_patterns
from contracts.formats.markers import (
    ABSENT_FIELD,
    ABSENT_MARK,
    IN_DOCUMENT,
    IN_DOCUMENT_OR_NULL,
    PRESENCE_KEY,
)
from contracts.formats.protocol import Reference

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

_SCALARS = ("string", "integer", "number", "boolean")


@dataclass(frozen=True)
class Shape:
    """One schema node as Spark sees it. `kind` is object, map, array or a scalar type name;
    `nullable` says the schema accepts JSON null there."""

    kind: str
    nullable: bool
    fields: tuple[tuple[str, Shape, bool], ...] = ()
    """An object's properties in order: (name, shape, required)."""
    item: Shape | None = None
    """An array's items, a map's values."""

    def spark_type(self) -> DataType:
        from pyspark.sql import types as T

        if self.kind == "object":
            return T.StructType(
                [
                    T.StructField(
                        name, shape.spark_type(), not required or shape.nullable, _presence(required, shape)
                    )
                    for name, shape, required in self.fields
                ]
            )
        assert self.item is not None or self.kind in _SCALARS
        if self.kind == "array":
            assert self.item is not None
            return T.ArrayType(self.item.spark_type(), self.item.nullable)
        if self.kind == "map":
            assert self.item is not None
            return T.MapType(T.StringType(), self.item.spark_type(), self.item.nullable)
        return {
            "string": T.StringType(),
            "integer": T.LongType(),
            "number": T.DoubleType(),
            "boolean": T.BooleanType(),
        }[self.kind]

    @property
    def has_optional_nulls(self) -> bool:
        """Whether some optional property at or below this node accepts null: then a null there may
        be the property's own or stand for its absence, which the record's `ABSENT_FIELD` tells."""
        if self.kind == "object":
            return any(
                (not required and shape.nullable) or shape.has_optional_nulls
                for _, shape, required in self.fields
            )
        return self.item is not None and self.item.has_optional_nulls


def _presence(required: bool, shape: Shape) -> dict[str, Any] | None:
    """An optional property's presence (contracts.formats.markers): a null is its absence, or, when
    it accepts null, its absence only where the record's mask lists it."""
    if required:
        return None
    return {PRESENCE_KEY: IN_DOCUMENT_OR_NULL if shape.nullable else IN_DOCUMENT}


@dataclass(frozen=True)
class JsonSchema:
    """A parsed JSON Schema: its document, the text it came from, and its records' shape. Pickles."""

    document: Any
    text: str
    shape: Shape

    def struct_type(self) -> StructType:
        """The record's Spark type; with `ABSENT_FIELD` last when some optional property accepts
        null (docs/semantics.md §1.5): a DataFrame then says which nulls are absent properties."""
        spark = self.shape.spark_type()
        from pyspark.sql.types import ArrayType, StringType, StructField, StructType

        assert isinstance(spark, StructType)
        if not self.shape.has_optional_nulls:
            return spark
        if ABSENT_FIELD in spark.fieldNames():
            raise ContractError(
                f"the schema has a property {ABSENT_FIELD!r}, the name of the field that says which of a"
                " record's nulls are absent properties (some optional property here accepts null)",
                position=f"#/properties/{ABSENT_FIELD}",
            )
        mask = StructField(ABSENT_FIELD, ArrayType(StringType(), False), True, {ABSENT_MARK: True})
        return StructType([*spark.fields, mask])


def parse_json_schema(schema_str: str, references: Sequence[Reference] = ()) -> JsonSchema:
    """The schema text as a JsonSchema; ContractError when it is not JSON, not a valid schema, or
    its records have no Spark type. The schemas it references (a `$ref` to a reference's name, or
    to the `$id` of the schema it names) are bundled into its document (`bundle`)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    document = _document(schema_str, "schema")
    if references:
        document = bundle(
            document, [(r.name, _document(r.schema_str, f"reference {r.name!r}")) for r in references]
        )
    try:
        validator_for(document).check_schema(document)
    except SchemaError as e:
        raise ContractError(f"not a valid JSON Schema: {e.message}", position="schema") from e
    check_patterns(document)
    shape = _Shaper(document).shape(document, "#", frozenset())
    if shape.kind != "object":
        raise ContractError(
            f"a record's schema must be an object with properties, not {shape.kind}", position="schema"
        )
    text = json.dumps(document, sort_keys=True) if references else schema_str
    return JsonSchema(document, text, shape)


def _document(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ContractError(
            f"the {what} is not JSON: {e}", position="schema" if what == "schema" else "references"
        ) from e


BUNDLED = "$defs"
"""Where `bundle` puts the referenced schemas: `#/$defs/<BUNDLED_PREFIX><n>`."""
BUNDLED_PREFIX = "__reference_"


def bundle(document: Any, references: Sequence[tuple[str, Any]]) -> Any:
    """One self-contained document: each referenced schema under `$defs`, and every `$ref` to a
    reference (by its name or its `$id`, with any `#` fragment) made local, as are the referenced
    schemas' own local `$ref`s. So the validators and the Spark type see one document, as the
    reference clients' resolver sees the referenced schemas by name."""
    index: dict[str, int] = {}
    for position, (name, referenced) in enumerate(references):
        index.setdefault(name, position)
        if isinstance(referenced, Mapping) and isinstance(referenced.get("$id"), str):
            index.setdefault(referenced["$id"], position)

    def local(position: int | None) -> str:
        return "#" if position is None else f"#/{BUNDLED}/{BUNDLED_PREFIX}{position}"

    def rewrite(node: Any, own: int | None) -> Any:
        if isinstance(node, list):
            return [rewrite(item, own) for item in node]
        if not isinstance(node, Mapping):
            return node
        rewritten = {key: rewrite(value, own) for key, value in node.items()}
        ref = node.get("$ref")
        if isinstance(ref, str):
            base, _, fragment = ref.partition("#")
            if base == "":
                rewritten["$ref"] = local(own) + fragment
            elif base in index:
                rewritten["$ref"] = local(index[base]) + fragment
        return rewritten

    root = rewrite(document, None)
    if not isinstance(root, dict):
        return root
    bundled = dict(root.get(BUNDLED) or {})
    for position, (_, referenced) in enumerate(references):
        embedded = rewrite(referenced, position)
        if isinstance(embedded, dict):
            # Inside the bundle it is no resource of its own: its refs now resolve from the root.
            embedded = {k: v for k, v in embedded.items() if k not in ("$id", "$schema")}
        bundled[f"{BUNDLED_PREFIX}{position}"] = embedded
    return {**root, BUNDLED: bundled}


class _Shaper:
    """Walks a schema document into Shapes, following local `$ref`s."""

    def __init__(self, document: Any) -> None:
        self.document = document

    def shape(self, node: Any, pointer: str, refs: frozenset[str]) -> Shape:
        if not isinstance(node, Mapping):
            raise _unsupported(pointer, "a schema that is true, false or not an object")
        ref = node.get("$ref")
        if ref is not None:
            return self._reference(str(ref), pointer, refs)
        for combinator in ("oneOf", "anyOf"):
            if combinator in node:
                return self._alternatives(node[combinator], f"{pointer}/{combinator}", refs)
        if "allOf" in node:
            parts = node["allOf"]
            if isinstance(parts, list) and len(parts) == 1:
                return self.shape(parts[0], f"{pointer}/allOf/0", refs)
            raise _unsupported(pointer, "allOf of several schemas")
        kinds, nullable = self._types(node, pointer)
        if len(kinds) != 1:
            allowed = " and ".join(kinds) if kinds else "any type"
            raise _unsupported(pointer, f"a value of {allowed}", "a Spark column holds one type")
        (kind,) = kinds
        if kind == "object":
            return self._object(node, pointer, refs, nullable)
        if kind == "array":
            items = node.get("items")
            if not isinstance(items, Mapping):
                raise _unsupported(pointer, "an array without one `items` schema")
            return Shape("array", nullable, item=self.shape(items, f"{pointer}/items", refs))
        return Shape(kind, nullable)

    def _object(self, node: Mapping[str, Any], pointer: str, refs: frozenset[str], nullable: bool) -> Shape:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if not properties and isinstance(extra, Mapping):
            return Shape("map", nullable, item=self.shape(extra, f"{pointer}/additionalProperties", refs))
        if not isinstance(properties, Mapping) or not properties:
            raise _unsupported(pointer, "an object without properties or an additionalProperties schema")
        required = set(node.get("required") or ())
        fields = tuple(
            (name, self.shape(schema, f"{pointer}/properties/{name}", refs), name in required)
            for name, schema in properties.items()
        )
        return Shape("object", nullable, fields=fields)

    def _alternatives(self, options: Any, pointer: str, refs: frozenset[str]) -> Shape:
        if not isinstance(options, list):
            raise _unsupported(pointer, "a oneOf/anyOf that is not a list")
        non_null = [
            (i, option)
            for i, option in enumerate(options)
            if not (isinstance(option, Mapping) and _is_null(option))
        ]
        if len(non_null) != 1:
            raise _unsupported(
                pointer, f"{len(non_null)} alternatives that are not null (a Spark column has one type)"
            )
        index, option = non_null[0]
        shape = self.shape(option, f"{pointer}/{index}", refs)
        nullable = len(non_null) < len(options) or shape.nullable
        return Shape(shape.kind, nullable, shape.fields, shape.item)

    def _reference(self, ref: str, pointer: str, refs: frozenset[str]) -> Shape:
        if not ref.startswith("#/"):
            raise _unsupported(
                pointer, f"$ref {ref!r} outside this schema (no schema it references has that name or $id)"
            )
        if ref in refs:
            raise _unsupported(pointer, f"the recursive $ref {ref!r}", "a Spark type cannot nest without end")
        target: Any = self.document
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or key not in target:
                raise ContractError(f"$ref {ref!r} at {pointer} points at nothing", position="schema")
            target = target[key]
        return self.shape(target, ref, refs | {ref})

    def _types(self, node: Mapping[str, Any], pointer: str) -> tuple[list[str], bool]:
        """The node's non-null JSON types (integer and number together are a number) and whether
        null is allowed, from `type`, else `enum`/`const`, else `properties`."""
        declared = node.get("type")
        if declared is None:
            values = node["enum"] if "enum" in node else [node["const"]] if "const" in node else None
            if values is not None:
                declared = sorted({_json_type(value) for value in values})
            elif "properties" in node or "additionalProperties" in node:
                declared = "object"
            elif "items" in node:
                declared = "array"
            else:
                return [], True
        types = [declared] if isinstance(declared, str) else list(declared)
        nullable = "null" in types
        kinds = [t for t in types if t != "null"]
        if set(kinds) == {"integer", "number"}:
            kinds = ["number"]
        for kind in kinds:
            if kind not in (*_SCALARS, "object", "array"):
                raise ContractError(f"unknown JSON type {kind!r} at {pointer}", position="schema")
        return kinds, nullable


def _is_null(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "null" or node.get("const", ...) is None or node.get("enum") == [None]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _unsupported(pointer: str, what: str, why: str | None = None) -> ContractError:
    return ContractError(
        f"{what} at {pointer} has no Spark type{f': {why}' if why else ''}", position="schema"
    )
