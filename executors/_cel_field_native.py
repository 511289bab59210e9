"""CEL_FIELD as one Spark expression: the field walk unrolled over the schema at plan time.

Every visited field and type name is decided when the rule compiles: skipped by the rule's tags,
skipped because its guard is statically false (such fields are not touched at all), failing
because its guard errors, or compiled to Columns (DESIGN.md principle 2). Nested values are
rebuilt natively: `withField` for records, `transform` for arrays, `transform_values` for maps,
member structs for multi-branch unions. A shape or expression with no exact native form raises
`Unsupported` and the executor falls back to the Python walk for the whole rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contracts.model import RuleKind
from executors._cel_field_columns import INT_MAX, INT_MIN, Env, Scope, Term, Unsupported, compile_term
from executors._cel_field_expr import FieldExpression
from executors._cel_field_schema import NULL, Array, Field, Leaf, Map, Node, Record, Union
from executors._protocol import NativeOutcome

if TYPE_CHECKING:
    from pyspark.sql import Column

# Beyond half an ulp above float's maximum, packing a double as a float overflows.
_FLOAT_MAX = 3.4028235677973366e38
_SPARK_TYPES = {"INT": "int", "LONG": "long", "FLOAT": "float", "DOUBLE": "double"}
# Which FieldTypes a CEL result of each type validates against when written back (fastavro's rules).
_ACCEPTING = {
    "null": ("NULL",),
    "string": ("STRING",),
    "bytes": ("BYTES",),
    "bool": ("BOOLEAN",),
    "int": ("INT", "LONG", "FLOAT", "DOUBLE"),
    "double": ("FLOAT", "DOUBLE"),
}
# Kinds whose values an earlier union branch of the paired kind might also validate: then the
# branch a value resolves to depends on the value, which only the Python walk decides exactly.
_OVERLAPPING = [
    frozenset({"INT", "LONG", "FLOAT", "DOUBLE"}),
    frozenset({"STRING", "ENUM"}),
    frozenset({"BYTES", "FIXED"}),
    frozenset({"RECORD", "MAP"}),
    frozenset({"ARRAY"}),
]


@dataclass
class Emitted:
    """A node's Columns: its new value (None if unchanged), when the rule fails, and — for a
    CONDITION — when the field-level result is a plain false (only that counts at record level)."""

    value: Column | None = None
    fail: Column | None = None
    false: Column | None = None


class _Plan:
    """A node of the unrolled walk; subclasses emit Columns for a value Column."""

    changes: bool = False

    def emit(self, value: Column, message: Column | None) -> Emitted:
        raise Unsupported(type(self).__name__)


@dataclass
class _Variant:
    """One type name a slot's value may have: when it applies, and the compiled guard and body."""

    presence: Callable[[Column], Column] | None
    guard: Term | None
    guard_error: bool
    body: Term | None


@dataclass
class _Slot:
    """What a visited primitive's new value may be written as: the accepted FieldTypes and Spark type."""

    accepts: frozenset[str]
    spark_type: str | None
    rigid: bool = False

    def check(self, result_type: str | None) -> None:
        """Refuse, at plan time, results whose validity only the Python walk can decide."""
        # A string may be an enum symbol and bytes a fixed value; in a member struct, a result of
        # another branch's type moves the value to that member.
        undecided = self.rigid or self.accepts & {"ENUM", "FIXED"}
        if result_type in _ACCEPTING and not self._kinds(result_type) and undecided:
            raise Unsupported("a transform result of a type the field's own branch cannot hold")

    def _kinds(self, result_type: str | None) -> list[str]:
        return [kind for kind in _ACCEPTING.get(result_type or "", ()) if kind in self.accepts]

    def write(self, result: Term, value: Column, old: Column) -> tuple[Column, Column | None]:
        """The value cast for writing, and when it does not fit (None: always fits); a result of a
        type the field cannot hold always fails, and the field keeps its old value."""
        from pyspark.sql import functions as F

        kinds = self._kinds(result.type)
        if not kinds:
            return old, F.lit(True)
        # try_cast: an out-of-range value is a failure here (unfit), never an ANSI cast error.
        cast = value.try_cast(self.spark_type) if self.spark_type else value
        if kinds == ["INT"]:
            return cast, ~value.between(INT_MIN, INT_MAX)
        if kinds == ["FLOAT"]:
            # fastavro cannot pack a double beyond float's range into a float (the write fails).
            return cast, (F.abs(value) >= _FLOAT_MAX) & ~F.isnan(value) & ~value.isin(
                float("inf"), float("-inf")
            )
        return cast, None


