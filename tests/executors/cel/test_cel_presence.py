"""CEL's `has()` is presence, decided by the format (docs/semantics.md §3.6): natively, in Python and
in the reference alike, on records whose fields are absent, null, unset or at their defaults.

For each format a list of drawn records goes through the format into Spark (`to_struct`, as a
decode leaves them) and each rule runs three ways: its native step on the DataFrame, its Python
twin on the records the Python pass reads back (`read_struct`), and the reference's CEL executor
(confluent-kafka 2.16.1's `msg_to_cel` and evaluator) on the document or message itself. A rule
whose native form does not exist (a property reached through a comprehension) runs the last two.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from contracts import formats
from contracts.formats.arrow_types import arrow_type
from contracts.model import Rule, RuleKind, RuleMode
from executors.cel import CelExecutor
from executors.protocol import NativeStep, RuleContext

SETTINGS = settings(
    max_examples=examples(3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
MAYBE_TEXT = st.sampled_from(["", "a", "x y"])


def _reference(expr: str, message: Any) -> bool:
    """The reference's CEL CONDITION outcome: a truthy result passes, an evaluation error fails."""
    import celpy
    from celpy.evaluation import CELEvalError
    from confluent_kafka.schema_registry.rules.cel.cel_executor import msg_to_cel
    from confluent_kafka.schema_registry.rules.cel.cel_field_presence import InterpretedRunner
    from confluent_kafka.schema_registry.rules.cel.extra_func import EXTRA_FUNCS

    env = celpy.Environment(runner_class=InterpretedRunner)
    program = env.program(env.compile(expr), functions=EXTRA_FUNCS)
    try:
        result = program.evaluate({"message": msg_to_cel(message)})
    except Exception:
        return False
    return not isinstance(result, CELEvalError) and bool(result)


def _outcomes(
    spark: Any, schema_type: str, parsed: Any, records: list[Any], rules: list[str]
) -> dict[str, tuple[list[bool] | None, list[bool]]]:
    """Each rule's outcomes on `records`: natively (None without a native form) and in Python."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructField, StructType

    schema_format = formats.get(schema_type)
    spark_type = schema_format.spark_type(parsed)
    column = schema_format.to_struct(records, parsed, arrow_type(spark_type))
    read_back = schema_format.read_struct(column, parsed).records
    table = pa.table({"i": pa.array(range(len(records)), pa.int32()), "r": column})
    df = spark.createDataFrame(
        table, StructType([StructField("i", IntegerType()), StructField("r", spark_type)])
    )
    steps = {}
    for expr in rules:
        rule = Rule("r", RuleKind.CONDITION, RuleMode.WRITE, "CEL", expr)
        ctx = RuleContext(rule, "p-value", 1, RuleMode.WRITE, parsed, spark_type, schema_format)
        steps[expr] = CelExecutor().compile(ctx)
    natives = {expr: step for expr, step in steps.items() if isinstance(step, NativeStep)}
    columns = [
        F.coalesce(step.build(F.col("r")).passed, F.lit(False)).alias(f"c{n}")
        for n, step in enumerate(natives.values())
    ]
    rows = df.orderBy("i").select(*columns).collect() if columns else []
    out: dict[str, tuple[list[bool] | None, list[bool]]] = {}
    for expr, step in steps.items():
        batch = step.batch if isinstance(step, NativeStep) else step
        assert batch is not None
        python = [outcome.passed for outcome in batch.factory()(read_back)]
        native = None
        if expr in natives:
            index = list(natives).index(expr)
            native = [bool(row[f"c{index}"]) for row in rows]
        out[expr] = (native, python)
    return out


def _disagreements(outcomes: dict[str, Any], expected: dict[str, list[bool]], shown: list[Any]) -> list[str]:
    problems = []
    for expr, (native, python) in outcomes.items():
        for i, want in enumerate(expected[expr]):
            if python[i] != want or (native is not None and native[i] != want):
                native_said = None if native is None else native[i]
                problems.append(
                    f"{expr}: reference {want}, python {python[i]}, native {native_said} on {shown[i]!r}"
                )
    return problems


# -- JSON Schema: a property is present when the document has it; null is a value ----------------

JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "owner": {"type": ["string", "null"]},
        "note": {"type": ["string", "null"]},
        "tag": {"type": "string"},
        "addr": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "line2": {"type": ["string", "null"]}},
            "required": ["city"],
        },
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"x": {"type": ["integer", "null"]}}},
        },
    },
    "required": ["id", "owner"],
}
JSON_RULES = [
    "has(message.owner)",
    "has(message.note)",
    "has(message.tag)",
    "has(message.addr)",
    "has(message.items)",
    "has(message.nope)",
    "has(message._absent)",
    "message.owner == null",
    "message.note == null",
    "message.tag == ''",
    "has(message.addr) ? has(message.addr.line2) : true",
    "has(message.addr) && has(message.addr.line2) ? message.addr.line2 == null : true",
    "has(message.items) ? message.items.all(i, has(i.x)) : true",
    "has(message.items) ? message.items.exists(i, has(i.x) && i.x == null) : false",
]


def _absent_null_or(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.sampled_from(["absent", None]) | value


@st.composite
def json_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid document: each optional property absent, null where it accepts null, or set."""
    document: dict[str, Any] = {"id": draw(st.integers(0, 3)), "owner": draw(st.none() | MAYBE_TEXT)}
    for name, value in (
        ("note", draw(_absent_null_or(MAYBE_TEXT))),
        ("tag", draw(st.just("absent") | MAYBE_TEXT)),
    ):
        if value != "absent":
            document[name] = value
    if draw(st.booleans()):
        addr: dict[str, Any] = {"city": draw(MAYBE_TEXT)}
        line2 = draw(_absent_null_or(MAYBE_TEXT))
        if line2 != "absent":
            addr["line2"] = line2
        document["addr"] = addr
    if draw(st.booleans()):
        items = []
        for x in draw(st.lists(_absent_null_or(st.integers(0, 2)), max_size=3)):
            items.append({} if x == "absent" else {"x": x})
        document["items"] = items
    return document


