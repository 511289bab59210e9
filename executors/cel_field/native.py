"""CEL_FIELD as one Spark expression: the field walk unrolled over the schema at plan time.

Every visited field and type name is decided when the rule compiles: skipped by the rule's tags,
skipped because its guard is statically false (such fields are not touched at all), failing
because its guard errors, or compiled to Columns (docs/semantics.md §9.2). Nested values are
rebuilt natively: `withField` for records, `transform` for arrays, `transform_values` for maps,
member structs for multi-branch unions; a field with presence (a Protobuf tree's `Present`) is
walked only when set. The tree is the format's (`FieldWalking.field_tree`). Guards and bodies
compile through the shared CEL compiler (`executors.cel.compile_term`), so CEL_FIELD has
every construct and builtin CEL has. A shape or expression with no exact native form raises
`NotNativeCel` and the executor falls back to the Python walk for the whole rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.formats.fields import NULL, Array, Field, Leaf, Map, Node, Present, Record, Union, Wrapped
from contracts.model import RuleKind
from executors.cel.compiler import CelType, NotNativeCel, Term, compile_term, split_rule
from executors.cel.compiler import any_error as _or
from executors.cel.runtime import field_activation
from executors.protocol import NativeOutcome

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
_SPARK_TYPES = {"INT": "int", "LONG": "long", "FLOAT": "float", "DOUBLE": "double"}
# `value` of each primitive FieldType: its CEL type, and the cast giving the compiler's
# representation of that type (CEL ints are longs, doubles are doubles; docs/semantics.md §4).
_VALUE_TYPES: dict[str, tuple[str, str | None]] = {
    "STRING": ("string", None),
    "BYTES": ("bytes", None),
    "INT": ("int", "long"),
    "LONG": ("int", "long"),
    "FLOAT": ("double", "double"),
    "DOUBLE": ("double", "double"),
    "BOOLEAN": ("bool", None),
}
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
        raise NotNativeCel(type(self).__name__)


@dataclass
class _Variant:
    """One type name a slot's value may have: when it applies, and the compiled guard and body.

    `cast` turns the field's Column into the compiler's representation of `value`.
    """

    presence: Callable[[Column], Column] | None
    guard: Term | None
    guard_error: bool
    body: Term | None
    cast: str | None = None


@dataclass
class _Slot:
    """What a visited primitive's new value may be written as: the accepted FieldTypes and Spark type."""

    accepts: frozenset[str]
    spark_type: str | None
    rigid: bool = False
    converting_writes: bool = False
    """The format's runtime converts some results to the field's type (FieldTree.converting_writes)."""

    def check(self, result_type: str) -> None:
        """Refuse, at plan time, results whose validity only the Python walk can decide."""
        # A string may be an enum symbol and bytes a fixed value; in a member struct, a result of
        # another branch's type moves the value to that member.
        undecided = self.rigid or self.accepts & {"ENUM", "FIXED"}
        if result_type in _ACCEPTING and not self._kinds(result_type) and undecided:
            raise NotNativeCel("a transform result of a type the field's own branch cannot hold")
        # The protobuf runtime takes UTF-8 bytes for a string field and an int for a bool one.
        converted = {"bytes": "STRING", "int": "BOOLEAN"}.get(result_type)
        if self.converting_writes and converted in self.accepts:
            raise NotNativeCel("a transform result the protobuf runtime converts to its field's type")

    def _kinds(self, result_type: str) -> list[str]:
        return [kind for kind in _ACCEPTING.get(result_type, ()) if kind in self.accepts]

    def always_fits(self, result_type: str) -> bool:
        """Whether every result of this type fits the field: `write` never reports it unfit."""
        kinds = self._kinds(result_type)
        return bool(kinds) and kinds not in (["INT"], ["FLOAT"])

    def write(self, result: Term, value: Column, old: Column) -> tuple[Column, Column | None]:
        """The value cast for writing, and when it does not fit (None: always fits); a result of a
        type the field cannot hold always fails, and the field keeps its old value."""
        from pyspark.sql import functions as F

        kinds = self._kinds(result.type.kind)
        if not kinds:
            return old, F.lit(True)
        # try_cast: an out-of-range value is a failure here (unfit), never an ANSI cast error.
        cast = value.try_cast(self.spark_type) if self.spark_type else value
        if kinds == ["INT"]:
            return cast, ~value.between(INT_MIN, INT_MAX)
        # A double beyond float's range is written as float's infinity, as fastavro's compiled
        # writer and protobuf store it and as Spark's cast gives it.
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

        out = Emitted(value if self.changes else None)
        for variant in self.variants:
            present = variant.presence(value) if variant.presence is not None else None
            if variant.guard_error:
                out.fail = _or(out.fail, present if present is not None else F.lit(True))
                continue
            env = {"value": value.cast(variant.cast) if variant.cast else value, "message": message}
            on = present
            if variant.guard is not None:
                guard = variant.guard.emit(env)
                # A null guard is not truthy: the field is left alone (docs/semantics.md §3).
                applies = (
                    F.coalesce(guard.value, F.lit(False)) if variant.guard.type.nullable else guard.value
                )
                on = _and(on, applies if guard.error is None else applies & ~guard.error)
                out.fail = _or(out.fail, _and(present, guard.error))
            assert variant.body is not None
            body = variant.body
            emitted = body.emit(env)
            result, err = emitted.value, emitted.error
            if self.kind is RuleKind.CONDITION:
                out.fail = _or(out.fail, _and(on, err))
                if body.type.kind == "bool":
                    # Only a plain false fails the record; null is not false (docs/semantics.md §4).
                    false = F.coalesce(~result, F.lit(False)) if body.type.nullable else ~result
                    out.false = _or(out.false, _and(on, false if err is None else ~err & false))
                continue
            if body.error:
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
        # A plain false from an element is not a record-level false (docs/semantics.md §4): errors only.
        # Spark calls `fails` while building the expression, which tells whether anything can fail.
        exists = F.exists(F.map_values(value) if self.is_map else value, fails)
        out.fail = exists if can_fail else None
        return out


