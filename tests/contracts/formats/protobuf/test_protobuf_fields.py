"""Field rules on Protobuf records (docs/semantics.md §1.6, §4.8, §11): CEL_FIELD and ENCRYPT walk
the message as confluent-kafka 2.16.1's Protobuf `transform` does, with tags from
`(confluent.field_meta).tags` and `metadata.tags`; ENCRYPT_PAYLOAD seals the message bytes, the
message indexes in clear. Parity both ways with the reference's ProtobufSerializer and
ProtobufDeserializer (classes protoc generates at test time), on Spark DataFrames."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import SECRET, SUBJECT, TOPIC, ReferenceEncryption, encrypt_rule
from protoc_classes import generated_module

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema

pytestmark = pytest.mark.spark

PROTO_FILE = "contracts_test_person.proto"
PERSON = """syntax = "proto3";
package acme;
import "confluent/meta.proto";
import "google/protobuf/wrappers.proto";
message Person {
  string name = 1;
  string ssn = 2 [(confluent.field_meta).tags = "PII"];
  bytes card = 3 [(confluent.field_meta).tags = "PII"];
  repeated string aliases = 4 [(confluent.field_meta).tags = "PII"];
  Address address = 5;
  int32 age = 6;
  optional string note = 7 [(confluent.field_meta).tags = "PII"];
  oneof contact {
    string email = 8 [(confluent.field_meta).tags = "PII"];
    int64 phone = 9;
  }
  map<string, Address> homes = 10;
  Level level = 11;
  google.protobuf.StringValue nick = 12;
  message Address {
    string city = 1 [(confluent.field_meta).tags = "PII"];
    string zip = 2;
  }
  enum Level { LOW = 0; HIGH = 1; }
}
"""
METADATA_TAGS = {"acme.Person.name": ["NAME", "PII"], "**.zip": ["NAME"]}
PEOPLE: list[dict[str, Any]] = [
    {"name": "Ada", "ssn": "123-45-6789", "card": b"\x00\x01\xfe\xff", "aliases": ["A", "Countess"],
     "address": {"city": "London", "zip": "N1"}, "age": 36, "note": "vip", "email": "ada@x.org",
     "phone": None, "homes": {"h": {"city": "Paris", "zip": "75"}}, "level": "HIGH", "nick": "addy"},
    {"name": "Bob", "ssn": "", "card": b"", "aliases": [], "address": None, "age": 7, "note": None,
     "email": None, "phone": 5551234, "homes": {}, "level": "LOW", "nick": None},
    {"name": "Çé", "ssn": "ünïcödé ✓ long", "card": bytes(range(40)), "aliases": ["x"],
     "address": {"city": "", "zip": ""}, "age": 50, "note": "", "email": None, "phone": None,
     "homes": {}, "level": "LOW", "nick": ""},
]  # fmt: skip
SIV = "AES256_SIV"
"""Deterministic: ciphertexts compare byte for byte."""


@pytest.fixture(scope="module")
def person_pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The classes protoc generates for PERSON; their `confluent.meta_pb2` import is the
    reference's bundled module, as an application compiling against Confluent's meta.proto has."""
    return generated_module(tmp_path_factory.mktemp("person_pb2"), PROTO_FILE, PERSON, confluent_meta=True)


def message(pb2: Any, person: dict[str, Any]) -> Any:
    """The person as a message of the generated class."""
    made = pb2.Person(
        name=person["name"],
        ssn=person["ssn"],
        card=person["card"],
        aliases=person["aliases"],
        age=person["age"],
        level=pb2.Person.Level.Value(person["level"]),
    )
    for key in ("note", "email", "phone"):
        if person[key] is not None:
            setattr(made, key, person[key])
    if person["address"] is not None:
        made.address.city, made.address.zip = person["address"]["city"], person["address"]["zip"]
    for key, home in person["homes"].items():
        made.homes[key].city, made.homes[key].zip = home["city"], home["zip"]
    if person["nick"] is not None:
        made.nick.value = person["nick"]
    return made


