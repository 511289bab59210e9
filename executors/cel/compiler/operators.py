"""CEL operators as Spark Columns: arithmetic, comparisons, &&, ||, !, ternary and `in`.

cel-python 0.5 is the reference, quirks included: operands of different types mostly have no
overload (an error) — `1 == 1.0`, `1 < 2.5` — while a few pairs leak Python's own mixing; what
null meets depends on the other operand's type (`null == 1` fails, `'a' == null` is false).
Which pairs fail is decided at plan time by asking cel-python itself about sample values
(`probe`); what stays per row must be one of the same-type operators below, else `NotNativeCel`.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from executors.cel.compiler.terms import (
    INT_MIN,
    ORDERED,
    PASSED_ON,
    SCALARS,
    CelType,
    Env,
    NotNativeCel,
    Term,
    Val,
    any_error,
    derived,
    error_term,
    known,
)
from executors.cel.reference import parse, reference_evaluate

if TYPE_CHECKING:
    from pyspark.sql import Column

COMPARISONS = {
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
}
ARITHMETIC = {
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
}
# The largest magnitude below which every int64 is exactly a double (comparisons with a double).
_EXACT_DOUBLE = 2**53
FAILS = object()  # cel-python has no overload for the operands (or raised)


def probe(operator: str, left: str, right: str) -> Any:
    """What cel-python answers for `a <operator> b` on sample values of two kinds: `FAILS` or the value.

    A pair whose failing depends on the values (any value divided by a double zero is infinity,
    a string `%` formats), or whose answer beside a null does, is refused: it runs in cel-python.
    """
    text = f"m.a {operator} m.b"
    answer, other = probe_expression(text, left, right), probe_expression(text, left, right, alternate=True)
    if (answer is FAILS) != (other is FAILS) or ("null" in (left, right) and answer != other):
        raise NotNativeCel(f"{left} {operator} {right}, whose answer in cel-python depends on the values")
    return answer


@lru_cache(maxsize=512)
def probe_expression(text: str, *kinds: str, alternate: bool = False) -> Any:
    """The reference's answer for `text` over `m.a` (and `m.b`) holding samples of the kinds
    (`alternate`: a double zero, and a string and bytes that format any value with `%`).

    The samples sit in a map as record fields do: cel-python treats a null variable differently.
    """
    import celpy

    fields = {celpy.celtypes.StringType(n): _sample(k, alternate) for n, k in zip("ab", kinds, strict=False)}
    try:
        result = reference_evaluate(parse(text), {"m": celpy.celtypes.MapType(fields)})
    except Exception:
        return FAILS
    return bool(result) if isinstance(result, celpy.celtypes.BoolType) else result


def _sample(kind: str, alternate: bool = False) -> Any:
    from celpy import celtypes

    alternates = {
        "double": celtypes.DoubleType(0.0),
        "string": celtypes.StringType("%s"),
        "bytes": celtypes.BytesType(b"%a"),  # `%a` formats any value
    }
    if alternate and kind in alternates:
        return alternates[kind]
    samples = {
        "int": celtypes.IntType(1),
        "uint": celtypes.UintType(1),
        "double": celtypes.DoubleType(1.5),
        "string": celtypes.StringType("a"),
        "bytes": celtypes.BytesType(b"a"),
        "bool": celtypes.BoolType(True),
        "null": None,
        "timestamp": celtypes.TimestampType(datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)),
        "duration": celtypes.DurationType(datetime.timedelta(seconds=1)),
        "list": celtypes.ListType([]),
        "map": celtypes.MapType({}),
    }
    return samples[kind]


def binary(operator: str, left: Term, right: Term) -> Term:
    """`left <operator> right` for a comparison or arithmetic operator (a grammar rule name)."""
    if left.error or right.error:
        return error_term()
    symbol = COMPARISONS.get(operator) or ARITHMETIC[operator]
    lt, rt = left.type, right.type
    if (lt.kind not in SCALARS or rt.kind not in SCALARS) and "null" not in (lt.kind, rt.kind):
        return _collection_operator(symbol, left, right)
    if "opaque" in (lt.kind, rt.kind):
        raise NotNativeCel("an operator over a value of no CEL type")
    core = _core(symbol, left, right)
    cases = [(probe(symbol, lt.kind, "null"), False, True)] if rt.nullable and lt.kind != "null" else []
    if lt.nullable and rt.kind != "null":
        cases.append((probe(symbol, "null", rt.kind), True, False))
    if lt.nullable and rt.nullable:
        cases.append((probe(symbol, "null", "null"), True, True))
    return _with_null_cases(core, cases, left, right, _core_copies(symbol, lt.kind, rt.kind, core[1]))


def _core_copies(symbol: str, left: str, right: str, function: Any) -> tuple[int, int, bool]:
    """How many copies of each operand's value the non-null operator's value and error hold, and
    whether it can fail (int overflow, division by zero, a timestamp out of range)."""
    if function is None or function is FAILS:
        return 0, 0, function is FAILS
    if symbol in COMPARISONS.values():
        return (2 if "double" in (left, right) else 1), 0, False
    if (left, right) == ("int", "int"):
        return (3, 3, True) if symbol in "/%" else (1, 1, True)
    if (left, right) == ("timestamp", "duration"):
        return 2, 1, True
    return (2 if symbol == "/" else 1), 0, False


def _core(symbol: str, left: Term, right: Term) -> tuple[CelType, Any]:
    """The non-null operator: (result type, Column function or a plan-time answer)."""
    lk, rk = left.type.kind, right.type.kind
    if "null" in (lk, rk):
        return CelType("null", True), None  # every row takes one of the null cases
    answer = probe(symbol, lk, rk)
    if answer is FAILS:
        return CelType("null", True), FAILS
    if symbol in ("==", "!=", "<", "<=", ">", ">="):
        return CelType("bool"), _comparison(symbol, left, right)
    return _arithmetic(symbol, left, right)


def _with_null_cases(
    core: tuple[CelType, Any],
    cases: list[tuple[Any, bool, bool]],
    left: Term,
    right: Term,
    core_copies: tuple[int, int, bool],
) -> Term:
    """The operator with its answers when an operand is null (each a plan-time constant or failure)."""
    from pyspark.sql import functions as F

    result_type, function = core
    for answer, _, _ in cases:
        if answer is not FAILS and not isinstance(answer, bool):
            raise NotNativeCel("an operator whose null case is not a boolean")
        if answer is not FAILS and result_type.kind not in ("bool", "null"):
            raise NotNativeCel("an arithmetic operator with a non-failing null case")
    if function is FAILS and not cases:
        return error_term()
    final_type = CelType("bool") if any(a is not FAILS for a, _, _ in cases) else result_type

    def emit(env: Env) -> Val:
        a, b = left.emit(env), right.emit(env)
        if function is None or function is FAILS:
            value, error = F.lit(None), (F.lit(True) if function is FAILS else None)
        else:
            out = function(a.value, b.value)
            value, error = out.value, out.error
        for answer, left_null, right_null in cases:
            test = _null_test(a.value, left_null, left.type) & _null_test(b.value, right_null, right.type)
            if answer is FAILS:
                value, error = F.when(test, F.lit(None)).otherwise(value), test | known(error)
            else:
                value, error = F.when(test, F.lit(bool(answer))).otherwise(value), _unless(error, test)
        return Val(value, any_error(a.error, b.error, error))

    # Each null case tests the operands once for the value and once for the error flag.
    value_copies, error_copies, core_fails = core_copies
    uses = (value_copies + len(cases), 0, error_copies + len(cases), 1)
    fails = core_fails or left.fails or right.fails or any(answer is FAILS for answer, _, _ in cases)
    return derived(final_type, emit, [(left, uses), (right, uses)], fails=fails, depth=4 + len(cases))


def _null_test(column: Column, is_null: bool, cel_type: CelType) -> Column:
    from pyspark.sql import functions as F

    if is_null:
        return column.isNull()
    return column.isNotNull() if cel_type.nullable else F.lit(True)


def _unless(error: Column | None, test: Column) -> Column | None:
    return None if error is None else ~test & error


def _comparison(symbol: str, left: Term, right: Term) -> Any:
    """Same-kind comparison (double against an exactly representable int constant too)."""
    from pyspark.sql import functions as F

    lk, rk = left.type.kind, right.type.kind
    if lk != rk:
        if (lk, rk) != ("double", "int") or not right.is_constant or abs(int(right.constant)) > _EXACT_DOUBLE:
            raise NotNativeCel(f"{symbol} over {lk} and {rk}")
    elif lk not in ORDERED and symbol not in ("==", "!="):
        raise NotNativeCel(f"{symbol} over {lk}")
    elif lk == "uint":
        raise NotNativeCel("uint comparison")
    method = {
        "==": "__eq__",
        "!=": "__ne__",
        "<": "__lt__",
        "<=": "__le__",
        ">": "__gt__",
        ">=": "__ge__",
    }[symbol]

    def compare(a: Column, b: Column) -> Val:
        if lk != "double":
            return Val(getattr(a, method)(b))
        b = b.cast("double")
        result = getattr(a, method)(b)
        # Spark orders NaN above everything and equal to itself; IEEE (and cel-python) compare it false.
        nan = F.isnan(a) | F.isnan(b)
        return Val(result | nan if symbol == "!=" else result & ~nan)

    return compare


def _arithmetic(symbol: str, left: Term, right: Term) -> tuple[CelType, Any]:
    lk, rk = left.type.kind, right.type.kind
    pair = (lk, rk)
    if pair == ("int", "int"):
        return CelType("int"), _int_arithmetic(symbol)
    if pair == ("double", "double") and symbol != "%":
        return CelType("double"), _double_arithmetic(symbol)
    if pair in (("string", "string"), ("bytes", "bytes")) and symbol == "+":
        return CelType(lk), _concat
    if pair == ("timestamp", "timestamp") and symbol == "-":
        return CelType("duration"), _timestamp_difference
    if pair == ("timestamp", "duration") and symbol in ("+", "-"):
        return CelType("timestamp"), _timestamp_shift(symbol)
    raise NotNativeCel(f"{symbol} over {lk} and {rk}")


def _int_arithmetic(symbol: str) -> Any:
    from pyspark.sql import functions as F

    def apply(a: Column, b: Column) -> Val:
        # CEL ints are 64-bit and overflow is an error; Spark's try_ functions give null there.
        if symbol == "+":
            value = F.try_add(a, b)
        elif symbol == "-":
            value = F.try_subtract(a, b)
        elif symbol == "*":
            value = F.try_multiply(a, b)
        else:
            # Division and remainder truncate toward zero as cel-python's do; a zero divisor fails,
            # and so does MIN / -1 (its quotient overflows), while MIN % -1 is 0 there.
            valid = b != 0
            if symbol == "/":
                valid = valid & ~((a == INT_MIN) & (b == -1))
            divisor = F.when(valid, b)
            value = F.call_function("div", a, divisor) if symbol == "/" else F.try_mod(a, divisor)
        return Val(value, value.isNull())

    return apply


def _double_arithmetic(symbol: str) -> Any:
    from pyspark.sql import functions as F

    def apply(a: Column, b: Column) -> Val:
        if symbol == "+":
            return Val(a + b)
        if symbol == "-":
            return Val(a - b)
        if symbol == "*":
            return Val(a * b)
        # cel-python's DoubleType answers +inf for any division by zero, whatever the signs.
        return Val(F.when(b == 0.0, F.lit(float("inf"))).otherwise(a / F.when(b != 0.0, b)))

    return apply


def _concat(a: Column, b: Column) -> Val:
    from pyspark.sql import functions as F

    return Val(F.concat(a, b))


def _timestamp_difference(a: Column, b: Column) -> Val:
    from pyspark.sql import functions as F

    return Val(F.unix_micros(a) - F.unix_micros(b))


# The instants cel-python's timestamps can hold: 0001-01-01T00:00:00Z up to the end of 9999.
_TIMESTAMP_MIN, _TIMESTAMP_MAX = -62135596800 * 10**6, 253402300800 * 10**6 - 1


def _timestamp_shift(symbol: str) -> Any:
    from pyspark.sql import functions as F

    def apply(a: Column, b: Column) -> Val:
        micros = F.try_add(F.unix_micros(a), b) if symbol == "+" else F.try_subtract(F.unix_micros(a), b)
        valid = micros.between(_TIMESTAMP_MIN, _TIMESTAMP_MAX)
        return Val(F.timestamp_micros(F.when(valid, micros)), ~F.coalesce(valid, F.lit(False)))

    return apply


def _collection_operator(symbol: str, left: Term, right: Term) -> Term:
    """`+` of two lists of one element type; other operators over lists and maps stay in Python."""
    from pyspark.sql import functions as F

    lt, rt = left.type, right.type
    if symbol != "+" or lt.kind != "list" or rt.kind != "list" or lt.nullable or rt.nullable:
        raise NotNativeCel(f"{symbol} over {lt.kind} and {rt.kind}")
    if lt.elem is None or rt.elem is None or not lt.elem.same(rt.elem):
        raise NotNativeCel("+ over lists of different element types")
    elem = lt.elem.with_null() if lt.elem.nullable or rt.elem.nullable else lt.elem

    def emit(env: Env) -> Val:
        a, b = left.emit(env), right.emit(env)
        return Val(F.concat(a.value, b.value), any_error(a.error, b.error))

    fails = left.fails or right.fails
    uses = [(left, PASSED_ON), (right, PASSED_ON)]
    return derived(CelType("list", elem=elem), emit, uses, fails=fails, depth=1)


def check_boolean(term: Term) -> None:
    """Operands of && / || / ! / ?: must be booleans (or null) here; others leak Python truthiness."""
    if term.type.kind not in ("bool", "null"):
        raise NotNativeCel("a logical operator over a non-boolean")


def truth(val: Val) -> tuple[Column, Column]:
    """(is true, is false) of a boolean operand's Columns, each never null."""
    from pyspark.sql import functions as F

    ok = ~known(val.error)
    return ok & F.coalesce(val.value, F.lit(False)), ok & F.coalesce(~val.value, F.lit(False))


