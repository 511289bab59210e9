"""Redacting encrypted fields in WRITE-side DLQ values, as the reference's DLQ action does, and
their values in the reasons of rules that saw them in plaintext.

A record a WRITE rule rejects goes to its dead-letter topic as it arrived, before any transform:
with its plaintext. Every string or bytes field an ENCRYPT rule of the version tags is written as
"<REDACTED>" instead (docs/semantics.md §7.3, §11.4), unless the rule config's
`dlq.redact.rule.types` says otherwise. The reference takes the union of the ENCRYPT rules' tags;
an ENCRYPT rule without tags encrypts every string and bytes field, so here it redacts them all.
The tagged fields are found by the record's format's field walk (`FieldWalking.field_walk`), the
one ENCRYPT itself walks; a format without one has nothing to redact.
A rule's failure reason may quote the record it evaluated (a CEL error quotes the value it could
not convert): where that record held those fields in plaintext (a WRITE rule before encryption, a
READ rule after decryption), each of their values is "<REDACTED>" in the reason too (`scrub`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.bounded import BoundedCache
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

    def scrub(self, record: Any, text: str) -> str:
        """`text` (a reason about `record`) with every value those fields hold in `record`, in each
        form a message quotes it (as it is, escaped as Python and JSON print it, bytes as their
        repr and as text), written as "<REDACTED>"."""
        values: list[Any] = []
        if record is not None:
            _walk(self).collect(record, values)
        for quoted in sorted({form for value in values for form in _quoted(value)}, key=len, reverse=True):
            text = text.replace(quoted, REDACTED)
        return text


class _Collector:
    """One Redaction's walk gathering the values of the fields it redacts, built once per process."""

    def __init__(self, redaction: Redaction) -> None:
        self.found: list[Any] | None = None
        self.walk = redaction.schema_format.field_walk(
            redaction.schema, redaction.metadata_tags, redaction.tags, self._visit
        )
        self.lock = threading.Lock()

    def collect(self, record: Any, into: list[Any]) -> None:
        """Append to `into` the values of the record's redacted fields."""
        with self.lock:
            self.found = into
            try:
                self.walk(record)
            finally:
                self.found = None

    def _visit(self, walked: WalkedField, value: Any) -> Any:
        if value is not None and walked.type_name in ("STRING", "BYTES") and self.found is not None:
            self.found.append(value)
        return value


_COLLECTORS: BoundedCache[int, tuple[Redaction, _Collector]] = BoundedCache(64)
"""Per process: each redaction's collector (keyed by id, holding the redaction)."""


def _walk(redaction: Redaction) -> _Collector:
    hit = _COLLECTORS.get(id(redaction))
    if hit is None or hit[0] is not redaction:
        hit = _COLLECTORS.put(id(redaction), (redaction, _Collector(redaction)))
    return hit[1]


def _quoted(value: Any) -> set[str]:
    """The forms a reason may quote a string or bytes value in (empty values left out)."""
    if isinstance(value, bytes | bytearray):
        data = bytes(value)
        forms = {repr(data)[2:-1], data.decode("latin-1"), data.decode("utf-8", "replace")}
    else:
        text = str(value)
        forms = {text, repr(text)[1:-1], json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    return {form for form in forms if form}


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
