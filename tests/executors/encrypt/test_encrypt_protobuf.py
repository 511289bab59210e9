"""ENCRYPT on Protobuf records with AES-GCM (docs/semantics.md §11), in parity both ways with
confluent-kafka 2.16.1's ProtobufSerializer and ProtobufDeserializer (tests/support/encrypt_oracle.py;
classes protoc generates at test time), on Spark DataFrames.

AES-GCM draws a nonce per value, so frames are compared by what they decrypt to: the reference's
read back here, ours read back there. Plain fields stay readable in our frames, unset ones
(an optional scalar, a message, a oneof member) stay unset, and with `encrypt.dek.expiry.days`
our rotated DEK version and the reference's older one read back on either side. AES256_SIV's
byte-for-byte parity is tests/contracts/formats/protobuf/test_protobuf_fields.py's.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from encrypt_oracle import KMS_PARAMS, SECRET, SUBJECT, ReferenceEncryption, encrypt_rule
from protoc_classes import generated_module

from contracts import DataContract, LocalRegistry, Schema
from executors.encrypt import EncryptExecutor

pytestmark = pytest.mark.spark

PROTO_FILE = "contracts_test_vault.proto"
ACCOUNT = """syntax = "proto3";
package vault;
import "confluent/meta.proto";
message Account {
  string owner = 1;
  string ssn = 2 [(confluent.field_meta).tags = "PII"];
  bytes pin = 3 [(confluent.field_meta).tags = "PII"];
  optional string note = 4 [(confluent.field_meta).tags = "PII"];
  repeated string emails = 5 [(confluent.field_meta).tags = "PII"];
  Card card = 6;
  int64 balance = 7;
  map<string, string> labels = 8;
  oneof contact {
    string phone = 9 [(confluent.field_meta).tags = "PII"];
    int32 desk = 10;
  }
  message Card {
    string number = 1 [(confluent.field_meta).tags = "PII"];
    int32 cvc = 2;
  }
}
"""
ACCOUNTS: list[dict[str, Any]] = [
    {"owner": "Ada", "ssn": "123-45-6789", "pin": b"\x00\x01\xfe", "note": "vip",
     "emails": ["ada@x.org", "a@y.org"], "card": {"number": "4111111111111111", "cvc": 123},
     "balance": 10_000, "labels": {"tier": "gold"}, "phone": "555-0100", "desk": None},
    {"owner": "Bob", "ssn": "", "pin": b"", "note": None, "emails": [], "card": None, "balance": -5,
     "labels": {}, "phone": None, "desk": 7},
    {"owner": "Çé", "ssn": "ünïcödé ✓", "pin": bytes(range(32)), "note": "", "emails": [""],
     "card": {"number": "", "cvc": 0}, "balance": 0, "labels": {"k": "ünï"}, "phone": "", "desk": None},
]  # fmt: skip
GCM_OVERHEAD = 28
"""AES-GCM's 12-byte nonce and 16-byte tag."""
DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def vault_pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generated_module(tmp_path_factory.mktemp("vault_pb2"), PROTO_FILE, ACCOUNT, confluent_meta=True)


def message(pb2: Any, account: dict[str, Any]) -> Any:
    """The account as a message of the generated class (None: unset)."""
    return pb2.Account(**{name: value for name, value in account.items() if value is not None})


def payload(algorithm: str, **params: str) -> dict[str, Any]:
    rule = encrypt_rule(algorithm, {**KMS_PARAMS, **params})
    return {"schemaType": "PROTOBUF", "schema": ACCOUNT, "ruleSet": {"domainRules": [rule]}}


def reference(pb2: Any, ours: dict[str, Any], clock_millis: int | None = None) -> ReferenceEncryption:
    """The reference's serdes over `ours`, its schema the serialized descriptor its registry holds."""
    theirs = {**ours, "schema": base64.standard_b64encode(pb2.DESCRIPTOR.serialized_pb).decode("ascii")}
    return ReferenceEncryption(theirs, SECRET, clock_millis, message_class=pb2.Account)


def contract(registry: LocalRegistry, ours: dict[str, Any], **kwargs: Any) -> DataContract:
    assert registry.register_schema(SUBJECT, Schema.from_dict(ours)) == 1
    return DataContract(registry, SUBJECT, rule_config={"secret": SECRET}, **kwargs)


def our_frames(spark: Any, accounts: DataContract) -> list[bytes]:
    from pyspark.sql.types import IntegerType, StructField, StructType

    schema = StructType([StructField("row", IntegerType()), *accounts.spark_schema.fields])
    names = accounts.spark_schema.names
    frame = spark.createDataFrame([(i, *(a[n] for n in names)) for i, a in enumerate(ACCOUNTS)], schema)
    return [bytes(row["value"]) for row in accounts.serialize(frame).orderBy("row").collect()]