@dataclass
class _LeafPlan(_Plan):
    variants: list[_Variant]
    slot: _Slot
    kind: RuleKind

    def __post_init__(self) -> None:
        self.changes = self.kind is RuleKind.TRANSFORM

    def emit(self, value: Column, message: Column | None) -> Emitted:
        from pyspark.sql import functions as F

        env = Env(value, message)
        out = Emitted(value if self.changes else None)
        for variant in self.variants:
            present = variant.presence(value) if variant.presence is not None else None
            if variant.guard_error:
                out.fail = _or(out.fail, present if present is not None else F.lit(True))
                continue
            on = present
            if variant.guard is not None:
                guard, guard_err = variant.guard.emit(env)
                on = _and(on, guard)
                out.fail = _or(out.fail, _and(present, guard_err))
            assert variant.body is not None
            body = variant.body
            result, err = body.emit(env)
            if self.kind is RuleKind.CONDITION:
                out.fail = _or(out.fail, _and(on, err))
                if body.type == "bool":
                    false = ~result if err is None else ~err & ~result
                    out.false = _or(out.false, _and(on, false))
                continue
            if body.type is None:
                written, unfit = value, None
            else:
                written, unfit = self.slot.write(body, result, value)
            out.fail = _or(out.fail, _and(on, _or(err, unfit)))
            out.value = written if on is None else F.when(on, written).otherwise(out.value)
        return out


@dataclass
class _UnvisitedFalsePlan(_Plan):
    """A boolean field the rule's tags exclude, whose plain false still counts at field level."""

    presences: list[Callable[[Column], Column] | None]

    def emit(self, value: Column, message: Column | None) -> Emitted:
        out = Emitted()
        for presence in self.presences:
            out.false = _or(out.false, _and(presence(value) if presence else None, ~value))
        return out


@dataclass
class _RecordPlan(_Plan):
    fields: list[tuple[Field, _Plan]]

    def __post_init__(self) -> None:
        self.changes = any(plan.changes for _, plan in self.fields)

    def emit(self, value: Column, message: Column | None) -> Emitted:
        current = value
        out = Emitted()
        for field, plan in self.fields:
            emitted = plan.emit(value.getField(field.name), current)
            out.fail = _or(out.fail, emitted.fail, emitted.false)
            if emitted.value is not None:
                current = current.withField(field.name, emitted.value)
        out.value = current if self.changes else None
        return out


@dataclass
class _ArrayPlan(_Plan):
    items: _Plan
    is_map: bool

    def __post_init__(self) -> None:
        self.changes = self.items.changes

    def emit(self, value: Column, message: Column | None) -> Emitted:
        from pyspark.sql import functions as F

        def new(item: Column) -> Column:
            emitted = self.items.emit(item, message)
            return item if emitted.value is None else emitted.value

        can_fail = False

        def fails(item: Column) -> Column:
            nonlocal can_fail
            fail = self.items.emit(item, message).fail
            can_fail = fail is not None
            return F.lit(False) if fail is None else fail

        out = Emitted()
        if self.changes:
            out.value = (
                F.transform_values(value, lambda _, v: new(v)) if self.is_map else F.transform(value, new)
            )
        # A plain false from an element is not a record-level false (SEMANTICS.md §4): errors only.
        # Spark calls `fails` while building the expression, which tells whether anything can fail.
        exists = F.exists(F.map_values(value) if self.is_map else value, fails)
        out.fail = exists if can_fail else None
        return out


@dataclass
class _NullablePlan(_Plan):
    """A ["null", container] union: its null visited as typeName NULL, its value walked when present."""

    null: _Plan | None
    inner: _Plan | None

    def __post_init__(self) -> None:
        self.changes = any(plan is not None and plan.changes for plan in (self.null, self.inner))

    def emit(self, value: Column, message: Column | None) -> Emitted:
        from pyspark.sql import functions as F

        out = Emitted()
        new = value
        if self.inner is not None:
            present = value.isNotNull()
            inner = self.inner.emit(value, message)
            out.fail = _and(present, inner.fail)
            out.false = _and(present, inner.false)
            if inner.value is not None:
                new = F.when(present, inner.value).otherwise(value)
        if self.null is not None:
            null = self.null.emit(value, message)
            out.fail = _or(out.fail, null.fail)
            out.false = _or(out.false, null.false)
            if null.value is not None:
                new = F.when(value.isNull(), null.value).otherwise(new)
        out.value = new if self.changes else None
        return out


