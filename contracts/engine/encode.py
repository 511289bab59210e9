"""The encode pass: records → Confluent frames through the subject's format, naming the schema in
the prefix or a schema id header, with the encoding rules on each serialized payload (§11.5), in
one Arrow-batched `mapInArrow` pass."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine.columns import (
    FAILURE,
    PARTITION,
    RECORD,
    STATUS,
    failure_field,
    raise_failures,
    status_type,
)
from contracts.engine.encoding_rules import PayloadRules, split_clear
from contracts.engine.id_headers import SchemaIdHeaders
from contracts.engine.positions import refuse_unread
from contracts.engine.routing import Router, with_partition
from contracts.errors import SerializationError
from contracts.formats.arrow_types import arrow_schema
from contracts.formats.protocol import SchemaFormat
from contracts.formats.wire import (
    SchemaRef,
    describe,
    encode_prefix,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


def encode(
    staged: DataFrame,
    schema: Any,
    schema_ref: SchemaRef,
    output: StructType,
    schema_format: SchemaFormat,
    in_header: SchemaIdHeaders | None = None,
    payload: tuple[PayloadRules, Router] | None = None,
    bodies: str | None = None,
) -> DataFrame:
    """Replace the record struct with a `value` column of Confluent frames, naming `schema_ref` in
    their prefix, or (when `in_header` gives it a value) in a schema id header before a bare body.
    With `payload`, its encoding rules turn each body into the payload after the prefix; the rows
    they reject go through its router (their serialized body as the DLQ value, §11.5). With
    `bodies` (and `payload`), `staged` holds each record's body already written (by `to_avro`) in
    that column instead of the record struct: the pass then only runs the encoding rules."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StructField, StructType

    prefix = b"" if in_header is not None and in_header.value is not None else encode_prefix(schema_ref)
    name = describe(schema_ref)
    if payload is None or not payload[0]:
        encoder = _EncodePass(schema, name, prefix, output.json(), schema_format, in_header)
        return staged.mapInArrow(encoder, output)
    rules, router = payload
    # The router's input: the staged columns, the frames, the status and failure of each row.
    routed = [f for f in staged.schema.fields if f.name not in (RECORD, bodies)]
    middle = StructType(
        [
            *routed,
            StructField("value", BinaryType(), True),
            StructField(STATUS, status_type(), True),
            failure_field(),
        ]
    )
    sealed = StructType([*output.fields, StructField(STATUS, status_type(), True), failure_field()])
    encoder = _EncodePass(
        schema, name, prefix, sealed.json(), schema_format, in_header, rules, router, middle.json(), bodies
    )
    encoded = raise_failures(with_partition(staged).mapInArrow(encoder, sealed))
    # Filtering on the status makes Spark evaluate the ERROR failures raise_failures raises.
    return encoded.filter(F.col(STATUS).isNull()).drop(STATUS)