def logical(conjunction: bool, operands: Sequence[Term]) -> Term:
    """A chain of CEL's commutative && (||), as cel-python folds it: a false (true) operand decides
    even when others fail; otherwise one operand that is not a boolean is the result (null stays
    null, an error an error), and two fail (cel-python's logical_and / logical_or on two of them).

    The whole chain is one expression holding each operand a fixed number of times: folding it two
    operands at a time would nest a copy of the left side in each step's Columns.
    """
    from pyspark.sql import functions as F

    for operand in operands:
        check_boolean(operand)
    simple = all(t.type.kind == "bool" and not t.type.nullable and not t.fails for t in operands)

    def emit(env: Env) -> Val:
        vals = [t.emit(env) for t in operands]
        if simple and all(v.error is None for v in vals):
            return Val(_balanced(F.lit(conjunction), [v.value for v in vals], conjunction))
        # Each operand as one code: 0 false, 1 true, 2 null, 3 an error.
        states = [_state(v) for v in vals]
        decisive = _balanced(F.lit(False), [state == (0 if conjunction else 1) for state in states], False)
        odd_count = _sum([(state >= 2).cast("int") for state in states])
        failed = _balanced(
            F.lit(False), [st == 3 for st, v in zip(states, vals, strict=True) if v.error is not None], False
        )
        value = F.when(decisive, F.lit(not conjunction)).when(odd_count == 0, F.lit(conjunction))
        return Val(value, ~decisive & ((odd_count >= 2) | failed))

    # Each operand's code (its value and error once) sits twice in the value, three times in the error.
    copies = (1, 0, 0, 0) if simple else (2, 2, 3, 3)
    nullable = any(t.type.nullable for t in operands)
    fails = not simple and (nullable or any(t.fails for t in operands))
    return derived(
        CelType("bool", nullable),
        emit,
        [(t, copies) for t in operands],
        fails=fails,
        depth=6 + len(operands).bit_length(),
    )


