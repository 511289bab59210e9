"""JSON Schema compatibility: can a reader schema read every document a writer schema accepts, decided
as Confluent Schema Registry decides it for JSON subjects.

The decision is the registry's JSON Schema diff (`io.confluent.kafka.schemaregistry.json.diff`, default
STRICT policy): writer and reader schemas are walked together, each difference gets a type (`Change`,
named as Confluent's `Difference.Type`) and a JSON path, and the reader can read the writer when every
difference is one of `COMPATIBLE_CHANGES`. Schemas are read as the registry's loader (Everit; draft 7
unless `$schema` names draft 4 or 6) reads them: a `type` list is an anyOf, several kinds of keyword in
one object an allOf, and a `$ref` within the document (`#/definitions/..`, `#/$defs/..`, any JSON
pointer) stands for its target; recursive references end as the registry's do (a pair of schemas met
again while being compared is assumed compatible, then re-checked until the verdicts settle).
BACKWARD means the new schema reads the old; FORWARD the old reads the new; FULL both.

As in the registry, some keywords are never compared: format, contains, propertyNames, if/then/else,
readOnly/writeOnly, and the schemas of patternProperties (these only decide whether an added or removed
property is covered). Where the registry's diff slips, this module does what was meant: a `$ref` to a
`$ref` is followed to its end (the registry follows one step), and a lower exclusiveMaximum is compared
with the other exclusiveMaximum (the registry reads `maximum` there).

Not supported, each a ValueError: `$ref` to another document or by `$id`/anchor, and the keywords only
JSON Schema 2019-09/2020-12 have (prefixItems, unevaluatedProperties, ...) in a schema whose `$schema`
names those drafts; the other keywords of such schemas are read as in draft 7. Also out of scope: the
registry's LENIENT policy and its other knobs.
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.registry.compatibility import Compatibility
from contracts.registry.json_compatibility.changes import COMPATIBLE_CHANGES, Change, Difference, JsonSchema
from contracts.registry.json_compatibility.documents import Document
from contracts.registry.json_compatibility.kinds import differences


def schema_differences(writer: JsonSchema, reader: JsonSchema) -> list[Difference]:
    """Every difference from `writer` (the schema data was written with) to `reader`, compatible or not;
    ValueError when either is not a schema this module reads."""
    return differences(Document(writer, "writer schema").root, Document(reader, "reader schema").root)


def _reader_errors(reader: Document, writer: Document) -> list[str]:
    """Why `reader` cannot read data written with `writer` (path-prefixed messages); empty when it can."""
    return [str(d) for d in differences(writer.root, reader.root) if d.change not in COMPATIBLE_CHANGES]


def json_schema_compatibility_errors(
    level: Compatibility | str, new: JsonSchema, previous: Sequence[JsonSchema]
) -> list[str]:
    """Why `new` breaks `level` against `previous` (oldest first); only the newest unless transitive.
    ValueError, naming the schema and the JSON pointer, when one is not a schema this module reads."""
    level = Compatibility(level)
    if level is Compatibility.NONE or not previous:
        return []
    first = 0 if level.transitive else len(previous) - 1
    new_document = Document(new, "new schema")
    errors: list[str] = []
    for index in reversed(range(first, len(previous))):
        old = Document(previous[index], f"previous schema {index + 1} of {len(previous)}")
        if level.backward:
            errors.extend(f"new schema cannot read old: {e}" for e in _reader_errors(new_document, old))
        if level.forward:
            errors.extend(f"old schema cannot read new: {e}" for e in _reader_errors(old, new_document))
    return errors


__all__ = [
    "COMPATIBLE_CHANGES",
    "Change",
    "Difference",
    "JsonSchema",
    "json_schema_compatibility_errors",
    "schema_differences",
]
