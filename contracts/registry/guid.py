"""Schema GUIDs as Confluent Schema Registry derives them: the MD5 of a schema's content read as a UUID.

Confluent Schema Registry 8 gives every schema a GUID that is not random: the MD5 digest of its
text, references, metadata and rule set, fed in a fixed order, with maps and sets sorted (Java's
order of UTF-16 code units). LocalRegistry derives its GUIDs the same way, so one schema has one
GUID wherever it is stored as the same text (docs/semantics.md §8.1).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

from contracts.model import Metadata, Rule, RuleSet, Schema


def schema_guid(schema: Schema) -> str:
    """The GUID of `schema`'s content (text, references, metadata, rule set), as a UUID string."""
    digest = hashlib.md5(usedforsecurity=False)
    _update(digest, [schema.schema_str])
    for ref in schema.references:
        _update(digest, [ref.name, ref.subject])
        digest.update(ref.version.to_bytes(4, "big", signed=True))
    if schema.metadata is not None:
        digest.update(b"\x01")  # present, even when empty: distinguishes {} from none
        _hash_metadata(digest, schema.metadata)
    if schema.rule_set is not None:
        digest.update(b"\x01")
        _hash_rule_set(digest, schema.rule_set)
    return str(uuid.UUID(bytes=digest.digest()))


def canonical_guid(guid: str) -> str | None:
    """`guid` in the lower-case hyphenated form registries answer with; None when it is no UUID."""
    try:
        return str(uuid.UUID(guid))
    except (ValueError, TypeError, AttributeError):
        return None


def _hash_metadata(digest: hashlib._Hash, metadata: Metadata) -> None:
    for path in _sorted(metadata.tags):
        _update(digest, [path, *_sorted(metadata.tags[path])])
    for key in _sorted(metadata.properties):
        _update(digest, [key, metadata.properties[key]])
    _update(digest, _sorted(metadata.sensitive))


def _hash_rule_set(digest: hashlib._Hash, rule_set: RuleSet) -> None:
    for rule in (*rule_set.migration_rules, *rule_set.domain_rules, *rule_set.encoding_rules):
        _hash_rule(digest, rule)
    if rule_set.enable_at is not None:
        _update(digest, [rule_set.enable_at])


def _hash_rule(digest: hashlib._Hash, rule: Rule) -> None:
    _update(digest, [rule.name, rule.doc, rule.kind.value, rule.mode.value, rule.type])
    _update(digest, _sorted(rule.tags))
    for key in _sorted(rule.params):
        _update(digest, [key, rule.params[key]])
    _update(digest, [rule.expr, rule.on_success, rule.on_failure])
    if rule.disabled:
        digest.update(b"\x01")


def _update(digest: hashlib._Hash, texts: Iterable[str | None]) -> None:
    """Each text's UTF-8 bytes in turn (a lone surrogate as "?", as Java encodes it); None adds nothing."""
    for text in texts:
        if text is not None:
            digest.update(text.encode("utf-8", errors="replace"))


def _sorted(texts: Iterable[str]) -> list[str]:
    """Distinct texts in Java's String order (UTF-16 code units), as its sorted maps and sets hold them."""
    return sorted(set(texts), key=lambda text: text.encode("utf-16-be", errors="surrogatepass"))
