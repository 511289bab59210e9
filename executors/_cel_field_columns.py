"""CEL over one visited field, compiled to Spark Columns: `value`, `message.…`, and plan-time constants.

A thin typed compiler for the expressions CEL_FIELD rules are made of. Every sub-expression that
reads neither `value` nor `message` (and `value` itself when the field is null) is evaluated once
at plan time by cel-python, so constants carry the runtime's exact answers, quirks included.
What remains must be one of a small set of operators over same-typed operands whose Spark
meaning equals CEL's; anything else raises `Unsupported` and the rule runs in Python instead.
Each compiled term yields a value Column and an error Column (never null), since an evaluation
error is a rule failure, not a crash (DESIGN.md principle 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executors._cel_field_schema import Leaf, Node, Record

if TYPE_CHECKING:
    from lark import Tree
    from pyspark.sql import Column

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
# CEL type of the value a primitive Avro type holds (ints and longs are CEL ints, floats doubles).
CEL_TYPES = {
    "STRING": "string",
    "BYTES": "bytes",
    "INT": "int",
    "LONG": "int",
    "FLOAT": "double",
    "DOUBLE": "double",
    "BOOLEAN": "bool",
    "NULL": "null",
}
_SPARK_CAST = {"int": "long", "double": "double"}
_COMPARISONS = {
    "relation_eq": "__eq__",
    "relation_ne": "__ne__",
    "relation_lt": "__lt__",
    "relation_le": "__le__",
    "relation_gt": "__gt__",
    "relation_ge": "__ge__",
}
_ORDERED = frozenset({"string", "int", "double", "bytes", "bool"})
# Types cel-python compares for equality without an overload error: never equal to each other.
_UNRELATED = frozenset({"string", "bytes", "bool", "null"})


class Unsupported(Exception):
    """The expression, or a field shape it meets, has no exact Spark form here: run the rule in Python."""


@dataclass(frozen=True)
class Env:
    """What a term is evaluated against: the field's value and its containing record, as Columns."""

    value: Column
    message: Column | None


Emit = Callable[[Env], "tuple[Column, Column | None]"]


@dataclass(frozen=True)
class Term:
    """A compiled (sub-)expression: its CEL type (None for a constant error) and how to emit it.

    `constant` holds the plan-time value when there is one, so callers can decide things statically.
    """

    type: str | None
    emit: Emit
    constant: Any = None
    is_constant: bool = False
    error: bool = False


@dataclass(frozen=True)
class Scope:
    """The plan-time facts of one visited field and type name: the constants and the value's type."""

    name: str
    full_name: str
    type_name: str
    tags: frozenset[str]
    message: Record | None

    def activation(self) -> dict[str, Any]:
        from celpy import celtypes

        return {
            "value": None,
            "name": celtypes.StringType(self.name),
            "fullName": celtypes.StringType(self.full_name),
            "typeName": celtypes.StringType(self.type_name),
            "tags": celtypes.ListType([celtypes.StringType(tag) for tag in sorted(self.tags)]),
        }

    @property
    def per_row(self) -> frozenset[str]:
        # A null field's value is the constant null: only `message` still varies per row.
        return frozenset({"message"}) if self.type_name == "NULL" else frozenset({"value", "message"})


def compile_term(tree: Tree, scope: Scope) -> Term:
    """Compile a parsed CEL expression (or part) for one field; raises Unsupported."""
    return _Compiler(scope).term(tree)


