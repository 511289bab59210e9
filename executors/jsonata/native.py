"""JSONata rules as native Spark steps: a CONDITION's truth test, and TRANSFORMs that build a record.

A TRANSFORM compiles natively when its result is an object built from `$`, `$sift($, function($v,
$k) {$k != 'x' …})`, object constructors `{'a': …}` and `$merge([...])` of those. For a domain
rule the object must fit the record's own type exactly as the batch path's check decides
(missing nullable fields become null; a value of the wrong type fails). For a migration rule the
result is plain data of another version's shape: the native record is a struct of the object's
keys in JSONata's order, typed by their expressions (a key JSONata leaves out because its value is
undefined is null there and flagged in the outcome's `undefined`), for the engine to project onto
the target as it projects plain data. A key whose value is a record field taken unchanged carries
that field's Avro type in its metadata (`SOURCE_KEY`): the projection reads it from the JSON view
as the target's type, which keeps the value only where both types are the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from contracts.formats.avro import LOGICAL_TYPES_KEY, TYPE_KEY
from contracts.formats.avro.json_view import SOURCE_KEY, has_json_view, source_type
from contracts.model import RuleKind
from executors.jsonata.values import (
    NotNativeJsonata,
    Scope,
    Value,
    as_column,
    both,
    compile_value,
    either,
    field_schemas,
    is_null,
    negated,
    plain,
    probing,
    spark_functions,
    truth,
    whole,
)
from executors.protocol import NativeOutcome, RuleContext

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField

__all__ = ["NotNativeJsonata", "compile_rule"]

Entries = dict[str, Value]
_INT_RANGE = (-(2**31), 2**31 - 1)


def compile_rule(ast: Any, ctx: RuleContext, *, migration: bool) -> Callable[[Column], NativeOutcome]:
    """The rule as a function of the record Column; raises NotNativeJsonata when only Python is exact."""
    schema = ctx.schema
    if ctx.schema_format.schema_type != "AVRO":
        raise NotNativeJsonata(f"records of a {ctx.schema_format.schema_type} schema (Avro only)")
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        raise NotNativeJsonata("not a record schema")
    from fastavro.schema import expand_schema

    expanded = expand_schema(dict(schema))
    if ctx.rule.kind is RuleKind.CONDITION:
        build = _condition(ast, ctx, expanded)
    else:
        build = _transform(ast, ctx, expanded, migration)
    with probing() as stand_in:
        build(stand_in)
    return build


def _condition(ast: Any, ctx: RuleContext, schema: Any) -> Callable[[Column], NativeOutcome]:
    def build(record: Column) -> NativeOutcome:
        F = spark_functions()
        value = compile_value(ast, Scope(record, ctx.spark_type, schema))
        # The reference tests the result's Python truth: False, None, 0, '' and {} fail.
        passed = both(negated(value.error), _truthy(value))
        return NativeOutcome(F.coalesce(as_column(passed), F.lit(False)))

    return build


def _truthy(value: Value) -> Any:
    if value.kind == "record":
        return value.column.isNotNull()
    return both(negated(value.missing), truth(value))


def _transform(ast: Any, ctx: RuleContext, schema: Any, migration: bool) -> Callable[[Column], NativeOutcome]:
    def build(record: Column) -> NativeOutcome:
        F = spark_functions()
        scope = Scope(record, ctx.spark_type, schema)
        entries = _object(ast, scope)
        if entries is None:
            raise NotNativeJsonata("a transform whose result is always undefined")
        errors = _errors(entries)
        undefined: dict[str, Column] = {}
        if migration:
            passed, result = errors, _plain_struct(entries)
            undefined = {k: as_column(v.missing) for k, v in entries.items() if v.missing is not False}
        else:
            ok, result = _conforming_struct(entries, ctx, schema)
            passed = either(errors, negated(ok))
        passed = negated(passed)
        return NativeOutcome(F.coalesce(as_column(passed), F.lit(False)), result, undefined)

    return build


def _errors(entries: Entries) -> Any:
    flag: Any = False
    for value in entries.values():
        flag = either(flag, value.error)
    return flag


def _object(node: Any, scope: Scope) -> Entries | None:
    """The keys and values of an object-shaped result, in JSONata's order; None when undefined."""
    node = plain(node)
    if node.type == "variable" and node.value == "":
        return _record_entries(scope)
    if node.type == "unary" and node.value == "{":
        return _constructor(node, scope)
    if node.type == "function":
        name = _function_name(node)
        if name == "sift":
            return _sift(node, scope)
        if name == "merge":
            return _merge(node, scope)
    raise NotNativeJsonata(f"{node.type} as a record")


