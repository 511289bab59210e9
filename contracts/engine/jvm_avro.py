"""Avro bodies decoded and encoded in the JVM by spark-avro (`from_avro`, `to_avro`), where they
give exactly what the fastavro passes of `decode` and `encode` give (docs/semantics.md §8.10).

Decoding sends no whole row to Python: a frame whose V0 id or V1 GUID
names a writer this module can read in the JVM (the target, or a writer migrated natively) and
whose row has no schema id header is decoded by `from_avro`; a tombstone gets its status natively;
every other frame (an unknown or late-registered id, a header, a writer migrated in Python or one
`from_avro` cannot read exactly) is decoded by the Python decoder in an Arrow UDF given those rows
alone (contracts.engine.python_decode_udf). `from_avro` in PERMISSIVE mode gives a record of nulls for a
body it cannot read, and reads some bodies fastavro refuses (strings that are not UTF-8, dates and
times Python cannot hold): those rows, found by Spark expressions, go to the same UDF, whose
Python decoder's reason (or success: a record of nulls) then decides. The UDF routes the rows it
rejects in the same task, so the decode policy and the DLQ reasons are the ones of the fastavro
path, byte for byte. When the input reads twice safely, the rows the UDF must see are picked out
in a branch of their own and the others never reach it (`python_decode_udf.decode_beside`);
otherwise one scan gives the UDF every row, those it need not see as nulls.

Encoding (`to_avro`) is exact where spark-avro writes the bytes fastavro writes for every record
of the schema: records without unions of several branches, enums, fixed, maps or logical types
whose Python values are converted (checked by `encodable`).

Which path runs is chosen per call: SPARK_CONTRACTS_AVRO_PATH (env var on the driver) "auto"
(default) spark-avro when a one-row `from_avro` query succeeds on the session (asked once per
session), "jvm" spark-avro (an error when it is missing), "python" fastavro alone.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine import decode, encode, id_headers, positions, python_decode_udf
from contracts.engine.columns import RECORD
from contracts.engine.read_twice import reads_twice_safely
from contracts.engine.routing import Router, with_partition
from contracts.engine.suspect_frames import SuspectFrames, encode_beside, numbers_rows_in_tasks
from contracts.errors import ContractError
from contracts.formats.avro.sizes import size_check
from contracts.formats.avro.types import PRIMITIVES as _PRIMITIVES
from contracts.formats.wire import describe, encode_prefix

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

PATH_ENV = "SPARK_CONTRACTS_AVRO_PATH"
PATHS = ("auto", "jvm", "python")
_MAX_LENGTH = 2**31 - 1
_PERMISSIVE = {"mode": "PERMISSIVE"}
# Logical types fastavro turns into Python objects whose range or form spark-avro does not check:
# a uuid is normalized (and refused when malformed), a time of day refused beyond 24 h.
_PYTHON_ONLY_LOGICAL = frozenset({"uuid", "time-millis", "time-micros"})
# The instants a Python datetime holds (years 1 to 9999), in microseconds from the epoch (UTC).
_MIN_MICROS = -62135596800000000
_MAX_MICROS = 253402300799999999
_JVM_WRITER = "__contract_jvm_writer"
BODIES = "__contract_body"
"""The bodies `to_avro` wrote, for the pass running payload encoding rules (`encode`)."""
_available: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_types: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def chosen_path() -> str:
    """The path SPARK_CONTRACTS_AVRO_PATH asks for ("auto" when unset)."""
    path = os.environ.get(PATH_ENV, "auto").strip().lower() or "auto"
    if path not in PATHS:
        raise ContractError(f"{PATH_ENV} must be one of {', '.join(PATHS)}, not {path!r}")
    return path


def available(spark: SparkSession) -> bool:
    """Whether spark-avro is on the session's classpath: a one-row `from_avro` query, run once per
    session (it works the same on Spark Connect, which has no JVM handle to look into)."""
    known = _available.get(spark)
    if known is None:
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        try:
            row = spark.range(1).select(from_avro(F.lit(b"\x02"), '"int"').alias("v")).first()
            known = row is not None and row["v"] == 1
        except Exception:  # a missing class shows as a py4j, analysis or Connect error
            known = False
        _available[spark] = known
    return known


def uses_jvm(spark: SparkSession, schema_type: str) -> bool:
    """Whether this call decodes and encodes Avro bodies with spark-avro."""
    path = chosen_path()
    if schema_type != "AVRO" or path == "python":
        return False
    if path == "jvm" and not available(spark):
        raise ContractError(
            f"{PATH_ENV}=jvm, but spark-avro is not on the session's classpath: start Spark with"
            " --packages org.apache.spark:spark-avro_2.13:<your Spark version>"
        )
    return available(spark)


def schema_json(schema: Any) -> str:
    """A fastavro parsed schema as Avro JSON Java's parser reads: each named type defined at its
    first use (those of references included), named after, fastavro's own keys left out."""
    named: Mapping[str, Any] = schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}
    defined: set[str] = set()

    def plain(node: Any) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVES or node in defined or node not in named:
                return node
            return plain(named[node])
        if isinstance(node, list):
            return [plain(branch) for branch in node]
        if not isinstance(node, dict):
            return node
        if node.get("type") in ("record", "error", "enum", "fixed"):
            if node["name"] in defined:
                return node["name"]
            defined.add(node["name"])
        out = {k: v for k, v in node.items() if not k.startswith("__")}
        for key in ("type", "items", "values"):
            if key in out and not (key == "type" and isinstance(out[key], str) and out[key] in _KINDS):
                out[key] = plain(out[key])
        if "fields" in out:
            out["fields"] = [{**f, "type": plain(f["type"])} for f in out["fields"]]
        return out

    return json.dumps(plain(schema))


