"""Hypothesis strategies for random JSON Schemas in the mapped subset (docs/semantics.md §1.5) and
records valid for them, shared by the JSON Schema format and CEL_FIELD tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
SCALARS = st.sampled_from(
    [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"enum": ["A", "B"]}]
)


def nullable(schema: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """The schema, or the same accepting null (as a type list or a oneOf with null)."""

    def widen(node: dict[str, Any], how: int) -> dict[str, Any]:
        if how == 0 or "type" not in node or not isinstance(node["type"], str):
            return node
        if how == 1:
            return {**node, "type": [node["type"], "null"]}
        return {"oneOf": [{"type": "null"}, node]}

    return st.builds(widen, schema, st.integers(0, 2))


def objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    def build(properties: dict[str, Any], required: list[bool]) -> dict[str, Any]:
        names = [name for name, keep in zip(properties, required, strict=False) if keep]
        return {"type": "object", "properties": properties, "required": names}

    properties = st.dictionaries(NAMES, nullable(children), min_size=1, max_size=4)
    return st.builds(build, properties, st.lists(st.booleans(), min_size=4, max_size=4))


def containers(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, nullable(children)),
        st.builds(lambda values: {"type": "object", "additionalProperties": values}, nullable(children)),
        objects(children),
    )


SCHEMAS = objects(st.recursive(SCALARS, containers, max_leaves=6))


def values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for `schema` (one of the shapes SCHEMAS draws)."""
    if "oneOf" in schema:
        return st.one_of(st.none(), values(schema["oneOf"][1]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of(st.none(), values({**schema, "type": kind[0]}))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        return st.text(max_size=8)
    if kind == "integer":
        return st.integers(-(2**63), 2**63 - 1)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(values(schema["items"]), max_size=3)
    if "additionalProperties" in schema:
        return st.dictionaries(st.text(max_size=4), values(schema["additionalProperties"]), max_size=3)
    required = {
        name: values(node) for name, node in schema["properties"].items() if name in schema["required"]
    }
    optional = {name: values(node) for name, node in schema["properties"].items() if name not in required}
    return st.fixed_dictionaries(required, optional=optional)


@st.composite
def schemas_and_records(draw: st.DrawFn, count: int = 3) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    schema = draw(SCHEMAS)
    return schema, draw(st.lists(values(schema), min_size=1, max_size=count))