def _record_entries(scope: Scope) -> Entries:
    schemas = field_schemas(scope.schema)
    return {
        f.name: Value(
            "copy", scope.record.getField(f.name), f.dataType, nullable=f.nullable, source=schemas[f.name]
        )
        for f in scope.record_type.fields
    }


def _constructor(node: Any, scope: Scope) -> Entries:
    """`{'a': x, …}`: literal keys; a key whose value is undefined is left out (null in the struct)."""
    entries: Entries = {}
    for key, value in node.lhs_object:
        key = plain(key)
        if key.type != "string" or key.value in entries:
            raise NotNativeJsonata("computed or repeated key")
        entries[key.value] = compile_value(value, scope)
    return entries


def _function_name(node: Any) -> str:
    procedure = plain(node.procedure)
    return str(procedure.value) if procedure.type == "variable" else ""


def _sift(node: Any, scope: Scope) -> Entries | None:
    """`$sift($, function($v, $k) {$k != 'a' and $k != 'b'})`: the record without those keys."""
    if len(node.arguments) != 2 or not _is_root(node.arguments[0]):
        raise NotNativeJsonata("$sift of something other than $")
    dropped = _dropped_keys(plain(node.arguments[1]))
    kept = {name: value for name, value in _record_entries(scope).items() if name not in dropped}
    return kept or None


def _is_root(node: Any) -> bool:
    node = plain(node)
    return node.type == "variable" and node.value == ""


def _dropped_keys(function: Any) -> set[str]:
    if function.type != "lambda" or len(function.arguments) != 2:
        raise NotNativeJsonata("$sift predicate")
    if function.signature is not None:
        raise NotNativeJsonata("$sift predicate with a signature (jsonata-python checks its arguments)")
    key = function.arguments[1].value
    return _key_tests(plain(function.body), key)


def _key_tests(body: Any, key: str) -> set[str]:
    if body.type == "binary" and body.value == "and":
        return _key_tests(plain(body.lhs), key) | _key_tests(plain(body.rhs), key)
    if body.type == "binary" and body.value == "!=":
        lhs, rhs = plain(body.lhs), plain(body.rhs)
        if lhs.type == "variable" and lhs.value == key and rhs.type == "string":
            return {rhs.value}
    raise NotNativeJsonata("$sift predicate")


def _merge(node: Any, scope: Scope) -> Entries:
    """`$merge([a, b, …])`: later keys win, keeping the position where a key first appeared."""
    if len(node.arguments) != 1:
        raise NotNativeJsonata("$merge arguments")
    array = plain(node.arguments[0])
    if array.type != "unary" or array.value != "[" or getattr(array, "consarray", False):
        raise NotNativeJsonata("$merge of something other than an array constructor")
    merged: Entries = {}
    for item in array.expressions:
        if plain(item).type == "unary" and item.value == "[":
            raise NotNativeJsonata("nested array")
        for name, value in (_object(item, scope) or {}).items():
            if name in merged and value.missing is not False:
                # An undefined value leaves the earlier one in place: a per-row choice of kinds.
                raise NotNativeJsonata(f"key {name} possibly undefined over an earlier value")
            merged[name] = value
    return merged


def _plain_struct(entries: Entries) -> Column:
    """A migration's result: the object's keys as struct fields, typed by their values; a field
    taken unchanged from the record says its Avro type in its metadata (SOURCE_KEY)."""
    F = spark_functions()
    fields = []
    for name, value in entries.items():
        if value.kind == "null" or value.numeric == "auto":
            raise NotNativeJsonata("a migration value whose Python type varies per record")
        column = whole(value)
        if value.missing is not False:
            column = F.when(~as_column(value.missing), column)
        metadata = {SOURCE_KEY: json.dumps(source_type(value.source))} if value.source is not None else None
        fields.append(column.alias(name, metadata=metadata))
    return F.struct(*fields)


def _conforming_struct(entries: Entries, ctx: RuleContext, schema: Any) -> tuple[Any, Column]:
    """A domain result as the record's type, and whether it fits (the batch path's schema check)."""
    F = spark_functions()
    ok: Any = True
    fields = []
    types = field_schemas(schema)
    for field in ctx.spark_type.fields:
        fits, column = _conforming_field(entries.get(field.name), field, types[field.name])
        ok = both(ok, fits)
        fields.append(column.alias(field.name))
    return ok, F.struct(*fields)


