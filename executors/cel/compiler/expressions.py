"""CEL rules compiled to native Spark Columns over the record struct, equal to cel-python's answers.

The expression is parsed by cel-python's own Lark parser and its tree walked into typed terms
(`terms`): `message.x.y` becomes `record.getField("x").getField("y")`, operators and
functions become Spark expressions that never throw (`operators`, `functions`).
Sub-expressions made only of literals are evaluated once at plan time by cel-python itself, so
constants carry its exact answers. Whatever has no exact native form raises `NotNativeCel`, and
the executor runs that rule with cel-python instead. A field the schema lacks is absent from every
record: `has()` of it is false, reading it an evaluation error; a condition that could never pass
for that reason is a ContractError naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.errors import ContractError
from contracts.model import RuleKind
from executors.cel.compiler import functions
from executors.cel.compiler import operators as ops
from executors.cel.compiler.terms import (
    CelType,
    Env,
    NotNativeCel,
    Term,
    Val,
    constant_term,
    error_term,
)
from executors.cel.reference import PASS_THROUGH, parse, unwrap
from executors.protocol import NativeOutcome

if TYPE_CHECKING:
    from lark import Token, Tree
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

__all__ = ["NotNativeCel", "compile_expression", "compile_rule", "compile_term", "split_rule"]

# Functions plain cel-python knows: a literal-only call to one of them is folded at plan time.
_STANDARD = frozenset(
    {
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "bool",
        "timestamp",
        "duration",
        "dyn",
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
        *functions.TIMESTAMP_ACCESSORS,
    }
)


def compile_rule(expr: str, kind: RuleKind, record_type: StructType) -> Callable[[Column], NativeOutcome]:
    """The rule `guard ; expr` as a function of the record Column (docs/semantics.md §3).

    Raises NotNativeCel when some part has no native form.
    """
    guard_text, body_text, body_offset = _split(expr)
    compiler = _TermCompiler(record_type, expr)
    guard = None if guard_text is None else compiler.root(guard_text, 0)
    if guard is not None and guard.type.kind not in ("bool", "null"):
        raise NotNativeCel("a guard that is not a boolean")
    if kind is RuleKind.CONDITION:
        body = compiler.root(body_text, body_offset)
        compiler.refuse_if_never_evaluates(guard, body.error)
        if body.type.kind not in ("bool", "null"):
            raise NotNativeCel("a condition that is not a boolean (cel-python tests its truthiness)")
        return _condition(guard, body)
    return _transform(guard, compiler.transform(body_text, body_offset, guard))


def compile_expression(expr: str, record_type: StructType) -> tuple[CelType, Callable[[Column], Val]]:
    """One expression (no guard) as its CEL type and its (value, error) Columns over the record."""
    term = _TermCompiler(record_type, expr).root(expr, 0)
    return term.type, lambda record: term.emit({"message": record})


def compile_term(
    text: str,
    record_type: StructType,
    *,
    variables: Mapping[str, CelType] | None = None,
    constants: Mapping[str, Any] | None = None,
) -> Term:
    """One expression (no guard) over `message` and further variables, as a typed term; raises NotNativeCel.

    `variables` are per-row values, typed here and given as Columns in the emit environment
    under their names; `constants` are plan-time values bound as cel-python binds them, so every
    sub-expression reading only constants is evaluated once, by cel-python with the reference's
    functions. This is how CEL_FIELD compiles (docs/semantics.md §4): `name`, `typeName`, `tags` …
    are constants per field, `value` a variable. A field `message` lacks is an evaluation error
    there (the reference's map lookup fails), not a contract error: the containing record varies.
    """
    compiler = _TermCompiler(record_type, text, variables=variables, constants=constants, rooted=False)
    return compiler.root(text, 0)


def split_rule(expr: str) -> tuple[str | None, str]:
    """A rule's guard (None when absent or blank) and body, split as the reference does (§3)."""
    guard, body, _ = _split(expr)
    return guard, body


def _split(expr: str) -> tuple[str | None, str, int]:
    """The reference splits at the first `;`, even one inside a string literal (docs/semantics.md §3)."""
    if ";" not in expr:
        return None, expr, 0
    head, body = expr.split(";", 1)
    return (head if head.strip() else None), body, len(head) + 1


def _condition(guard: Term | None, body: Term) -> Callable[[Column], NativeOutcome]:
    from pyspark.sql import functions as F

    def build(record: Column) -> NativeOutcome:
        env = {"message": record}
        val = body.emit(env)
        passed = _true(val, body.type.nullable or body.type.kind == "null")
        erred = F.lit(False) if val.error is None else val.error
        if guard is None:
            return NativeOutcome(passed, error=erred)
        # A guard that is not true passes the condition; a guard that fails fails the rule.
        g = guard.emit(env)
        ok = F.lit(True) if g.error is None else ~g.error
        applies = F.coalesce(g.value, F.lit(False))
        return NativeOutcome(
            F.when(ok, F.when(applies, passed).otherwise(True)),
            error=~ok | (applies & erred),
        )

    return build


def _transform(guard: Term | None, body: Callable[[Env], Val]) -> Callable[[Column], NativeOutcome]:
    from pyspark.sql import functions as F

    def build(record: Column) -> NativeOutcome:
        env = {"message": record}
        new = body(env)
        passed = F.lit(True) if new.error is None else ~new.error
        erred = F.lit(False) if new.error is None else new.error
        if guard is None:
            return NativeOutcome(passed, new.value, error=erred)
        g = guard.emit(env)
        ok = F.lit(True) if g.error is None else ~g.error
        apply = F.coalesce(g.value, F.lit(False))
        return NativeOutcome(
            F.when(ok, F.when(apply, passed).otherwise(True)),
            F.when(ok & apply, new.value).otherwise(record),
            error=~ok | (apply & erred),
        )

    return build


def _true(val: Val, nullable: bool) -> Column:
    """A condition's outcome: true only for CEL true; false, null and errors fail."""
    from pyspark.sql import functions as F

    value = F.coalesce(val.value, F.lit(False)) if nullable else val.value
    return value if val.error is None else value & ~val.error


@dataclass(frozen=True)
class _Scope:
    """Where a sub-expression sits: the comprehension variables bound around it, with their types."""

    variables: tuple[tuple[str, CelType], ...] = ()

    def bind(self, name: str, cel_type: CelType) -> _Scope:
        return _Scope(((name, cel_type), *self.variables))

    def lookup(self, name: str) -> CelType | None:
        return next((t for n, t in self.variables if n == name), None)


class _TermCompiler:
    """Walks cel-python's parse tree into typed terms over the record's Spark type."""

    def __init__(
        self,
        record_type: StructType,
        text: str,
        *,
        variables: Mapping[str, CelType] | None = None,
        constants: Mapping[str, Any] | None = None,
        rooted: bool = True,
    ) -> None:
        self.record = CelType("map", key=CelType("string"), fields=record_type)
        # `rooted`: `message` is the whole record (a CEL rule), not a field's containing record (CEL_FIELD).
        self.message_pointer = "" if rooted else None
        self.text = text
        self.part = text
        self.offset = 0
        self.variables = dict(variables or {})
        self.constants = dict(constants or {})
        self.missing: list[tuple[str, str]] = []
        """The fields the expression reads that the schema lacks, with their positions."""

    def root(self, text: str, offset: int) -> Term:
        self.part, self.offset = text, offset
        try:
            tree = parse(text)
        except Exception as e:
            raise NotNativeCel(f"cel-python cannot parse it: {e}") from e
        term = self.term(tree, _Scope())
        _check_size(term.cost, term.depth)
        return term

    def refuse_if_never_evaluates(self, guard: Term | None, body_fails: bool) -> None:
        """A ContractError when the rule reads a field the schema lacks whatever the record (its
        guard, or with none its body, always an error): it could never pass (docs/semantics.md §3.5)."""
        if self.missing and (guard.error if guard is not None else body_fails):
            name, position = self.missing[0]
            raise ContractError(
                f"the expression reads field {name!r}, which the schema lacks", position=position
            )

    def transform(self, text: str, offset: int, guard: Term | None = None) -> Callable[[Env], Val]:
        """A TRANSFORM's new record (under `guard`): `message` itself or a map literal with exactly
        its fields."""
        self.part, self.offset = text, offset
        tree = unwrap(parse(text))
        if tree.data == "ident" and str(tree.children[0]) == "message":
            return lambda env: Val(env["message"])
        if tree.data != "map_lit":
            raise NotNativeCel("a transform that is not a map literal of the record's fields")
        entries = self._map_entries(tree, _Scope())
        self.refuse_if_never_evaluates(guard, any(value.error for _, value in entries))
        # Each field's value is cast once, and tested for null where the field is not nullable.
        cost = 4 + sum(2 * value.value_cost + value.error_cost for _, value in entries)
        _check_size(cost, 2 + max(value.depth for _, value in entries))
        return functions.record_literal(self.record, entries)

    def _map_entries(self, tree: Tree, scope: _Scope) -> list[tuple[Any, Term]]:
        inits = tree.children[0].children if tree.children and tree.children[0] is not None else []
        keys = [self.term(inits[i], scope) for i in range(0, len(inits), 2)]
        values = [self.term(inits[i + 1], scope) for i in range(0, len(inits), 2)]
        if not all(key.is_constant for key in keys):
            raise NotNativeCel("a map literal with computed keys")
        return [(key.constant, value) for key, value in zip(keys, values, strict=True)]

    def term(self, tree: Tree, scope: _Scope) -> Term:
        rule = tree.data
        children = tree.children
        if rule in PASS_THROUGH and len(children) == 1:
            return self.term(children[0], scope)
        if self.foldable(tree, scope):
            return functions.fold(_as_expr(tree), self.constants)
        handler = getattr(self, f"_{rule}", None)
        if handler is None:
            raise NotNativeCel(f"no native form for CEL {rule}")
        return handler(tree, scope)

    def foldable(self, tree: Tree, scope: _Scope) -> bool:
        """Whether cel-python can evaluate `tree` at plan time: it reads no per-row variable.

        A sub-expression reading plan-time constants is folded whatever functions it calls: the
        plan-time evaluator has the reference's functions, and folding is what keeps a guard on
        `name` or `typeName` off the rows (docs/semantics.md §9.2).
        """
        free = _free_variables(tree)
        if not free:
            return _foldable(tree)
        return all(name in self.constants and scope.lookup(name) is None for name in free)

    def _expr(self, tree: Tree, scope: _Scope) -> Term:
        condition, then, otherwise = (self.term(child, scope) for child in tree.children)
        return ops.ternary(condition, then, otherwise)

    def _conditionalor(self, tree: Tree, scope: _Scope) -> Term:
        return ops.logical(False, [self.term(operand, scope) for operand in _chain(tree)])

    def _conditionaland(self, tree: Tree, scope: _Scope) -> Term:
        return ops.logical(True, [self.term(operand, scope) for operand in _chain(tree)])

    def _relation(self, tree: Tree, scope: _Scope) -> Term:
        operator = tree.children[0]
        left = self.term(operator.children[0], scope)
        right = self.term(tree.children[1], scope)
        if operator.data == "relation_in":
            return ops.membership(left, right)
        return ops.binary(operator.data, left, right)

    _addition = _relation
    _multiplication = _relation

    def _unary(self, tree: Tree, scope: _Scope) -> Term:
        operand = self.term(tree.children[1], scope)
        return ops.negate(operand) if tree.children[0].data == "unary_not" else ops.minus(operand)

    def _ident(self, tree: Tree, scope: _Scope) -> Term:
        name = str(tree.children[0])
        bound = scope.lookup(name)
        if bound is not None:
            return Term(bound, lambda env: Val(env[name]), fails=False)
        if name in self.variables:
            return Term(self.variables[name], lambda env: Val(env[name]), fails=False)
        if name == "message":
            return Term(
                self.record, lambda env: Val(env["message"]), fails=False, pointer=self.message_pointer
            )
        raise NotNativeCel(f"the variable {name}")

    def _member_dot(self, tree: Tree, scope: _Scope) -> Term:
        receiver = self.term(tree.children[0], scope)
        token = tree.children[1]
        return self.select(receiver, str(token), token)

    def select(self, receiver: Term, name: str, token: Token) -> Term:
        """`receiver.name`: a record's field, or a string-keyed map's entry (missing → failure)."""
        if receiver.error:
            return receiver
        rt = receiver.type
        if rt.fields is not None:
            field = functions.record_fields(rt).get(name)
            if field is None:
                # Absent from every record: reading it is CEL's "no such key", per record (§3.5).
                self.missing.append((name, self.where(token)))
                return error_term()
            return functions.record_field(receiver, field)
        if rt.kind == "map":
            return functions.map_entry(receiver, constant_term(name))
        if rt.kind == "null":
            return error_term()
        raise NotNativeCel(f"field selection on {rt.kind}")

    def where(self, token: Token) -> str:
        """`line:column` of a token in the rule's whole expression (guard included)."""
        start = self.offset + (token.start_pos or 0)
        line = self.text.count("\n", 0, start) + 1
        column = start - (self.text.rfind("\n", 0, start) + 1) + 1
        return f"{line}:{column}"

    def _member_index(self, tree: Tree, scope: _Scope) -> Term:
        receiver = self.term(tree.children[0], scope)
        index = self.term(tree.children[1], scope)
        return functions.index(receiver, index)

    def _member_dot_arg(self, tree: Tree, scope: _Scope) -> Term:
        name = str(tree.children[1])
        arguments = _arguments(tree.children[2] if len(tree.children) > 2 else None)
        if name in functions.MACROS:
            return self.macro(name, tree.children[0], arguments, scope)
        receiver = self.term(tree.children[0], scope)
        return functions.call(name, receiver, [self.term(a, scope) for a in arguments])

    def _ident_arg(self, tree: Tree, scope: _Scope) -> Term:
        name = str(tree.children[0])
        arguments = _arguments(tree.children[1] if len(tree.children) > 1 else None)
        if name == "has":
            return self.has(arguments, scope)
        if not arguments:
            raise NotNativeCel(f"{name}() without arguments")
        first, *rest = (self.term(a, scope) for a in arguments)
        return functions.call(name, first, rest)

    def has(self, arguments: list[Tree], scope: _Scope) -> Term:
        """`has(x.f)`: whether a record has the field (always, when x is not null) or a map the key."""
        (argument,) = arguments
        node = unwrap(argument)
        if node.data != "member_dot":
            raise NotNativeCel("has() of something other than a field selection")
        receiver = self.term(node.children[0], scope)
        return functions.has(receiver, str(node.children[1]))

    def macro(self, name: str, target: Tree, arguments: list[Tree], scope: _Scope) -> Term:
        """all / exists / exists_one / map / filter over a list (or a map's keys)."""
        if len(arguments) != 2:
            raise NotNativeCel(f"{name} with {len(arguments)} arguments")
        variable = unwrap(arguments[0])
        if variable.data != "ident":
            raise NotNativeCel(f"{name} without a variable")
        receiver = self.term(target, scope)
        var = str(variable.children[0])
        element = functions.iterated_type(receiver)
        body = self.term(arguments[1], scope.bind(var, element))
        if name in _KEEPING_ERRORS and body.fails and _gives_error_values(arguments[1]):
            raise NotNativeCel(f"{name} over a predicate whose error may be a value, which cel-python keeps")
        return functions.macro(name, receiver, var, body)

    def _list_lit(self, tree: Tree, scope: _Scope) -> Term:
        items = _arguments(tree.children[0] if tree.children else None)
        return functions.list_literal([self.term(item, scope) for item in items])

    def _map_lit(self, tree: Tree, scope: _Scope) -> Term:
        raise NotNativeCel("a map literal built per row outside a transform")


MAX_COST = 5_000
"""Spark expression nodes a rule's native form may hold, as `Term.cost` estimates them (within a
factor of about 2.5 of the real count): past it, planning grows slow (a condition of 70,000 nodes
took 45 s to plan here) and the rule runs with cel-python instead."""
MAX_SPARK_DEPTH = 100
"""How deeply a rule's native Spark expressions may nest, as `Term.depth` estimates it (from above):
Spark converts a Column to its expression by recursion on a py4j thread, some 30 frames a level,
and 300 nested `when`s overflowed its stack here."""


def _check_size(cost: int, depth: int) -> None:
    if cost > MAX_COST:
        raise NotNativeCel(f"an expression of about {cost} Spark nodes (more than {MAX_COST})")
    if depth > MAX_SPARK_DEPTH:
        raise NotNativeCel(f"Spark expressions nested about {depth} deep (more than {MAX_SPARK_DEPTH})")


def _chain(tree: Tree) -> list[Tree]:
    """The operands of `a && b && c` (or ||), which the grammar nests to the left, in order."""
    operands = []
    while len(tree.children) == 2 and tree.children[0].data == tree.data:
        operands.append(tree.children[1])
        tree = tree.children[0]
    operands.extend(reversed(tree.children))
    return operands[::-1]


_LEVELS = ("expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary")
# cel-python's `?:`, `||` and `&&` give an error as a value rather than raising it, `!` and `==`
# pass that value on, and its exists_one and filter take it as true (map keeps it in the list): such
# a predicate that may fail runs in cel-python.
_KEEPING_ERRORS = frozenset({"exists_one", "filter", "map"})
_ERROR_VALUED = frozenset({"expr", "conditionalor", "conditionaland"})


def _gives_error_values(tree: Tree) -> bool:
    """Whether `tree` holds a `?:`, `||` or `&&` (a grammar level with more than its one child)."""
    return any(node.data in _ERROR_VALUED and len(node.children) > 1 for node in tree.iter_subtrees())


def _as_expr(tree: Tree) -> Tree:
    """A sub-tree wrapped in the grammar's single-child levels above it: cel-python evaluates
    only whole expressions."""
    from lark import Tree

    chain = (*_LEVELS, "member", "primary")
    if tree.data in chain:
        depth = chain.index(tree.data)
    elif tree.data.startswith("member_"):
        depth = chain.index("member") + 1
    else:
        depth = len(chain)
    for level in reversed(chain[:depth]):
        tree = Tree(level, [tree])
    return tree


def _arguments(exprlist: Tree | None) -> list[Tree]:
    return [] if exprlist is None else list(exprlist.children)


def _free_variables(tree: Tree) -> frozenset[str]:
    """The identifiers `tree` reads that no comprehension inside it binds."""
    from lark import Tree

    if tree.data == "ident":
        return frozenset({str(tree.children[0])})
    if tree.data == "member_dot_arg" and str(tree.children[1]) in functions.MACROS:
        arguments = _arguments(tree.children[2] if len(tree.children) > 2 else None)
        variable = unwrap(arguments[0]) if len(arguments) == 2 else None
        if variable is not None and variable.data == "ident":
            body = _free_variables(arguments[1]) - {str(variable.children[0])}
            return _free_variables(tree.children[0]) | body
    free: frozenset[str] = frozenset()
    for child in tree.children:
        if isinstance(child, Tree):
            free |= _free_variables(child)
    return free


def _foldable(tree: Tree) -> bool:
    """Literal-only (no variable, no function cel-python lacks): cel-python evaluates it at plan time."""
    for node in tree.iter_subtrees():
        if node.data == "ident":
            return False
        if node.data in ("member_dot_arg", "ident_arg"):
            name = node.children[1] if node.data == "member_dot_arg" else node.children[0]
            if str(name) not in _STANDARD:
                return False
    return True
