"""JSON Schema bodies decoded in the JVM by Spark's `from_json`, where the record and the verdict
are provably the Python decoder's (docs/semantics.md §8.11).

The frames whose V0 id or V1 GUID names the target version (no schema id header, no READ encoding
rules, a schema whose keywords `json_schema.native` compiles) are left undecoded by the Python
decode pass and parsed by `from_json` with the target's Spark type right after it, in the same
scan. A row is trusted when its body is, byte for byte, the record's compact JSON as `to_json`
writes it or the same text with `json.dumps`'s default separators (`json_schema.layouts`), and
the compiled keywords find it valid: the body is then that record's JSON text, which `json.loads`
reads as the same values (no unknown or duplicate property, no number read as a string, no 1.0
or oversized integer read as a long, no other top-level value, valid UTF-8, no trailing text),
so `jsonschema` finds it valid too. Every other of these rows goes to a small Arrow UDF that sees
those rows alone and decodes them with the Python decoder: its record, or its reason under the
decode policy (routed after the rules, as the `from_avro` rows), so the records, the DLQ records
and the errors are the Python path's.

SPARK_CONTRACTS_JSON_PATH (env var on the driver) chooses per call: "auto" (default) and "jvm"
this path where the schema allows it (`from_json` is always there, so both mean the same);
"python" the Python pass alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine import serde
from contracts.engine.frame import RECORD, STATUS
from contracts.engine.routing import Router
from contracts.errors import ContractError, SerializationError
from contracts.formats import avro
from contracts.formats.json_schema import layouts, native
from contracts.formats.wire import encode_prefix

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PATH_ENV = "SPARK_CONTRACTS_JSON_PATH"
PATHS = ("auto", "jvm", "python")
_MAX_LENGTH = 2**31 - 1
_PERMISSIVE = {"mode": "PERMISSIVE"}
_PARSED = "__contract_json_parsed"
_TRUSTED = "__contract_json_trusted"
_JVM_ROW = "__contract_json_jvm_row"
_PYTHON = "__contract_json_python"


def chosen_path() -> str:
    """The path SPARK_CONTRACTS_JSON_PATH asks for ("auto" when unset)."""
    path = os.environ.get(PATH_ENV, "auto").strip().lower() or "auto"
    if path not in PATHS:
        raise ContractError(f"{PATH_ENV} must be one of {', '.join(PATHS)}, not {path!r}")
    return path


@dataclass(frozen=True)
class JsonJvmDecode:
    """The JVM half of a JSON decode: the target's prefixes (V0 id, V1 GUID) and Spark type."""

    prefixes: tuple[bytes, ...]
    spark_type: Any

    @classmethod
    def plan(cls, decoder: serde.Decoder, spark: SparkSession) -> JsonJvmDecode | None:
        """The JVM half for `decoder`'s target, or None when the chosen path is Python's or the
        target's frames cannot use it (why: `fallback_reason`)."""
        from pyspark.sql.types import StructType

        if decoder.schema_format.schema_type != "JSON" or chosen_path() == "python":
            return None
        ids = [i for i, w in decoder.writers.items() if w.version == decoder.target_version]
        if not ids or fallback_reason(decoder.writers[ids[0]]) is not None:
            return None
        prefixes = [encode_prefix(i) for i in ids]
        prefixes += [encode_prefix(_uuid(guid)) for guid, i in decoder.guids.items() if i in ids]
        return cls(tuple(prefixes), StructType.fromJson(json.loads(decoder.target_type_json)))

    def decode(self, df: DataFrame, decoder: serde.Decoder, router: Router, keep_value: bool) -> DataFrame:
        """`serde.decode`'s result in one scan of `df`: the Python pass decodes every frame but
        the target's, which it leaves for `from_json` right after it. A parsed row not trusted is
        decoded by the Python decoder in a small Arrow UDF that sees those rows alone; its record,
        or its failure with the Python path's reason (routed, under DLQ, after the rules), is
        the row's."""
        from pyspark.sql import functions as F

        value = F.col(f"`{decoder.value_column}`")
        by_jvm = F.lit(False)
        for prefix in self.prefixes:
            by_jvm = by_jvm | (F.substring(value, 1, len(prefix)) == F.lit(prefix))
        if decoder.headers_column is not None:
            named = F.exists(
                F.col(f"`{decoder.headers_column}`"), lambda h: h["key"] == F.lit(decoder.id_header)
            )
            by_jvm = by_jvm & ~F.coalesce(named, F.lit(False))
        by_jvm = F.coalesce(by_jvm & value.isNotNull(), F.lit(False))
        out = serde.decode(df.withColumn(_JVM_ROW, by_jvm), decoder, router, keep_value=True, skip=_JVM_ROW)
        jvm_row = F.col(_JVM_ROW)
        body = F.when(F.substring(value, 1, 1) == F.lit(b"\x00"), F.substring(value, 6, _MAX_LENGTH))
        text = body.otherwise(F.substring(value, 18, _MAX_LENGTH)).cast("string")
        out = out.withColumn(_PARSED, F.when(jvm_row, F.from_json(text, self.spark_type, _PERMISSIVE)))
        parsed = F.col(_PARSED)
        trusted = layouts.written_from(parsed, self.spark_type, text)
        trusted = trusted & native.surely_valid(parsed, decoder.target_schema)
        out = out.withColumn(_TRUSTED, jvm_row & F.coalesce(trusted, F.lit(False)))
        where = [F.col(name) for name in ("topic", "partition", "offset") if name in out.columns]
        rows = F.struct(value.alias(decoder.value_column), *where)
        untrusted = jvm_row & ~F.col(_TRUSTED)
        out = out.withColumn(_PYTHON, _python_udf(decoder, self.spark_type)(F.when(untrusted, rows)))
        python = F.col(_PYTHON)
        record = F.when(F.col(_TRUSTED), parsed).otherwise(python.getField("record"))
        out = out.withColumn(RECORD, F.when(jvm_row, record).otherwise(F.col(RECORD)))
        reason = python.getField("reason")
        unreadable = serde.unreadable_status(decoder, df.columns)
        out = out.withColumn(STATUS, F.when(reason.isNotNull(), unreadable(reason)).otherwise(F.col(STATUS)))
        temporary = [_JVM_ROW, _PARSED, _TRUSTED, _PYTHON]
        return out.drop(*temporary) if keep_value else out.drop(*temporary, decoder.value_column)