_KINDS = frozenset({*_PRIMITIVES, "record", "error", "enum", "fixed", "array", "map"})


def _walk(schema: Any) -> Iterable[dict[str, Any]]:
    """Every dict node of a parsed schema (named types once)."""
    seen: set[int] = set()
    stack = [schema, *(schema.get("__named_schemas", {}).values() if isinstance(schema, dict) else ())]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            yield node
            stack.extend(node[k] for k in ("type", "items", "values") if k in node)
            stack.extend(f["type"] for f in node.get("fields", ()))


def inexact_reason(schema: Any, spark_type: DataType, spark: SparkSession) -> str | None:
    """Why `from_avro` cannot decode this writer's bodies exactly as fastavro does; None when it can."""
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        return "its schema is not a record"
    for node in _walk(schema):
        if node.get("type") == "map":
            return "it has a map (spark-avro keeps the duplicate keys of a body, fastavro the last)"
        if node.get("logicalType") in _PYTHON_ONLY_LOGICAL:
            return f"it has a {node['logicalType']} (fastavro converts and checks it, spark-avro does not)"
    if size_check(schema) is not None:
        return "it has arrays of zero-size items, whose declared counts fastavro bounds"
    found = _from_avro_type(spark, schema_json(schema))
    if isinstance(found, str):
        return f"spark-avro cannot read its schema: {found}"
    if not _same_shape(found, spark_type):
        return f"spark-avro reads it as {found.simpleString()}, not {spark_type.simpleString()}"
    return None


