"""Hypothesis round trips of ENCRYPT (docs/semantics.md §11): random Avro record schemas whose
PII-tagged fields hold strings and bytes (plain, in nullable unions, arrays and maps, in nested
records) beside untagged fields of any type, and random records for them.

WRITE then READ gives back the records, through the executor's batch evaluator for each DEK
algorithm and end to end on Spark (`serialize` then `deserialize`); the encrypted records are
valid for the schema, every tagged value is replaced by its ciphertext and every untagged field
is left as it was; AES256_SIV gives equal ciphertexts for equal plaintexts, AES-GCM never does.

Field names say what a field is: `plain*` untagged (any type, nothing tagged inside), `pii*`
tagged PII (strings and bytes only, what ENCRYPT can encrypt), `nested*` a record of such fields
(itself tagged or not: a record's fields keep their own tags).
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import fastavro
import fastavro.validation
import pyarrow as pa
import pytest
from avro_strategies import SchemaBuilder, fastavro_round_trip, holds_list_of_nulls, values_for
from encrypt_oracle import encrypt_rule, rule_evaluator
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.avro import parse_schema, records_to_arrow, spark_to_avro_value
from contracts.model import RuleMode
from executors.encrypt import EncryptExecutor
from executors.protocol import BatchEvaluator

SUBJECT = "people-value"
SECRET = "property-secret"
ALGORITHMS = ["AES256_GCM", "AES128_GCM", "AES256_SIV"]
ROW = "row"
"""A pass-through column carrying each record's index on Spark."""

# Ciphertext bytes beyond the plaintext's: AES-GCM's nonce and tag, AES-SIV's synthetic IV.
OVERHEAD = {"AES256_GCM": 28, "AES128_GCM": 28, "AES256_SIV": 16}
SECRET_LEAVES: list[Any] = [
    "string",
    "bytes",
    ["null", "string"],
    ["string", "null"],
    ["null", "bytes"],
    ["null", "string", "bytes"],
]
TAGGED = {"confluent:tags": ["PII"]}
SLOW_EXAMPLES = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]


class _Untagged(SchemaBuilder):
    """SchemaBuilder's random types with no tags anywhere: the fields ENCRYPT must leave alone."""

    def tags(self) -> dict[str, Any]:
        return {}


class TaggedSchemas:
    """Draws record schemas mixing `plain*`, `pii*` and `nested*` fields (module docstring).

    The untagged types come from one `_Untagged` builder, whose named types are the only ones it
    reuses; the records drawn here are named `Person<n>`, so an untagged field never reuses a
    record holding tagged fields."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.plain = _Untagged(draw)
        self.records = 0

    def record(self, depth: int) -> dict[str, Any]:
        self.records += 1
        name = f"Person{self.records}"
        draw = self.draw
        fields = [
            {"name": f"plain{i}", "type": self.plain.any(depth + 1)} for i in range(draw(st.integers(0, 3)))
        ]
        for i in range(draw(st.integers(0, 2)) if depth < 2 else 0):
            nested: Any = self.record(depth + 1)
            if draw(st.booleans()):
                nested = ["null", nested]
            fields.append({"name": f"nested{i}", "type": nested, **(TAGGED if draw(st.booleans()) else {})})
        # Tagged fields anywhere among the others, which stay in order: a named type is defined
        # where it first appears, before the fields that reuse it.
        for i in range(draw(st.integers(0 if depth else 1, 3))):
            tagged = {"name": f"pii{i}", "type": self.secret(), **TAGGED}
            fields.insert(draw(st.integers(0, len(fields))), tagged)
        return {"type": "record", "name": name, "fields": fields}

    def secret(self) -> Any:
        """A type of strings and bytes only: a leaf, or an array or map of leaves (maybe nullable)."""
        leaf = self.draw(st.sampled_from(SECRET_LEAVES))
        shape = self.draw(st.sampled_from(["leaf", "leaf", "array", "map", "nullable array"]))
        if shape == "leaf":
            return leaf
        container = {"type": "array", "items": leaf} if "array" in shape else {"type": "map", "values": leaf}
        return ["null", container] if shape.startswith("nullable") else container


@st.composite
def tagged_records(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    """A random schema of `TaggedSchemas` (as text) and 1 to 8 records valid for it, as a fastavro
    reader gives them back (its choice of union branch, float32 rounding)."""
    text = json.dumps(TaggedSchemas(draw).record(0))
    parsed = parse_schema(text)
    records = draw(st.lists(values_for(parsed, parsed["__named_schemas"]), min_size=1, max_size=8))
    return text, fastavro_round_trip(records, parsed)


def _payload(schema: str, algorithm: str) -> dict[str, Any]:
    return {"schemaType": "AVRO", "schema": schema, "ruleSet": {"domainRules": [encrypt_rule(algorithm)]}}


def _evaluators(schema: str, algorithm: str) -> tuple[BatchEvaluator, BatchEvaluator, BatchEvaluator]:
    """The rule's WRITE evaluator twice (two workers sharing the DEK) and its READ evaluator,
    compiled by EncryptExecutor on a fresh registry, as the engine compiles them."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(schema, algorithm)))
    write, other_write, read = (
        rule_evaluator(registry, mode, EncryptExecutor(), SECRET)
        for mode in (RuleMode.WRITE, RuleMode.WRITE, RuleMode.READ)
    )
    return write, other_write, read


def _passed(outcomes: Any) -> list[Any]:
    assert all(o.passed for o in outcomes), [o.reason for o in outcomes if not o.passed]
    return [o.record for o in outcomes]


