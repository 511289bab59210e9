"""What LocalRegistry stores for a schema it is given: the subject config's metadata and rule set
merged in, rules written out in full, the text normalized when asked, and the identity that makes
two registrations one schema (docs/semantics.md §1)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from contracts.model import Metadata, Rule, RuleSet, Schema, merge_metadata, merge_rule_sets

_PRIMITIVE_NAMES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def canonical_json(value: Any) -> str:
    """`value` as JSON with sorted keys and no whitespace: equal values, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_identity(schema: Schema) -> str:
    """What makes two registrations "the same schema": text, type, references, metadata, ruleSet."""
    return canonical_json(
        [
            schema.schema_type,
            schema.schema_str,
            [r.to_dict() for r in schema.references],
            None if schema.metadata is None else schema.metadata.to_dict(),
            None if schema.rule_set is None else schema.rule_set.to_dict(),
        ]
    )


def as_stored(schema: Schema) -> Schema:
    """Rules with `kind` and `mode` written out, as the registry stores them (docs/semantics.md §1)."""
    rules = schema.rule_set
    if rules is None:
        return schema
    stored = dataclasses.replace(
        rules,
        migration_rules=tuple(_explicit_rule(r) for r in rules.migration_rules),
        domain_rules=tuple(_explicit_rule(r) for r in rules.domain_rules),
        encoding_rules=tuple(_explicit_rule(r) for r in rules.encoding_rules),
    )
    return schema.with_changes(rule_set=stored)


def _explicit_rule(rule: Rule) -> Rule:
    return dataclasses.replace(rule, present=rule.present | {"kind", "mode"})


def config_metadata(config: Mapping[str, Any], key: str) -> Metadata | None:
    """The config's `defaultMetadata` or `overrideMetadata` (`key`), None when unset."""
    value = config.get(key)
    return None if value is None else Metadata.from_dict(value)


def config_rule_set(config: Mapping[str, Any], key: str) -> RuleSet | None:
    """The config's `defaultRuleSet` or `overrideRuleSet` (`key`), None when unset."""
    value = config.get(key)
    return None if value is None else RuleSet.from_dict(value)


def effective(schema: Schema, config: Mapping[str, Any], previous: Schema | None) -> Schema:
    """The schema with config defaults under and overrides over its own metadata and rule set; a
    schema that gives none keeps the previous version's (docs/semantics.md §1, Confluent 7.4+)."""
    own_metadata = schema.metadata
    own_rules = schema.rule_set
    if previous is not None:
        own_metadata = previous.metadata if own_metadata is None else own_metadata
        own_rules = previous.rule_set if own_rules is None else own_rules
    metadata = _layered(
        merge_metadata,
        config_metadata(config, "defaultMetadata"),
        own_metadata,
        config_metadata(config, "overrideMetadata"),
    )
    rule_set = _layered(
        merge_rule_sets,
        config_rule_set(config, "defaultRuleSet"),
        own_rules,
        config_rule_set(config, "overrideRuleSet"),
    )
    return as_stored(schema.with_changes(metadata=metadata, rule_set=rule_set))


def _layered(merge: Callable[..., Any], default: Any, own: Any, override: Any) -> Any:
    """`own` untouched when the config has neither layer, else default < own < override."""
    if default is None and override is None:
        return own
    return merge(default, own, override)


def normalized(schema: Schema) -> Schema:
    """The schema with its text normalized as `normalize` asks: an Avro schema's canonical text
    (full names, no namespace keys), a JSON Schema's canonical JSON; other types untouched."""
    kind = schema.schema_type.upper()
    if kind not in ("AVRO", "JSON"):
        return schema
    document = json.loads(schema.schema_str)
    text = canonical_json(_normalize_node(document, "")) if kind == "AVRO" else canonical_json(document)
    return schema.with_changes(schema_str=text)


def _normalize_node(node: Any, namespace: str) -> Any:
    if isinstance(node, list):
        return [_normalize_node(branch, namespace) for branch in node]
    if isinstance(node, str):
        return _full_name(node, namespace) if node not in _PRIMITIVE_NAMES else node
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "namespace"}
    if node.get("type") in ("record", "error", "enum", "fixed"):
        full = _full_name(node["name"], node.get("namespace", namespace))
        out["name"] = full
        namespace = full.rpartition(".")[0]
    if "fields" in node:
        out["fields"] = [{**f, "type": _normalize_node(f["type"], namespace)} for f in node["fields"]]
    for key in ("items", "values"):
        if key in node:
            out[key] = _normalize_node(node[key], namespace)
    if isinstance(node.get("type"), list | dict):
        out["type"] = _normalize_node(node["type"], namespace)
    return out


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"
