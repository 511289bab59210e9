"""JSONata value expressions as Spark Columns, with jsonata-python's exact undefined, null and error rules.

A compiled expression is a `Value`: its Column, its JSONata kind, whether it is *undefined* (a
missing key, a path through null — distinct from JSON null, which a record's null field is) and
whether jsonata-python would raise. Flags are Python booleans when known at compile time, else
non-null boolean Columns. What has no exact native form raises `NotNativeJsonata`.

jsonata-python reads a record's JSON view (contracts.formats.avro.json_view): bytes, decimals, dates and
timestamps are strings and numbers there, which these Columns do not compute with; such a field
is a `copy`, taken whole into a result, where `whole` gives the value the view carries back.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from contracts.formats.avro import TYPE_KEY
from contracts.formats.avro.json_view import has_json_view

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField, StructType

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
# Node attributes that change what a plain name, literal or operator means (predicates, grouping, …).
_MODIFIERS = ("predicate", "stages", "group", "focus", "index", "tuple", "ancestor", "keep_array")
_ARITHMETIC = frozenset("+-*/")
_ORDERING = frozenset({"<", "<=", ">", ">="})


_PROBING: ContextVar[bool] = ContextVar("jsonata_probing", default=False)


class _StandIn:
    """Any Column or functions module while probing: every call or operator gives the stand-in back,
    so the driver learns whether a rule compiles natively without needing a Spark session."""

    def __getattr__(self, name: str) -> Any:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def _operator(self, *args: Any) -> Any:
        return self

    __and__ = __rand__ = __or__ = __ror__ = __invert__ = __neg__ = _operator
    __add__ = __sub__ = __mul__ = __truediv__ = __mod__ = _operator
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _operator  # type: ignore[assignment]
    __hash__ = object.__hash__


STAND_IN: Any = _StandIn()


@contextmanager
def probing() -> Iterator[Any]:
    """Compile against the stand-in: raises NotNativeJsonata exactly where building real Columns would."""
    token = _PROBING.set(True)
    try:
        yield STAND_IN
    finally:
        _PROBING.reset(token)


def spark_functions() -> Any:
    """pyspark.sql.functions, or the stand-in while probing."""
    if _PROBING.get():
        return STAND_IN
    from pyspark.sql import functions

    return functions


class NotNativeJsonata(Exception):
    """The expression has no provably identical native form: the rule runs in Python."""


@dataclass(frozen=True)
class Value:
    """A JSONata value as Columns. kind: string, number, boolean, record, null (the literal), or
    copy (a record field taken whole by `$`, `$sift`, `$merge` or a path, any type). numeric: for
    numbers, the Python type jsonata-python yields — int, float, or auto (int when integral:
    arithmetic). source: the Avro type (fastavro's expanded schema) of a value taken unchanged
    from the record, None for a computed one."""

    kind: str
    column: Column
    dtype: DataType
    missing: Any = False
    error: Any = False
    numeric: str = ""
    nullable: bool = True
    source: Any = None


def either(a: Any, b: Any) -> Any:
    """Logical or of two flags, folding Python constants."""
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return a | b


def both(a: Any, b: Any) -> Any:
    """Logical and of two flags, folding Python constants."""
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return a & b


def negated(a: Any) -> Any:
    return (not a) if isinstance(a, bool) else ~a


def as_column(flag: Any) -> Column:
    F = spark_functions()

    return F.lit(flag) if isinstance(flag, bool) else flag


def plain(node: Any) -> Any:
    """The node, after refusing modifiers (filters, grouping, …) that only the interpreter handles."""
    if any(getattr(node, name, None) for name in _MODIFIERS):
        raise NotNativeJsonata(f"modifier on {node.type}")
    return node


@dataclass(frozen=True)
class Scope:
    """The record being evaluated: its struct Column, Spark type and Avro schema (expanded)."""

    record: Column
    record_type: StructType
    schema: Any

    def root(self) -> Value:
        return Value("record", self.record, self.record_type, nullable=False, source=self.schema)


def non_null(schema: Any) -> Any:
    """A ["null", T] union's T; any other type as it is."""
    if isinstance(schema, list):
        branches = [branch for branch in schema if branch != "null"]
        if len(branches) == 1:
            return branches[0]
    return schema


def field_schemas(record: Any) -> dict[str, Any]:
    """The Avro type of each field of an (expanded) record schema, by name."""
    return {f["name"]: f["type"] for f in non_null(record)["fields"]}


def whole(value: Value) -> Column:
    """The value as a result holds it: what the JSON view carries back (see `view_column`)."""
    if value.source is None:
        return value.column
    viewed = view_column(value.column, value.source, value.dtype)
    return value.column if viewed is None else viewed


def view_column(column: Column, schema: Any, dtype: DataType) -> Column | None:
    """The Column a value of this Avro type becomes on its way through the JSON view and back,
    None where that is the value itself: a millisecond timestamp loses its microseconds (the view
    counts milliseconds). A fixed (whose size the way back checks) or a union of several branches
    holding bytes or logical types has no exact native form."""
    from pyspark.sql import types as T

    F = spark_functions()
    schema = non_null(schema)
    if isinstance(schema, list):
        if any(has_json_view(branch) for branch in schema):
            raise NotNativeJsonata("a union of several branches with bytes or logical types")
        return None
    kind = schema if isinstance(schema, str) else schema["type"]
    logical = None if isinstance(schema, str) else schema.get("logicalType")
    if kind == "fixed" and logical != "decimal":
        raise NotNativeJsonata("a fixed, whose size the JSON view's way back checks")
    if kind == "long" and logical == "timestamp-millis":
        return F.timestamp_millis(F.unix_millis(column))
    if kind == "long" and logical == "local-timestamp-millis":
        fraction = F.extract(F.lit("SECOND"), column) * F.lit(1000) % F.lit(1)
        return column - F.make_dt_interval(secs=fraction / F.lit(1000))
    if kind == "record" and isinstance(dtype, T.StructType):
        fields = [
            (f.name, view_column(column.getField(f.name), f_schema["type"], f.dataType))
            for f, f_schema in zip(dtype.fields, schema["fields"], strict=True)
        ]
        if all(viewed is None for _, viewed in fields):
            return None
        rebuilt = F.struct(
            *[
                (viewed if viewed is not None else column.getField(name)).alias(name)
                for name, viewed in fields
            ]
        )
        return F.when(column.isNotNull(), rebuilt)
    if kind == "array" and isinstance(dtype, T.ArrayType):
        probe = view_column(column, schema["items"], dtype.elementType)
        if probe is None:
            return None
        return F.transform(column, lambda item: view_column(item, schema["items"], dtype.elementType))
    if kind == "map" and isinstance(dtype, T.MapType):
        probe = view_column(column, schema["values"], dtype.valueType)
        if probe is None:
            return None
        return F.transform_values(
            column, lambda _, item: view_column(item, schema["values"], dtype.valueType)
        )
    return None


def compile_value(node: Any, scope: Scope) -> Value:
    """The Value of one expression node over the record."""
    node = plain(node)
    compiler = _COMPILERS.get(node.type)
    if compiler is None:
        raise NotNativeJsonata(node.type)
    return compiler(node, scope)


def _literal(node: Any, scope: Scope) -> Value:
    F = spark_functions()
    from pyspark.sql import types as T

    value = node.value
    if node.type == "string":
        if any("\ud800" <= character <= "\udfff" for character in value):
            # jsonata-python reads `\ud83d\ude00` as two lone surrogates, which the JVM cannot hold.
            raise NotNativeJsonata("a string literal with a lone surrogate")
        return Value("string", F.lit(value), T.StringType())
    if isinstance(value, bool):
        return Value("boolean", F.lit(value), T.BooleanType())
    if isinstance(value, int) and -(2**31) <= value < 2**31:
        return Value("number", F.lit(value).cast("int"), T.IntegerType(), numeric="int")
    if isinstance(value, int) and _LONG_MIN <= value <= _LONG_MAX:
        return Value("number", F.lit(value).cast("long"), T.LongType(), numeric="int")
    if isinstance(value, int) and int(float(value)) == value:
        # A large literal such as 1e300: an integral double, as arithmetic results are.
        return Value("number", F.lit(float(value)), T.DoubleType(), numeric="auto")
    if isinstance(value, float):
        return Value("number", F.lit(value).cast("double"), T.DoubleType(), numeric="float")
    if node.type == "value" and value is None:  # the `null` literal
        return Value("null", F.lit(None), T.NullType())
    raise NotNativeJsonata(f"literal {value!r}")


def _variable(node: Any, scope: Scope) -> Value:
    if node.value != "":
        raise NotNativeJsonata(f"variable ${node.value}")
    return scope.root()


def _path(node: Any, scope: Scope) -> Value:
    """`a.b.c` or `$.a`: struct fields; a step through null is undefined, a null field is JSON null."""
    steps = [plain(step) for step in node.steps]
    if steps and steps[0].type == "variable" and steps[0].value == "":
        steps = steps[1:]
    if not steps or any(step.type != "name" for step in steps):
        raise NotNativeJsonata("path")
    current = scope.root()
    for step in steps:
        if current.kind != "record":
            raise NotNativeJsonata("path step into a non-record")
        current = _field(current, str(step.value))
    return current


def _field(parent: Value, name: str) -> Value:
    from pyspark.sql import types as T

    assert isinstance(parent.dtype, T.StructType)
    fields = {f.name: f for f in parent.dtype.fields}
    if name not in fields:
        raise NotNativeJsonata(f"no field {name}")
    field = fields[name]
    source = field_schemas(parent.source)[name] if parent.source is not None else None
    # A step through a null record is undefined (the root record is never null).
    missing = either(parent.missing, parent.column.isNull()) if parent.nullable else parent.missing
    kind = field_kind(field, source)
    return Value(
        kind,
        parent.column.getField(name),
        field.dataType,
        missing,
        parent.error,
        _numeric(field),
        True,
        source,
    )


def field_kind(field: StructField, source: Any = None) -> str:
    """A record field's JSONata kind when a path reaches it: bytes, decimals, dates and timestamps
    are copies (their JSON view is not what the Column holds); arrays, maps and unions have none."""
    from pyspark.sql import types as T

    avro_type = field.metadata.get(TYPE_KEY)
    dtype = field.dataType
    if source is not None and _viewed_leaf(non_null(source)):
        return "copy"
    if isinstance(dtype, T.StringType) and avro_type in ("STRING", "ENUM"):
        return "string"
    if isinstance(dtype, T.BooleanType) and avro_type == "BOOLEAN":
        return "boolean"
    if _numeric(field):
        return "number"
    if isinstance(dtype, T.StructType) and avro_type == "RECORD":
        return "record"
    raise NotNativeJsonata(f"field {field.name} of type {dtype.simpleString()}")


_VIEWED_LOGICAL = frozenset(
    {
        "decimal",
        "date",
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
    }
)


def _viewed_leaf(schema: Any) -> bool:
    """Bytes, fixed, decimals, dates and timestamps: values whose JSON view is another JSON type
    than their Column holds (times and uuids are numbers and strings in both)."""
    if isinstance(schema, str):
        return schema == "bytes"
    if not isinstance(schema, dict):
        return False
    return schema["type"] in ("bytes", "fixed") or schema.get("logicalType") in _VIEWED_LOGICAL


def _numeric(field: StructField) -> str:
    from pyspark.sql import types as T

    avro_type = field.metadata.get(TYPE_KEY)
    if isinstance(field.dataType, T.IntegerType | T.LongType) and avro_type in ("INT", "LONG"):
        return "int"
    if isinstance(field.dataType, T.FloatType | T.DoubleType) and avro_type in ("FLOAT", "DOUBLE"):
        return "float"
    return ""


def is_null(value: Value) -> Any:
    """JSON null (a record's null field, or the `null` literal) — as opposed to undefined."""
    if value.kind == "null":
        return True
    if not value.nullable:
        return False
    return both(negated(value.missing), value.column.isNull())


def _require(value: Value, *kinds: str) -> Value:
    if value.kind not in kinds:
        raise NotNativeJsonata(f"{value.kind} operand")
    return value


def _double(value: Value) -> Column:
    return value.column.cast("double")


def _not_finite(column: Column) -> Column:
    F = spark_functions()

    return F.isnan(column) | (F.abs(column) == F.lit(float("inf")))


def _not_a_number(value: Value) -> Any:
    """jsonata-python raises on an arithmetic operand that is defined but not finite: null, NaN, ±inf."""
    F = spark_functions()

    fault = is_null(value)
    if value.numeric != "int":
        fault = either(fault, F.coalesce(_not_finite(_double(value)), F.lit(False)))
    return fault


def _arithmetic(op: str, left: Value, right: Value) -> Value:
    """+ - * / in doubles; undefined if an operand is; division by zero and overflow to ±inf raise."""
    F = spark_functions()
    from pyspark.sql import types as T

    _require(left, "number")
    _require(right, "number")
    missing = either(left.missing, right.missing)
    error = either(either(left.error, right.error), either(_not_a_number(left), _not_a_number(right)))
    a, b = _double(left), _double(right)
    if op == "/":
        result = F.try_divide(a, b)
        error = either(error, both(negated(missing), F.coalesce(b == F.lit(0.0), F.lit(False))))
    else:
        result = {"+": a + b, "-": a - b, "*": a * b}[op]
    overflow = F.coalesce(F.abs(result) == F.lit(float("inf")), F.lit(False))
    return Value("number", result, T.DoubleType(), missing, either(error, overflow), "auto")


def _negative(node: Any, scope: Scope) -> Value:
    from pyspark.sql import types as T

    if node.value != "-":
        raise NotNativeJsonata(f"unary {node.value}")
    operand = _require(compile_value(node.expression, scope), "number")
    error = either(operand.error, _not_a_number(operand))
    return Value("number", -_double(operand), T.DoubleType(), operand.missing, error, "auto")


def _text(value: Value) -> Column:
    """A `&` operand as jsonata-python's $string renders it: undefined is '', JSON null 'null'."""
    F = spark_functions()

    _require(value, "string", "boolean", "null")
    if value.kind == "null":
        # A null branch of a conditional is undefined where the condition chose no branch.
        return F.when(as_column(value.missing), F.lit("")).otherwise(F.lit("null"))
    text = value.column
    if value.kind == "boolean":
        text = F.when(value.column, F.lit("true")).otherwise(F.lit("false"))
    return (
        F.when(as_column(value.missing), F.lit("")).when(value.column.isNull(), F.lit("null")).otherwise(text)
    )


def _concat(left: Value, right: Value) -> Value:
    F = spark_functions()
    from pyspark.sql import types as T

    column = F.concat(_text(left), _text(right))
    return Value("string", column, T.StringType(), False, either(left.error, right.error), nullable=False)


def _equal_values(left: Value, right: Value) -> Column:
    """Equality of two defined, non-null values: numbers as doubles (NaN equals nothing, unlike Spark)."""
    F = spark_functions()

    if left.kind == "number":
        a, b = _double(left), _double(right)
        return (a == b) & ~F.isnan(a)
    return left.column == right.column


def _equality(op: str, left: Value, right: Value) -> Value:
    """= and !=: false when either side is undefined; JSON null equals only null; kinds never mix."""
    F = spark_functions()
    from pyspark.sql import types as T

    kinds = {left.kind, right.kind} - {"null"}
    # Against the null literal any value compares by its nullness (a copy's JSON view is null too).
    compared = kinds if "null" not in (left.kind, right.kind) else set()
    if len(kinds) > 1 or compared - {"string", "number", "boolean"}:
        raise NotNativeJsonata("equality of these kinds")
    left_null, right_null = as_column(is_null(left)), as_column(is_null(right))
    if kinds and "null" not in (left.kind, right.kind):
        equal = (
            F.when(left_null & right_null, F.lit(True))
            .when(left_null | right_null, F.lit(False))
            .otherwise(_equal_values(left, right))
        )
    else:
        equal = left_null & right_null
    result = equal if op == "=" else ~equal
    value = F.when(as_column(either(left.missing, right.missing)), F.lit(False)).otherwise(result)
    return Value("boolean", value, T.BooleanType(), False, either(left.error, right.error), nullable=False)


def _ordering(op: str, left: Value, right: Value) -> Value:
    """< <= > >=: strings or numbers of one kind; JSON null raises, undefined gives undefined."""
    F = spark_functions()
    from pyspark.sql import types as T

    if left.kind != right.kind or left.kind not in ("string", "number"):
        raise NotNativeJsonata("ordering of these kinds")
    error = either(either(left.error, right.error), either(is_null(left), is_null(right)))
    missing = either(left.missing, right.missing)
    a, b = left.column, right.column
    exact = left.kind == "string" or (left.numeric == right.numeric == "int")
    if not exact:
        if _long_against_auto(left, right) or _long_against_auto(right, left):
            # Python compares an int with an integral double exactly; Spark would round the long.
            raise NotNativeJsonata("long compared with an arithmetic result")
        a, b = _double(left), _double(right)
    compared = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    if not exact:
        compared = compared & ~F.isnan(a) & ~F.isnan(b)
    return Value("boolean", compared, T.BooleanType(), missing, error)


def _long_against_auto(value: Value, other: Value) -> bool:
    from pyspark.sql import types as T

    return value.numeric == "int" and isinstance(value.dtype, T.LongType) and other.numeric == "auto"


def truth(value: Value) -> Column:
    """jsonata-python's boolize: undefined and null are false, strings by length, numbers by non-zero."""
    F = spark_functions()

    if value.kind == "null":
        return F.lit(False)
    if value.kind == "boolean":
        test = value.column
    elif value.kind == "string":
        test = F.length(value.column) > 0
    elif value.kind == "number":
        test = value.column != F.lit(0)
    else:
        raise NotNativeJsonata(f"truth of a {value.kind}")
    return F.coalesce(test, F.lit(False))


def _logical(op: str, left: Value, right: Value) -> Value:
    """and/or: both sides boolized, the right side evaluated (and able to raise) only when needed."""
    from pyspark.sql import types as T

    a, b = truth(left), truth(right)
    if op == "and":
        return Value(
            "boolean", a & b, T.BooleanType(), False, either(left.error, both(a, right.error)), nullable=False
        )
    return Value(
        "boolean", a | b, T.BooleanType(), False, either(left.error, both(~a, right.error)), nullable=False
    )


def _binary(node: Any, scope: Scope) -> Value:
    op = str(node.value)
    left, right = compile_value(node.lhs, scope), compile_value(node.rhs, scope)
    if op in _ARITHMETIC:
        return _arithmetic(op, left, right)
    if op == "&":
        return _concat(left, right)
    if op in ("=", "!="):
        return _equality(op, left, right)
    if op in _ORDERING:
        return _ordering(op, left, right)
    if op in ("and", "or"):
        return _logical(op, left, right)
    raise NotNativeJsonata(f"operator {op}")


def _condition(node: Any, scope: Scope) -> Value:
    """`c ? a : b`: branches of one kind and type; without an else, a false condition is undefined."""
    F = spark_functions()

    test = compile_value(node.condition, scope)
    chosen = truth(test)
    then = compile_value(node.then, scope)
    if node._else is None:
        return replace(
            then,
            column=F.when(chosen, then.column),
            missing=either(negated(chosen), then.missing),
            error=either(test.error, both(chosen, then.error)),
            nullable=True,
        )
    other = compile_value(node._else, scope)
    if (then.kind, then.dtype, then.numeric) != (other.kind, other.dtype, other.numeric):
        raise NotNativeJsonata("branches of different kinds")
    return Value(
        then.kind,
        F.when(chosen, then.column).otherwise(other.column),
        then.dtype,
        F.when(chosen, as_column(then.missing)).otherwise(as_column(other.missing)),
        either(test.error, F.when(chosen, as_column(then.error)).otherwise(as_column(other.error))),
        then.numeric,
    )


def _block(node: Any, scope: Scope) -> Value:
    if len(node.expressions) != 1:
        raise NotNativeJsonata("block of several expressions")
    return compile_value(node.expressions[0], scope)


def _function(node: Any, scope: Scope) -> Value:
    """Only `$exists(x)`: whether x is defined (a null field exists, a step through null does not)."""
    from pyspark.sql import types as T

    procedure = plain(node.procedure)
    if procedure.type != "variable":
        raise NotNativeJsonata("a call of a computed function")
    if procedure.value != "exists":
        raise NotNativeJsonata(f"${procedure.value}")  # explain() names it: "no native form for $uppercase"
    if len(node.arguments) != 1:
        raise NotNativeJsonata(f"$exists with {len(node.arguments)} arguments")
    argument = compile_value(node.arguments[0], scope)
    exists = as_column(negated(argument.missing))
    return Value("boolean", exists, T.BooleanType(), False, argument.error, nullable=False)


def _unary(node: Any, scope: Scope) -> Value:
    if node.value == "-":
        return _negative(node, scope)
    raise NotNativeJsonata(f"unary {node.value} as a value")


_COMPILERS = {
    "string": _literal,
    "number": _literal,
    "value": _literal,
    "variable": _variable,
    "path": _path,
    "binary": _binary,
    "unary": _unary,
    "condition": _condition,
    "block": _block,
    "function": _function,
}