def payload(domain: list[dict[str, Any]] = (), encoding: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    rule_set = {"domainRules": list(domain), "encodingRules": list(encoding)}
    return {
        "schemaType": "PROTOBUF",
        "schema": PERSON,
        "metadata": {"tags": METADATA_TAGS},
        "ruleSet": rule_set,
    }


def serialized(pb2: Any, ours: dict[str, Any]) -> dict[str, Any]:
    """The payload as the reference's mock registry holds it: the schema a serialized descriptor."""
    return {**ours, "schema": base64.standard_b64encode(pb2.DESCRIPTOR.serialized_pb).decode("ascii")}


def contract(registry: LocalRegistry, ours: dict[str, Any], **kwargs: Any) -> DataContract:
    assert registry.register_schema(SUBJECT, Schema.from_dict(ours)) == 1
    return DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, **kwargs)


def people_frame(spark: Any, contract: DataContract) -> Any:
    from pyspark.sql.types import IntegerType, StructField, StructType

    schema = StructType([StructField("row", IntegerType()), *contract.spark_schema.fields])
    rows = [(i, *(person[name] for name in contract.spark_schema.names)) for i, person in enumerate(PEOPLE)]
    return spark.createDataFrame(rows, schema)


def reference_serializer(pb2: Any, ours: dict[str, Any], rules: Any) -> Any:
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from reference_oracle import mock_client

    client = mock_client(f"mock://protobuf-fields-{id(ours)}")
    assert client.register_schema(SUBJECT, ReferenceSchema.from_dict(serialized(pb2, ours))) == 1
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    return ProtobufSerializer(pb2.Person, client, conf=conf, rule_registry=rules)


def cel_field_rules() -> Any:
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor

    rules = RuleRegistry()
    rules.register_executor(CelFieldExecutor())
    return rules