class _Compiler:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def term(self, tree: Tree) -> Term:
        if not _reads(tree) & self.scope.per_row:
            return self.constant(tree)
        rule = tree.data
        children = tree.children
        if len(children) == 1 and rule in (
            "expr",
            "conditionalor",
            "conditionaland",
            "relation",
            "addition",
            "multiplication",
            "unary",
            "member",
            "primary",
            "paren_expr",
        ):
            return self.term(children[0])
        if rule == "expr":
            return self.ternary(*children)
        if rule in ("conditionalor", "conditionaland"):
            return self.logical(rule == "conditionaland", self.term(children[0]), self.term(children[1]))
        if rule in ("relation", "addition", "multiplication"):
            operator = children[0].data
            left = children[0].children[0]
            if operator == "relation_in":
                return self.membership(self.term(left), children[1])
            return self.binary(operator, self.term(left), self.term(children[1]))
        if rule == "unary":
            return self.unary(children[0].data, self.term(children[1]))
        if rule == "ident":
            return self.identifier(str(children[0]))
        if rule == "member_dot":
            return self.message_field(tree)
        if rule == "member_dot_arg":
            return self.method(str(children[1]), children[0], children[2] if len(children) > 2 else None)
        if rule == "ident_arg" and str(children[0]) == "size" and len(children) == 2:
            (argument,) = children[1].children
            return self.size(self.term(argument))
        raise Unsupported(f"no native form for CEL {rule}")

    def constant(self, tree: Tree) -> Term:
        """Evaluate at plan time with cel-python: a literal, or a constant error."""
        import celpy
        from celpy import celtypes

        environment = celpy.Environment()
        try:
            value = environment.program(tree).evaluate(self.scope.activation())
            if isinstance(value, celpy.CELEvalError):
                raise value
        except Exception:
            return _error()
        for cel_type, kind in (
            (celtypes.BoolType, "bool"),
            (celtypes.StringType, "string"),
            (celtypes.BytesType, "bytes"),
            (celtypes.IntType, "int"),
            (celtypes.DoubleType, "double"),
        ):
            if isinstance(value, cel_type):
                plain = {"bool": bool, "string": str, "bytes": bytes, "int": int, "double": float}[kind](
                    value
                )
                return _literal(kind, plain)
        if value is None:
            return _literal("null", None)
        if isinstance(value, celtypes.ListType):
            return Term("list", _unemittable, constant=value, is_constant=True)
        raise Unsupported(f"constant of type {type(value).__name__}")

    def identifier(self, name: str) -> Term:
        if name != "value":
            raise Unsupported(f"variable {name}")
        kind = CEL_TYPES[self.scope.type_name]
        cast = _SPARK_CAST.get(kind)
        return Term(kind, lambda env: (env.value.cast(cast) if cast else env.value, None))

    def message_field(self, tree: Tree) -> Term:
        path: list[str] = []
        node = tree
        while node.data in ("member_dot", "member", "primary"):
            if node.data == "member_dot":
                path.append(str(node.children[1]))
            node = node.children[0]
        if node.data != "ident" or str(node.children[0]) != "message" or self.scope.message is None:
            raise Unsupported("field access on something other than message")
        record: Node = self.scope.message
        for name in reversed(path[1:]):
            record = _field_node(record, name)
            if not isinstance(record, Record):
                raise Unsupported("message path through a non-record")
        leaf = _field_node(record, path[0])
        if not isinstance(leaf, Leaf) or not leaf.primitive or leaf.logical or leaf.type_name == "NULL":
            raise Unsupported("message field that is not a plain non-null primitive")
        kind = CEL_TYPES[leaf.type_name]
        cast = _SPARK_CAST.get(kind)
        names = list(reversed(path))

        def emit(env: Env) -> tuple[Column, Column | None]:
            assert env.message is not None
            column = env.message
            for name in names:
                column = column.getField(name)
            return (column.cast(cast) if cast else column), None

        return Term(kind, emit)

    def ternary(self, condition: Tree, then: Tree, otherwise: Tree) -> Term:
        test, yes, no = self.term(condition), self.term(then), self.term(otherwise)
        if test.error:
            return test
        if test.type != "bool" or yes.type != no.type or yes.type in (None, "list"):
            raise Unsupported("ternary over mixed types")
        from pyspark.sql import functions as F

        def emit(env: Env) -> tuple[Column, Column | None]:
            (t, t_err), (y, y_err), (n, n_err) = test.emit(env), yes.emit(env), no.emit(env)
            branch_err = None
            if y_err is not None or n_err is not None:
                branch_err = F.when(t, _known(y_err)).otherwise(_known(n_err))
            return F.when(t, y).otherwise(n), _any(t_err, branch_err)

        return Term(yes.type, emit)

    def logical(self, conjunction: bool, left: Term, right: Term) -> Term:
        # CEL's commutative && and ||: a false (true) operand wins over an error in the other one.
        for term in (left, right):
            if term.type not in ("bool", None):
                raise Unsupported("&& or || over non-booleans")
        from pyspark.sql import functions as F

        def emit(env: Env) -> tuple[Column, Column | None]:
            (a, a_err), (b, b_err) = left.emit(env), right.emit(env)
            if a_err is None and b_err is None:
                return (a & b if conjunction else a | b), None
            a_ok, b_ok = ~_known(a_err), ~_known(b_err)
            decisive = F.lit(not conjunction)
            a_wins = a_ok & (~a if conjunction else a)
            b_wins = b_ok & (~b if conjunction else b)
            value = a & b if conjunction else a | b
            error = ~(a_wins | b_wins) & ~(a_ok & b_ok)
            return F.when(a_wins | b_wins, decisive).otherwise(value), _nonnull(error)

        return Term("bool", emit)

    def binary(self, operator: str, left: Term, right: Term) -> Term:
        if left.error or right.error:
            return _error()
        kind = left.type
        if kind != right.type or kind == "null":
            return _mixed(operator, left, right)
        if operator in _COMPARISONS:
            if kind not in _ORDERED:
                raise Unsupported(f"comparison of {kind}")
            return Term("bool", _comparison(operator, kind, left, right))
        if operator == "addition_add" and kind in ("string", "bytes"):
            return Term(kind, _combine(left, right, _concat))
        if operator in ("addition_add", "addition_sub", "multiplication_mul") and kind in ("int", "double"):
            return Term(kind, _arithmetic(operator, kind, left, right))
        raise Unsupported(f"{operator} over {kind}")

    def unary(self, operator: str, operand: Term) -> Term:
        if operand.error:
            return operand

        if operator == "unary_not" and operand.type == "bool":
            return Term("bool", lambda env: _map(operand.emit(env), lambda c: ~c))
        if operator == "unary_neg" and operand.type == "double":
            return Term("double", lambda env: _map(operand.emit(env), lambda c: -c))
        if operator == "unary_neg" and operand.type == "int":
            zero = _literal("int", 0)
            return Term("int", _arithmetic("addition_sub", "int", zero, operand))
        raise Unsupported(f"{operator} over {operand.type}")

    def membership(self, item: Term, container: Tree) -> Term:
        listed = self.term(container)
        if item.error or listed.error:
            return _error()
        if not listed.is_constant or listed.type != "list" or item.type not in ("string", "int", "bool"):
            raise Unsupported("`in` over something other than a constant list")
        plain = {"string": str, "int": int, "bool": bool}[item.type]
        cel_type = _cel_class(item.type)
        if not all(isinstance(element, cel_type) for element in listed.constant):
            raise Unsupported("`in` over a list of mixed types")
        values = [plain(element) for element in listed.constant]
        from pyspark.sql import functions as F

        return Term(
            "bool",
            lambda env: _map(item.emit(env), lambda c: c.isin(values) if values else F.lit(False)),
        )

    def method(self, name: str, target: Tree, arguments: Tree | None) -> Term:
        receiver = self.term(target)
        args = [self.term(argument) for argument in (arguments.children if arguments is not None else [])]
        if name == "size" and not args:
            return self.size(receiver)
        if name in ("startsWith", "endsWith", "contains") and len(args) == 1:
            if receiver.error or args[0].error:
                return _error()
            if receiver.type != "string" or args[0].type != "string":
                raise Unsupported(f"{name} over {receiver.type}")
            method = {"startsWith": "startswith", "endsWith": "endswith", "contains": "contains"}[name]
            return Term("bool", _combine(receiver, args[0], lambda a, b: getattr(a, method)(b)))
        raise Unsupported(f"method {name}")

    def size(self, operand: Term) -> Term:
        if operand.error or operand.type in ("int", "double", "bool"):
            return _error()  # cel-python: no size() overload for scalars
        from pyspark.sql import functions as F

        if operand.type == "string":
            return Term("int", lambda env: _map(operand.emit(env), lambda c: F.char_length(c).cast("long")))
        if operand.type == "bytes":
            return Term("int", lambda env: _map(operand.emit(env), lambda c: F.length(c).cast("long")))
        raise Unsupported(f"size of {operand.type}")