@dataclass
class _MembersPlan(_Plan):
    """A multi-branch union (spark-avro's member struct): each present member walked as its branch."""

    null: _Plan | None
    members: list[tuple[int, _Plan]]

    def __post_init__(self) -> None:
        self.changes = any(plan.changes for _, plan in self.members) or bool(self.null and self.null.changes)

    def emit(self, value: Column, message: Column | None) -> Emitted:
        from pyspark.sql import functions as F

        out = Emitted()
        new = value
        for index, plan in self.members:
            member = value.getField(f"member{index}")
            present = member.isNotNull()
            emitted = plan.emit(member, message)
            out.fail = _or(out.fail, _and(present, emitted.fail))
            out.false = _or(out.false, _and(present, emitted.false))
            if emitted.value is not None:
                new = new.withField(f"member{index}", F.when(present, emitted.value).otherwise(member))
        if self.null is not None:
            null = self.null.emit(value, message)
            out.fail = _or(out.fail, null.fail)
            out.false = _or(out.false, null.false)
        out.value = F.when(value.isNull(), value).otherwise(new) if self.changes else None
        return out


def _or(*columns: Column | None) -> Column | None:
    present = [column for column in columns if column is not None]
    if not present:
        return None
    result = present[0]
    for column in present[1:]:
        result = result | column
    return result


def _and(condition: Column | None, column: Column | None) -> Column | None:
    if column is None:
        return None
    return column if condition is None else condition & column


