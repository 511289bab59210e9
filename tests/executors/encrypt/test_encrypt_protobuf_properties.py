"""Hypothesis round trips of ENCRYPT on Protobuf records (docs/semantics.md §11): random proto3
files whose record message mixes `plain*` fields of any kind (scalars, repeated, maps, `optional`)
with `pii*` ones tagged `(confluent.field_meta).tags = "PII"` (strings and bytes: singular,
repeated, `optional`, a oneof member), and `nested*` messages of the same (singular or repeated,
themselves tagged or not: a message's fields keep their own tags), and random records for them.

WRITE then READ gives back the records, through the executor's batch evaluator for each DEK
algorithm and end to end on Spark (`serialize` then `deserialize`); the encrypted records encode
as the message, every tagged value set is replaced by its ciphertext (a string by its base64),
unset ones stay unset, and every untagged field is left as it was.
"""

from __future__ import annotations

import base64
from typing import Any

import pyarrow as pa
from encrypt_oracle import encrypt_rule, rule_evaluator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts import DataContract, LocalRegistry, Schema
from contracts.formats.avro import arrow_type
from contracts.formats.protobuf import ProtobufFormat
from contracts.model import RuleMode
from executors.encrypt import EncryptExecutor
from executors.protocol import BatchEvaluator

SUBJECT = "random-value"
SECRET = "property-secret"
ALGORITHMS = ["AES256_GCM", "AES128_GCM", "AES256_SIV"]
OVERHEAD = {"AES256_GCM": 28, "AES128_GCM": 28, "AES256_SIV": 16}
"""Ciphertext bytes beyond the plaintext's: AES-GCM's nonce and tag, AES-SIV's synthetic IV."""
FORMAT = ProtobufFormat()
TAG = ' [(confluent.field_meta).tags = "PII"]'
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
BYTES = st.binary(max_size=6)
PLAIN = {
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
    "double": st.floats(allow_nan=False),
    "string": TEXT,
    "bytes": BYTES,
}
SECRET_LEAVES = {"string": TEXT, "bytes": BYTES}
SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]


class _Field:
    """One field of a drawn message: its declaration and how to draw its value (absent: unset)."""

    def __init__(self, line: str, values: st.SearchStrategy[Any], presence: bool = False) -> None:
        self.line = line
        self.values = values
        self.presence = presence  # unset is an absent key (optional scalars, oneof members)


class TaggedMessages:
    """Draws the messages of one proto3 file (module docstring): `Msg1` the record, the others
    nested in it, each declared at the top level of the file."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.messages: list[str] = []

    def message(self, depth: int) -> tuple[str, st.SearchStrategy[dict[str, Any]]]:
        """A message's name and the strategy for its records."""
        draw = self.draw
        name = f"Msg{len(self.messages) + 1}"
        self.messages.append("")
        at = len(self.messages) - 1
        fields: list[tuple[str, _Field]] = []
        for i in range(draw(st.integers(1 if depth else 0, 3))):  # a nested message is never empty
            fields.append((f"plain{i}", self._plain()))
        for i in range(draw(st.integers(0, 2)) if depth < 2 else 0):
            fields.append((f"nested{i}", self._nested(depth)))
        for i in range(draw(st.integers(0 if depth else 1, 3))):
            fields.insert(draw(st.integers(0, len(fields))), (f"pii{i}", self._secret()))
        oneof = draw(st.booleans())
        lines = [f"  {field.line} {field_name} = {n}{field_name.startswith('pii') * TAG};"
                 for n, (field_name, field) in enumerate(fields, 1)]  # fmt: skip
        if oneof:  # a tagged string or an untagged int, or neither
            n = len(fields)
            lines.append(f"  oneof choice {{ string piiOne = {n + 1}{TAG}; int32 plainOne = {n + 2}; }}")
        self.messages[at] = f"message {name} {{\n" + "\n".join(lines) + "\n}\n"
        return name, _records(fields, oneof)

    def _plain(self) -> _Field:
        kind = self.draw(st.sampled_from([*PLAIN, "repeated", "map", "optional"]))
        if kind == "repeated":
            scalar = self.draw(st.sampled_from(list(PLAIN)))
            return _Field(f"repeated {scalar}", st.lists(PLAIN[scalar], max_size=3))
        if kind == "map":
            return _Field("map<string, int64>", st.dictionaries(TEXT, PLAIN["int64"], max_size=2))
        if kind == "optional":
            scalar = self.draw(st.sampled_from(list(PLAIN)))
            return _Field(f"optional {scalar}", PLAIN[scalar], presence=True)
        return _Field(kind, PLAIN[kind])

    def _secret(self) -> _Field:
        leaf = self.draw(st.sampled_from(list(SECRET_LEAVES)))
        shape = self.draw(st.sampled_from(["", "", "repeated ", "optional "]))
        values = st.lists(SECRET_LEAVES[leaf], max_size=3) if shape == "repeated " else SECRET_LEAVES[leaf]
        return _Field(f"{shape}{leaf}", values, presence=shape == "optional ")

    def _nested(self, depth: int) -> _Field:
        name, records = self.message(depth + 1)
        if self.draw(st.booleans()):
            return _Field(f"repeated {name}", st.lists(records, max_size=2))
        return _Field(name, st.none() | records)

    def text(self) -> str:
        head = 'syntax = "proto3";\npackage rnd;\nimport "confluent/meta.proto";\n'
        return head + "".join(self.messages)


def _records(fields: list[tuple[str, _Field]], oneof: bool) -> st.SearchStrategy[dict[str, Any]]:
    required = {name: field.values for name, field in fields if not field.presence}
    optional = {name: field.values for name, field in fields if field.presence}
    base = st.fixed_dictionaries(required, optional=optional)
    if not oneof:
        return base
    choice = (
        st.just({})
        | st.builds(lambda v: {"piiOne": v}, TEXT)
        | st.builds(lambda v: {"plainOne": v}, PLAIN["int32"])
    )
    return st.builds(lambda record, chosen: {**record, **chosen}, base, choice)


