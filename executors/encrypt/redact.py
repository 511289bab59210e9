"""Redacting encrypted fields in WRITE-side DLQ values, as the reference's DLQ action does.

A record a WRITE rule rejects goes to its dead-letter topic as it arrived, before any transform:
with its plaintext. Every string or bytes field an ENCRYPT rule of the version tags is written as
"<REDACTED>" instead (docs/semantics.md §7.3, §11.4), unless the rule config's
`dlq.redact.rule.types` says otherwise. The reference takes the union of the ENCRYPT rules' tags;
an ENCRYPT rule without tags encrypts every string and bytes field, so here it redacts them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.model import Rule
from executors.cel_field.schema import Leaf
from executors.encrypt.walk import field_walk

REDACTED = "<REDACTED>"
REDACTED_BYTES = REDACTED.encode("utf-8")
REDACT_RULE_TYPES = "dlq.redact.rule.types"
"""The rule config key naming, comma-separated, the rule types whose tagged fields are redacted, as
the reference's DLQ action reads it; "" redacts nothing."""
DEFAULT_REDACT_RULE_TYPES = "ENCRYPT,ENCRYPT_PAYLOAD"


@dataclass(frozen=True)
class Redaction:
    """Replaces the tagged string and bytes fields of records of one Avro or JSON schema; picklable."""

    tags: frozenset[str]
    """The tags whose fields are redacted; empty: every string and bytes field."""
    schema: Any = field(repr=False)
    metadata_tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __call__(self, records: Sequence[Any]) -> list[Any]:
        """The records with those fields redacted (copies; None stays None)."""
        walk = field_walk(self.schema, self.metadata_tags, self.tags, _redacted)
        return [None if record is None else walk(record) for record in records]


def redaction_for(
    rules: Sequence[Rule],
    schema: Any,
    metadata_tags: Mapping[str, tuple[str, ...]],
    config: Mapping[str, str],
) -> Redaction | None:
    """The redaction the version's rules of the types `config` names (`dlq.redact.rule.types`,
    ENCRYPT and ENCRYPT_PAYLOAD by default) call for, whatever their mode, disabled or not, as the
    reference looks at the whole list; None when there are none."""
    named = config.get(REDACT_RULE_TYPES, DEFAULT_REDACT_RULE_TYPES)
    types = {name.strip().upper() for name in named.split(",") if name.strip()}
    encrypting = [rule for rule in rules if rule.type.upper() in types]
    if not encrypting:
        return None
    every_field = any(not rule.tags for rule in encrypting)
    tags = frozenset() if every_field else frozenset(tag for rule in encrypting for tag in rule.tags)
    return Redaction(tags, schema, dict(metadata_tags))


def _redacted(leaf: Leaf, _field: Any, value: Any) -> Any:
    if value is None:
        return None
    if leaf.type_name == "STRING":
        return REDACTED
    if leaf.type_name == "BYTES":
        return REDACTED_BYTES
    return value