def reference_frames(serializer: Any, pb2: Any) -> list[bytes | None]:
    """Each person as the reference serializer writes it after the rules (None: a rule failed)."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    frames: list[bytes | None] = []
    for person in PEOPLE:
        try:
            frames.append(serializer(message(pb2, person), SerializationContext(TOPIC, MessageField.VALUE)))
        except Exception:
            frames.append(None)
    return frames


def our_frames(contract: DataContract, frame: Any) -> list[bytes | None]:
    rows = {row["row"]: bytes(row["value"]) for row in contract.serialize(frame).collect()}
    return [rows.get(i) for i in range(len(PEOPLE))]


def test_cel_field_rules_write_what_the_reference_writes(spark: Any, person_pb2: Any, tmp_path: Path) -> None:
    rules = [
        {"name": "pii", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD", "tags": ["PII"],
         "expr": "typeName == 'STRING' ; name == 'city' ? fullName + ':' + string(size(tags)) : value + '!'"},
        {"name": "byMetadata", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD",
         "tags": ["NAME"], "expr": "value + '?'"},
        {"name": "untagged", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD",
         "expr": "name == 'age' || name == 'value' ; typeName == 'INT' ? value + 1 : value + '~'"},
        {"name": "short", "kind": "CONDITION", "mode": "WRITE", "type": "CEL_FIELD", "tags": ["PII"],
         "expr": "typeName == 'STRING' && name != 'city' ; size(value) < 13", "onFailure": "DLQ",
         "params": {"dlq.topic": "long"}},
    ]  # fmt: skip
    ours = payload(rules)
    sink = LocalTopicSink(tmp_path / "dlq")
    people = contract(LocalRegistry(), ours, dlq_sink=sink)
    assert "(native); touches acme.Person.name, acme.Person.ssn," in people.explain()

    got = our_frames(people, people_frame(spark, people))

    expected = reference_frames(reference_serializer(person_pb2, ours, cel_field_rules()), person_pb2)
    assert got == expected
    assert [frame is not None for frame in got] == [True, True, False]
    assert [dict(r.headers)["__rule.name"] for r in sink.read("long")] == [b"short"]
    written = person_pb2.Person.FromString(got[0][6:])
    assert (written.name, written.ssn, written.age) == ("Ada!?", "123-45-6789!", 37)
    assert list(written.aliases) == ["A!", "Countess!"] and written.card == PEOPLE[0]["card"]
    city = "acme.Person.Address.city:1"  # fullName, and the count of its tags
    assert (written.address.city, written.address.zip, written.homes["h"].city) == (city, "N1?", city)
    assert written.nick.value == "addy~"  # a wrapper's `value` field, untagged


def test_encrypted_fields_read_and_write_as_the_reference_does(spark: Any, person_pb2: Any) -> None:
    ours = payload([encrypt_rule(SIV)])
    reference = ReferenceEncryption(serialized(person_pb2, ours), SECRET, message_class=person_pb2.Person)
    theirs = [reference.serialize(message(person_pb2, person)) for person in PEOPLE]
    registry = LocalRegistry()
    reference.export_keys(registry)
    people = contract(registry, ours)

    got = our_frames(people, people_frame(spark, people))

    written = person_pb2.Person.FromString(got[0][6:])
    assert (written.age, written.address.zip, written.homes["h"].zip) == (36, "N1", "75")
    assert written.name != "Ada"  # tagged by metadata.tags
    assert b"123-45-6789" not in got[0] and b"London" not in got[0] and b"Countess" not in got[0]
    assert written.card != PEOPLE[0]["card"] and base64.b64decode(written.ssn)  # bytes raw, strings base64
    assert got == theirs  # AES256_SIV: byte for byte
    assert [reference.deserialize(frame) for frame in got] == [message(person_pb2, p) for p in PEOPLE]
    frames = spark.createDataFrame(list(enumerate(theirs)), "row int, value binary")
    read = people.deserialize(frames, key_col=None).orderBy("row").collect()
    assert [{k: v for k, v in row.asDict(recursive=True).items() if k != "row"} for row in read] == PEOPLE


def test_encrypted_payloads_read_and_write_as_the_reference_does(spark: Any, person_pb2: Any) -> None:
    ours = payload(encoding=[encrypt_rule(SIV, payload=True)])
    reference = ReferenceEncryption(
        serialized(person_pb2, ours), SECRET, whole_payload=True, message_class=person_pb2.Person
    )
    theirs = [reference.serialize(message(person_pb2, person)) for person in PEOPLE]
    registry = LocalRegistry()
    reference.export_keys(registry)
    people = contract(registry, ours)

    got = our_frames(people, people_frame(spark, people))

    assert all(frame is not None and frame[5] == 0 for frame in got)  # the message indexes in clear
    assert b"Ada" not in got[0] and b"123-45-6789" not in got[0]
    assert got == theirs
    assert [reference.deserialize(frame) for frame in got] == [message(person_pb2, p) for p in PEOPLE]
    frames = spark.createDataFrame(list(enumerate(theirs)), "row int, value binary")
    read = people.deserialize(frames, key_col=None).orderBy("row").collect()
    assert [{k: v for k, v in row.asDict(recursive=True).items() if k != "row"} for row in read] == PEOPLE


def test_a_write_rule_rejecting_a_record_sends_its_tagged_fields_redacted(spark: Any, tmp_path: Path) -> None:
    adults = {"name": "adults", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
              "expr": "message.age >= 18", "onFailure": "DLQ", "params": {"dlq.topic": "minors"}}  # fmt: skip
    encrypt = encrypt_rule(SIV)
    sink = LocalTopicSink(tmp_path / "dlq")
    people = contract(LocalRegistry(), payload([adults, encrypt]), dlq_sink=sink)

    assert people.serialize(people_frame(spark, people)).count() == 2

    (rejected,) = sink.read("minors")
    value = json.loads(rejected.value or b"")
    assert value["ssn"] == "<REDACTED>" and value["card"] == base64.b64encode(b"<REDACTED>").decode()
    assert value["name"] == "<REDACTED>" and value["phone"] == "5551234" and value["age"] == 7


def test_a_field_result_its_field_cannot_hold_fails_the_rule_as_in_the_reference(
    spark: Any, person_pb2: Any, tmp_path: Path
) -> None:
    wrong = {"name": "wrong", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD", "tags": ["PII"],
             "expr": "name == 'ssn' ; size(value) > 3 ? 1 : null", "onFailure": "DLQ",
             "params": {"dlq.topic": "unfit"}}  # fmt: skip
    ours = payload([wrong])
    sink = LocalTopicSink(tmp_path / "dlq")
    people = contract(LocalRegistry(), ours, dlq_sink=sink)

    got = our_frames(people, people_frame(spark, people))

    expected = reference_frames(reference_serializer(person_pb2, ours, cel_field_rules()), person_pb2)
    assert got == expected == [None, None, None]
    reasons = sorted((dict(r.headers)["__rule.exception"] or b"").decode() for r in sink.read("unfit"))
    assert all("acme.Person.ssn" in reason for reason in reasons) and len(reasons) == 3
    assert sum("is null" in reason for reason in reasons) == 1  # Bob's empty ssn
