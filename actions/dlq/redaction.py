"""Redacting encrypted fields in WRITE-side DLQ values, as the reference's DLQ action does.

A record a WRITE rule rejects goes to its dead-letter topic as it arrived, before any transform:
with its plaintext. Every string or bytes field an ENCRYPT rule of the version tags is written as
"<REDACTED>" instead (docs/semantics.md §7.3, §11.4), unless the rule config's
`dlq.redact.rule.types` says otherwise. The reference takes the union of the ENCRYPT rules' tags;
an ENCRYPT rule without tags encrypts every string and bytes field, so here it redacts them all.
The tagged fields are found by the record's format's field walk (`FieldWalking.field_walk`), the
one ENCRYPT itself walks; a format without one has nothing to redact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.formats.fields import FieldWalking, WalkedField, field_walking
from contracts.formats.protocol import SchemaFormat
from contracts.model import Rule

REDACTED = "<REDACTED>"
REDACTED_BYTES = REDACTED.encode("utf-8")
REDACT_RULE_TYPES = "dlq.redact.rule.types"
"""The rule config key naming, comma-separated, the rule types whose tagged fields are redacted, as
the reference's DLQ action reads it; "" redacts nothing."""
DEFAULT_REDACT_RULE_TYPES = "ENCRYPT,ENCRYPT_PAYLOAD"


@dataclass(frozen=True)
class Redaction:
    """Replaces the tagged string and bytes fields of records of one schema; picklable."""

    tags: frozenset[str]
    """The tags whose fields are redacted; empty: every string and bytes field."""
    schema: Any = field(repr=False)
    schema_format: FieldWalking = field(repr=False)
    metadata_tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __call__(self, records: Sequence[Any]) -> list[Any]:
        """The records with those fields redacted (copies; None stays None)."""
        walk = self.schema_format.field_walk(self.schema, self.metadata_tags, self.tags, _redacted)
        return [None if record is None else walk(record) for record in records]


def redaction_for(
    rules: Sequence[Rule],
    schema: Any,
    schema_format: SchemaFormat,
    metadata_tags: Mapping[str, tuple[str, ...]],
    config: Mapping[str, str],
) -> Redaction | None:
    """The redaction the version's rules of the types `config` names (`dlq.redact.rule.types`,
    ENCRYPT and ENCRYPT_PAYLOAD by default) call for, whatever their mode, disabled or not, as the
    reference looks at the whole list; None when there are none, or when the format walks no fields
    (its records have no tagged fields to find)."""
    walking = field_walking(schema_format)
    if walking is None:
        return None
    named = config.get(REDACT_RULE_TYPES, DEFAULT_REDACT_RULE_TYPES)
    types = {name.strip().upper() for name in named.split(",") if name.strip()}
    encrypting = [rule for rule in rules if rule.type.upper() in types]
    if not encrypting:
        return None
    every_field = any(not rule.tags for rule in encrypting)
    tags = frozenset() if every_field else frozenset(tag for rule in encrypting for tag in rule.tags)
    return Redaction(tags, schema, walking, dict(metadata_tags))


def _redacted(field: WalkedField, value: Any) -> Any:
    if value is None:
        return None
    if field.type_name == "STRING":
        return REDACTED
    if field.type_name == "BYTES":
        return REDACTED_BYTES
    return value