def _state(val: Val) -> Column:
    from pyspark.sql import functions as F

    code = F.coalesce(val.value.cast("int"), F.lit(2))
    return code if val.error is None else F.when(val.error, F.lit(3)).otherwise(code)


def _balanced(empty: Column, columns: list[Column], conjunction: bool) -> Column:
    """`columns` joined by & (|) as a balanced tree: a long chain nests only logarithmically deep."""
    if not columns:
        return empty
    while len(columns) > 1:
        pairs = [columns[i : i + 2] for i in range(0, len(columns), 2)]
        columns = [(p[0] & p[1] if conjunction else p[0] | p[1]) if len(p) == 2 else p[0] for p in pairs]
    return columns[0]


def _sum(columns: list[Column]) -> Column:
    """The sum of int Columns as a balanced tree."""
    while len(columns) > 1:
        pairs = [columns[i : i + 2] for i in range(0, len(columns), 2)]
        columns = [p[0] + p[1] if len(p) == 2 else p[0] for p in pairs]
    return columns[0]


def negate(operand: Term) -> Term:
    """`!x` on a boolean; anything else (null included) fails."""
    if operand.error:
        return operand
    check_boolean(operand)

    def emit(env: Env) -> Val:
        val = operand.emit(env)
        if operand.type.kind == "bool" and not operand.type.nullable and val.error is None:
            return Val(~val.value)
        is_true, is_false = truth(val)
        return Val(~val.value, ~(is_true | is_false))

    simple = operand.type.kind == "bool" and not operand.type.nullable and not operand.fails
    uses = (1, 0, 0, 0) if simple else (1, 0, 2, 2)
    return derived(CelType("bool"), emit, [(operand, uses)], fails=not simple, depth=4)