@dataclass
class _WrapperPlan(_Plan):
    """A Protobuf wrapper's value (Spark's nullable scalar), walked as its message's `value` field:
    the message a rule reads there is the wrapper, `{value}`."""

    inner: _Plan

    def __post_init__(self) -> None:
        self.changes = self.inner.changes

    def emit(self, value: Column, message: Column | None) -> Emitted:
        from pyspark.sql import functions as F

        return self.inner.emit(value, F.struct(value.alias("value")))


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


def _and(condition: Column | None, column: Column | None) -> Column | None:
    if column is None:
        return None
    return column if condition is None else condition & column


class NativePlanner:
    """Unrolls one CEL_FIELD rule over a schema tree; raises NotNativeCel when it cannot be native.

    Each visited field's guard and body compile through the shared CEL compiler, with `name`,
    `fullName`, `typeName` and `tags` bound as plan-time constants exactly as the Python twin
    binds them, `value` as the field's Column and `message` as its containing record's struct.
    `fitting_only` (a migration) refuses a transform whose result may not fit its field: there such
    a result makes the record undecodable (docs/semantics.md §4.7), which the Python twin tells
    apart from a failed rule and the native walk does not. `converting_writes`: the format's runtime
    converts some results to their field's type rather than refusing them (FieldTree).
    """

    def __init__(
        self,
        expr: str,
        kind: RuleKind,
        rule_tags: frozenset[str],
        *,
        fitting_only: bool = False,
        converting_writes: bool = False,
    ) -> None:
        self.guard, self.body = split_rule(expr)
        self.kind = kind
        self.rule_tags = rule_tags
        self.fitting_only = fitting_only
        self.converting_writes = converting_writes
        self.touched: list[str] = []
        """The full names of the fields the rule's expression runs on, in schema order (after `plan`)."""

    def plan(self, root: Node, spark_type: StructType) -> Callable[[Column], NativeOutcome]:
        """The native step's build function for records of the `root` schema (Spark type `spark_type`)."""
        if not isinstance(root, Record):
            raise NotNativeCel("a top-level schema that is not a record")
        plan = self._record(root, spark_type)

        def build(record: Column) -> NativeOutcome:
            from pyspark.sql import functions as F

            if plan is None:
                return NativeOutcome(F.lit(True), record if self.kind is RuleKind.TRANSFORM else None)
            emitted = plan.emit(record, None)
            passed = F.lit(True) if emitted.fail is None else ~emitted.fail
            new = emitted.value if emitted.value is not None else record
            transformed = new if self.kind is RuleKind.TRANSFORM else None
            return NativeOutcome(passed, transformed)

        return build

    def _record(self, record: Record, struct: StructType) -> _RecordPlan | None:
        fields = []
        for field in record.fields:
            plan = self._node(field.node, struct[field.name].dataType, field, struct)
            if plan is not None:
                fields.append((field, plan))
        return _RecordPlan(fields) if fields else None

    def _node(self, node: Node, dtype: DataType, field: Field, container: StructType) -> _Plan | None:
        """The plan of a value of `node`'s schema held in a Column of type `dtype`, inside
        `field` of the record `container` (the `message` of its primitives)."""
        from pyspark.sql import types as T

        if isinstance(node, Record):
            assert isinstance(dtype, T.StructType)
            return self._record(node, dtype)
        if isinstance(node, Array):
            assert isinstance(dtype, T.ArrayType)
            items = self._node(node.items, dtype.elementType, field, container)
            return None if items is None else _ArrayPlan(items, False)
        if isinstance(node, Map):
            assert isinstance(dtype, T.MapType)
            values = self._node(node.values, dtype.valueType, field, container)
            return None if values is None else _ArrayPlan(values, True)
        if isinstance(node, Leaf):
            return self._slot([(None, node)], self._leaf_slot(node), field, container)
        if isinstance(node, Present):
            if isinstance(node.node, Leaf):
                is_set: Callable[[Column], Column] = lambda v: v.isNotNull()  # noqa: E731
                return self._slot([(is_set, node.node)], self._leaf_slot(node.node), field, container)
            inner = self._node(node.node, dtype, field, container)
            return None if inner is None else _NullablePlan(None, inner)
        if isinstance(node, Wrapped):
            return self._wrapped(node, dtype)
        return self._union(node, dtype, field, container)

    def _leaf_slot(self, leaf: Leaf) -> _Slot:
        return _Slot(
            frozenset({leaf.type_name}),
            _SPARK_TYPES.get(leaf.type_name),
            converting_writes=self.converting_writes,
        )

    def _wrapped(self, node: Wrapped, dtype: DataType) -> _Plan | None:
        """A wrapper's `value` walked over Spark's scalar; a Duration's `seconds` and `nanos`, which
        Spark holds as one interval, stay in Python when the rule would visit them."""
        from pyspark.sql import types as T

        leaves = {"LONG": T.LongType(), "INT": T.IntegerType()}
        if len(node.fields) == 1:
            (inner,) = node.fields
            container = T.StructType([T.StructField(inner.name, dtype)])
            plan = self._node(inner.node, dtype, inner, container)
            return None if plan is None else _WrapperPlan(plan)
        typed = [
            (inner, leaves[inner.node.type_name]) for inner in node.fields if isinstance(inner.node, Leaf)
        ]
        container = T.StructType([T.StructField(inner.name, spark_type) for inner, spark_type in typed])
        for inner, spark_type in typed:
            if self._node(inner.node, spark_type, inner, container) is not None:
                raise NotNativeCel(f"a visited {node.full_name} (one interval in Spark)")
        return None

    def _union(self, union: Union, dtype: DataType, field: Field, container: StructType) -> _Plan | None:
        branches = [branch for branch in union.branches if branch != NULL]
        nullable = len(branches) < len(union.branches)
        null_slot_kinds = frozenset(["NULL", *(b.type_name for b in branches if isinstance(b, Leaf))])
        is_null: Callable[[Column], Column] = lambda v: v.isNull()  # noqa: E731
        is_set: Callable[[Column], Column] = lambda v: v.isNotNull()  # noqa: E731
        if not branches:
            return self._slot([(None, NULL)], _Slot(frozenset({"NULL"}), None), field, container)
        if len(branches) == 1:
            (branch,) = branches
            if isinstance(branch, Leaf):
                spark = _SPARK_TYPES.get(branch.type_name)
                options = [(is_null, NULL), (is_set, branch)] if nullable else [(None, branch)]
                return self._slot(options, _Slot(null_slot_kinds, spark), field, container)
            if not nullable:
                return self._node(branch, dtype, field, container)
            null = self._slot(
                [(is_null, NULL)], _Slot(frozenset({"NULL", _kind(branch)}), None), field, container
            )
            inner = self._node(branch, dtype, field, container)
            return None if null is None and inner is None else _NullablePlan(null, inner)
        kinds = [_kind(branch) for branch in branches]
        if (
            set(kinds) in ({"INT", "LONG"}, {"FLOAT", "DOUBLE"})
            and len(kinds) == 2
            and all(isinstance(branch, Leaf) and branch.logical is None for branch in branches)
        ):
            return self._widened(kinds, nullable, field, container)
        from pyspark.sql import types as T

        assert isinstance(dtype, T.StructType)
        return self._members(branches, kinds, nullable, dtype, field, container)

    def _widened(self, kinds: list[str], nullable: bool, field: Field, container: StructType) -> _Plan | None:
        # spark-avro widens [int, long] / [float, double] to one column; the reference still
        # names the first branch that validates the value: an int-first union says INT in range.
        from pyspark.sql import functions as F

        first = kinds[0]
        options: list[tuple[Callable[[Column], Column] | None, Leaf]] = []
        if nullable:
            options.append((lambda v: v.isNull(), NULL))
        if first == "INT":
            # Never null: a null value is the NULL branch's, and a null test would taint the flags.
            in_range = lambda v: F.coalesce(v.between(INT_MIN, INT_MAX), F.lit(False))  # noqa: E731
            options.append((in_range, Leaf("INT", None)))
            options.append((lambda v: v.isNotNull() & ~in_range(v), Leaf("LONG", None)))
        else:
            options.append((lambda v: v.isNotNull(), Leaf(first, None)))
        accepts = frozenset([*kinds, *(["NULL"] if nullable else [])])
        return self._slot(options, _Slot(accepts, "long" if "LONG" in kinds else "double"), field, container)

    def _members(
        self,
        branches: list[Node],
        kinds: list[str],
        nullable: bool,
        dtype: StructType,
        field: Field,
        container: StructType,
    ) -> _Plan | None:
        members = []
        for index, branch in enumerate(branches):
            if isinstance(branch, Leaf):
                slot = _Slot(frozenset({branch.type_name}), _SPARK_TYPES.get(branch.type_name), rigid=True)
                plan = self._slot([(None, branch)], slot, field, container)
            else:
                plan = self._node(branch, dtype[f"member{index}"].dataType, field, container)
            if plan is None:
                continue
            members.append((index, plan))
        null = None
        if nullable:
            null_slot = _Slot(frozenset({"NULL"}), None, rigid=True)
            null = self._slot([(lambda v: v.isNull(), NULL)], null_slot, field, container)
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
                raise NotNativeCel("a union whose branch a value resolves to depends on the value")
        return _MembersPlan(null, members)

    def _slot(
        self,
        options: list[tuple[Callable[[Column], Column] | None, Leaf]],
        slot: _Slot,
        field: Field,
        container: StructType,
    ) -> _Plan | None:
        if self.rule_tags and self.rule_tags.isdisjoint(field.tags):
            # The reference hands an unvisited field's own value back as its "result", so in a
            # CONDITION a boolean field holding false fails the record even though no
            # expression ran (confluent-kafka 2.16.1, common/avro.py; the Python twin agrees).
            booleans = [presence for presence, leaf in options if leaf.type_name == "BOOLEAN"]
            return _UnvisitedFalsePlan(booleans) if booleans and self.kind is RuleKind.CONDITION else None
        variants = []
        for presence, leaf in options:
            variant = self._variant(presence, leaf, field, container)
            if variant is not None:
                if self.kind is RuleKind.TRANSFORM and variant.body is not None and not variant.body.error:
                    slot.check(variant.body.type.kind)
                    if self.fitting_only and not slot.always_fits(variant.body.type.kind):
                        raise NotNativeCel("a migration result that may not fit its field")
                variants.append(variant)
        if variants and field.full_name not in self.touched:
            self.touched.append(field.full_name)
        return _LeafPlan(variants, slot, self.kind) if variants else None

    def _variant(
        self, presence: Callable[[Column], Column] | None, leaf: Leaf, field: Field, container: StructType
    ) -> _Variant | None:
        if not leaf.primitive:
            return None  # enums and fixed are left alone (docs/semantics.md §4)
        variables, constants = _bindings(leaf, field)
        guard: Term | None = None
        if self.guard is not None:
            guard = compile_term(self.guard, container, variables=variables, constants=constants)
            if guard.error:
                return _Variant(presence, None, True, None)
            if guard.is_constant:
                if not guard.constant:
                    return None
                guard = None
            elif guard.type.kind not in ("bool", "null"):
                raise NotNativeCel("a per-row guard that is not a boolean")
        if leaf.logical is not None:
            raise NotNativeCel(f"a visited {leaf.logical} value")
        body = compile_term(self.body, container, variables=variables, constants=constants)
        if not body.error:
            _check_result(body.type, self.kind)
        cast = _VALUE_TYPES[leaf.type_name][1] if leaf.type_name in _VALUE_TYPES else None
        return _Variant(presence, guard, False, body, cast)