@st.composite
def tagged_messages(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    """A random file of `TaggedMessages` (as text) and 1 to 6 records of its first message, as
    the format reads them back."""
    messages = TaggedMessages(draw)
    _, records = messages.message(0)
    text = messages.text()
    parsed = FORMAT.parse(text, ())
    drawn = draw(st.lists(records, min_size=1, max_size=6))
    return text, [FORMAT.decode(FORMAT.encode(record, parsed), parsed, None) for record in drawn]


def _payload(text: str, algorithm: str) -> dict[str, Any]:
    return {"schemaType": "PROTOBUF", "schema": text, "ruleSet": {"domainRules": [encrypt_rule(algorithm)]}}


def _evaluators(text: str, algorithm: str) -> tuple[BatchEvaluator, BatchEvaluator]:
    """The rule's WRITE and READ evaluators, compiled on a fresh registry as the engine does."""
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(text, algorithm)))
    return (
        rule_evaluator(registry, RuleMode.WRITE, EncryptExecutor(), SECRET, SUBJECT),
        rule_evaluator(registry, RuleMode.READ, EncryptExecutor(), SECRET, SUBJECT),
    )


def _passed(outcomes: Any) -> list[Any]:
    assert all(o.passed for o in outcomes), [o.reason for o in outcomes if not o.passed]
    return [o.record for o in outcomes]


def _assert_encrypted(plain: Any, encrypted: Any, algorithm: str) -> None:
    """Every `plain*` field as it was, every `pii*` value its ciphertext, presence kept."""
    if isinstance(plain, list):
        assert isinstance(encrypted, list) and len(encrypted) == len(plain)
        for p, e in zip(plain, encrypted, strict=True):
            _assert_encrypted(p, e, algorithm)
        return
    if plain is None:
        assert encrypted is None
        return
    assert isinstance(encrypted, dict) and encrypted.keys() == plain.keys()
    for name, value in plain.items():
        if name.startswith("plain"):
            assert encrypted[name] == value, name
        elif name.startswith("pii"):
            for leaf, cipher in zip(*_leaves(value, encrypted[name]), strict=True):
                assert type(cipher) is type(leaf)
                data = base64.b64decode(cipher, validate=True) if isinstance(cipher, str) else cipher
                size = len(leaf.encode("utf-8") if isinstance(leaf, str) else leaf)
                assert len(data) == size + OVERHEAD[algorithm]
        else:
            _assert_encrypted(value, encrypted[name], algorithm)


def _leaves(plain: Any, encrypted: Any) -> tuple[list[Any], list[Any]]:
    if isinstance(plain, list):
        assert isinstance(encrypted, list) and len(encrypted) == len(plain)
        return plain, encrypted
    return [plain], [encrypted]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=SLOW)
@given(case=tagged_messages(), algorithm=st.sampled_from(ALGORITHMS))
def test_the_batch_evaluator_encrypts_tagged_fields_and_decrypts_them_back(
    case: tuple[str, list[dict[str, Any]]], algorithm: str
) -> None:
    text, records = case
    parsed = FORMAT.parse(text, ())
    write, read = _evaluators(text, algorithm)

    encrypted = _passed(write(records))

    for plain, sealed in zip(records, encrypted, strict=True):
        _assert_encrypted(plain, sealed, algorithm)
        assert FORMAT.decode(FORMAT.encode(sealed, parsed), parsed, None) == sealed
    assert _passed(read(encrypted)) == records


@settings(max_examples=examples(2), deadline=None, suppress_health_check=SLOW)
@given(case=tagged_messages(), algorithm=st.sampled_from(ALGORITHMS))
def test_serialize_encrypts_and_deserialize_decrypts_on_spark(
    spark: Any, case: tuple[str, list[dict[str, Any]]], algorithm: str
) -> None:
    from pyspark.sql.types import IntegerType, StructField, StructType

    text, records = case
    parsed = FORMAT.parse(text, ())
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_payload(text, algorithm)))
    contract = DataContract(registry, SUBJECT, rule_config={"secret": SECRET})
    spark_type = contract.spark_schema
    column = FORMAT.to_struct(records, parsed, arrow_type(spark_type))
    table = pa.Table.from_struct_array(column).append_column("row", pa.array(range(len(records)), pa.int32()))
    df = spark.createDataFrame(
        table, StructType([*spark_type.fields, StructField("row", IntegerType(), False)])
    )

    framed = contract.serialize(df)
    frames = sorted(framed.collect(), key=lambda row: row["row"])
    for plain, frame in zip(records, frames, strict=True):
        _assert_encrypted(plain, FORMAT.decode(bytes(frame["value"])[5:], parsed, None), algorithm)

    back = sorted(contract.deserialize(framed, key_col=None).collect(), key=lambda row: row["row"])
    read = [{name: row.asDict(recursive=True)[name] for name in spark_type.names} for row in back]
    assert read == [_as_row(record, spark_type) for record in records]


def _as_row(value: Any, spark_type: Any) -> Any:
    """A record as Spark collects it: every field of a struct there, an unset one as None."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if value is None:
        return None
    if isinstance(spark_type, StructType):
        return {f.name: _as_row(value.get(f.name), f.dataType) for f in spark_type.fields}
    if isinstance(spark_type, ArrayType):
        return [_as_row(item, spark_type.elementType) for item in value]
    if isinstance(spark_type, MapType):
        return {key: _as_row(item, spark_type.valueType) for key, item in value.items()}
    return value