def minus(operand: Term) -> Term:
    """Unary minus: int overflow (-MIN) and null operands fail."""
    from pyspark.sql import functions as F

    if operand.error:
        return operand
    kind = operand.type.kind
    if kind not in ("int", "double"):
        raise NotNativeCel(f"unary minus over {kind}")

    def emit(env: Env) -> Val:
        val = operand.emit(env)
        value = F.try_subtract(F.lit(0).cast("long"), val.value) if kind == "int" else -val.value
        failed = value.isNull() if kind == "int" or operand.type.nullable else None
        return Val(value, any_error(val.error, failed))

    fails = kind == "int" or operand.fails or operand.type.nullable
    return derived(CelType(kind), emit, [(operand, (1, 0, 1, 1))], fails=fails, depth=3)


def ternary(condition: Term, then: Term, otherwise: Term) -> Term:
    """`c ? a : b`: only the chosen branch's error counts; a non-boolean condition fails."""
    from pyspark.sql import functions as F

    if condition.error:
        return condition
    check_boolean(condition)
    result_type = _branch_type(then.type, otherwise.type)

    def emit(env: Env) -> Val:
        is_true, is_false = truth(condition.emit(env))
        a, b = then.emit(env), otherwise.emit(env)
        value = F.when(is_true, a.value).when(is_false, b.value)
        error = ~(is_true | is_false)
        if a.error is not None:
            error = error | (is_true & a.error)
        if b.error is not None:
            error = error | (is_false & b.error)
        return Val(value, error)

    uses = [(condition, (2, 2, 4, 4)), (then, PASSED_ON), (otherwise, PASSED_ON)]
    return derived(result_type, emit, uses, depth=5)