def _bindings(leaf: Leaf, field: Field) -> tuple[dict[str, CelType], dict[str, Any]]:
    """The per-row variables and plan-time constants of one visited field and type name.

    The constants are the Python twin's own activation (`field_activation`), so a folded
    sub-expression sees exactly what the twin sees; `value` is a constant only for typeName NULL.
    """
    activation = field_activation(None, field.name, field.full_name, leaf.type_name, sorted(field.tags), None)
    del activation["message"]
    if leaf.type_name == "NULL":
        return {}, activation
    del activation["value"]
    return {"value": CelType(_VALUE_TYPES[leaf.type_name][0])}, activation


def _check_result(result: CelType, kind: RuleKind) -> None:
    """Refuse results whose native handling is not exact: a TRANSFORM writes only scalar values
    of a definite type (null results only as the literal null), a CONDITION tests scalars."""
    if result.kind not in _ACCEPTING:
        raise NotNativeCel(f"a field result of type {result.kind}")
    if kind is RuleKind.TRANSFORM and result.nullable and result.kind != "null":
        raise NotNativeCel("a transform result that may be null")


def _kind(node: Node) -> str:
    if isinstance(node, Leaf):
        return node.type_name
    return {Record: "RECORD", Array: "ARRAY", Map: "MAP", Union: "COMBINED"}[type(node)]
