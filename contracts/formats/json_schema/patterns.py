"""The regular expressions of a JSON Schema (`pattern`, `patternProperties`), matched by RE2
(docs/semantics.md §1.5, §3.7), never by Python's backtracking `re`, which `jsonschema` and
`fastjsonschema` use: `^(a+)+$` takes them minutes on 41 characters, RE2 linear time.

A pattern RE2 refuses (a lookaround, a backreference) is a ContractError at load, as in a Go
client, whose validator matches with RE2 too. The validators get RE2 through their own means:
`jsonschema` a validator class whose `pattern`, `patternProperties` and `additionalProperties`
keywords search with RE2; `fastjsonschema` its generated code's table of compiled patterns,
refilled with RE2's. `unevaluatedProperties` next to `patternProperties`, whose `jsonschema` code
matches with `re` alone, is refused at load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from contracts.errors import ContractError
from contracts.formats.regex import compiled, refusal

_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMAS = (
    "additionalProperties",
    "additionalItems",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
)


def schema_patterns(node: Any, pointer: str = "#") -> Iterator[tuple[str, str]]:
    """(JSON pointer, pattern) for every `pattern` and `patternProperties` key of the schema
    `node` and of the schemas inside it."""
    if not isinstance(node, Mapping):
        return
    if isinstance(node.get("pattern"), str):
        yield f"{pointer}/pattern", node["pattern"]
    if isinstance(node.get("patternProperties"), Mapping):
        for key in node["patternProperties"]:
            yield f"{pointer}/patternProperties/{key}", key
    for keyword in _SCHEMA_MAPS:
        children = node.get(keyword)
        if isinstance(children, Mapping):
            for name, child in children.items():
                yield from schema_patterns(child, f"{pointer}/{keyword}/{name}")
    for keyword in (*_SCHEMA_LISTS, *_SCHEMAS):
        child = node.get(keyword)
        if isinstance(child, list):
            for index, item in enumerate(child):
                yield from schema_patterns(item, f"{pointer}/{keyword}/{index}")
        else:
            yield from schema_patterns(child, f"{pointer}/{keyword}")


def check_patterns(document: Any) -> None:
    """ContractError naming the first pattern RE2 refuses, or the pairing of
    `unevaluatedProperties` with `patternProperties`."""
    found = list(schema_patterns(document))
    for pointer, pattern in found:
        refused = refusal(pattern)
        if refused is not None:
            raise ContractError(
                f"the pattern {pattern!r} at {pointer} is not an RE2 pattern ({refused}); patterns are"
                " matched by RE2, in time linear in the text",
                position="schema",
            )
    if any("/patternProperties/" in pointer for pointer, _ in found) and _mentions(
        document, "unevaluatedProperties"
    ):
        raise ContractError(
            "unevaluatedProperties next to patternProperties is not supported: jsonschema matches"
            " those patterns with Python's backtracking regex engine, not RE2",
            position="schema",
        )


def _mentions(node: Any, keyword: str) -> bool:
    if isinstance(node, Mapping):
        return keyword in node or any(_mentions(child, keyword) for child in node.values())
    if isinstance(node, list):
        return any(_mentions(child, keyword) for child in node)
    return False


def re2_validator(base: type) -> type:
    """`base` (a jsonschema validator class) with its regex keywords searching with RE2."""
    from jsonschema.validators import extend

    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    return extend(base, validators=keywords)  # type: ignore[no-any-return]


def on_re2(fast: Callable[[Any], Any], document: Any) -> Callable[[Any], Any] | None:
    """The fastjsonschema validator `fast` with its compiled patterns replaced by RE2's, or None
    when its code does not keep them where fastjsonschema does (a `REGEX_PATTERNS` table)."""
    if not any(True for _ in schema_patterns(document)):
        return fast
    table = getattr(fast, "__globals__", {}).get("REGEX_PATTERNS")
    if not isinstance(table, dict) or not table:
        return None
    for pattern in table:
        table[pattern] = compiled(pattern)
    return fast


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if compiled(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's `additionalProperties`, with the names `patternProperties` covers found by RE2."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [compiled(pattern) for pattern in schema.get("patternProperties", {})]
    extras = {
        name
        for name in instance
        if name not in properties and not any(pattern.search(name) for pattern in patterns)
    }
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            regexes = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {regexes}")
        else:
            names = sorted(extras, key=str)
            verb = "was" if len(names) == 1 else "were"
            listed = ", ".join(repr(name) for name in names)
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")