def fallback_reason(writer: serde.WriterVersion) -> str | None:
    """Why a writer's frames keep the Python decode; None when `from_json` may read them."""
    if writer.failure is not None:
        return "its records cannot reach the target"
    if writer.payload:
        return "its READ encoding rules turn each payload into the body in Python"
    if any(shape.kind == "map" for shape in _shapes(writer.schema.shape)):
        return "it has a map (additionalProperties alone), whose duplicate keys from_json may refuse"
    return native.inexact_reason(writer.schema)


def _shapes(shape: Any) -> list[Any]:
    out = [shape]
    for _, field, _ in shape.fields:
        out += _shapes(field)
    if shape.item is not None:
        out += _shapes(shape.item)
    return out


def _python_udf(decoder: serde.Decoder, spark_type: Any) -> Any:
    """An Arrow UDF over rows (a struct of the frame and the Kafka columns naming where it is; null
    but for the target's frames `from_json` could not be trusted with): the Python decoder's record
    of each, or the reason it cannot read it. Under ERROR the first unreadable one fails the job,
    with the message and exception of the Python path."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    returned = StructType([StructField("record", spark_type), StructField("reason", StringType())])
    arrow_returned = avro.arrow_type(returned)
    record_type = arrow_returned.field("record").type
    schema_format = decoder.schema_format
    tagged = schema_format.needs_tags(decoder.target_schema)

    def decoded(rows: pa.Array) -> pa.Array:
        if rows.null_count == len(rows):
            return pa.nulls(len(rows), arrow_returned)
        batch = pa.RecordBatch.from_struct_array(rows)
        frames = batch.column(decoder.value_column).to_pylist()
        records: list[Any] = [None] * len(rows)
        reasons: list[str | None] = [None] * len(rows)
        for i, ok in enumerate(rows.is_valid().to_pylist()):
            if not ok or frames[i] is None:
                continue
            try:
                _, records[i] = serde.read_frame(decoder, frames[i], None)
            except SerializationError as e:
                reasons[i] = str(serde.undecodable_status(decoder, batch, i, e)["reason"])
        record_column = schema_format.to_struct(records, decoder.target_schema, record_type, tagged)
        reason_column = pa.array(reasons, type=pa.string())
        return pa.StructArray.from_arrays([record_column, reason_column], fields=list(arrow_returned))

    # Nondeterministic only to the optimizer: a filter on the status is then not pushed below the
    # UDF, where it would inline `from_json` into its condition and evaluate it twice.
    return F.arrow_udf(decoded, returned).asNondeterministic()


def _uuid(guid: str) -> Any:
    import uuid

    return uuid.UUID(guid)
