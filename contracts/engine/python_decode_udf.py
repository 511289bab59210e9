"""The Python decoder as an Arrow UDF over the rows a JVM decode leaves to it (contracts.engine.jvm_avro).

`from_avro` reads most frames. The others (a frame of an unknown or late-registered id, one named
by a schema id header, one of a writer migrated in Python or read inexactly in the JVM) are
decoded here, and the JVM's suspect records (a record of nulls, a value Python refuses) are judged
here. Only those rows cross to the Python worker: picked out in a branch of their own when the
input reads twice safely (`decode_beside`), else in the one scan, where every other row reaches it
as a null, not as a whole row as in a `mapInArrow` pass. The rows it rejects go to their DLQ
topics through the decode stage's Router in the same task, as the fastavro pass sends them, and
leave marked ROUTED for a native filter to drop.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from contracts.engine import decode, positions
from contracts.engine.columns import (
    FAILURE,
    PARTITION,
    RECORD,
    STATUS,
    failed_batch,
    failure_field,
    quote_name,
    raise_failures,
    status_literal,
    status_type,
)
from contracts.engine.routing import Router
from contracts.errors import DataContractError, SerializationError, in_one_line
from contracts.formats.arrow_types import arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

ROUTED = "__contract_routed"
"""True for a row this pass sent to a DLQ topic (it leaves the DataFrame)."""
SUSPECT = "__contract_suspect"
"""True for a row the JVM decoded whose record the Python decoder must judge."""
_GIVEN = "__contract_python_rows"


def decoded_type(decoder: decode.Decoder) -> StructType:
    """What the UDF gives per row: ROUTED, each natively migrated writer's record, the target record
    and the FAILURE an ERROR migration action left (null for a row it was not given)."""
    from pyspark.sql.types import BooleanType, StructField, StructType

    writers = [
        StructField(decode.writer_column(version), _plain(json.loads(type_json)), True)
        for version, type_json in decoder.native_types.items()
    ]
    target = _plain(json.loads(decoder.target_type_json))
    return StructType(
        [
            StructField(ROUTED, BooleanType(), True),
            *writers,
            StructField(RECORD, target, True),
            failure_field(),
        ]
    )


def _plain(type_json: dict[str, Any]) -> StructType:
    """A record type without its fields' metadata: an Arrow UDF's result type must equal the one
    Spark reads back from Arrow, which holds none."""
    from pyspark.sql.types import StructType

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "metadata"} | (
                {"metadata": {}} if "metadata" in node else {}
            )
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    return StructType.fromJson(strip(type_json))


@dataclass(frozen=True)
class PythonRows:
    """The picklable UDF body: decodes (or judges, SUSPECT) the rows given to it, routes the rows it
    rejects through `router`, and gives `decoded_type`'s struct for each row."""

    decoder: decode.Decoder
    router: Router
    decoded_json: str

    def column(self, rows: Column) -> Column:
        """The UDF applied to `rows`: a struct holding the frame, the columns DLQ records and error
        messages name, PARTITION and SUSPECT; null for a row decoded elsewhere."""
        from pyspark.sql import functions as F

        def decode(arrays: Iterator[pa.Array]) -> Iterator[pa.Array]:
            return self(arrays)

        udf = F.arrow_udf(decode, self._spark_type)
        # Nondeterministic only to the optimizer, so the filter on ROUTED stays above the UDF.
        return udf.asNondeterministic()(rows)

    @property
    def _spark_type(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.decoded_json))

    @cached_property
    def _arrow_type(self) -> pa.StructType:
        return pa.struct(list(arrow_schema(self._spark_type)))

    @cached_property
    def _added(self) -> list[pa.Field]:
        """The columns `decode.decode_batch` adds to a batch: writers, RECORD, STATUS, FAILURE."""
        from pyspark.sql.types import StructField, StructType

        middle = self._spark_type.fields[1:-1]
        fields = [*middle, StructField(STATUS, status_type(), True), failure_field()]
        return list(arrow_schema(StructType(fields)))

    def __call__(self, arrays: Iterator[pa.Array]) -> Iterator[pa.Array]:
        pending: deque[tuple[pa.Array, pa.RecordBatch]] = deque()

        def decoded_batches() -> Iterator[pa.RecordBatch]:
            for rows in arrays:
                decoded = self._decoded(pa.RecordBatch.from_struct_array(rows).filter(rows.is_valid()))
                pending.append((rows, decoded))
                yield decoded.drop_columns([SUSPECT])

        # The Router writes the DLQ records of each batch as it is pulled and commits at the end.
        for _ in self.router(decoded_batches()):
            rows, decoded = pending.popleft()
            yield self._output(rows, decoded)

    def _decoded(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """`batch` (the given rows) with the decoder's columns added: suspects are judged, the
        other rows decoded, each rejected row given its status; an error met on the way marks
        every row to fail the job with it, natively, as one line."""
        output = pa.schema([*batch.schema, *self._added])
        try:
            return self._judged_and_decoded(batch, output)
        except DataContractError as error:
            if not batch.num_rows:
                raise
            return failed_batch(batch, output, in_one_line(error))

    def _judged_and_decoded(self, batch: pa.RecordBatch, output: pa.Schema) -> pa.RecordBatch:
        decoder = self.decoder
        suspect = pc.fill_null(batch.column(SUSPECT), False)
        if not pc.any(suspect).as_py():
            return decode.decode_batch(decoder, batch, output)
        index = batch.schema.get_field_index(decoder.value_column)
        frames = batch.column(index)
        unjudged = pc.if_else(suspect, pa.scalar(None, frames.type), frames)
        decoded = decode.decode_batch(
            decoder, batch.set_column(index, batch.schema.field(index), unjudged), output
        )
        statuses = decoded.column(STATUS).to_pylist()
        for i, is_suspect in enumerate(suspect.to_pylist()):
            if is_suspect:
                statuses[i] = self._judged(batch, i)
        status_index = output.get_field_index(STATUS)
        decoded = decoded.set_column(index, output.field(index), frames)
        return decoded.set_column(
            status_index, output.field(STATUS), pa.array(statuses, output.field(STATUS).type)
        )

    def _judged(self, batch: pa.RecordBatch, i: int) -> dict[str, Any] | None:
        """The status of a row whose JVM record is suspect: the policy's for a frame the Python
        decoder cannot read, None where it reads a record of nulls, as `from_avro` did. A record it
        reads with a value the JVM did not give is a disagreement no policy can route: it fails."""
        decoder = self.decoder
        try:
            _, record = decode.read_frame(decoder, batch.column(decoder.value_column)[i].as_py(), None)
        except SerializationError as e:
            return decode.undecodable_status(decoder, batch, i, e)
        if isinstance(record, dict) and all(v is None for v in record.values()):
            return None
        raise SerializationError(
            f"spark-avro and fastavro read a frame of subject {decoder.subject!r} differently (a"
            " decimal beyond its precision?): set SPARK_CONTRACTS_AVRO_PATH=python to decode with"
            " fastavro alone"
        )

    def _output(self, rows: pa.Array, decoded: pa.RecordBatch) -> pa.Array:
        """The UDF's result for `rows`: the decoded given rows in their places, nulls elsewhere."""
        arrow_type = self._arrow_type
        if not decoded.num_rows:
            return pa.nulls(len(rows), arrow_type)
        routed = pc.is_valid(decoded.column(STATUS))
        parts = [routed, *(decoded.column(f.name) for f in list(arrow_type)[1:])]
        given = pa.StructArray.from_arrays(parts, fields=list(arrow_type))
        chosen = rows.is_valid()
        positions = pc.subtract(pc.cumulative_sum(chosen.cast(pa.int64())), 1)
        return given.take(pc.if_else(chosen, positions, pa.scalar(None, pa.int64())))


def decode_rest(
    staged: DataFrame,
    decoder: decode.Decoder,
    router: Router,
    by_python: Column,
    suspect: Column,
    by_jvm: Mapping[str, Column],
    columns: list[str],
) -> DataFrame:
    """`decode.decode`'s result (`columns` of the input, then the writers', RECORD and STATUS) for
    `staged`, the input with PARTITION and what a JVM decoder read: the rows `by_python` are decoded
    and the `suspect` ones judged by the UDF, its rejects routed and dropped; every other row takes
    the JVM's values (`by_jvm`: per writer column, or RECORD, its value), a tombstone its status."""
    from pyspark.sql import functions as F

    rows = PythonRows(decoder, router, decoded_type(decoder).json())
    names = _given_columns(decoder, router, staged.columns)
    fields = [F.col(f"`{name}`") for name in names]
    given = rows.column(
        F.when(by_python | suspect, F.struct(*fields, F.col(PARTITION), suspect.alias(SUSPECT)))
    )
    out = staged.withColumn(_GIVEN, given).filter(~F.coalesce(F.col(_GIVEN)[ROUTED], F.lit(False)))
    decoded = F.col(_GIVEN)
    writers = [decode.writer_column(v) for v in decoder.native_types]
    for name in [*writers, RECORD]:
        out = out.withColumn(name, F.when(by_python, decoded[name]).otherwise(by_jvm.get(name, F.lit(None))))
    value = F.col(f"`{decoder.value_column}`")
    out = out.withColumns(
        {STATUS: F.when(value.isNull(), status_literal(decoder.tombstone_status)), FAILURE: decoded[FAILURE]}
    )
    return raise_failures(out).select(*[F.col(f"`{name}`") for name in [*columns, *writers, RECORD, STATUS]])


def decode_beside(
    staged: DataFrame,
    decoder: decode.Decoder,
    router: Router,
    by_python: Column,
    suspect: Column,
    by_jvm: Mapping[str, Column],
    columns: list[str],
) -> DataFrame:
    """`decode_rest`'s result in two branches joined by a union, for an input that reads twice
    safely: the rows the JVM decoded and no one must judge never cross to Python; the others
    (`by_python`, `suspect`) are picked out and given to `decode_rest` alone."""
    from pyspark.sql import functions as F

    spark_type = decoded_type(decoder)
    writers = [decode.writer_column(v) for v in decoder.native_types]
    value = F.col(quote_name(decoder.value_column))
    given = by_python | suspect
    nothing = {name: F.lit(None).cast(spark_type[name].dataType) for name in [*writers, RECORD]}
    decoded = [by_jvm.get(name, nothing[name]).alias(name) for name in nothing]
    by_jvm_alone = staged.filter(~given).select(
        *[F.col(quote_name(name)) for name in columns],
        *decoded,
        F.when(value.isNull(), status_literal(decoder.tombstone_status)).alias(STATUS),
    )
    rest = decode_rest(staged.filter(given), decoder, router, by_python, suspect, by_jvm, columns)
    return by_jvm_alone.unionByName(rest)


def _given_columns(decoder: decode.Decoder, router: Router, columns: list[str]) -> list[str]:
    """The columns of `columns` the UDF needs for a row: the frame, its schema id headers, and what
    DLQ records and error messages name (key, DLQ value, headers, topic, partition, offset)."""
    layout = router.layout
    wanted = [
        decoder.value_column,
        decoder.headers_column,
        layout.value_column,
        layout.key_column,
        layout.headers_column,
        layout.topic_column,
        *positions.DECODE_POSITION,
    ]
    return list(dict.fromkeys(name for name in wanted if name is not None and name in columns))