def _from_avro_type(spark: SparkSession, avro_json: str) -> DataType | str:
    """The Spark type `from_avro` gives for a schema (one analysis, cached per session), or why not."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    cache = _types.setdefault(spark, {})
    if avro_json not in cache:
        try:
            probe = spark.range(0).select(
                from_avro(F.lit(None).cast("binary"), avro_json, _PERMISSIVE).alias("r")
            )
            cache[avro_json] = probe.schema["r"].dataType
        except Exception as e:
            cache[avro_json] = str(e).splitlines()[0][:300]
    return cache[avro_json]


def _same_shape(found: DataType, ours: DataType) -> bool:
    """Same types and field names, nullability and metadata aside (PERMISSIVE makes every field
    nullable; the union with the Python half keeps the Python half's metadata)."""
    from pyspark.sql import types as T

    if isinstance(found, T.StructType) and isinstance(ours, T.StructType):
        return len(found.fields) == len(ours.fields) and all(
            a.name == b.name and _same_shape(a.dataType, b.dataType)
            for a, b in zip(found.fields, ours.fields, strict=True)
        )
    if isinstance(found, T.ArrayType) and isinstance(ours, T.ArrayType):
        return _same_shape(found.elementType, ours.elementType)
    if isinstance(found, T.MapType) or isinstance(ours, T.MapType):
        return False
    return type(found) is type(ours) and found == ours


def _unpythonic(value: Column, data_type: DataType) -> Column | None:
    """True where a decoded value holds what the Python decoder refuses (a string that is not
    UTF-8, a date or an instant outside years 1 to 9999); None when the type holds none."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(data_type, T.StringType):
        return ~F.is_valid_utf8(value)
    if isinstance(data_type, T.TimestampType):
        micros = F.unix_micros(value)
        return (micros < F.lit(_MIN_MICROS)) | (micros > F.lit(_MAX_MICROS))
    if isinstance(data_type, T.DateType | T.TimestampNTZType):
        return (F.year(value) < F.lit(1)) | (F.year(value) > F.lit(9999))
    if isinstance(data_type, T.ArrayType):
        inner = _unpythonic(F.col("x"), data_type.elementType)
        if inner is None:
            return None
        return F.exists(value, lambda x: _unpythonic(x, data_type.elementType))  # type: ignore[arg-type,return-value]
    if isinstance(data_type, T.StructType):
        checks = [_unpythonic(value.getField(f.name), f.dataType) for f in data_type.fields]
        present = [c for c in checks if c is not None]
        if not present:
            return None
        any_bad = present[0]
        for check in present[1:]:
            any_bad = any_bad | check
        return any_bad
    return None


def _suspect(record: Column, data_type: Any) -> Column:
    """Rows the Python decoder must judge: a record of nulls (what PERMISSIVE gives for a body it
    cannot read, or a record whose fields all are null) or one holding values Python refuses."""
    from pyspark.sql import functions as F

    nulls = F.lit(True)
    for f in data_type.fields:
        nulls = nulls & record.getField(f.name).isNull()
    bad = _unpythonic(record, data_type)
    return nulls if bad is None else nulls | F.coalesce(bad, F.lit(False))


@dataclass(frozen=True)
class _JvmWriter:
    """A writer read by `from_avro`: its prefixes (V0 id, V1 GUID), schema JSON and Spark type."""

    version: int
    prefixes: tuple[bytes, ...]
    avro_json: str
    spark_type: Any
    column: str
    """RECORD for the target, else the writer's own column (`decode.writer_column`)."""


@dataclass(frozen=True)
class JvmDecode:
    """The JVM half of a decode: the writers `from_avro` reads exactly, and why the others not."""

    writers: tuple[_JvmWriter, ...]
    fallbacks: Mapping[int, str]
    """Writer versions left to fastavro, with why."""

    @classmethod
    def plan(cls, decoder: decode.Decoder, spark: SparkSession) -> JvmDecode | None:
        """The JVM half for `decoder`'s known writers, or None when no writer can use it (or the
        chosen path is fastavro's)."""
        from pyspark.sql.types import StructType

        if not uses_jvm(spark, decoder.schema_format.schema_type):
            return None
        ids: dict[int, list[bytes]] = {}
        for schema_id in decoder.writers:
            ids.setdefault(decoder.writers[schema_id].version, []).append(encode_prefix(schema_id))
        for guid, schema_id in decoder.guids.items():
            writer = decoder.writers.get(schema_id)
            if writer is not None:
                ids[writer.version].append(encode_prefix(_uuid(guid)))
        chosen: list[_JvmWriter] = []
        fallbacks: dict[int, str] = {}
        for version, prefixes in sorted(ids.items()):
            writer = next(w for w in decoder.writers.values() if w.version == version)
            if writer.failure is not None:
                continue  # its records cannot reach the target: the Python pass says why
            if writer.payload:
                fallbacks[version] = "its READ encoding rules turn each payload into the body in Python"
                continue
            if version == decoder.target_version:
                type_json, column = decoder.target_type_json, RECORD
            elif version in decoder.native_types:
                type_json, column = decoder.native_types[version], decode.writer_column(version)
            else:
                fallbacks[version] = "its migration runs in Python, on the records fastavro reads"
                continue
            spark_type = StructType.fromJson(json.loads(type_json))
            why = inexact_reason(writer.schema, spark_type, spark)
            if why is not None:
                fallbacks[version] = why
                continue
            chosen.append(
                _JvmWriter(version, tuple(prefixes), schema_json(writer.schema), spark_type, column)
            )
        return cls(tuple(chosen), fallbacks) if chosen else None

    def decode(self, df: DataFrame, decoder: decode.Decoder, router: Router, keep_value: bool) -> DataFrame:
        """`decode.decode`'s result for `df`, no row crossing to Python whole: `from_avro` reads the
        JVM writers' frames; the other frames, and the JVM's suspect records, go to the Python
        decoder (contracts.engine.python_decode_udf), which routes the rows it rejects through
        `router` in the same task, as the fastavro pass does: in a branch of their own when `df`
        reads twice safely, else in the one scan."""
        from pyspark.sql import functions as F

        value = F.col(f"`{decoder.value_column}`")
        # Which JVM writer's prefix a frame has, found once per row (null: no JVM writer's frame,
        # a frame named by a schema id header, or a tombstone).
        index = F.when(self._matches(value, self.writers[0]), F.lit(0))
        for i, w in enumerate(self.writers[1:], start=1):
            index = index.when(self._matches(value, w), F.lit(i))
        unnamed = value.isNotNull()
        if decoder.headers_column is not None:
            named = F.exists(
                F.col(f"`{decoder.headers_column}`"), lambda h: h["key"] == F.lit(decoder.id_header)
            )
            unnamed = unnamed & ~F.coalesce(named, F.lit(False))
        chosen = F.col(_JVM_WRITER)
        reads = {
            w.column: F.when(chosen == F.lit(i), self._read(value, w)) for i, w in enumerate(self.writers)
        }
        staged = with_partition(df).withColumn(_JVM_WRITER, F.when(unnamed, index)).withColumns(reads)
        suspect = F.lit(False)
        for i, w in enumerate(self.writers):
            suspect = F.when(chosen == F.lit(i), _suspect(F.col(w.column), w.spark_type)).otherwise(suspect)
        suspect = F.coalesce(suspect, F.lit(False))
        by_python = value.isNotNull() & chosen.isNull()
        kept = [name for name in df.columns if keep_value or name != decoder.value_column]
        by_jvm_values = {name: F.col(name) for name in reads}
        rest = python_decode_udf.decode_beside if reads_twice_safely(df) else python_decode_udf.decode_rest
        return rest(staged, decoder, router, by_python, suspect, by_jvm_values, kept)

    @staticmethod
    def _matches(value: Column, writer: _JvmWriter) -> Column:
        from pyspark.sql import functions as F

        match = F.lit(False)
        for prefix in writer.prefixes:
            match = match | (F.substring(value, 1, len(prefix)) == F.lit(prefix))
        return match

    @staticmethod
    def _read(value: Column, writer: _JvmWriter) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        body = F.when(F.substring(value, 1, 1) == F.lit(b"\x00"), F.substring(value, 6, _MAX_LENGTH))
        body = body.otherwise(F.substring(value, 18, _MAX_LENGTH))
        # A nondeterministic guard keeps each record in the projection that reads it: without it,
        # a filter on the record is pushed below and reads the body once per field it names.
        return F.when(F.spark_partition_id() >= F.lit(0), from_avro(body, writer.avro_json, _PERMISSIVE))


def _uuid(guid: str) -> Any:
    import uuid

    return uuid.UUID(guid)


def encode_inexact_reason(schema: Any) -> str | None:
    """Why `to_avro` may not write fastavro's bytes for every record of `schema`; None when it does."""
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        return "its schema is not a record"
    for node in _walk(schema):
        kind = node.get("type")
        if "logicalType" in node:
            return f"it has a {node['logicalType']} (converted from Python values on the fastavro path)"
        if kind in ("enum", "fixed", "map"):
            return f"it has a {kind}"
        for f in node.get("fields", ()):
            branches = f["type"] if isinstance(f["type"], list) else None
            if branches is not None and (len(branches) != 2 or "null" not in branches):
                return "it has a union other than [null, T] (fastavro picks the branch from the value)"
        for key in ("items",):
            if isinstance(node.get(key), list):
                return "it has a union inside an array"
    return None


def _unwritable(value: Column, schema: Any, named: Mapping[str, Any]) -> Column:
    """True where fastavro would refuse `value` for `schema`: a null where the schema has none, a
    string that is not UTF-8 (null where undecided: callers coalesce)."""

    if isinstance(schema, list):
        (inner,) = [branch for branch in schema if branch != "null"]
        return value.isNotNull() & _present_unwritable(value, inner, named)
    return value.isNull() | _present_unwritable(value, schema, named)


def _present_unwritable(value: Column, schema: Any, named: Mapping[str, Any]) -> Column:
    from pyspark.sql import functions as F

    node = named.get(schema, schema) if isinstance(schema, str) else schema
    kind = node if isinstance(node, str) else node.get("type")
    if kind == "string":
        return ~F.is_valid_utf8(value)
    if kind in ("record", "error"):
        bad = F.lit(False)
        for f in node["fields"]:
            bad = bad | F.coalesce(_unwritable(value.getField(f["name"]), f["type"], named), F.lit(False))
        return bad
    if kind == "array":
        items = node["items"]
        return F.exists(value, lambda x: F.coalesce(_unwritable(x, items, named), F.lit(False)))
    if isinstance(kind, dict | list):
        return _present_unwritable(value, kind, named)
    return F.lit(False)


def to_avro_encode(
    staged: DataFrame,
    schema: Any,
    schema_ref: Any,
    output: Any,
    schema_format: Any,
    in_header: id_headers.SchemaIdHeaders | None = None,
    payload: Any = None,
) -> DataFrame | None:
    """`encode.encode`'s result, the bodies written by `to_avro` when it writes fastavro's bytes (the
    schema passes `encode_inexact_reason`, no Kafka headers to rewrite), else None (the Python
    encode pass runs); a record fastavro may refuse (a null where the schema has none, a string
    that is not UTF-8) is encoded by fastavro, failing the job with the fastavro path's message
    when it does: in a branch of its own when the input reads twice safely
    (contracts.engine.suspect_frames), else in an Arrow UDF over the rows. Payload encoding rules
    then run in a pass over the bodies alone (`encode.encode` with `bodies`), the records never
    crossing to Python."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    spark = staged.sparkSession
    encodes_payload = payload is not None and bool(payload[0])
    usable = in_header is None and uses_jvm(spark, schema_format.schema_type)
    if not usable or encode_inexact_reason(schema) is not None:
        return None
    avro_json = schema_json(schema)
    found = _from_avro_type(spark, avro_json)
    if isinstance(found, str) or not _same_shape(found, staged.schema[RECORD].dataType):
        return None
    # With encoding rules, the bodies: the pass running them adds the prefix.
    prefix = b"" if encodes_payload else encode_prefix(schema_ref)
    named = schema.get("__named_schemas", {})
    record = F.col(RECORD)
    suspect = F.coalesce(_unwritable(record, schema, named), F.lit(False))
    where = [F.col(f"`{n}`") for n in positions.ENCODE_POSITION if n in staged.columns]
    written = F.concat(F.lit(prefix), to_avro(record, avro_json))
    if not encodes_payload and numbers_rows_in_tasks(staged):
        names = tuple(output.fieldNames())
        frames = SuspectFrames(schema, describe(schema_ref), prefix, schema_format, names)
        return encode_beside(staged, record.isNotNull() & suspect, written, output, frames)
    rows = F.when(suspect, F.struct(record.alias(RECORD), *where))
    by_python = _fastavro_frames_udf(schema, describe(schema_ref), prefix, schema_format)(rows)
    value = F.when(suspect, by_python).otherwise(written)
    if encodes_payload:
        written = staged.withColumn(BODIES, value).drop(RECORD)
        return encode.encode(written, schema, schema_ref, output, schema_format, None, payload, BODIES)
    columns = [value.alias(f.name) if f.name == "value" else F.col(f"`{f.name}`") for f in output.fields]
    return staged.select(*columns)


def _fastavro_frames_udf(schema: Any, schema_name: str, prefix: bytes, schema_format: Any) -> Any:
    """An Arrow UDF over a partition's rows (a struct of the record and the Kafka columns naming it;
    null but for the suspects): fastavro's frame of each suspect, or the fastavro path's failure."""
    from pyspark.sql import functions as F

    def frames(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        rows_before = 0
        for rows in batches:
            batch = pa.RecordBatch.from_struct_array(rows)
            chosen = rows.is_valid().to_pylist()
            out = encode.encode_frames(batch, rows_before, schema, schema_name, prefix, schema_format, chosen)
            rows_before += len(rows)
            yield pa.array(out, type=pa.binary())

    return F.arrow_udf(frames, "binary").asNondeterministic()