@dataclass(frozen=True)
class _EncodePass:
    schema: Any
    schema_name: str
    prefix: bytes
    output_json: str
    schema_format: SchemaFormat
    in_header: SchemaIdHeaders | None
    payload: PayloadRules | None = None
    router: Router | None = None
    middle_json: str | None = None
    """With `payload`: the type of the batches the router receives (`encode`)."""
    bodies: str | None = None
    """The column holding the bodies already written, if they are (`encode`)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.types import StructType

        output = arrow_schema(StructType.fromJson(json.loads(self.output_json)))
        if self.router is None or self.middle_json is None:
            encoded = self._all(batches, None)
        else:
            middle = arrow_schema(StructType.fromJson(json.loads(self.middle_json)))
            encoded = self.router(self._all(batches, middle))
        for batch in encoded:
            replaced = {}
            if self.in_header is not None:
                column = self.in_header.column
                framed = batch.column("value").is_valid().to_pylist()
                replaced[column] = self.in_header.rewritten(batch, output.field(column).type, framed)
            columns = [replaced[f.name] if f.name in replaced else batch.column(f.name) for f in output]
            yield pa.RecordBatch.from_arrays(columns, schema=output)

    def _all(self, batches: Iterator[pa.RecordBatch], middle: pa.Schema | None) -> Iterator[pa.RecordBatch]:
        rows_before = 0
        for batch in batches:
            yield self._encoded(batch, middle, rows_before)
            rows_before += batch.num_rows

    def _encoded(self, batch: pa.RecordBatch, middle: pa.Schema | None, rows_before: int) -> pa.RecordBatch:
        """The batch with its frames in `value` (and, for the router, each row's status and failure)."""
        bodies = self._bodies(batch, rows_before)
        present = [i for i, body in enumerate(bodies) if body is not None]  # no record: no frame
        frames: list[bytes | None] = list(bodies)
        statuses: list[dict[str, Any] | None] = [None] * len(bodies)
        failures: list[str | None] = [None] * len(bodies)
        if self.payload:
            split = [split_clear(self.schema_format, bodies[i]) for i in present]
            sealed, refused, failed, _ = self.payload.apply_all([payload for _, payload in split])
            for i, (clear, _), payload, status, failure in zip(
                present, split, sealed, refused, failed, strict=True
            ):
                # A rejected row's DLQ value is its serialized body, as the reference sends it.
                sealed_frame = self.prefix + clear + payload
                frames[i] = sealed_frame if status is None and failure is None else bodies[i]
                statuses[i], failures[i] = status, failure
        else:
            for i in present:
                frames[i] = self.prefix + bodies[i]
        columns = {"value": pa.array(frames, type=pa.binary())}
        if middle is None:
            return batch.append_column("value", columns["value"])
        columns[STATUS] = pa.array(statuses, type=middle.field(STATUS).type)
        columns[FAILURE] = pa.array(failures, type=middle.field(FAILURE).type)
        names = [*middle.names[:-3], PARTITION]
        kept = [batch.column(n) for n in names]
        schema = pa.schema([*(batch.schema.field(n) for n in names), *(middle.field(n) for n in columns)])
        return pa.RecordBatch.from_arrays([*kept, *columns.values()], schema=schema)

    def _bodies(self, batch: pa.RecordBatch, rows_before: int) -> list[bytes | None]:
        """Each row's body (None for a null record): as written already, or encoded here."""
        if self.bodies is not None:
            written: list[bytes | None] = batch.column(self.bodies).to_pylist()
            return written
        read = self.schema_format.read_struct(batch.column(RECORD), self.schema, tagged=True)
        refuse_unread(batch, rows_before, read.unreadable, None, None, f"encoded with {self.schema_name}")
        return [None if record is None else self._body(record) for record in read.records]

    def _body(self, record: Any) -> bytes:
        try:
            return self.schema_format.encode(record, self.schema)
        except Exception as e:
            raise SerializationError(f"record cannot be encoded with {self.schema_name}: {e}") from e


def encode_frames(
    batch: pa.RecordBatch,
    rows_before: int,
    schema: Any,
    schema_name: str,
    prefix: bytes,
    schema_format: SchemaFormat,
    rows: list[bool] | None = None,
    numbering: tuple[int, list[int]] | None = None,
) -> list[bytes | None]:
    """The frames of the records in `batch`'s RECORD column (only at `rows`, when given; None
    elsewhere and for a null record), the partition's first `rows_before` rows already encoded
    (or the rows numbered as `numbering` says: `positions.refuse_unread`); a record that cannot
    be read or encoded fails the job naming it."""
    read = schema_format.read_struct(batch.column(RECORD), schema, tagged=True)
    refuse_unread(batch, rows_before, read.unreadable, None, None, f"encoded with {schema_name}", numbering)
    frames: list[bytes | None] = []
    for i, record in enumerate(read.records):
        if record is None or (rows is not None and not rows[i]):
            frames.append(None)  # a null record (a tombstone) has a null frame
            continue
        try:
            body = schema_format.encode(record, schema)
        except Exception as e:
            raise SerializationError(f"record cannot be encoded with {schema_name}: {e}") from e
        frames.append(prefix + body)
    return frames