@pytest.mark.one_pass
def test_the_json_mask_keeps_absent_and_null_apart_through_spark() -> None:
    schema_format = formats.get("JSON")
    parsed = schema_format.parse(json.dumps(JSON_SCHEMA), ())
    documents = [{"id": 1, "owner": None}, {"id": 2, "owner": "o", "note": None, "items": [{"x": None}, {}]}]
    column = schema_format.to_struct(documents, parsed, arrow_type(schema_format.spark_type(parsed)))
    assert [value["_absent"] for value in column.to_pylist()] == [
        ["/note", "/addr/line2"][:1],
        ["/items/1/x"],
    ]
    assert schema_format.read_struct(column, parsed).records == documents
    assert [json.loads(schema_format.encode(d, parsed)) for d in documents] == documents


@SETTINGS
@given(documents=st.lists(json_documents(), min_size=20, max_size=40))
def test_json_has_is_the_property_in_the_document(spark: Any, documents: list[dict[str, Any]]) -> None:
    parsed = formats.get("JSON").parse(json.dumps(JSON_SCHEMA), ())
    outcomes = _outcomes(spark, "JSON", parsed, documents, JSON_RULES)
    assert outcomes["has(message.note)"][0] is not None  # the mask is read natively
    expected = {expr: [_reference(expr, d) for d in documents] for expr in JSON_RULES}
    problems = _disagreements(outcomes, expected, documents)
    assert not problems, "\n".join(problems[:20])


# -- Protobuf: HasField semantics; an unset field reads as its default -----------------------------

PROTO = """
syntax = "proto3";
package presence;
import "google/protobuf/wrappers.proto";
message Doc {
  string id = 1;
  optional int32 n = 2;
  int64 count = 3;
  repeated string tags = 4;
  Sub sub = 5;
  google.protobuf.StringValue w = 6;
  oneof choice { string a = 7; Sub b = 8; }
  bool flag = 9;
  map<string, int32> m = 10;
  double ratio = 11;
  bytes blob = 12;
}
message Sub { int64 x = 1; optional string y = 2; }
"""
PROTO_RULES = [
    *(
        f"has(message.{name})"
        for name in ("id", "n", "count", "tags", "sub", "w", "a", "b", "flag", "m", "ratio", "blob")
    ),
    "has(message.nope)",
    "message.n == 0",
    "message.a == ''",
    "message.w == null",
    "has(message.sub) ? has(message.sub.y) : true",
    "has(message.sub) ? message.sub.y == '' : true",
    "has(message.b) ? has(message.b.x) : true",
]


@st.composite
def protobuf_fields(draw: st.DrawFn) -> dict[str, Any]:
    """Field values to set on a Doc (a field left out stays unset), defaults included."""
    chosen: dict[str, Any] = {}
    for name, values in (
        ("id", MAYBE_TEXT),
        ("n", st.integers(-1, 1)),
        ("count", st.integers(-1, 1)),
        ("tags", st.lists(MAYBE_TEXT, max_size=2)),
        ("flag", st.booleans()),
        ("ratio", st.sampled_from([0.0, -0.0, 1.5])),
        ("blob", st.sampled_from([b"", b"\x00"])),
        ("w", MAYBE_TEXT),
        ("m", st.dictionaries(st.sampled_from(["k", "l"]), st.integers(0, 1), max_size=2)),
    ):
        if draw(st.booleans()):
            chosen[name] = draw(values)
    if draw(st.booleans()):
        chosen["sub"] = {
            "x": draw(st.integers(0, 1)),
            **({"y": draw(MAYBE_TEXT)} if draw(st.booleans()) else {}),
        }
    choice = draw(st.sampled_from(["", "a", "b"]))
    if choice == "a":
        chosen["a"] = draw(MAYBE_TEXT)
    elif choice == "b":
        chosen["b"] = {"x": draw(st.integers(0, 1))}
    return chosen


