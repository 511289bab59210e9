"""JSON Schema bodies decoded in the JVM by Spark's `from_json`, where the record and the verdict
are provably the Python decoder's (docs/semantics.md §8.11).

The frames whose V0 id or V1 GUID names the target version (no schema id header, no READ encoding
rules, a schema whose keywords `json_schema.native` compiles) are parsed by `from_json` with the
target's Spark type. A row is trusted when its body is, byte for byte, the record's compact JSON
as `to_json` writes it or the same text with `json.dumps`'s default separators
(`json_schema.layouts`), and the compiled keywords find it valid: the body is then that record's
JSON text, which `json.loads` reads as the same values (no unknown or duplicate property, no
number read as a string, no 1.0 or oversized integer read as a long, no other top-level value,
valid UTF-8, no trailing text), so `jsonschema` finds it valid too. Every other row with a frame
goes, in the same scan, to the Python decoder in an Arrow UDF given those rows alone
(`python_decode_udf`, as on the spark-avro path): its record, or its rejection under the decode
policy, routed in the same task, so the records, the DLQ records and the errors are the Python
path's. A trusted row crosses to Python as a null.

SPARK_CONTRACTS_JSON_PATH (env var on the driver) chooses per call: "auto" (default) and "jvm"
this path where the schema allows it (`from_json` is always there, so both mean the same);
"python" the Python pass alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts.engine import decode, python_decode_udf
from contracts.engine.columns import RECORD
from contracts.engine.routing import Router, with_partition
from contracts.errors import ContractError
from contracts.formats.json_schema import layouts, native
from contracts.formats.markers import ABSENT_FIELD, ABSENT_MARK
from contracts.formats.wire import encode_prefix
from contracts.planning.planner import WriterVersion

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PATH_ENV = "SPARK_CONTRACTS_JSON_PATH"
PATHS = ("auto", "jvm", "python")
_MAX_LENGTH = 2**31 - 1
_PERMISSIVE = {"mode": "PERMISSIVE"}
_PARSED = "__contract_json_parsed"
_TRUSTED = "__contract_json_trusted"


def chosen_path() -> str:
    """The path SPARK_CONTRACTS_JSON_PATH asks for ("auto" when unset)."""
    path = os.environ.get(PATH_ENV, "auto").strip().lower() or "auto"
    if path not in PATHS:
        raise ContractError(f"{PATH_ENV} must be one of {', '.join(PATHS)}, not {path!r}")
    return path


@dataclass(frozen=True)
class JsonJvmDecode:
    """The JVM half of a JSON decode: the target's prefixes (V0 id, V1 GUID) and Spark type,
    without its absent-property mask (`ABSENT_FIELD`), which `decode` computes (§1.5)."""

    prefixes: tuple[bytes, ...]
    spark_type: Any
    masked: bool = False

    @classmethod
    def plan(cls, decoder: decode.Decoder, spark: SparkSession) -> JsonJvmDecode | None:
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
        target = StructType.fromJson(json.loads(decoder.target_type_json))
        properties = StructType([f for f in target.fields if not f.metadata.get(ABSENT_MARK)])
        return cls(tuple(prefixes), properties, masked=len(properties.fields) < len(target.fields))

    def decode(self, df: DataFrame, decoder: decode.Decoder, router: Router, keep_value: bool) -> DataFrame:
        """`decode.decode`'s result in one scan of `df`, no row crossing to Python whole: `from_json`
        reads the target's frames, and the rows it is not trusted with, with every other frame, go
        to the Python decoder (contracts.engine.python_decode_udf), which routes the rows it rejects
        through `router` in the same task, as the Python pass does."""
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
        body = F.when(F.substring(value, 1, 1) == F.lit(b"\x00"), F.substring(value, 6, _MAX_LENGTH))
        text = body.otherwise(F.substring(value, 18, _MAX_LENGTH)).cast("string")
        parsed = F.when(by_jvm, F.from_json(text, self.spark_type, _PERMISSIVE))
        staged = with_partition(df).withColumn(_PARSED, parsed)
        parsed = F.col(_PARSED)
        trusted = layouts.written_from(parsed, self.spark_type, text)
        trusted = by_jvm & F.coalesce(
            trusted & native.surely_valid(parsed, decoder.target_schema), F.lit(False)
        )
        staged = staged.withColumn(_TRUSTED, trusted)
        by_python = value.isNotNull() & ~F.col(_TRUSTED)
        kept = [name for name in df.columns if keep_value or name != decoder.value_column]
        if self.masked:
            # A trusted text left out every null struct field: each null optional property is absent.
            parsed = parsed.withField(
                ABSENT_FIELD, layouts.absent_pointers(parsed, decoder.target_schema.shape)
            )
        out = python_decode_udf.decode_rest(
            staged, decoder, router, by_python, F.lit(False), {RECORD: parsed}, kept
        )
        return out.drop(_PARSED, _TRUSTED) if _PARSED in out.columns else out


def fallback_reason(writer: WriterVersion) -> str | None:
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


def _uuid(guid: str) -> Any:
    import uuid

    return uuid.UUID(guid)