def _conforming_field(value: Value | None, field: StructField, avro: Any) -> tuple[Any, Column]:
    F = spark_functions()
    if value is None or value.kind == "null":
        if not field.nullable:
            raise NotNativeJsonata(f"field {field.name} always missing")
        return True, F.lit(None).cast(field.dataType)
    fits, column = _present(value, field, avro)
    if value.kind == "copy" and value.missing is False:
        # A field copied whole keeps its own nulls, which the same type allows.
        return fits, column
    absent = either(value.missing, is_null(value))
    if absent is False:
        return fits, column
    absent = as_column(absent)
    if fits is True and field.nullable:
        return True, F.when(~absent, column)
    return F.when(absent, F.lit(field.nullable)).otherwise(as_column(fits)), F.when(~absent, column)


def _present(value: Value, field: StructField, avro: Any) -> tuple[Any, Column]:
    """Whether a defined, non-null value fits the field's Avro type, and the value as its Spark type.
    Into a field whose JSON view differs from its Column (bytes, logical types) only that field's
    own type, taken unchanged, comes back as it was; anything else is read back in Python."""
    from pyspark.sql import types as T

    avro_type = field.metadata.get(TYPE_KEY)
    target = field.dataType
    if has_json_view(avro) or field.metadata.get(LOGICAL_TYPES_KEY):
        if value.source is None or source_type(value.source) != source_type(avro):
            raise NotNativeJsonata(f"field {field.name} from a value of another type")
        if not same_shape(value.dtype, target):
            raise NotNativeJsonata(f"field {field.name} of another type")
        return True, whole(value)
    if value.kind in ("copy", "record"):
        if not same_shape(value.dtype, target):
            raise NotNativeJsonata(f"field {field.name} of another type")
        return True, whole(value)
    if value.kind == "string" and isinstance(target, T.StringType) and avro_type == "STRING":
        return True, value.column
    if value.kind == "boolean" and isinstance(target, T.BooleanType):
        return True, value.column
    if value.kind == "number":
        return _number(value, target, avro_type)
    raise NotNativeJsonata(f"{value.kind} into field {field.name}")


def _number(value: Value, target: DataType, avro_type: str | None) -> tuple[Any, Column]:
    """Numbers into int/long (Python ints in range only), double (any), float (floats only)."""
    from pyspark.sql import types as T

    F = spark_functions()
    if isinstance(target, T.DoubleType) and avro_type == "DOUBLE":
        column = value.column.cast("double")
        # jsonata-python turns an integral result into an int: -0.0 becomes 0.
        return True, column + F.lit(0.0) if value.numeric == "auto" else column
    if isinstance(target, T.FloatType) and avro_type == "FLOAT" and isinstance(value.dtype, T.FloatType):
        return True, value.column
    if isinstance(target, T.IntegerType | T.LongType) and avro_type in ("INT", "LONG"):
        return _integer(value, target)
    raise NotNativeJsonata("number into this field")


def _integer(value: Value, target: DataType) -> tuple[Any, Column]:
    from pyspark.sql import types as T

    F = spark_functions()
    low, high = _INT_RANGE if isinstance(target, T.IntegerType) else (-(2**63), 2**63)
    if value.numeric == "int":
        if isinstance(target, T.LongType) or isinstance(value.dtype, T.IntegerType):
            return True, value.column.cast(target)
        fits = value.column.between(low, high)
        return fits, F.when(fits, value.column.cast(target))
    if value.numeric == "auto":
        number = value.column.cast("double")
        # An integral double in range (floor would overflow to long under ANSI); 2**63 is out of range.
        upper = number < F.lit(float(high)) if high == 2**63 else number <= F.lit(float(high))
        fits = (number % F.lit(1.0) == F.lit(0.0)) & (number >= F.lit(float(low))) & upper
        return fits, F.when(fits, number.cast(target))
    raise NotNativeJsonata("a float into an integer field always fails")


def same_shape(a: DataType, b: DataType) -> bool:
    """Same Spark type and nullability, ignoring field metadata."""
    from pyspark.sql import types as T

    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and x.nullable == y.nullable and same_shape(x.dataType, y.dataType)
            for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return a.containsNull == b.containsNull and same_shape(a.elementType, b.elementType)
    if isinstance(a, T.MapType) and isinstance(b, T.MapType):
        return a.valueContainsNull == b.valueContainsNull and same_shape(a.valueType, b.valueType)
    return a == b