def _message(descriptor: Any, chosen: dict[str, Any]) -> Any:
    from google.protobuf.message_factory import GetMessageClass

    message = GetMessageClass(descriptor)()
    for name, value in chosen.items():
        if name in ("sub", "b"):
            target = getattr(message, name)
            target.SetInParent()
            for key, item in value.items():
                setattr(target, key, item)
        elif name == "w":
            message.w.value = value
        elif name == "tags":
            message.tags.extend(value)
        elif name == "m":
            message.m.update(value)
        else:
            setattr(message, name, value)
    return message


@SETTINGS
@given(chosen=st.lists(protobuf_fields(), min_size=20, max_size=40))
def test_protobuf_has_is_has_field(spark: Any, chosen: list[dict[str, Any]]) -> None:
    from contracts.formats.protobuf.values import to_record

    parsed = formats.get("PROTOBUF").parse(PROTO, ())
    messages = [_message(parsed.message(), fields) for fields in chosen]
    records = [to_record(message) for message in messages]
    outcomes = _outcomes(spark, "PROTOBUF", parsed, records, PROTO_RULES)
    assert all(outcomes[f"has(message.{name})"][0] is not None for name in ("n", "count", "tags", "sub", "a"))
    expected = {expr: [_reference(expr, message) for message in messages] for expr in PROTO_RULES}
    problems = _disagreements(outcomes, expected, chosen)
    assert not problems, "\n".join(problems[:20])


# -- Avro: every field of the schema is present, a null one included --------------------------------

AVRO_SCHEMA = {
    "type": "record",
    "name": "Rec",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {
            "name": "sub",
            "type": [
                "null",
                {"type": "record", "name": "Sub", "fields": [{"name": "x", "type": ["null", "long"]}]},
            ],
        },
    ],
}
AVRO_RULES = [
    "has(message.id)",
    "has(message.note)",
    "has(message.sub)",
    "has(message.nope)",
    "message.note == null",
    "has(message.sub) && message.sub != null ? has(message.sub.x) : true",
]


@SETTINGS
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {
                "id": st.integers(0, 3),
                "note": st.none() | MAYBE_TEXT,
                "sub": st.none() | st.fixed_dictionaries({"x": st.none() | st.integers(0, 1)}),
            }
        ),
        min_size=10,
        max_size=20,
    )
)
def test_avro_has_is_every_field_of_the_schema(spark: Any, records: list[dict[str, Any]]) -> None:
    parsed = formats.get("AVRO").parse(json.dumps(AVRO_SCHEMA), ())
    outcomes = _outcomes(spark, "AVRO", parsed, records, AVRO_RULES)
    expected = {expr: [_reference(expr, record) for record in records] for expr in AVRO_RULES}
    problems = _disagreements(outcomes, expected, records)
    assert not problems, "\n".join(problems[:20])


# -- A field the schema lacks is absent: has() false, reading it a per-record error (§3.5) ----------

MISSING_RULES = [
    "has(message.old) ? message.old > 0 : message.id > 0",
    "!has(message.old) || message.old > 0",
    "message.old > 0 || message.id >= 0",
    "has(message.sub) && message.sub != null ? (has(message.sub.gone) ? message.sub.gone : true) : true",
]


@SETTINGS
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {
                "id": st.integers(-1, 2),
                "note": st.none() | MAYBE_TEXT,
                "sub": st.none() | st.fixed_dictionaries({"x": st.none() | st.integers(0, 1)}),
            }
        ),
        min_size=10,
        max_size=20,
    )
)
def test_rules_guarding_a_field_the_schema_lacks_compile_and_run(
    spark: Any, records: list[dict[str, Any]]
) -> None:
    parsed = formats.get("AVRO").parse(json.dumps(AVRO_SCHEMA), ())
    outcomes = _outcomes(spark, "AVRO", parsed, records, MISSING_RULES)
    assert all(native is not None for native, _ in outcomes.values())  # all native
    expected = {expr: [_reference(expr, record) for record in records] for expr in MISSING_RULES}
    problems = _disagreements(outcomes, expected, records)
    assert not problems, "\n".join(problems[:20])


@pytest.mark.one_pass
@pytest.mark.parametrize(
    ("kind", "expr", "position"),
    [
        (RuleKind.CONDITION, "message.old > 0", "1:9"),
        (RuleKind.CONDITION, "message.old > 0 ; true", "1:9"),
        (RuleKind.TRANSFORM, "{'id': message.id, 'note': message.gone, 'sub': null}", "1:36"),
    ],
)
def test_a_rule_that_reads_a_field_the_schema_lacks_whatever_the_record_is_refused(
    kind: RuleKind, expr: str, position: str
) -> None:
    from contracts.errors import ContractError

    schema_format = formats.get("AVRO")
    parsed = schema_format.parse(json.dumps(AVRO_SCHEMA), ())
    rule = Rule("r", kind, RuleMode.WRITE, "CEL", expr)
    ctx = RuleContext(
        rule, "p-value", 1, RuleMode.WRITE, parsed, schema_format.spark_type(parsed), schema_format
    )
    with pytest.raises(ContractError, match=r"reads field '(old|gone)', which the schema lacks") as refused:
        CelExecutor().compile(ctx)
    assert refused.value.position == position