def read_here(spark: Any, accounts: DataContract, frames: list[bytes]) -> list[dict[str, Any]]:
    df = spark.createDataFrame(list(enumerate(frames)), "row int, value binary")
    rows = accounts.deserialize(df, key_col=None).orderBy("row").collect()
    return [{k: v for k, v in row.asDict(recursive=True).items() if k != "row"} for row in rows]


def ciphertext(value: str | bytes, plaintext: str | bytes) -> bytes:
    """A string field's base64 ciphertext (or a bytes field's raw one), checked to be AES-GCM's of
    `plaintext`'s length."""
    data = base64.b64decode(value, validate=True) if isinstance(value, str) else value
    size = len(plaintext.encode("utf-8") if isinstance(plaintext, str) else plaintext)
    assert len(data) == size + GCM_OVERHEAD or len(data) == size + GCM_OVERHEAD + 5  # + a DEK version
    return data


@pytest.mark.parametrize("algorithm", ["AES256_GCM"])
def test_gcm_encrypted_fields_read_and_write_as_the_reference_does(
    spark: Any, vault_pb2: Any, algorithm: str
) -> None:
    ours = payload(algorithm)
    oracle = reference(vault_pb2, ours)
    theirs = [oracle.serialize(message(vault_pb2, account)) for account in ACCOUNTS]
    registry = LocalRegistry()
    oracle.export_keys(registry)
    accounts = contract(registry, ours)

    assert read_here(spark, accounts, theirs) == ACCOUNTS
    got = our_frames(spark, accounts)

    assert [oracle.deserialize(frame) for frame in got] == [message(vault_pb2, a) for a in ACCOUNTS]
    assert all(mine != other for mine, other in zip(got, theirs, strict=True))  # a nonce per value
    ada, bob, ce = (vault_pb2.Account.FromString(frame[6:]) for frame in got)
    # Mixed: the plain fields (a nested message's too) as they were, the tagged ones encrypted.
    assert (ada.owner, ada.balance, dict(ada.labels), ada.card.cvc) == ("Ada", 10_000, {"tier": "gold"}, 123)
    assert b"123-45-6789" not in got[0] and b"4111111111111111" not in got[0] and b"vip" not in got[0]
    encrypted = [
        (ada.ssn, "123-45-6789"), (ada.pin, b"\x00\x01\xfe"), (ada.note, "vip"), (ada.phone, "555-0100"),
        (ada.card.number, "4111111111111111"), *zip(ada.emails, ACCOUNTS[0]["emails"], strict=True),
        (bob.ssn, ""), (bob.pin, b""), (ce.note, ""), (ce.phone, ""), (ce.emails[0], ""),
    ]  # fmt: skip
    for value, plain in encrypted:
        ciphertext(value, plain)
    # Unset stays unset: an optional scalar, a message, a oneof's tagged member.
    assert not bob.HasField("note") and not bob.HasField("card") and bob.WhichOneof("contact") == "desk"
    assert (bob.owner, bob.desk, list(bob.emails)) == ("Bob", 7, [])


def test_rotated_deks_on_protobuf_carry_their_version_both_ways(
    spark: Any, vault_pb2: Any, tmp_path: Path
) -> None:
    """The reference writes with DEK version 1; two days on (expiry 1 day) our WRITE creates
    version 2 and prefixes it; each side reads both sides' frames."""
    ours = payload("AES256_GCM", **{"encrypt.dek.expiry.days": "1"})
    oracle = reference(vault_pb2, ours)
    theirs = [oracle.serialize(message(vault_pb2, account)) for account in ACCOUNTS]
    registry = LocalRegistry()
    oracle.export_keys(registry)
    later = registry.get_dek("kek1", SUBJECT, "AES256_GCM", 1).ts + 2 * DAY_MS
    accounts = contract(registry, ours, executors=[EncryptExecutor(clock=lambda: later)])

    got = our_frames(spark, accounts)

    assert registry.get_dek("kek1", SUBJECT, "AES256_GCM", -1).version == 2
    mine, other = (vault_pb2.Account.FromString(frame[6:]) for frame in (got[0], theirs[0]))
    assert ciphertext(mine.ssn, "123-45-6789")[:5] == b"\x00\x00\x00\x00\x02"
    assert ciphertext(other.ssn, "123-45-6789")[:5] == b"\x00\x00\x00\x00\x01"
    assert mine.pin[:5] == b"\x00\x00\x00\x00\x02" and mine.owner == "Ada"
    reader = reference(vault_pb2, ours, clock_millis=later)
    reader.import_keys(registry, "kek1", "AES256_GCM", range(1, 3))
    expected = [message(vault_pb2, a) for a in ACCOUNTS]
    assert [reader.deserialize(frame) for frame in got + theirs] == expected + expected
    assert read_here(spark, accounts, got + theirs) == ACCOUNTS + ACCOUNTS