def _mixed(operator: str, left: Term, right: Term) -> Term:
    """An operator over two different CEL types, as cel-python 0.5 answers it (measured): no
    overload (an error), a constant, or — where Python's own int/float/bool mixing leaks through
    and the answer depends on the values — no native form."""
    pair = frozenset({left.type, right.type})
    if left.type == "list" or right.type == "list":
        raise Unsupported("an operator over a list")
    if operator in ("relation_eq", "relation_ne"):
        if pair <= _UNRELATED:
            return _literal("bool", (operator == "relation_ne") != (left.type == right.type))
        if pair == {"bool", "int"}:
            raise Unsupported("bool compared with int")
        return _error()
    if "bool" in pair or (left.type, right.type) == ("double", "int"):
        raise Unsupported(f"{operator} over {left.type} and {right.type}")
    return _error()


def _reads(tree: Tree) -> frozenset[str]:
    return frozenset(str(node.children[0]) for node in tree.find_data("ident"))


def _field_node(record: Node, name: str) -> Node:
    if not isinstance(record, Record):
        raise Unsupported("field of a non-record")
    for field in record.fields:
        if field.name == name:
            return field.node
    raise Unsupported(f"message has no field {name}")


def _cel_class(kind: str) -> type:
    from celpy import celtypes

    return {"string": celtypes.StringType, "int": celtypes.IntType, "bool": celtypes.BoolType}[kind]


