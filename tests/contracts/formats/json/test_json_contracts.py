"""JSON Schema contracts end to end on Spark: CEL and JSONata rules on JSON records, DLQ records,
Confluent frames both ways with the reference's JSONSerializer/JSONDeserializer as the oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actions.dlq.local_topic import LocalTopicSink
from contracts import DataContract, LocalRegistry, Schema, metrics_of
from contracts.errors import ContractError
from contracts.formats.wire import encode_frame

pytestmark = pytest.mark.spark

SUBJECT = "orders-value"
TOPIC = "orders"
ORDER: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string", "minLength": 1},
        "email": {"type": ["string", "null"]},
        "amount": {"type": "number"},
    },
    "required": ["id", "customer", "amount"],
}
POSITIVE = {
    "name": "positiveAmount",
    "kind": "CONDITION",
    "type": "CEL",
    "mode": "WRITEREAD",
    "expr": "message.amount > 0.0",
    "onFailure": "DLQ",
    "params": {"dlq.topic": "bad-orders"},
}
UPPER = {
    "name": "upperCustomer",
    "kind": "TRANSFORM",
    "type": "JSONATA",
    "mode": "WRITE",
    "expr": "$merge([$, {'customer': $uppercase(customer)}])",
}
ORDERS = [
    {"id": 1, "customer": "ann", "email": "ann@example.com", "amount": 12.5},
    {"id": 2, "customer": "bob", "email": None, "amount": -1.5},
    {"id": 3, "customer": "cy", "email": None, "amount": 7.25},
]


def payload(rules: list[dict[str, Any]], schema: dict[str, Any] = ORDER) -> dict[str, Any]:
    return {"schemaType": "JSON", "schema": json.dumps(schema), "ruleSet": {"domainRules": rules}}


def contract(tmp_path: Path, rules: list[dict[str, Any]]) -> tuple[DataContract, LocalTopicSink]:
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(payload(rules)))
    sink = LocalTopicSink(tmp_path / "dlq")
    return DataContract(registry, SUBJECT, dlq_sink=sink), sink


def orders_frame(spark: Any, contract: DataContract) -> Any:
    return spark.createDataFrame([tuple(o.values()) for o in ORDERS], contract.spark_schema)


def test_write_runs_cel_and_jsonata_rules_on_json_records(spark: Any, tmp_path: Path) -> None:
    orders, sink = contract(tmp_path, [POSITIVE, UPPER])
    explained = orders.explain()
    assert "positiveAmount" in explained and "(native)" in explained
    assert "(python); no native form for records of a JSON schema (Avro only)" in explained
    written = orders.write(orders_frame(spark, orders))
    assert sorted((row["id"], row["customer"]) for row in written.collect()) == [(1, "ANN"), (3, "CY")]
    (rejected,) = sink.read("bad-orders")
    assert json.loads(rejected.value or b"") == ORDERS[1]
    assert dict(rejected.headers)["__rule.name"] == b"positiveAmount"
    counts = metrics_of(written).get()  # type: ignore[union-attr]
    assert (counts["positiveAmount"].passed, counts["positiveAmount"].failed) == (2, 1)


def test_a_transform_result_that_breaks_the_json_schema_fails_the_rule(spark: Any, tmp_path: Path) -> None:
    emptied = {**UPPER, "name": "emptyCustomer", "expr": "$merge([$, {'customer': ''}])"}
    orders, _ = contract(tmp_path, [emptied])
    with pytest.raises(Exception, match=r"emptyCustomer.*at /customer: '' should be non-empty"):
        orders.write(orders_frame(spark, orders)).collect()


PII_ORDER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "email": {"type": ["string", "null"], "confluent:tags": ["PII"]},
        "customer": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "confluent:tags": ["PII"]},
                "tier": {"type": "string", "enum": ["gold", "basic"]},
                "note": {"$ref": "#/definitions/note"},
            },
            "required": ["name", "tier"],
        },
        "phones": {"type": "array", "items": {"type": "string"}, "confluent:tags": ["PII"]},
        "amount": {"type": "number"},
    },
    "required": ["id", "customer", "amount"],
    "definitions": {"note": {"type": "string"}},
}
PII_TAGS = {"$.customer.note": ["PII"]}
PII_ORDERS = [
    {
        "id": 1,
        "email": "ann@example.com",
        "customer": {"name": "ann", "tier": "gold", "note": "vip"},
        "phones": ["555-0100", "555-0101"],
        "amount": 12.5,
    },
    {"id": 2, "email": None, "customer": {"name": "bob", "tier": "basic"}, "phones": [], "amount": 3.0},
]
MASK = {
    "name": "maskPii",
    "kind": "TRANSFORM",
    "type": "CEL_FIELD",
    "mode": "WRITE",
    "tags": ["PII"],
    "expr": "typeName == 'STRING' ; 'xxx-' + name + '-' + fullName",
}
SHORT = {
    "name": "shortStrings",
    "kind": "CONDITION",
    "type": "CEL_FIELD",
    "mode": "WRITE",
    "expr": "typeName == 'STRING' || typeName == 'ENUM' ; size(value) < 16",
    "onFailure": "DLQ",
    "params": {"dlq.topic": "long-strings"},
}


def _pii_payload(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {**payload(rules, PII_ORDER), "metadata": {"tags": PII_TAGS}}


def test_cel_field_rules_walk_json_records_as_the_reference_does(spark: Any, tmp_path: Path) -> None:
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import CelFieldExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext
    from reference_oracle import mock_client

    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(_pii_payload([SHORT, MASK])))
    sink = LocalTopicSink(tmp_path / "dlq")
    orders = DataContract(registry, SUBJECT, dlq_sink=sink)
    assert "maskPii" in orders.explain() and "no native field walk for JSON records" in orders.explain()
    long_phone = {**PII_ORDERS[1], "id": 3, "customer": {"name": "a-very-long-name", "tier": "gold"}}
    rows = [{**order, "customer": {"note": None, **order["customer"]}} for order in [*PII_ORDERS, long_phone]]
    df = spark.createDataFrame(
        [tuple(row[f] for f in orders.spark_schema.fieldNames()) for row in rows], orders.spark_schema
    )

    framed = sorted(orders.serialize(df).collect(), key=lambda row: json.loads(bytes(row["value"])[5:])["id"])

    client = mock_client(f"mock://json-cel-field-{tmp_path.name}")
    client.register_schema(SUBJECT, ReferenceSchema.from_dict(_pii_payload([MASK])))
    rules = RuleRegistry()
    rules.register_executor(CelFieldExecutor())
    serializer = JSONSerializer(
        None, client, conf={"auto.register.schemas": False, "use.latest.version": True}, rule_registry=rules
    )
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    expected = [json.loads(serializer(json.loads(json.dumps(order)), ctx)[5:]) for order in PII_ORDERS]
    assert expected[0]["customer"] == {
        "name": "xxx-name-$.customer.name",
        "tier": "gold",
        "note": "xxx-note-$.customer.note",
    }
    assert [json.loads(bytes(row["value"])[5:]) for row in framed] == expected
    (rejected,) = sink.read("long-strings")
    assert json.loads(rejected.value or b"")["id"] == 3


def reference_client(rules: list[dict[str, Any]]) -> Any:
    """A reference mock registry holding the same contract under the same id (1)."""
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from reference_oracle import mock_client

    client = mock_client(f"mock://json-{id(rules)}")
    registered = payload(rules)
    schema = ReferenceSchema.from_dict({**registered, "schema": registered["schema"]})
    assert client.register_schema(SUBJECT, schema) == 1
    return client


def reference_rules() -> Any:
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor

    registry = RuleRegistry()
    registry.register_executor(CelExecutor())
    registry.register_executor(JsonataExecutor())
    return registry


def test_serialize_writes_the_frames_the_reference_serializer_writes(spark: Any, tmp_path: Path) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    orders, _ = contract(tmp_path, [UPPER])
    framed = orders.serialize(orders_frame(spark, orders)).collect()
    client = reference_client([UPPER])
    serializer = JSONSerializer(
        None,
        client,
        conf={"auto.register.schemas": False, "use.latest.version": True},
        rule_registry=reference_rules(),
    )
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    expected = [serializer(dict(order), ctx) for order in ORDERS]
    assert [bytes(row["value"]) for row in framed] == expected
    deserializer = JSONDeserializer(None, schema_registry_client=client, rule_registry=reference_rules())
    assert [deserializer(bytes(row["value"]), ctx)["customer"] for row in framed] == ["ANN", "BOB", "CY"]


def test_deserialize_reads_reference_frames_with_read_rules_and_routes_invalid_ones(
    spark: Any, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    orders, sink = contract(tmp_path, [POSITIVE])
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    serializer = JSONSerializer(None, reference_client([]), conf=conf)
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    frames = [serializer(dict(order), ctx) for order in ORDERS]
    frames.append(encode_frame(1, b'{"id": 4, "amount": 1.5}'))  # no customer: invalid
    rows = [(f"k{i}".encode(), frame) for i, frame in enumerate(frames)]
    read = orders.deserialize(
        spark.createDataFrame(rows, "key binary, value binary"),
        on_decode_error="DLQ",
        decode_dlq_topic="undecodable",
    )
    assert sorted((row["id"], row["customer"], row["amount"]) for row in read.collect()) == [
        (1, "ann", 12.5),
        (3, "cy", 7.25),
    ]
    assert [json.loads(r.value[5:] or b"")["id"] for r in sink.read("bad-orders")] == [2]
    (undecodable,) = sink.read("undecodable")
    assert undecodable.key == b"k3" and undecodable.value == frames[3]
    reason = (dict(undecodable.headers)["__rule.exception"] or b"").decode()
    assert "'customer' is a required property" in reason, reason


def test_a_jsonata_migration_upgrades_records_of_an_older_major(spark: Any, tmp_path: Path) -> None:
    """Version 1 calls the buyer `customer`, version 2 (major 2) `buyer`; v1 frames read as v2."""
    registry = LocalRegistry()
    registry.set_config(SUBJECT, compatibility="NONE")
    first = {**payload([]), "metadata": {"properties": {"major": "1"}}}
    registry.register_schema(SUBJECT, Schema.from_dict(first))
    properties = {k: v for k, v in ORDER["properties"].items() if k != "customer"}
    renamed = {
        **ORDER,
        "properties": {**properties, "buyer": {"type": "string", "maxLength": 4}},
        "required": ["id", "buyer", "amount"],
    }
    upgrade = {
        "name": "customerToBuyer",
        "kind": "TRANSFORM",
        "type": "JSONATA",
        "mode": "UPGRADE",
        "expr": "$merge([$sift($, function($v, $k) {$k != 'customer'}), {'buyer': customer}])",
    }
    second = {
        "schemaType": "JSON",
        "schema": json.dumps(renamed),
        "metadata": {"properties": {"major": "2"}},
        "ruleSet": {"migrationRules": [upgrade]},
    }
    registry.register_schema(SUBJECT, Schema.from_dict(second))
    reader = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / "dlq"))
    frames = [(encode_frame(1, json.dumps(order).encode()),) for order in ORDERS]
    frames.append((encode_frame(1, b'{"id": 9, "customer": "zachary", "amount": 1.0}'),))  # too long in v2
    read = reader.deserialize(
        spark.createDataFrame(frames, "value binary"), on_decode_error="DLQ", decode_dlq_topic="undecodable"
    )
    # `email` is optional and accepts null: `_absent` says where a document left it out (§1.5).
    assert read.columns == ["id", "email", "amount", "buyer", "_absent"]
    assert sorted((row["id"], row["buyer"]) for row in read.collect()) == [(1, "ann"), (2, "bob"), (3, "cy")]
    (undecodable,) = LocalTopicSink(tmp_path / "dlq").read("undecodable")
    reason = (dict(undecodable.headers)["__rule.exception"] or b"").decode()
    assert "migrated record does not fit the target schema" in reason and "customerToBuyer" in reason, reason


CUSTOMER_SCHEMA = {
    "$id": "https://acme.example/customer.json",
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "tier": {"$ref": "#/definitions/tier"},
    },
    "required": ["name", "tier"],
    "definitions": {"tier": {"type": "string", "enum": ["gold", "basic"]}},
}
REFERRING_ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"$ref": "customer.json"},
        "tier": {"$ref": "customer.json#/definitions/tier"},
        "amount": {"type": "number"},
    },
    "required": ["id", "customer", "amount"],
}
CUSTOMER_REFERENCE = {"name": "customer.json", "subject": "customer", "version": 1}
REFERRING_ORDERS = [
    {"id": 1, "customer": {"name": "ann", "tier": "gold"}, "tier": "gold", "amount": 12.5},
    {"id": 2, "customer": {"name": "bob", "tier": "basic"}, "tier": "basic", "amount": 3.0},
]


def _with_customer(register: Any) -> None:
    """The customer schema, then an order schema referencing it by name, through `register`."""
    register("customer", {"schemaType": "JSON", "schema": json.dumps(CUSTOMER_SCHEMA)})
    order = {"schemaType": "JSON", "schema": json.dumps(REFERRING_ORDER), "references": [CUSTOMER_REFERENCE]}
    register(SUBJECT, order)


def test_a_schema_referencing_another_subject_reads_frames_the_reference_writes(
    spark: Any, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import Schema as ReferenceSchema
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from reference_oracle import mock_client

    registry = LocalRegistry()
    _with_customer(lambda subject, p: registry.register_schema(subject, Schema.from_dict(p)))
    client = mock_client(f"mock://json-references-{tmp_path.name}")
    _with_customer(lambda subject, p: client.register_schema(subject, ReferenceSchema.from_dict(p)))
    sink = LocalTopicSink(tmp_path / "dlq")
    orders = DataContract(registry, SUBJECT, dlq_sink=sink)
    customer = orders.spark_schema["customer"].dataType
    assert customer.simpleString() == "struct<name:string,tier:string>"

    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    serializer = JSONSerializer(
        None, client, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    frames = [serializer(dict(order), ctx) for order in REFERRING_ORDERS]
    # The referenced schema's enum holds here too: an unknown tier is undecodable.
    platinum = {**REFERRING_ORDERS[0], "customer": {"name": "cy", "tier": "platinum"}}
    frames.append(frames[0][:5] + json.dumps(platinum).encode())
    df = spark.createDataFrame([(frame,) for frame in frames], "value binary")
    read = orders.deserialize(df, on_decode_error="DLQ", decode_dlq_topic="undecodable")
    rows = sorted(read.collect(), key=lambda row: row["id"])
    assert [(row["customer"].asDict(), row["tier"]) for row in rows] == [
        (order["customer"], order["tier"]) for order in REFERRING_ORDERS
    ]
    (undecodable,) = sink.read("undecodable")
    assert (
        "'platinum' is not one of ['gold', 'basic']"
        in (dict(undecodable.headers)["__rule.exception"] or b"").decode()
    )

    written = orders.serialize(read.select("id", "customer", "tier", "amount")).collect()
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    back = sorted((deserializer(bytes(row["value"]), ctx) for row in written), key=lambda o: o["id"])
    assert back == REFERRING_ORDERS


def test_a_reference_that_is_not_json_is_refused_naming_it(tmp_path: Path) -> None:
    from contracts.formats.json_schema.types import parse_json_schema
    from contracts.formats.protocol import Reference

    with pytest.raises(ContractError, match=r"the reference 'customer\.json' is not JSON"):
        parse_json_schema(json.dumps(REFERRING_ORDER), [Reference("customer.json", "{nope")])
    with pytest.raises(ContractError, match=r"\$ref 'customer.json' outside this schema \(no schema it"):
        parse_json_schema(json.dumps(REFERRING_ORDER), [Reference("other.json", json.dumps(CUSTOMER_SCHEMA))])


def test_absent_and_null_properties_survive_deserialize_and_serialize_on_both_paths(
    spark: Any, tmp_path: Path
) -> None:
    """`_absent` keeps an absent property apart from a null one (docs/semantics.md §1.5, §3.6):
    READ rules see the document's presence, and the frames written back are the frames read."""
    from decode_paths import path_chosen

    from contracts.engine.jvm_json import PATH_ENV

    has_email = {"name": "hasEmail", "kind": "CONDITION", "type": "CEL", "mode": "READ",
                 "expr": "has(message.email)", "onFailure": "NONE"}  # fmt: skip
    registry = LocalRegistry()
    registry.register_schema(SUBJECT, Schema.from_dict(payload([has_email])))
    bodies = [
        b'{"id":1,"customer":"ann","email":"a@b.c","amount":1.0}',
        b'{"id":2,"customer":"bob","email":null,"amount":2.0}',
        b'{"id":3,"customer":"cy","amount":3.0}',
    ]
    frames = spark.createDataFrame([(encode_frame(1, body),) for body in bodies], "value binary")
    for path in ("python", "jvm"):
        with path_chosen(PATH_ENV, path):
            contract = DataContract(registry, SUBJECT, dlq_sink=LocalTopicSink(tmp_path / path))
            read = contract.deserialize(frames, key_col=None)
            rows = read.orderBy("id").collect()
            assert [row["_absent"] for row in rows] == [None, None, ["/email"]], path
            counts = metrics_of(read).get()  # type: ignore[union-attr]
            assert (counts["hasEmail"].passed, counts["hasEmail"].failed) == (2, 1), path  # null is present
            written = contract.serialize(read.orderBy("id").repartition(1))
            assert [bytes(row["value"])[5:] for row in written.collect()] == bodies, path
    # Built by hand, without `_absent`: a null property that accepts null is written as null.
    by_hand = spark.createDataFrame(
        [(4, "dee", None, 4.0)], "id long, customer string, email string, amount double"
    )
    (row,) = contract.serialize(by_hand).collect()
    assert bytes(row["value"])[5:] == b'{"id":4,"customer":"dee","email":null,"amount":4.0}'


def test_a_dlq_value_read_back_keeps_absent_and_null_properties_apart(spark: Any, tmp_path: Path) -> None:
    """A WRITE-side DLQ value is the record's document: a property it leaves out is listed in the
    record read back (`read_dlq_value`), one it holds as null is not (docs/semantics.md §1.5, §7.7)."""
    huge = {**POSITIVE, "name": "huge", "expr": "message.amount > 100.0", "params": {"dlq.topic": "small"}}
    orders, sink = contract(tmp_path, [huge])
    df = spark.createDataFrame(
        [(1, "ann", None, 1.0, ["/email"]), (2, "bob", None, 2.0, None)],
        "id long, customer string, email string, amount double, _absent array<string>",
    )
    assert orders.write(df).count() == 0
    values = sorted(json.loads(record.value or b"")["id"] for record in sink.read("small"))
    assert values == [1, 2]
    read = sink.read_df(spark, "small", orders).orderBy("record.id").collect()
    assert [(row.record.id, row.record.email, row.record._absent) for row in read] == [
        (1, None, ["/email"]),
        (2, None, None),
    ]