def _tagged_pairs(plain: Any, encrypted: Any) -> list[tuple[Any, Any]]:
    """The tagged values of a record and of its encryption, in pairs; asserts on the way that every
    `plain*` field is unchanged and that the shape (nulls, lengths, map keys) is kept."""
    if plain is None:
        assert encrypted is None
        return []
    assert isinstance(encrypted, dict) and encrypted.keys() == plain.keys()
    pairs: list[tuple[Any, Any]] = []
    for name, value in plain.items():
        if name.startswith("plain"):
            assert encrypted[name] == value, name
        elif name.startswith("pii"):
            pairs += _leaf_pairs(value, encrypted[name])
        else:
            pairs += _tagged_pairs(value, encrypted[name])
    return pairs


def _leaf_pairs(plain: Any, encrypted: Any) -> list[tuple[Any, Any]]:
    """The strings and bytes of a tagged field's value (a leaf, a list or a map of leaves)."""
    if isinstance(plain, list):
        assert isinstance(encrypted, list) and len(encrypted) == len(plain)
        return [pair for p, e in zip(plain, encrypted, strict=True) for pair in _leaf_pairs(p, e)]
    if isinstance(plain, dict):
        assert isinstance(encrypted, dict) and list(encrypted) == list(plain)
        return [pair for key in plain for pair in _leaf_pairs(plain[key], encrypted[key])]
    if plain is None:
        assert encrypted is None
        return []
    return [(plain, encrypted)]


def _ciphertext(leaf: str | bytes) -> bytes:
    """A tagged leaf's ciphertext: a string holds it as base64, bytes as they are."""
    return base64.b64decode(leaf, validate=True) if isinstance(leaf, str) else leaf


def _assert_encrypted(records: list[Any], encrypted: list[Any], parsed: Any, algorithm: str) -> list[Any]:
    """Checks the encrypted records against the plain ones; returns their tagged pairs."""
    for record in encrypted:
        fastavro.validation.validate(record, parsed, raise_errors=True)
    pairs = [pair for p, e in zip(records, encrypted, strict=True) for pair in _tagged_pairs(p, e)]
    for plain, cipher in pairs:
        assert type(cipher) is type(plain)
        plaintext = plain.encode("utf-8") if isinstance(plain, str) else plain
        assert len(_ciphertext(cipher)) == len(plaintext) + OVERHEAD[algorithm]
    return pairs


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=SLOW_EXAMPLES)
@given(case=tagged_records())
def test_the_batch_evaluator_encrypts_tagged_fields_and_decrypts_them_back(
    algorithm: str, case: tuple[str, list[dict[str, Any]]]
) -> None:
    text, records = case
    parsed = parse_schema(text)
    write, other_write, read = _evaluators(text, algorithm)

    encrypted = _passed(write(records))
    pairs = _assert_encrypted(records, encrypted, parsed, algorithm)
    assert _passed(read(encrypted)) == records

    again = _passed(other_write(records))
    assert _passed(read(again)) == records
    if algorithm == "AES256_SIV":
        assert again == encrypted  # deterministic: equal plaintexts, equal ciphertexts
    else:
        repeated = [cipher for _, cipher in _assert_encrypted(records, again, parsed, algorithm)]
        assert all(first != second for (_, first), second in zip(pairs, repeated, strict=True))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=examples(3), deadline=None, suppress_health_check=SLOW_EXAMPLES)
@given(case=tagged_records())
def test_serialize_encrypts_and_deserialize_decrypts_on_spark(
    spark: Any, tmp_path_factory: Any, algorithm: str, case: tuple[str, list[dict[str, Any]]]
) -> None:
    """Each record is written twice (rows i and n + i): AES256_SIV frames them identically, AES-GCM
    differently wherever a tagged value is set."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    text, records = case
    # pyspark's createDataFrame cannot build a list of nulls (tests/support/avro_strategies.py).
    assume(not holds_list_of_nulls(json.loads(text)))
    parsed = parse_schema(text)
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(text, algorithm)))
    sink = LocalTopicSink(tmp_path_factory.mktemp("dlq"))
    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, dlq_sink=sink)
    names = contract.spark_schema.fieldNames()
    doubled = records + records
    rows = pa.Table.from_batches([records_to_arrow(doubled, parsed)])
    rows = rows.append_column(ROW, pa.array(range(len(doubled)), pa.int32()))
    df = spark.createDataFrame(
        rows, StructType([*contract.spark_schema.fields, StructField(ROW, IntegerType(), False)])
    )

    framed = contract.serialize(df)
    frames = {row[ROW]: bytes(row["value"]) for row in framed.collect()}
    assert sorted(frames) == list(range(len(doubled)))
    encrypted = [fastavro.schemaless_reader(io.BytesIO(frames[i][5:]), parsed) for i in range(len(doubled))]
    pairs = _assert_encrypted(doubled, encrypted, parsed, algorithm)
    n = len(records)
    if algorithm == "AES256_SIV":
        assert all(frames[i] == frames[n + i] for i in range(n))
    else:
        half = len(pairs) // 2
        assert all(
            first != second for (_, first), (_, second) in zip(pairs[:half], pairs[half:], strict=True)
        )

    back = contract.deserialize(framed, key_col=None)
    read = {
        row[ROW]: spark_to_avro_value({name: row[name] for name in names}, parsed) for row in back.collect()
    }
    assert read == dict(enumerate(doubled))
    assert sink.topics() == []