def _branch_type(a: CelType, b: CelType) -> CelType:
    if a.kind == "null":
        return b.with_null()
    if b.kind == "null":
        return a.with_null()
    if not a.same(b):
        raise NotNativeCel("a ternary whose branches have different types")
    return a.with_null() if a.nullable or b.nullable else a


def membership(item: Term, container: Term) -> Term:
    """`x in list` (element equality) and `k in map` (key presence), over non-null operands of one type."""
    from pyspark.sql import functions as F

    if item.error or container.error:
        return error_term()
    ct = container.type
    if ct.nullable or item.type.nullable or ct.kind not in ("list", "map"):
        raise NotNativeCel("`in` over nullable operands or a non-collection")
    if ct.fields is not None or item.type.fields is not None:
        raise NotNativeCel("`in` over a record (a struct in Spark)")
    searched = ct.elem if ct.kind == "list" else ct.key
    assert searched is not None
    if searched.kind == "dyn":
        return _constant_bool(False, item)
    if searched.nullable or item.type.kind in ("double", "list", "map", "null", "uint"):
        raise NotNativeCel("`in` over doubles, nulls or collections")
    if item.type.kind != searched.kind:
        if probe("==", item.type.kind, searched.kind) is not FAILS:
            raise NotNativeCel("`in` over mixed types")
        # Each comparison fails: an error as soon as there is one element (or key) to compare.
        emit_mismatched = lambda env: _mismatched(item.emit(env), container.emit(env))  # noqa: E731
        uses = [(item, (0, 0, 0, 1)), (container, (0, 0, 1, 1))]
        return derived(CelType("bool"), emit_mismatched, uses, depth=2)

    def emit(env: Env) -> Val:
        a, c = item.emit(env), container.emit(env)
        if ct.kind == "list":
            found = F.array_contains(c.value, a.value)
        else:
            found = F.map_contains_key(c.value, a.value)
        return Val(found, any_error(a.error, c.error))

    fails = item.fails or container.fails
    uses = [(item, PASSED_ON), (container, PASSED_ON)]
    return derived(CelType("bool"), emit, uses, fails=fails, depth=1)


def _mismatched(item: Val, container: Val) -> Val:
    from pyspark.sql import functions as F

    return Val(F.lit(False), any_error(item.error, container.error, F.size(container.value) > 0))


def _constant_bool(value: bool, operand: Term) -> Term:
    from pyspark.sql import functions as F

    emit = lambda env: Val(F.lit(value), operand.emit(env).error)  # noqa: E731
    return derived(CelType("bool"), emit, [(operand, (0, 0, 0, 1))], fails=operand.fails, depth=1)
