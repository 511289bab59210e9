"""A JSON Schema's validation as a Spark Column, where it can be proved (docs/semantics.md §8.11):
`surely_valid` is true only for records `jsonschema` finds valid, given a record read from the
compact JSON `to_json` writes of it (so a null struct field is an absent property, an array's null
item a present null, a double finite and a long a JSON integer).

Compiled: `type`, `properties`, `required`, `items` (one schema), `additionalProperties` (a
record read that way has no other property), `enum`/`const` of scalars, `minimum`/`maximum` and
numeric `exclusiveMinimum`/`exclusiveMaximum`, `minLength`/`maxLength`, `minItems`/`maxItems`,
`pattern` where Java matches as RE2 does, in linear time (`contracts.formats.regex`), a `$ref`
without sibling keywords, and a `oneOf`/`anyOf` of `{"type": "null"}` and one schema that
refuses null.
Annotations (`title`, `format`, which jsonschema does not check by default, …) are ignored. Any
other keyword makes the schema `inexact`: its records are then validated in Python alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.formats.json_schema.types import JsonSchema, Shape
from contracts.formats.regex import NotInJava, java_form

if TYPE_CHECKING:
    from pyspark.sql import Column

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "$schema",
        "$id",
        "$comment",
        "default",
        "examples",
        "readOnly",
        "writeOnly",
        "deprecated",
        "format",
        "definitions",
        "$defs",
    }
)
_COMPILED = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "oneOf",
        "anyOf",
        "$ref",
    }
)
_VENDOR_PREFIXES = ("connect.", "confluent:")
"""Keywords Confluent's tools add, which no validator reads."""
_LONG = (-(2**63), 2**63 - 1)
_EXACT_DOUBLE = 2**53

Check = Callable[["Column"], "Column"]


class Inexact(Exception):
    """A keyword (or a form of one) this module cannot compile exactly."""


@dataclass(frozen=True)
class _Node:
    """A compiled schema node: `check` (None: always true) of a present non-null value, and
    whether a present null is valid."""

    check: Check | None
    accepts_null: bool


def inexact_reason(parsed: JsonSchema) -> str | None:
    """Why `surely_valid` cannot be built for this schema; None when it can."""
    try:
        _Compiler(parsed.document).node(parsed.document, parsed.shape, "#")
    except Inexact as e:
        return str(e)
    return None


def surely_valid(record: Column, parsed: JsonSchema) -> Column:
    """True where `record` (read from the compact JSON of itself) is valid against the schema;
    false where it may not be (jsonschema then decides). Raises Inexact as `inexact_reason` says."""
    from pyspark.sql import functions as F

    compiled = _Compiler(parsed.document).node(parsed.document, parsed.shape, "#")
    return F.lit(True) if compiled.check is None else compiled.check(record)