class NativePlanner:
    """Unrolls one CEL_FIELD rule over a schema tree; raises Unsupported when it cannot be native."""

    def __init__(self, expression: FieldExpression, kind: RuleKind, rule_tags: frozenset[str]) -> None:
        self.expression = expression
        self.kind = kind
        self.rule_tags = rule_tags

    def plan(self, root: Node) -> Callable[[Column], NativeOutcome]:
        """The native step's build function for records of the `root` schema."""
        if not isinstance(root, Record):
            raise Unsupported("a top-level schema that is not a record")
        plan = self._record(root)

        def build(record: Column) -> NativeOutcome:
            from pyspark.sql import functions as F

            if plan is None:
                return NativeOutcome(F.lit(True), record if self.kind is RuleKind.TRANSFORM else None)
            emitted = plan.emit(record, None)
            passed = F.lit(True) if emitted.fail is None else ~emitted.fail
            new = emitted.value if emitted.value is not None else record
            return NativeOutcome(passed, new if self.kind is RuleKind.TRANSFORM else None)

        return build

    def _record(self, record: Record) -> _RecordPlan | None:
        fields = []
        for field in record.fields:
            plan = self._node(field.node, field, record)
            if plan is not None:
                fields.append((field, plan))
        return _RecordPlan(fields) if fields else None

    def _node(self, node: Node, field: Field, record: Record) -> _Plan | None:
        if isinstance(node, Record):
            return self._record(node)
        if isinstance(node, Array | Map):
            items = self._node(node.items if isinstance(node, Array) else node.values, field, record)
            return None if items is None else _ArrayPlan(items, isinstance(node, Map))
        if isinstance(node, Leaf):
            return self._slot(
                [(None, node)],
                _Slot(frozenset({node.type_name}), _SPARK_TYPES.get(node.type_name)),
                field,
                record,
            )
        return self._union(node, field, record)

    def _union(self, union: Union, field: Field, record: Record) -> _Plan | None:
        branches = [branch for branch in union.branches if branch != NULL]
        nullable = len(branches) < len(union.branches)
        null_slot_kinds = frozenset(["NULL", *(b.type_name for b in branches if isinstance(b, Leaf))])
        is_null: Callable[[Column], Column] = lambda v: v.isNull()  # noqa: E731
        is_set: Callable[[Column], Column] = lambda v: v.isNotNull()  # noqa: E731
        if not branches:
            return self._slot([(None, NULL)], _Slot(frozenset({"NULL"}), None), field, record)
        if len(branches) == 1:
            (branch,) = branches
            if isinstance(branch, Leaf):
                spark = _SPARK_TYPES.get(branch.type_name)
                options = [(is_null, NULL), (is_set, branch)] if nullable else [(None, branch)]
                return self._slot(options, _Slot(null_slot_kinds, spark), field, record)
            if not nullable:
                return self._node(branch, field, record)
            null = self._slot(
                [(is_null, NULL)], _Slot(frozenset({"NULL", _kind(branch)}), None), field, record
            )
            inner = self._node(branch, field, record)
            return None if null is None and inner is None else _NullablePlan(null, inner)
        kinds = [_kind(branch) for branch in branches]
        if (
            set(kinds) in ({"INT", "LONG"}, {"FLOAT", "DOUBLE"})
            and len(kinds) == 2
            and all(isinstance(branch, Leaf) and branch.logical is None for branch in branches)
        ):
            return self._widened(union, kinds, nullable, field, record)
        return self._members(branches, kinds, nullable, field, record)

    def _widened(
        self, union: Union, kinds: list[str], nullable: bool, field: Field, record: Record
    ) -> _Plan | None:
        # spark-avro widens [int, long] / [float, double] to one column; the reference still
        # names the first branch that validates the value: an int-first union says INT in range.
        first = kinds[0]
        options: list[tuple[Callable[[Column], Column] | None, Leaf]] = []
        if nullable:
            options.append((lambda v: v.isNull(), NULL))
        if first == "INT":
            options.append((lambda v: v.between(INT_MIN, INT_MAX), Leaf("INT", None)))
            options.append((lambda v: ~v.between(INT_MIN, INT_MAX), Leaf("LONG", None)))
        else:
            options.append((lambda v: v.isNotNull(), Leaf(first, None)))
        accepts = frozenset([*kinds, *(["NULL"] if nullable else [])])
        return self._slot(options, _Slot(accepts, "long" if "LONG" in kinds else "double"), field, record)

    def _members(
        self, branches: list[Node], kinds: list[str], nullable: bool, field: Field, record: Record
    ) -> _Plan | None:
        members = []
        for index, branch in enumerate(branches):
            if isinstance(branch, Leaf):
                slot = _Slot(frozenset({branch.type_name}), _SPARK_TYPES.get(branch.type_name), rigid=True)
                plan = self._slot([(None, branch)], slot, field, record)
            else:
                plan = self._node(branch, field, record)
            if plan is None:
                continue
            members.append((index, plan))
        null = None
        if nullable:
            null_slot = _Slot(frozenset({"NULL"}), None, rigid=True)
            null = self._slot([(lambda v: v.isNull(), NULL)], null_slot, field, record)
        if not members and null is None:
            return None
        # The reference takes the first branch that validates a value: when one branch may accept
        # another's values, which branch (and typeName) a value gets depends on the value.
        for index, kind in enumerate(kinds):
            if any(
                kind in group and kinds[earlier] in group
                for group in _OVERLAPPING
                for earlier in range(index)
            ):
                raise Unsupported("a union whose branch a value resolves to depends on the value")
        return _MembersPlan(null, members)

    def _slot(
        self,
        options: list[tuple[Callable[[Column], Column] | None, Leaf]],
        slot: _Slot,
        field: Field,
        record: Record,
    ) -> _Plan | None:
        if self.rule_tags and self.rule_tags.isdisjoint(field.tags):
            # The reference hands an unvisited field's own value back as its "result", so in a
            # CONDITION a boolean field holding false fails the record even though no
            # expression ran (confluent-kafka 2.16.1, common/avro.py; the Python twin agrees).
            booleans = [presence for presence, leaf in options if leaf.type_name == "BOOLEAN"]
            return _UnvisitedFalsePlan(booleans) if booleans and self.kind is RuleKind.CONDITION else None
        variants = []
        for presence, leaf in options:
            variant = self._variant(presence, leaf, field, record)
            if variant is not None:
                if self.kind is RuleKind.TRANSFORM and variant.body is not None:
                    slot.check(variant.body.type)
                variants.append(variant)
        return _LeafPlan(variants, slot, self.kind) if variants else None

    def _variant(
        self, presence: Callable[[Column], Column] | None, leaf: Leaf, field: Field, record: Record
    ) -> _Variant | None:
        if not leaf.primitive:
            return None  # enums and fixed are left alone (SEMANTICS.md §4)
        scope = Scope(field.name, field.full_name, leaf.type_name, field.tags, record)
        guard: Term | None = None
        if self.expression.guard_tree is not None:
            guard = compile_term(self.expression.guard_tree, scope)
            if guard.error:
                return _Variant(presence, None, True, None)
            if guard.is_constant:
                if not guard.constant:
                    return None
                guard = None
            elif guard.type != "bool":
                raise Unsupported("a per-row guard that is not a boolean")
        if leaf.logical is not None:
            raise Unsupported(f"a visited {leaf.logical} value")
        body = compile_term(self.expression.body_tree, scope)
        if body.type == "list":
            raise Unsupported("a list result")
        return _Variant(presence, guard, False, body)


def _kind(node: Node) -> str:
    if isinstance(node, Leaf):
        return node.type_name
    return {Record: "RECORD", Array: "ARRAY", Map: "MAP", Union: "COMBINED"}[type(node)]
