"""CEL functions, macros, selection and literals as Spark Columns, matching cel-python 0.5.

Selection on a null fails, `has()` on a null record is false, `size(null)` is 0 (cel-python's
answers). Macros become higher-order functions; an element whose predicate fails makes the
whole macro fail unless CEL's && / || absorption decides it (all / exists).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from contracts.formats.markers import (
    ABSENT_MARK,
    CEL_DIFFERS_KEY,
    IN_DOCUMENT,
    IN_DOCUMENT_OR_NULL,
    LOGICAL_TYPES_KEY,
    TYPE_KEY,
    pointer,
)
from executors.cel.compiler import operators as ops
from executors.cel.compiler import patterns, presence
from executors.cel.compiler.terms import (
    INT_MIN,
    PASSED_ON,
    CelType,
    Env,
    NotNativeCel,
    Term,
    Val,
    any_error,
    constant_term,
    constant_type,
    derived,
    error_term,
    known,
    literal_column,
    spark_cel_type,
    spark_value,
)
from executors.cel.reference import reference_evaluate

if TYPE_CHECKING:
    from lark import Tree
    from pyspark.sql import Column
    from pyspark.sql.types import StructField

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Accessor → (Spark function of the UTC date or time of day, offset to CEL's numbering).
TIMESTAMP_ACCESSORS = frozenset(
    {
        "getFullYear",
        "getMonth",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
    }
)
_DAY_MICROS = 86_400_000_000


def fold(tree: Tree, variables: Mapping[str, Any] | None = None) -> Term:
    """A literal-only expression (or one reading only plan-time `variables`), evaluated once by
    cel-python: a constant or a constant failure."""
    try:
        value = reference_evaluate(tree, variables or {})
    except Exception:
        return error_term()
    return constant_term(value)


def record_fields(record: CelType) -> dict[str, StructField]:
    """A record's fields as CEL sees them, by name: not a JSON record's absent-property mask."""
    assert record.fields is not None
    return {f.name: f for f in record.fields.fields if not f.metadata.get(ABSENT_MARK)}


def record_field(receiver: Term, field: StructField) -> Term:
    """A record's field, as its presence reads it (`presence.read`); selecting from a null
    record fails."""
    nullable = field.nullable and not presence.reads_as_set(field)
    field_type = spark_cel_type(field.dataType, nullable, field.metadata.get(TYPE_KEY))
    times_of_day = {"time-millis", "time-micros"} & set(field.metadata.get(LOGICAL_TYPES_KEY, ()))
    if field.metadata.get(CEL_DIFFERS_KEY):
        raise NotNativeCel(
            f"field {field.name}, whose Spark value is not what CEL sees (a Protobuf enum or uint)"
        )
    if field_type.kind == "opaque" or times_of_day:
        # A time of day is an int column here but a datetime.time, no CEL type, in cel-python.
        raise NotNativeCel(f"field {field.name} holds values cel-python sees as non-CEL types")
    nullable_receiver = receiver.type.nullable
    where = None if receiver.pointer is None else pointer(receiver.pointer, field.name)
    checks_presence = presence.kind(field) in (IN_DOCUMENT, IN_DOCUMENT_OR_NULL)
    if presence.kind(field) == IN_DOCUMENT_OR_NULL and where is None:
        raise NotNativeCel(f"property {field.name} of a record not reached from `message`")

    def emit(env: Env) -> Val:
        r = receiver.emit(env)
        read, absent = presence.read(r.value.getField(field.name), field, env, where)
        value = spark_value(read, field.dataType)
        return Val(value, any_error(r.error, r.value.isNull() if nullable_receiver else None, absent))

    # The receiver's value is read once for the field, again to tell an absent property (§3.6).
    uses = (1, 0, (1 if nullable_receiver else 0) + (1 if checks_presence else 0), 1)
    fails = receiver.fails or nullable_receiver or checks_presence
    plain = presence.kind(field) is None
    term = derived(field_type, emit, [(receiver, uses)], fails=fails, depth=2 if plain else 3)
    return replace(term, pointer=where) if field_type.fields is not None else term


def map_entry(receiver: Term, key: Term) -> Term:
    """`m.k` or `m[k]` on a string-keyed map: a missing key fails, as does a null map."""
    from pyspark.sql import functions as F

    rt = receiver.type
    assert rt.elem is not None
    if key.type.kind != "string" or key.type.nullable:
        if key.type.kind in ("int", "uint", "double", "bool", "bytes"):
            return error_term()
        raise NotNativeCel(f"a map index of kind {key.type.kind}")

    def emit(env: Env) -> Val:
        r, k = receiver.emit(env), key.emit(env)
        present = F.coalesce(F.map_contains_key(r.value, k.value), F.lit(False))
        return Val(F.try_element_at(r.value, k.value), any_error(r.error, k.error, ~present))

    return derived(rt.elem, emit, [(receiver, (1, 0, 1, 1)), (key, (1, 0, 1, 1))])


def index(receiver: Term, position: Term) -> Term:
    """`list[i]` (cel-python indexes as Python does: negative from the end) or `map[key]`."""
    from pyspark.sql import functions as F

    if receiver.error or position.error:
        return error_term()
    rt = receiver.type
    if rt.kind == "map" and rt.fields is None:
        return map_entry(receiver, position)
    if rt.kind != "list" or position.type.kind != "int" or position.type.nullable:
        raise NotNativeCel(f"indexing {rt.kind} by {position.type.kind}")
    assert rt.elem is not None

    def emit(env: Env) -> Val:
        r, i = receiver.emit(env), position.emit(env)
        size = F.size(r.value).cast("long")
        at = F.when(i.value < 0, i.value + size).otherwise(i.value)
        inside = F.coalesce((at >= 0) & (at < size), F.lit(False))
        value = F.get(r.value, F.when(inside, at).cast("int"))
        return Val(value, any_error(r.error, i.error, ~inside))

    return derived(rt.elem, emit, [(receiver, (5, 0, 3, 1)), (position, (6, 0, 4, 1))], depth=6)


def has(receiver: Term, name: str) -> Term:
    """`has(x.name)`: whether a record has the field, as its format decides presence
    (`presence.present`; a field its schema lacks is absent); a map the key; a null, or a
    receiver whose evaluation fails, has nothing."""
    from pyspark.sql import functions as F

    if receiver.error:
        return receiver
    rt = receiver.type
    if rt.fields is not None:
        field = record_fields(rt).get(name)
        where = None if receiver.pointer is None else pointer(receiver.pointer, name)
        if field is not None and presence.kind(field) == IN_DOCUMENT_OR_NULL and where is None:
            raise NotNativeCel(f"has() on property {name} of a record not reached from `message`")

        def emit_record(env: Env) -> Val:
            r = receiver.emit(env)
            if field is None:
                return Val(F.lit(False))
            found = presence.present(r.value.getField(name), field, env, where)
            value = F.coalesce(r.value.isNotNull() & found, F.lit(False)) if rt.nullable else found
            return Val(_false_where(r.error, value))

        reads = (0 if field is None or presence.kind(field) is None else 1) + (1 if rt.nullable else 0)
        depth = 1 if field is None or presence.kind(field) is None else 3
        return derived(CelType("bool"), emit_record, [(receiver, (reads, 1, 0, 0))], fails=False, depth=depth)
    if rt.kind != "map":
        raise NotNativeCel(f"has() on {rt.kind}")

    def emit_map(env: Env) -> Val:
        r = receiver.emit(env)
        return Val(_false_where(r.error, F.coalesce(F.map_contains_key(r.value, F.lit(name)), F.lit(False))))

    return derived(CelType("bool"), emit_map, [(receiver, (1, 1, 0, 0))], fails=False)


def _false_where(error: Column | None, value: Column) -> Column:
    """`value`, but false where the receiver failed: cel-python's `has(e.f)` is whether reading
    `e.f` succeeds, so a receiver that fails has nothing rather than failing the test."""
    from pyspark.sql import functions as F

    return value if error is None else F.when(error, F.lit(False)).otherwise(value)


def call(name: str, receiver: Term, arguments: list[Term]) -> Term:
    """A function or method call: `size(x)` and `x.size()` alike."""
    if receiver.error or any(a.error for a in arguments):
        return error_term()
    if name == "size" and not arguments:
        return size(receiver)
    if name in ("contains", "startsWith", "endsWith") and len(arguments) == 1:
        return _string_test(name, receiver, arguments[0])
    if name == "matches" and len(arguments) == 1:
        return patterns.matches(receiver, arguments[0])
    if name in patterns.VALIDATORS and not arguments:
        return patterns.validator(name, receiver)
    if name in TIMESTAMP_ACCESSORS and not arguments:
        return _timestamp_accessor(name, receiver)
    if not arguments and name in ("int", "double", "string", "bytes", "bool", "dyn"):
        return _conversion(name, receiver)
    raise NotNativeCel(f"function {name} with {len(arguments)} arguments")


def size(operand: Term) -> Term:
    """Code points of a string, bytes of bytes, entries of a list or map; size(null) is 0 in cel-python."""
    from pyspark.sql import functions as F

    kind = operand.type.kind
    if operand.type.fields is not None:
        raise NotNativeCel("size of a record (a struct in Spark)")
    measure = {"string": F.char_length, "bytes": F.octet_length, "list": F.size, "map": F.size}.get(kind)
    if measure is None:
        if kind in ("int", "uint", "double", "bool", "timestamp", "duration"):
            return error_term()
        raise NotNativeCel(f"size of {kind}")

    def emit(env: Env) -> Val:
        val = operand.emit(env)
        value = measure(val.value).cast("long")
        if operand.type.nullable:
            value = F.when(val.value.isNull(), F.lit(0).cast("long")).otherwise(value)
        return Val(value, val.error)

    return derived(CelType("int"), emit, [(operand, (2, 0, 0, 1))], fails=operand.fails)


def _string_test(name: str, receiver: Term, argument: Term) -> Term:
    """contains / startsWith / endsWith on strings (null receiver or argument fails)."""
    if receiver.type.kind != "string" or argument.type.kind != "string":
        raise NotNativeCel(f"{name} over {receiver.type.kind} and {argument.type.kind}")
    method = {"contains": "contains", "startsWith": "startswith", "endsWith": "endswith"}[name]

    def emit(env: Env) -> Val:
        r, a = receiver.emit(env), argument.emit(env)
        nulls = [t.isNull() for t, term in ((r.value, receiver), (a.value, argument)) if term.type.nullable]
        return Val(getattr(r.value, method)(a.value), any_error(r.error, a.error, *nulls))

    fails = any(t.fails or t.type.nullable for t in (receiver, argument))
    uses = (1, 0, 1, 1)
    return derived(CelType("bool"), emit, [(receiver, uses), (argument, uses)], fails=fails, depth=2)


def _whole(micros: Column, unit: int) -> Column:
    """How many whole `unit`s a non-negative count of microseconds holds, in long arithmetic."""
    from pyspark.sql import functions as F

    return F.call_function("div", micros, F.lit(unit))


def _timestamp_accessor(name: str, receiver: Term) -> Term:
    """getFullYear() etc. in UTC (CEL's default), computed from epoch microseconds so the
    session time zone plays no part."""
    from pyspark.sql import functions as F

    if receiver.type.kind != "timestamp":
        raise NotNativeCel(f"{name} on {receiver.type.kind}")

    def emit(env: Env) -> Val:
        r = receiver.emit(env)
        micros = F.unix_micros(r.value)
        # Integer arithmetic: far from 1970 a double quotient rounds the day's last microsecond up.
        of_day = F.pmod(micros, F.lit(_DAY_MICROS))
        day = _whole(micros - of_day, _DAY_MICROS)
        date = F.date_from_unix_date(day.cast("int"))
        value = {
            "getFullYear": lambda: F.year(date),
            "getMonth": lambda: F.month(date) - 1,
            "getDate": lambda: F.dayofmonth(date),
            "getDayOfMonth": lambda: F.dayofmonth(date) - 1,
            "getDayOfWeek": lambda: F.dayofweek(date) - 1,
            "getDayOfYear": lambda: F.dayofyear(date) - 1,
            "getHours": lambda: _whole(of_day, 3_600_000_000),
            "getMinutes": lambda: _whole(of_day, 60_000_000) % 60,
            "getSeconds": lambda: _whole(of_day, 1_000_000) % 60,
            "getMilliseconds": lambda: _whole(of_day, 1000) % 1000,
        }[name]()
        null_error = r.value.isNull() if receiver.type.nullable else None
        return Val(value.cast("long"), any_error(r.error, null_error))

    fails = receiver.fails or receiver.type.nullable
    return derived(CelType("int"), emit, [(receiver, (2, 0, 1, 1))], fails=fails, depth=8)


def _conversion(name: str, operand: Term) -> Term:
    """int() / double() / string() / bytes() / bool() / dyn() where Spark's cast equals cel-python's."""
    from pyspark.sql import functions as F

    kind = operand.type.kind
    if name == "dyn" or (name, kind) in (
        ("int", "int"),
        ("double", "double"),
        ("string", "string"),
        ("bytes", "bytes"),
        ("bool", "bool"),
    ):
        return _checked(operand, operand.type.non_null(), lambda c: c, name)
    if (name, kind) == ("int", "double"):
        # Truncation toward zero; NaN, infinities and values beyond int64 fail.
        def to_int(c: Column) -> Column:
            inside = (c >= float(INT_MIN)) & (c < -float(INT_MIN))
            return F.when(inside, c).cast("long")

        return _checked(operand, CelType("int"), to_int, name, fails_on_null_result=True)
    casts = {
        ("int", "bool"): "long",
        ("double", "int"): "double",
        ("string", "int"): "string",
        ("string", "bool"): "string",
        ("bytes", "string"): "binary",
    }
    target = casts.get((name, kind))
    if target is None:
        raise NotNativeCel(f"{name}() of {kind}")
    result = {"long": "int", "double": "double", "string": "string", "binary": "bytes"}[target]
    return _checked(operand, CelType(result), lambda c: c.cast(target), name)


def _checked(
    operand: Term, result: CelType, function: Any, name: str, fails_on_null_result: bool = False
) -> Term:
    """A conversion; on a null operand cel-python's own answer (int(null) is 0, string(null) fails)."""
    from pyspark.sql import functions as F

    on_null = ops.probe_expression(f"{name}(m.a)", "null") if operand.type.nullable else ops.FAILS
    if on_null is not ops.FAILS and on_null is not None:
        on_null_type = constant_type(on_null)
        if on_null_type.kind != result.kind:
            raise NotNativeCel(f"{name}(null) is not a {result.kind}")

    def emit(env: Env) -> Val:
        val = operand.emit(env)
        value = function(val.value)
        error = value.isNull() if fails_on_null_result else None
        if operand.type.nullable:
            is_null = val.value.isNull()
            if on_null is ops.FAILS:
                error = is_null | known(error)
            elif on_null is not None:
                value = F.when(is_null, literal_column(on_null, result)).otherwise(value)
                error = None if error is None else ~is_null & error
        return Val(value, any_error(val.error, error))

    nullable = operand.type.nullable and on_null is None
    fails = operand.fails or fails_on_null_result or operand.type.nullable
    result = result.with_null() if nullable else result
    return derived(result, emit, [(operand, (2, 0, 2, 1))], fails=fails, depth=4)


def iterated_type(receiver: Term) -> CelType:
    """What a macro's variable ranges over: a list's elements or a map's keys."""
    rt = receiver.type
    if receiver.error or rt.nullable or rt.kind not in ("list", "map"):
        # cel-python raises a bare TypeError iterating null: not an absorbable CEL error.
        raise NotNativeCel(f"a macro over {rt.kind}")
    if rt.fields is not None:
        raise NotNativeCel("a macro over a record's keys (a struct in Spark)")
    element = rt.elem if rt.kind == "list" else rt.key
    assert element is not None
    if element.kind in ("dyn", "opaque"):
        raise NotNativeCel("a macro over elements of unknown type")
    return element


def macro(name: str, receiver: Term, var: str, body: Term) -> Term:
    """The macro as higher-order functions over the (non-null) list or the map's keys."""
    from pyspark.sql import functions as F

    if name in ("all", "exists", "exists_one", "filter") and body.type.kind not in ("bool", "null"):
        raise NotNativeCel(f"{name} with a non-boolean predicate")
    map_keys = receiver.type.kind == "map"

    def items(env: Env) -> tuple[Column, Column | None]:
        r = receiver.emit(env)
        return (F.map_keys(r.value) if map_keys else r.value), r.error

    def at(env: Env, x: Column) -> Val:
        return body.emit({**env, var: x})

    def outcome(env: Env, x: Column) -> tuple[Column, Column, Column]:
        """(true, false, neither) for one element's predicate, never null."""
        is_true, is_false = ops.truth(at(env, x))
        return is_true, is_false, ~(is_true | is_false)

    def failed(env: Env, array: Column) -> Column | None:
        if at(env, F.lit(None)).error is None:
            return None
        return F.exists(array, lambda x: known(at(env, x).error))

    def emit(env: Env) -> Val:
        array, receiver_error = items(env)
        plain = body.type.kind == "bool" and not body.type.nullable and at(env, F.lit(None)).error is None
        if plain and name in ("all", "exists"):
            higher = F.forall if name == "all" else F.exists
            return Val(higher(array, lambda x: at(env, x).value), receiver_error)
        if name in ("all", "exists"):
            # reduce with && (||): a deciding element wins over failing ones; otherwise any
            # non-boolean (an error, or null) makes the result non-boolean.
            decide = 1 if name == "all" else 0
            decided = F.exists(array, lambda x: outcome(env, x)[decide])
            odd = F.size(F.filter(array, lambda x: outcome(env, x)[2]))
            value = F.when(decided, F.lit(name == "exists")).when(odd == 0, F.lit(name == "all"))
            # One odd element is the result, a null read as false as cel-python's reduction reads
            # it; two or more fail.
            value = value.otherwise(F.lit(False))
            failing = failed(env, array)
            error = ~decided & ((odd >= 2) | known(failing))
            return Val(value, any_error(receiver_error, error))
        error = failed(env, array)
        if name == "exists_one":
            count = F.size(F.filter(array, lambda x: outcome(env, x)[0]))
            return Val(count == 1, any_error(receiver_error, error))
        if name == "filter":
            return Val(F.filter(array, lambda x: outcome(env, x)[0]), any_error(receiver_error, error))
        return Val(F.transform(array, lambda x: at(env, x).value), any_error(receiver_error, error))

    # The plain all/exists hold the body once; otherwise they read it in several places (whether it
    # is true, false or neither, and whether it failed), map and filter once more for the error.
    plain = (
        name in ("all", "exists") and body.type.kind == "bool" and not body.type.nullable and not body.fails
    )
    if plain:
        copies = [(receiver, PASSED_ON), (body, (1, 0, 0, 0))]
    elif name in ("all", "exists"):
        copies = [(receiver, (2, 0, 3, 1)), (body, (3, 3, 3, 4))]
    else:
        copies = [(receiver, (1, 0, 1, 1)), (body, (1, 1, 0, 1))]
    if name == "map":
        return derived(CelType("list", elem=body.type), emit, copies, depth=4)
    if name == "filter":
        element = receiver.type.elem if not map_keys else receiver.type.key
        return derived(CelType("list", elem=element), emit, copies, depth=4)
    return derived(CelType("bool"), emit, copies, fails=not plain or receiver.fails, depth=6)


def list_literal(items: list[Term]) -> Term:
    """`[a, b, …]` built per row; every element must have one type and none may fail."""
    from pyspark.sql import functions as F

    if any(item.error for item in items):
        return error_term()
    if not items:
        raise NotNativeCel("an empty list literal")
    first = items[0].type
    if first.kind in ("null", "opaque") or not all(item.type.same(first) for item in items):
        raise NotNativeCel("a list literal mixing element types")
    elem = first.with_null() if any(item.type.nullable for item in items) else first

    def emit(env: Env) -> Val:
        vals = [item.emit(env) for item in items]
        return Val(F.array(*[v.value for v in vals]), any_error(*[v.error for v in vals]))

    fails = any(item.fails for item in items)
    return derived(
        CelType("list", elem=elem), emit, [(item, PASSED_ON) for item in items], fails=fails, depth=1
    )


def record_literal(record: CelType, entries: list[tuple[Any, Term]]) -> Any:
    """A TRANSFORM's map literal as the record struct: its keys must be exactly the record's fields,
    each value of the field's own Spark type (a null only where the field is nullable)."""
    from pyspark.sql import functions as F

    assert record.fields is not None
    fields = record_fields(record)
    given = {str(key): value for key, value in entries}
    if set(given) != set(fields) or len(given) != len(entries):
        raise NotNativeCel("a transform whose keys are not exactly the record's fields")
    for name, term in given.items():
        _check_writable(fields[name], term)

    def emit(env: Env) -> Val:
        columns, errors = [], []
        for field in record.fields.fields:  # type: ignore[union-attr]
            if field.name not in fields:  # the mask: the literal's properties are all present
                columns.append(F.lit(None).cast(field.dataType).alias(field.name))
                continue
            val = given[field.name].emit(env)
            columns.append(val.value.cast(field.dataType).alias(field.name))
            errors.append(val.error)
            if not field.nullable and given[field.name].type.nullable:
                errors.append(val.value.isNull())
        return Val(F.struct(*columns), any_error(*errors))

    return emit


def _check_writable(field: StructField, term: Term) -> None:
    """Only values the field's Avro type takes unchanged: same CEL kind on a long, double, string,
    bytes or boolean field (narrower Avro types would need the serializer's range checks)."""
    from pyspark.sql import types as T

    exact = {
        T.LongType: "int",
        T.DoubleType: "double",
        T.StringType: "string",
        T.BinaryType: "bytes",
        T.BooleanType: "bool",
    }
    kind = exact.get(type(field.dataType))
    if term.error:
        return
    if kind is not None and term.type.kind == kind:
        return
    if term.type.kind == "null" and field.nullable:
        return
    raise NotNativeCel(f"a transform value of kind {term.type.kind} for field {field.name}")


__all__ = ["MACROS", "TIMESTAMP_ACCESSORS", "call", "fold", "has", "index", "macro", "size"]