def _literal(kind: str, value: Any) -> Term:
    def emit(env: Env) -> tuple[Column, Column | None]:
        from pyspark.sql import functions as F

        column = F.lit(value)
        return (column.cast(_SPARK_CAST[kind]) if kind in _SPARK_CAST else column), None

    return Term(kind, emit, constant=value, is_constant=True)


def _error() -> Term:
    def emit(env: Env) -> tuple[Column, Column | None]:
        from pyspark.sql import functions as F

        return F.lit(None), F.lit(True)

    return Term(None, emit, is_constant=True, error=True)


def _unemittable(env: Env) -> tuple[Column, Column | None]:
    raise Unsupported("a constant list has no column form")


def _known(error: Column | None) -> Column:
    from pyspark.sql import functions as F

    return F.lit(False) if error is None else error


def _nonnull(error: Column) -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(error, F.lit(True))


def _any(*errors: Column | None) -> Column | None:
    present = [error for error in errors if error is not None]
    if not present:
        return None
    combined = present[0]
    for error in present[1:]:
        combined = combined | error
    return combined


def _map(
    emitted: tuple[Column, Column | None], function: Callable[[Column], Column]
) -> tuple[Column, Column | None]:
    return function(emitted[0]), emitted[1]


def _combine(left: Term, right: Term, function: Callable[[Column, Column], Column]) -> Emit:
    def emit(env: Env) -> tuple[Column, Column | None]:
        (a, a_err), (b, b_err) = left.emit(env), right.emit(env)
        return function(a, b), _any(a_err, b_err)

    return emit


def _concat(a: Column, b: Column) -> Column:
    from pyspark.sql import functions as F

    return F.concat(a, b)


def _comparison(operator: str, kind: str, left: Term, right: Term) -> Emit:
    from pyspark.sql import functions as F

    method = _COMPARISONS[operator]

    def compare(a: Column, b: Column) -> Column:
        result = getattr(a, method)(b)
        if kind != "double":
            return result
        # Spark orders NaN above everything and equal to itself; IEEE (and CEL) compare it false.
        either_nan = F.isnan(a) | F.isnan(b)
        return result | either_nan if operator == "relation_ne" else result & ~either_nan

    return _combine(left, right, compare)


def _arithmetic(operator: str, kind: str, left: Term, right: Term) -> Emit:
    from pyspark.sql import functions as F

    def emit(env: Env) -> tuple[Column, Column | None]:
        (a, a_err), (b, b_err) = left.emit(env), right.emit(env)
        if kind == "double":
            value = {"addition_add": a + b, "addition_sub": a - b, "multiplication_mul": a * b}[operator]
            return value, _any(a_err, b_err)
        # CEL ints are 64-bit and overflow is an error: Spark's try_ arithmetic gives null there.
        function = {
            "addition_add": F.try_add,
            "addition_sub": F.try_subtract,
            "multiplication_mul": F.try_multiply,
        }
        value = function[operator](a, b)
        return value, _any(a_err, b_err, value.isNull())

    return emit
