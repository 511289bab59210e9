"""The parity corpus: contracts and records run through the reference and our engine (issue 3).

Each case is one contract, a mode (WRITE or READ) and a record set. The test requires the same
per-record outcome from both, except where a case carries a `Difference`: behaviour docs/semantics.md
documents as ours on purpose, with the outcome we expect instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from reference_oracle import Contract, Outcome, SourceRecord

SUBJECT = "users-value"
TOPIC = "users"

USER: dict[str, Any] = {
    "type": "record",
    "name": "User",
    "namespace": "com.acme",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "age", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "active", "type": "boolean"},
        {"name": "data", "type": "bytes"},
        {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [
                    {"name": "city", "type": "string"},
                    {"name": "zip", "type": ["null", "string"], "default": None},
                ],
            },
        },
    ],
}

ITEM: dict[str, Any] = {
    "type": "record",
    "name": "Item",
    "fields": [
        {"name": "sku", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}

HOST: dict[str, Any] = {
    "type": "record",
    "name": "Host",
    "fields": [
        {"name": "host", "type": "string"},
        {"name": "ip", "type": "string"},
        {"name": "uri", "type": "string"},
        {"name": "uuid", "type": "string"},
    ],
}


def user(id: int, **fields: Any) -> dict[str, Any]:
    """A valid User record; `fields` override its defaults."""
    record: dict[str, Any] = {
        "id": id,
        "name": "ann",
        "email": "ann@example.com",
        "age": 30,
        "score": 2.5,
        "active": True,
        "data": b"abc",
        "ssn": "123456789",
        "tags": ["a", "bb"],
        "attrs": {"tier": "gold"},
        "address": {"city": "Paris", "zip": "75001"},
    }
    unknown = set(fields) - set(record)
    assert not unknown, unknown
    return {**record, **fields}


USERS = (
    user(1),
    user(2, name="bob", email=None, age=-1, score=0.0, active=False, data=b"", tags=[], attrs={}),
    user(3, name="", email="not-an-email", age=0, score=-1.5, tags=["vip"], attrs={"tier": "silver"}),
    user(4, name="dan", age=17, ssn="12345", address={"city": "Lyon", "zip": None}),
    user(5, name="eve", email="eve@example.org", age=65, score=1e9, data=b"\x00\xff", tags=["x", "vip"]),
)

ITEMS = (
    {"sku": "a1", "qty": 1, "note": None},
    {"sku": "b2", "qty": 0, "note": "gift"},
    {"sku": "", "qty": -3, "note": ""},
)

HOSTS = (
    {
        "host": "example.com",
        "ip": "10.0.0.1",
        "uri": "https://example.com/a",
        "uuid": "123e4567-e89b-12d3-a456-426614174000",
    },
    {"host": "-bad-.com", "ip": "::1", "uri": "example.com", "uuid": "not-a-uuid"},
    {"host": "a.b.c", "ip": "256.1.1.1", "uri": "mailto:x@y.z", "uuid": "123E4567E89B12D3A456426614174000"},
)


def rule(name: str, expr: str | None, **fields: Any) -> dict[str, Any]:
    """A CEL CONDITION in WRITE mode; `fields` (registry JSON keys) override any part of it."""
    return {"name": name, "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": expr, **fields}


def transform(name: str, expr: str, **fields: Any) -> dict[str, Any]:
    """A CEL TRANSFORM in WRITE mode; `fields` override any part of it."""
    return rule(name, expr, kind="TRANSFORM", **fields)


def dlq(topic: str, **fields: Any) -> dict[str, Any]:
    """Rule fields for onFailure DLQ to `topic` (the rule's `dlq.topic` param)."""
    return {"onFailure": "DLQ", "params": {"dlq.topic": topic}, **fields}


def suffix_item(name: str, text: str, **fields: Any) -> dict[str, Any]:
    """A TRANSFORM appending `text` to an Item's sku: the order of two of them shows in the result."""
    expr = "{'sku': message.sku + '" + text + "', 'qty': message.qty, 'note': message.note}"
    return transform(name, expr, **fields)


@dataclass(frozen=True)
class Difference:
    """A documented, intended difference: why (one line, citing docs/semantics.md) and our outcomes."""

    reason: str
    ours: Callable[[list[Outcome]], list[Outcome]]


@dataclass(frozen=True)
class Case:
    """One contract, mode and record set: the unit of the parity test."""

    id: str
    mode: Literal["WRITE", "READ"]
    contract: Contract
    records: tuple[SourceRecord, ...]
    difference: Difference | None = None


def case(
    id: str,
    rules: list[dict[str, Any]],
    records: tuple[Mapping[str, Any], ...] = USERS,
    *,
    mode: Literal["WRITE", "READ"] = "WRITE",
    schema: dict[str, Any] = USER,
    metadata: dict[str, Any] | None = None,
    keys: Mapping[int, bytes] | None = None,
    **options: Any,
) -> Case:
    """A case over `records` (as SourceRecords, with `keys` by index) and a contract of `rules`."""
    sources = tuple(SourceRecord(dict(value), (keys or {}).get(i)) for i, value in enumerate(records))
    return Case(id, mode, Contract(schema, tuple(rules), metadata), sources, **options)


def both_modes(base: Case) -> list[Case]:
    """The case as given (WRITE) and the same contract on READ, for WRITEREAD rules."""
    return [replace(base, id=f"{base.id}-write"), replace(base, id=f"{base.id}-read", mode="READ")]


def _every_record_fails_at_load(reference: list[Outcome]) -> list[Outcome]:
    """A contract whose action cannot run fails as a whole, naming the rule, before any record."""
    rules = {outcome[1] for outcome in reference if outcome[0] == "error"}
    assert len(rules) == 1, reference
    (name,) = rules
    return [("error", name, "the contract fails at load") for _ in reference]


FAILS_AT_LOAD = Difference(
    "an unknown action or a DLQ action without a topic fails the contract at load (docs/semantics.md §9.9;"
    " the error of docs/semantics.md §2.4 and §7, raised early); the reference raises per failing record",
    _every_record_fails_at_load,
)


def _records_kept_unchanged(reference: list[Outcome]) -> list[Outcome]:
    """Every record the reference fails goes on as it was (`ITEMS`, in order)."""
    assert all(outcome[0] == "error" for outcome in reference), reference
    return [("record", dict(item)) for item in ITEMS[: len(reference)]]


NULL_TRANSFORM_KEEPS_THE_RECORD = Difference(
    "a TRANSFORM's null result is a failure, and after a failed transform with onFailure NONE the"
    " record goes on unchanged (docs/semantics.md §2.2 and §2.4); the reference replaces the message with"
    " null and its writer then fails",
    _records_kept_unchanged,
)

# The reference's `__rule.exception` is str() of cel-python's error, its argument tuple; ours is
# one line with the same meaning (docs/guide.md: What happens to a record).
_ONE_LINE_EXCEPTIONS = {
    b"('modulus or divide by zero', <class 'ZeroDivisionError'>, ('integer division or modulo by zero',))": (
        b"modulus or divide by zero: integer division or modulo by zero"
    ),
}


def _one_line_exceptions(reference: list[Outcome]) -> list[Outcome]:
    """Each DLQ record's `__rule.exception` header as our one-line reason."""
    ours: list[Outcome] = []
    for outcome in reference:
        if outcome[0] == "dlq":
            headers = tuple(
                (name, _ONE_LINE_EXCEPTIONS[value] if name == "__rule.exception" and value else value)
                for name, value in outcome[5]
            )
            outcome = (*outcome[:5], headers)
        ours.append(outcome)
    return ours


ONE_LINE_EVALUATION_ERRORS = Difference(
    "a CEL evaluation error's reason is one readable line (cel-python's message and the error under"
    " it); the reference writes str() of cel-python's exception, its whole argument tuple",
    _one_line_exceptions,
)


def field_named(field_of: Callable[[dict[str, Any]], str]) -> Difference:
    """Each DLQ record's `__rule.exception` ending with the field that failed (`field_of` its record)."""

    def ours(reference: list[Outcome]) -> list[Outcome]:
        named: list[Outcome] = []
        for outcome in reference:
            if outcome[0] == "dlq":
                where = f" (field {field_of(json.loads(outcome[4]))})".encode()
                headers = tuple(
                    (name, value + where if name == "__rule.exception" else value)
                    for name, value in outcome[5]
                )
                outcome = (*outcome[:5], headers)
            named.append(outcome)
        return named

    return Difference(
        "a failed CEL_FIELD condition's reason names the field that failed (docs/semantics.md §4.4,"
        " §10.31); the reference's is the rule's text alone",
        ours,
    )


def _first_too_long_or_false(user: dict[str, Any]) -> str:
    """The field of a USER record where `size(value) <= 3` over name and city first fails."""
    if len(user["name"]) > 3:
        return "com.acme.User.name"
    return "com.acme.User.active" if user["active"] is False else "com.acme.Address.city"


CEL_CONDITIONS = [
    case("int-comparison-error-by-default", [rule("adult", "message.age >= 18")], USERS[:2]),
    case(
        "failed-condition-with-none-keeps-the-record", [rule("adult", "message.age >= 18", onFailure="NONE")]
    ),
    case("failed-condition-to-dlq-topic-param", [rule("adult", "message.age >= 18", **dlq("minors"))]),
    case(
        "dlq-topic-from-metadata-property",
        [rule("adult", "message.age >= 18", onFailure="DLQ")],
        metadata={"properties": {"dlq.topic": "meta-minors", "owner": "team-a"}},
    ),
    case(
        "dlq-topic-param-wins-over-metadata",
        [rule("adult", "message.age >= 18", **dlq("param-minors"))],
        metadata={"properties": {"dlq.topic": "meta-minors"}},
    ),
    case(
        "doc-is-the-failure-reason", [rule("adult", "message.age >= 18", doc="must be an adult", **dlq("m"))]
    ),
    case(
        "double-comparison", [rule("scored", "message.score > 1.0 && message.score < 1e8", **dlq("scores"))]
    ),
    case("int-and-double-arithmetic", [rule("mixed", "double(message.age) * 0.5 >= 8.5", **dlq("ages"))]),
    case("int-division", [rule("ratio", "100 / message.age > 1", **dlq("ratios"))], USERS[:2] + USERS[3:]),
    case("int-division-by-zero-fails-the-rule", [rule("ratio", "100 / message.age > 1")], USERS[1:3]),
    case(
        "evaluation-error-with-none-continues",
        [
            rule("ratio", "100 / message.age > 1", onFailure="NONE"),
            rule("named", "message.name != ''", **dlq("n")),
        ],
    ),
    case(
        "evaluation-error-text-is-the-dlq-exception",
        [rule("ratio", "100 / message.age > 1", **dlq("ratios"))],
        USERS[2:3],
        difference=ONE_LINE_EVALUATION_ERRORS,
    ),
    case("nullable-field-compared-to-null", [rule("hasEmail", "message.email != null", **dlq("no-email"))]),
    case(
        "null-field-in-an-operation-is-a-failure",
        [
            rule("dotCom", "message.email.endsWith('.com')", onFailure="NONE"),
            rule("adult", "message.age >= 18", **dlq("m")),
        ],
    ),
    case(
        "string-functions",
        [rule("nameOk", "size(message.name) >= 3 && message.name.matches('^[a-e]')", **dlq("names"))],
    ),
    case("string-concat", [rule("ssnOk", "(message.ssn + 'x').endsWith('789x')", **dlq("ssn"))]),
    case(
        "string-contains-is-not-a-reference-function",
        [rule("hasA", "message.name.contains('a')")],
        USERS[:1],
    ),
    case(
        "bytes-size-and-literal",
        [rule("dataOk", "size(message.data) == 3 && message.data == b'abc'", **dlq("b"))],
    ),
    case("boolean-field", [rule("isActive", "message.active", **dlq("inactive"))]),
    case(
        "nested-record-fields",
        [rule("inParis", "message.address.city == 'Paris' && message.address.zip != null", **dlq("geo"))],
    ),
    case(
        "array-macros",
        [rule("tagsOk", "message.tags.all(t, size(t) >= 1) && size(message.tags) > 0", **dlq("t"))],
    ),
    case(
        "array-membership-and-exists",
        [rule("vip", "'vip' in message.tags || message.tags.exists(t, t == 'a')", **dlq("v"))],
    ),
    case(
        "map-key-presence",
        [rule("gold", "'tier' in message.attrs && message.attrs['tier'] == 'gold'", **dlq("m"))],
    ),
    case("missing-map-key-fails-the-rule", [rule("gold", "message.attrs['tier'] == 'gold'")], USERS[:2]),
    case("is-email-builtin", [rule("emailOk", "message.email != null; message.email.isEmail()", **dlq("e"))]),
    case(
        "host-ip-uri-uuid-builtins",
        [
            rule("hostOk", "message.host.isHostname()", onFailure="NONE"),
            rule("ipOk", "message.ip.isIpv4() || message.ip.isIpv6()", **dlq("ips")),
            rule("uriOk", "message.uri.isUri()", **dlq("uris")),
            rule("uuidOk", "message.uuid.isUuid()", **dlq("uuids")),
        ],
        HOSTS,
        schema=HOST,
    ),
    case(
        "guard-false-passes-the-condition",
        [rule("adult", "message.email != null; message.age >= 18", **dlq("g"))],
    ),
    case(
        "error-in-the-guard-is-a-failure",
        [
            rule("adult", "100 / message.age > 0; true", onFailure="NONE"),
            rule("named", "message.name != ''", **dlq("n")),
        ],
    ),
    case("non-boolean-result-is-tested-for-truth", [rule("named", "message.name", **dlq("truthy"))]),
]

CEL_TRANSFORMS = [
    case("transform-replaces-the-record", [suffix_item("bang", "!")], ITEMS, schema=ITEM),
    case(
        "transform-guard-false-keeps-the-record",
        [transform("bang", "message.qty > 0; " + suffix_item("bang", "!")["expr"])],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "transform-evaluation-error-with-none-keeps-the-record",
        [
            transform(
                "div", f"10 / message.qty > 0 ? {suffix_item('x', '+')['expr']} : message", onFailure="NONE"
            ),
            suffix_item("bang", "!"),
        ],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "transform-null-result-with-none-nulls-the-record",
        [transform("nothing", "null", onFailure="NONE")],
        ITEMS[:1],
        schema=ITEM,
        difference=NULL_TRANSFORM_KEEPS_THE_RECORD,
    ),
    case(
        "transform-feeds-the-next-condition",
        [suffix_item("bang", "!"), rule("banged", "message.sku.endsWith('1!')", **dlq("b"))],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "transform-result-not-fitting-the-schema-is-an-error",
        [transform("stringly", "{'sku': message.sku, 'qty': string(message.qty), 'note': message.note}")],
        ITEMS[:1],
        schema=ITEM,
    ),
    case(
        "transform-result-not-fitting-the-schema-with-dlq-is-an-error",
        [
            transform(
                "stringly",
                "{'sku': message.sku, 'qty': string(message.qty), 'note': message.note}",
                **dlq("t"),
            )
        ],
        ITEMS[:1],
        schema=ITEM,
    ),
    case(
        "write-transforms-run-in-order",
        [suffix_item("addA", "a"), suffix_item("addB", "b")],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "read-transforms-run-in-reverse-order",
        [suffix_item("addA", "a", mode="WRITEREAD"), suffix_item("addB", "b", mode="READ")],
        ITEMS,
        schema=ITEM,
        mode="READ",
    ),
    case(
        "read-condition-sees-the-later-transform",
        [
            rule("banged", "message.sku.endsWith('!')", mode="READ", **dlq("r")),
            suffix_item("bang", "!", mode="READ"),
        ],
        ITEMS,
        schema=ITEM,
        mode="READ",
    ),
]

ACTIONS = [
    case(
        "on-success-dlq",
        [rule("adult", "message.age >= 18", onSuccess="DLQ", onFailure="NONE", params={"dlq.topic": "ok"})],
    ),
    case(
        "on-success-error",
        [rule("minor", "message.age < 18", onSuccess="ERROR", onFailure="NONE")],
        USERS[1:3],
    ),
    case("explicit-none-both-ways", [rule("adult", "message.age >= 18", onSuccess="NONE", onFailure="NONE")]),
    *both_modes(
        case(
            "pair-dlq-then-none",
            [rule("adult", "message.age >= 18", mode="WRITEREAD", **dlq("m", onFailure="DLQ,NONE"))],
        )
    ),
    *both_modes(
        case(
            "pair-none-then-dlq",
            [rule("adult", "message.age >= 18", mode="WRITEREAD", **dlq("m", onFailure="NONE,DLQ"))],
        )
    ),
    *both_modes(
        case(
            "pair-error-then-dlq",
            [rule("adult", "message.age >= 18", mode="WRITEREAD", **dlq("m", onFailure="ERROR,DLQ"))],
            USERS[:2],
        )
    ),
    case(
        "pair-on-a-write-rule-is-one-action-name",
        [rule("adult", "message.age >= 18", onFailure="NONE,DLQ")],
        difference=FAILS_AT_LOAD,
    ),
    case(
        "pair-with-a-space-names-an-unknown-action",
        [rule("adult", "message.age >= 18", mode="WRITEREAD", onFailure="ERROR, NONE")],
        mode="READ",
        difference=FAILS_AT_LOAD,
    ),
    case(
        "dlq-without-a-topic", [rule("adult", "message.age >= 18", onFailure="DLQ")], difference=FAILS_AT_LOAD
    ),
    case(
        "disabled-rule-is-skipped",
        [rule("never", "false", disabled=True), rule("adult", "message.age >= 0", **dlq("d"))],
    ),
    case(
        "first-failing-rule-wins-on-write",
        [
            rule("adult", "message.age >= 18", **dlq("first")),
            rule("named", "message.name != ''", **dlq("second")),
        ],
    ),
    case(
        "read-runs-rules-in-reverse-order",
        [
            rule("adult", "message.age >= 18", mode="READ", **dlq("first")),
            rule("named", "message.name != 'dan'", mode="WRITEREAD", **dlq("second")),
        ],
        mode="READ",
    ),
    case(
        "rules-of-the-other-mode-do-not-run",
        [rule("readOnly", "false", mode="READ"), rule("adult", "message.age >= 18", **dlq("w"))],
    ),
    case(
        "unknown-rule-type-with-none-skips-the-rest",
        [rule("mystery", None, type="NOPE", onFailure="NONE"), rule("rejectAll", "false", **dlq("all"))],
    ),
    case("unknown-rule-type-fails-by-default", [rule("mystery", None, type="NOPE")], USERS[:1]),
    case("unknown-rule-type-to-dlq", [rule("mystery", "x", type="NOPE", **dlq("unknown"))], USERS[:2]),
    case(
        "dlq-records-carry-the-key-and-headers-on-write",
        [rule("adult", "message.age >= 18", **dlq("keyed"))],
        keys={1: b"k-bob", 3: b"k-dan"},
    ),
    case(
        "dlq-records-carry-the-original-bytes-on-read",
        [rule("adult", "message.age >= 18", mode="READ", **dlq("keyed"))],
        keys={1: b"k-bob", 3: b"k-dan"},
        mode="READ",
    ),
    case(
        "read-conditions-on-nested-and-collections",
        [
            rule("inParis", "message.address.city == 'Paris'", mode="READ", onFailure="NONE"),
            rule(
                "gold",
                "'tier' in message.attrs && message.attrs['tier'] == 'gold'",
                mode="READ",
                **dlq("gold"),
            ),
            rule("emailOk", "message.email != null; message.email.isEmail()", mode="READ", **dlq("email")),
        ],
        mode="READ",
    ),
]

CEL_FIELD = [
    case(
        "cel-field-transform-on-tagged-fields", [transform("mask", "'XXX'", type="CEL_FIELD", tags=["PII"])]
    ),
    case(
        "cel-field-condition-on-metadata-tags",
        [rule("short", "size(value) <= 3", type="CEL_FIELD", tags=["PRIVATE"], **dlq("long"))],
        metadata={"tags": {"com.acme.User.name": ["PRIVATE"], "**.city": ["PRIVATE"]}},
        # A boolean field holding false fails a condition unvisited (docs/semantics.md §4.4).
        difference=field_named(_first_too_long_or_false),
    ),
    case(
        "cel-field-guard-on-type-name",
        [transform("bang", "typeName == 'STRING' ; value + '!'", type="CEL_FIELD")],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "cel-field-null-is-visited",
        [rule("noNull", "typeName != 'NULL'", type="CEL_FIELD", **dlq("nulls"))],
        ITEMS,
        schema=ITEM,
        difference=field_named(
            lambda item: "Item." + next(name for name, value in item.items() if value is None)
        ),
    ),
    case(
        "cel-field-read-transform",
        [transform("mask", "name == 'ssn' ; 'XXX'", type="CEL_FIELD", mode="READ")],
        mode="READ",
    ),
    case(
        "cel-field-same-tag-transforms-first-on-write",
        [
            transform("maskA", "'AAA'", type="CEL_FIELD", tags=["PII"]),
            transform("maskB", "'BBB'", type="CEL_FIELD", tags=["PII"]),
        ],
        USERS[:1],
    ),
    case(
        "cel-field-same-tag-transforms-last-on-read",
        [
            transform("maskA", "'AAA'", type="CEL_FIELD", tags=["PII"], mode="READ"),
            transform("maskB", "'BBB'", type="CEL_FIELD", tags=["PII"], mode="READ"),
        ],
        USERS[:1],
        mode="READ",
    ),
    case(
        "cel-field-disabled-transform-still-supersedes",
        [
            transform("maskA", "'AAA'", type="CEL_FIELD", tags=["PII"], disabled=True),
            transform("maskB", "'BBB'", type="CEL_FIELD", tags=["PII"]),
            transform("maskC", "'CCC'", type="CEL_FIELD", tags=["SECRET"]),
        ],
        USERS[:1],
    ),
]

JSONATA = [
    case(
        "jsonata-transform",
        [transform("upper", "$merge([$, {'sku': $uppercase(sku)}])", type="JSONATA")],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "jsonata-condition",
        [rule("positive", "qty > 0", type="JSONATA", **dlq("qty"))],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "jsonata-undefined-result-is-a-failure",
        [rule("noted", "note", type="JSONATA", **dlq("notes"))],
        ITEMS,
        schema=ITEM,
    ),
    case(
        "jsonata-read-transform",
        [transform("tagged", "$merge([$, {'note': 'read'}])", type="JSONATA", mode="READ")],
        ITEMS,
        schema=ITEM,
        mode="READ",
    ),
]

CASES: list[Case] = [*CEL_CONDITIONS, *CEL_TRANSFORMS, *ACTIONS, *CEL_FIELD, *JSONATA]
