"""The payments contract and records the broker tests run, and what each record should become.

Two major versions of one subject: 1 (`email`) and 2 (`email` renamed `contact`, a `channel` with a
default), with JSONata UPGRADE/DOWNGRADE migrations between them. Both versions' WRITE rule sends
non-positive amounts to a DLQ topic (the producer's side); version 2 also defaults an empty channel
(WRITE) and, for its readers, sends amounts over 1000 and unknown currencies to DLQ topics and
masks the PII-tagged contact (READ, run in reverse order: smallAmount, knownCurrency, maskPii).
Every name is derived from the source topic, so each test owns its subject and DLQ topics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from contracts import LocalRegistry, Schema
from contracts.formats.wire import encode_frame

MAJOR = "application.major.version"
MASKED = "<masked>"
CURRENCIES = ("EUR", "USD")


@dataclass(frozen=True)
class Topics:
    """The source topic of one test and the subject and DLQ topics named after it."""

    source: str

    @property
    def subject(self) -> str:
        return f"{self.source}-value"  # TopicNameStrategy, as the reference serializer names it

    @property
    def write_dlq(self) -> str:
        return f"{self.source}-write-dlq"

    @property
    def read_dlq(self) -> str:
        return f"{self.source}-read-dlq"

    @property
    def bad_currency(self) -> str:
        return f"{self.source}-bad-currency"

    @property
    def undecodable(self) -> str:
        return f"{self.source}-undecodable"


def _schema(major: int) -> dict[str, Any]:
    contact = {"name": "email" if major == 1 else "contact", "type": "string", "confluent:tags": ["PII"]}
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "long"},
        contact,
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
    ]
    if major == 2:
        fields.append({"name": "channel", "type": "string", "default": "web"})
    return {"type": "record", "name": "Payment", "namespace": "com.acme.pay", "fields": fields}


def _rules(topics: Topics, major: int) -> dict[str, Any]:
    positive = {
        "name": "positiveAmount",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.amount > 0.0",
        "onFailure": "DLQ",
        "params": {"dlq.topic": topics.write_dlq},
    }
    if major == 1:
        return {"domainRules": [positive]}
    default_channel = {
        "name": "defaultChannel",
        "kind": "TRANSFORM",
        "type": "CEL",
        "mode": "WRITE",
        "expr": "message.channel == '' ; {'id': message.id, 'contact': message.contact,"
        " 'amount': message.amount, 'currency': message.currency, 'channel': 'web'}",
    }
    mask = {
        "name": "maskPii",
        "kind": "TRANSFORM",
        "type": "CEL_FIELD",
        "mode": "READ",
        "tags": ["PII"],
        "expr": f"typeName == 'STRING' ; '{MASKED}'",
    }
    known_currency = {
        "name": "knownCurrency",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "READ",
        "expr": f"message.currency in {list(CURRENCIES)}",
        "onFailure": "DLQ",
        "params": {"dlq.topic": topics.bad_currency},
    }
    small = {  # no dlq.topic param: the version's metadata names its topic
        "name": "smallAmount",
        "kind": "CONDITION",
        "type": "CEL",
        "mode": "READ",
        "expr": "message.amount <= 1000.0",
        "onFailure": "DLQ",
    }
    rename = "$merge([$sift($, function($v, $k) {$k != '%s'}), {'%s': $.'%s'}])"
    migrations = [
        {
            "name": "emailToContact",
            "kind": "TRANSFORM",
            "type": "JSONATA",
            "mode": "UPGRADE",
            "expr": rename % ("email", "contact", "email"),
        },
        {
            "name": "contactToEmail",
            "kind": "TRANSFORM",
            "type": "JSONATA",
            "mode": "DOWNGRADE",
            "expr": rename % ("contact", "email", "contact"),
        },
    ]
    return {
        "migrationRules": migrations,
        "domainRules": [default_channel, positive, mask, known_currency, small],
    }


def register_payments(registry: LocalRegistry, topics: Topics) -> None:
    """Versions 1 (major 1) and 2 (major 2) of the payments contract under `topics.subject`."""
    registry.set_config(topics.subject, compatibility="BACKWARD", compatibilityGroup=MAJOR)
    for major in (1, 2):
        payload = {
            "schemaType": "AVRO",
            "schema": json.dumps(_schema(major)),
            "metadata": {"properties": {MAJOR: str(major), "dlq.topic": topics.read_dlq}},
            "ruleSet": _rules(topics, major),
        }
        registry.register_schema(topics.subject, Schema.from_dict(payload))


@dataclass(frozen=True)
class Payment:
    """One record to produce: its id, the major its producer writes, value, key and headers."""

    id: int
    major: int
    value: dict[str, Any]

    @property
    def key(self) -> bytes:
        return f"k{self.id}".encode()

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return [("trace", f"t{self.id}".encode())]


def payments(first: int, count: int) -> list[Payment]:
    """Payments `first`..: even ids written with major 1, odd with 2. Every 37th amount (from 5) is
    negative, every 13th (from 7) over 1000, every 11th (from 3) in an unknown currency; every 4th
    major-2 payment has an empty channel."""
    records = []
    for i in range(first, first + count):
        major = 1 if i % 2 == 0 else 2
        amount = -1.0 if i % 37 == 5 else (5000.0 if i % 13 == 7 else 10.0 + i)
        currency = "JPY" if i % 11 == 3 else CURRENCIES[i % 2]
        value: dict[str, Any] = {"id": i, "amount": amount, "currency": currency}
        if major == 1:
            value["email"] = f"p{i}@example.com"
        else:
            value["contact"] = f"p{i}@example.com"
            value["channel"] = "" if i % 8 == 1 else "app"
        records.append(Payment(i, major, value))
    return records


def expected_outcome(payment: Payment, topics: Topics) -> str | None:
    """The DLQ topic `payment` ends in (WRITE rules on the producer, then READ rules in reverse
    order on a major-2 reader), or None when it reaches the reader's output."""
    value = payment.value
    if value["amount"] <= 0:
        return topics.write_dlq
    if value["amount"] > 1000:
        return topics.read_dlq
    if value["currency"] not in CURRENCIES:
        return topics.bad_currency
    return None


def as_major_2_reader_sees_it(payment: Payment) -> dict[str, Any]:
    """The record a major-2 reader gets: migrated (email → contact, channel defaulted), masked."""
    value = payment.value
    channel = value.get("channel") or "web"
    return {
        "id": value["id"],
        "contact": MASKED,
        "amount": value["amount"],
        "currency": value["currency"],
        "channel": channel,
    }


UNDECODABLE = (
    (b"junk-magic", b"\x07not an avro frame"),  # wrong magic byte
    (b"junk-id", encode_frame(2_000_000_000, b"\x02")),  # a schema id no registry knows
    (b"junk-short", b"\x00\x00"),  # truncated before the schema id ends
)
"""Raw (key, value) records a broken producer wrote: the reader's decode step rejects them."""