class _Compiler:
    """Walks a schema document and its Shape together into Column checks."""

    def __init__(self, document: Any) -> None:
        self.document = document

    def node(self, node: Any, shape: Shape, pointer: str) -> _Node:
        if not isinstance(node, Mapping):
            raise Inexact(f"the schema at {pointer} is not an object")
        for key in node:
            if key not in _ANNOTATIONS and key not in _COMPILED and not key.startswith(_VENDOR_PREFIXES):
                raise Inexact(f"{key!r} at {pointer} is not compiled to Spark")
        keywords = {k for k in node if k in _COMPILED}
        if "$ref" in node:
            if keywords != {"$ref"}:
                raise Inexact(f"$ref at {pointer} has sibling keywords")
            return self.node(self._target(node["$ref"], pointer), shape, str(node["$ref"]))
        for combinator in ("oneOf", "anyOf"):
            if combinator in node:
                if keywords != {combinator}:
                    raise Inexact(f"{combinator} at {pointer} has sibling keywords")
                return self._nullable(node[combinator], shape, f"{pointer}/{combinator}")
        accepts_null = _type_accepts_null(node) and _values_accept_null(node)
        checks = [check for check in self._checks(node, shape, pointer) if check is not None]
        return _Node(_all(checks), accepts_null)

    def _target(self, ref: Any, pointer: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise Inexact(f"$ref at {pointer} leaves the document")
        target: Any = self.document
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or key not in target:
                raise Inexact(f"$ref at {pointer} points at nothing")
            target = target[key]
        return target

    def _resolved(self, node: Any, pointer: str) -> Any:
        seen = 0
        while isinstance(node, Mapping) and "$ref" in node and seen < 32:
            node, seen = self._target(node["$ref"], pointer), seen + 1
        return node

    def _nullable(self, options: Any, shape: Shape, pointer: str) -> _Node:
        """`oneOf`/`anyOf` of a null schema and one schema X that refuses null: null, or X."""
        if not isinstance(options, list) or len(options) != 2:
            raise Inexact(f"{pointer} is not a null schema and one other")
        nulls = [i for i, option in enumerate(options) if _is_plain_null(option)]
        if len(nulls) != 1:
            raise Inexact(f"{pointer} is not a null schema and one other")
        index = 1 - nulls[0]
        other = options[index]
        declared = self._resolved(other, pointer)
        kind = declared.get("type") if isinstance(declared, Mapping) else None
        refuses_null = isinstance(kind, str) and kind != "null"
        refuses_null = refuses_null or (isinstance(kind, list) and bool(kind) and "null" not in kind)
        if not refuses_null:
            raise Inexact(f"{pointer}/{index} may accept null (one and the same null would match twice)")
        inner = self.node(other, shape, f"{pointer}/{index}")
        return _Node(inner.check, True)

    def _checks(self, node: Mapping[str, Any], shape: Shape, pointer: str) -> list[Check | None]:
        if shape.kind == "object":
            return self._object(node, shape, pointer)
        scalar_checks: list[Check | None] = []
        if "enum" in node:
            if not isinstance(node["enum"], list):
                raise Inexact(f"enum at {pointer} is not a list")
            scalar_checks.append(_one_of_values(node["enum"], shape.kind, pointer))
        if "const" in node:
            scalar_checks.append(_one_of_values([node["const"]], shape.kind, pointer))
        if shape.kind == "array":
            return [*scalar_checks, *self._array(node, shape, pointer)]
        if shape.kind == "string":
            return [*scalar_checks, *_string(node, pointer)]
        if shape.kind in ("integer", "number"):
            return [*scalar_checks, *_number(node, shape.kind, pointer)]
        if shape.kind == "boolean":
            return scalar_checks
        raise Inexact(f"the {shape.kind} at {pointer} is not compiled to Spark")

    def _object(self, node: Mapping[str, Any], shape: Shape, pointer: str) -> list[Check | None]:
        from pyspark.sql import functions as F

        if "enum" in node or "const" in node:
            raise Inexact(f"an object's enum or const at {pointer}")
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            raise Inexact(f"the object at {pointer} has no properties")
        names = [name for name, _, _ in shape.fields]
        children = {
            name: self.node(properties[name], field, f"{pointer}/properties/{name}")
            for name, field, _ in shape.fields
        }
        required = node.get("required", [])
        if not isinstance(required, list):
            raise Inexact(f"required at {pointer} is not a list")

        def check(value: Column) -> Column:
            conditions = [
                value.getField(name).isNotNull() if name in names else F.lit(False) for name in required
            ]
            for name, child in children.items():
                if child.check is not None:
                    field = value.getField(name)
                    conditions.append(field.isNull() | child.check(field))
            return _and(conditions)

        return [check]

    def _array(self, node: Mapping[str, Any], shape: Shape, pointer: str) -> list[Check | None]:
        from pyspark.sql import functions as F

        assert shape.item is not None
        items = self.node(node.get("items"), shape.item, f"{pointer}/items")
        checks: list[Check | None] = []
        if items.check is not None or not items.accepts_null:
            item_check = items.check

            def each(x: Column) -> Column:
                present = F.lit(True) if item_check is None else item_check(x)
                return F.when(x.isNull(), F.lit(items.accepts_null)).otherwise(present)

            checks.append(lambda value: F.forall(value, each))
        low, high = _count(node, "minItems", pointer), _count(node, "maxItems", pointer)
        if low is not None:
            checks.append(lambda value: F.size(value) >= F.lit(low))
        if high is not None:
            checks.append(lambda value: F.size(value) <= F.lit(high))
        return checks


def _string(node: Mapping[str, Any], pointer: str) -> list[Check | None]:
    from pyspark.sql import functions as F

    checks: list[Check | None] = []
    low, high = _count(node, "minLength", pointer), _count(node, "maxLength", pointer)
    if low is not None:
        checks.append(lambda value: F.length(value) >= F.lit(low))
    if high is not None:
        checks.append(lambda value: F.length(value) <= F.lit(high))
    if "pattern" in node:
        pattern = node["pattern"]
        if not isinstance(pattern, str):
            raise Inexact(f"the pattern at {pointer} is not a string")
        try:
            java = java_form(pattern)
        except NotInJava as e:
            raise Inexact(f"the pattern at {pointer} is {e}") from e
        checks.append(lambda value: value.rlike(java))
    return checks


def _number(node: Mapping[str, Any], kind: str, pointer: str) -> list[Check | None]:
    from pyspark.sql import functions as F

    checks: list[Check | None] = []
    if kind == "number":  # a double read from a JSON number; "NaN" and "Infinity" are strings
        checks.append(lambda value: ~F.isnan(value) & (F.abs(value) != F.lit(math.inf)))
    for keyword, op in (
        ("minimum", ">="),
        ("maximum", "<="),
        ("exclusiveMinimum", ">"),
        ("exclusiveMaximum", "<"),
    ):
        if keyword in node:
            checks.append(_bound(node[keyword], op, kind, f"{keyword} at {pointer}"))
    return checks


def _bound(bound: Any, op: str, kind: str, where: str) -> Check:
    """value `op` bound, exactly as Python compares an int or a float with it."""
    from pyspark.sql import functions as F

    if isinstance(bound, bool) or not isinstance(bound, int | float) or not math.isfinite(bound):
        raise Inexact(f"{where} is not a finite number")
    if kind == "integer":
        # An integer compared with a float bound: the nearest integer bound on the right side.
        if isinstance(bound, float) and not bound.is_integer():
            bound, op = (math.ceil(bound), ">=") if op in (">=", ">") else (math.floor(bound), "<=")
        bound = int(bound)
        if not _LONG[0] <= bound <= _LONG[1]:
            raise Inexact(f"{where} is beyond a long")
    elif isinstance(bound, int) and abs(bound) > _EXACT_DOUBLE:
        raise Inexact(f"{where} is an integer a double may not hold")
    else:
        bound = float(bound)
    literal = F.lit(bound)

    def check(value: Column) -> Column:
        if op == ">=":
            return value >= literal
        if op == "<=":
            return value <= literal
        return value > literal if op == ">" else value < literal

    return check


def _count(node: Mapping[str, Any], keyword: str, pointer: str) -> int | None:
    value = node.get(keyword)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Inexact(f"{keyword} at {pointer} is not a count")
    return value


def _one_of_values(values: list[Any], kind: str, pointer: str) -> Check:
    """The value equals one of `values` as jsonschema compares (1 == 1.0, True is no 1)."""
    from pyspark.sql import functions as F

    kept: list[Any] = []
    for value in values:
        if value is None:
            continue
        if (kind == "string" and isinstance(value, str)) or (kind == "boolean" and isinstance(value, bool)):
            kept.append(value)
        elif kind in ("integer", "number") and isinstance(value, int | float) and not isinstance(value, bool):
            if kind == "integer":
                if isinstance(value, float) and not value.is_integer():
                    continue  # no integer equals it
                if not _LONG[0] <= int(value) <= _LONG[1]:
                    continue
                kept.append(int(value))
            else:
                if isinstance(value, int) and abs(value) > _EXACT_DOUBLE:
                    raise Inexact(f"an enum value at {pointer} is an integer a double may not hold")
                if isinstance(value, float) and not math.isfinite(value):
                    continue
                kept.append(float(value))
        elif isinstance(value, dict | list):
            raise Inexact(f"an object or array among the enum values at {pointer}")
    if not kept:
        return lambda value: F.lit(False)
    return lambda value: value.isin(*kept)


def _type_accepts_null(node: Mapping[str, Any]) -> bool:
    declared = node.get("type")
    if declared is None:
        return True
    return declared == "null" or (isinstance(declared, list) and "null" in declared)


def _values_accept_null(node: Mapping[str, Any]) -> bool:
    if "enum" in node and (not isinstance(node["enum"], list) or None not in node["enum"]):
        return False
    return not ("const" in node and node["const"] is not None)


def _is_plain_null(node: Any) -> bool:
    """`{"type": "null"}`, annotations aside."""
    return (
        isinstance(node, Mapping)
        and node.get("type") == "null"
        and all(k == "type" or k in _ANNOTATIONS or k.startswith(_VENDOR_PREFIXES) for k in node)
    )


def _all(checks: list[Check]) -> Check | None:
    if not checks:
        return None
    return lambda value: _and([check(value) for check in checks])


def _and(conditions: list[Column]) -> Column:
    from pyspark.sql import functions as F

    if not conditions:
        return F.lit(True)
    out = conditions[0]
    for condition in conditions[1:]:
        out = out & condition
    return out
