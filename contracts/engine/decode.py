"""The decode pass: Confluent frames → the target's records, migrating writer data in Python, in
one Arrow-batched `mapInArrow` pass through the subject's format.

A frame names its writer's schema by id (V0) or GUID (V1) in its prefix, or in a schema id header
of the row's Kafka `headers`, when its payload is the bare body (docs/semantics.md §8.1). A record
that cannot be decoded (wrong magic byte, truncated body, unknown id or GUID, a bad schema id
header, an id of another subject, a migration result the target cannot read) follows the decode
policy: ERROR fails the job naming the partition/offset when the rows carry them; DLQ sends the
raw key and value to a topic with the reason in a header. Nothing is dropped silently.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from contracts.engine import python_migration
from contracts.engine.columns import (
    FAILURE,
    PARTITION,
    RECORD,
    STATUS,
    failed_batch,
    failure_field,
    raise_failures,
    status_type,
)
from contracts.engine.encoding_rules import PayloadRefused, PayloadRules, split_clear
from contracts.engine.gc_pause import gc_paused
from contracts.engine.id_headers import schema_id_headers
from contracts.engine.positions import row_position
from contracts.engine.python_pass import LeadingRules
from contracts.engine.routing import Router, with_partition
from contracts.engine.tombstones import TOMBSTONE, mark_tombstones
from contracts.errors import DataContractError, SerializationError, in_one_line
from contracts.formats.arrow_text import printable
from contracts.formats.arrow_types import arrow_schema
from contracts.formats.protocol import SchemaFormat, decodes_as_read_back, display_name
from contracts.formats.wire import (
    VALUE_SCHEMA_ID_HEADER,
    SchemaRef,
    decode_frame,
    decode_schema_id,
    describe,
)
from contracts.planning.planner import LateWriters, WriterVersion

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


DECODE_RULE = "deserialize"

RULE_STATUS = "__contract_rule_status"
"""Inside the decode pass with leading rules: the statuses the rules gave, kept apart from those of
the decode (which its router sends to their topics) until the router has passed."""


@dataclass(frozen=True)
class DecodePolicy:
    """What an undecodable record does: "ERROR" fails the job, "DLQ" routes its bytes to `topic`."""

    action: str = "ERROR"
    topic: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ("ERROR", "DLQ"):
            raise ValueError(f"decode policy must be ERROR or DLQ, not {self.action!r}")
        if self.action == "DLQ" and not self.topic:
            raise ValueError("a DLQ decode policy needs a topic")


@dataclass(frozen=True)
class Decoder:
    """Everything the decode pass needs on a worker: picklable, built once on the driver."""

    subject: str
    target_version: int
    target_schema: Any
    target_type_json: str
    writers: Mapping[int, WriterVersion]
    late: LateWriters
    policy: DecodePolicy
    value_column: str
    schema_format: SchemaFormat
    """The format of the subject's schemas, which decodes their bodies."""
    guids: Mapping[str, int] = field(default_factory=dict)
    """The schema id of each prefetched writer's GUID (lower-case, hyphenated), where the registry
    gave one: a V1 frame finds its writer through it."""
    headers_column: str | None = None
    """The rows' Kafka headers (array<struct<key: string, value: binary>>), when they have them."""
    id_header: str = VALUE_SCHEMA_ID_HEADER
    """The header that, when a row has it, names the writer's schema; its payload is the bare body."""
    native_types: Mapping[int, str] = field(default_factory=dict)
    """Writer versions migrated natively after the pass, with their Spark record types (JSON):
    their records leave the pass in their own shape, in `writer_column(version)`."""
    _cache: dict[SchemaRef, WriterVersion] = field(default_factory=dict, compare=False, repr=False)
    _missing: dict[SchemaRef, SerializationError] = field(default_factory=dict, compare=False, repr=False)

    @property
    def tombstone_status(self) -> dict[str, Any]:
        """The `_contract` value a tombstone carries until release_tombstones."""
        return {
            "rule": None,
            "mode": "READ",
            "action": TOMBSTONE,
            "reason": None,
            "topic": None,
            "subject": self.subject,
            "version": self.target_version,
        }

    def keeps_branches(self, writer: WriterVersion) -> bool:
        """Whether `writer`'s records are read with their union branches tagged: when a plain value
        may not tell its branch and the record goes to Spark as read (the target's own records,
        natively migrated ones); a migration in Python takes plain values, as the reference's."""
        return writer.chooses_branches and (
            writer.version == self.target_version or writer.version in self.native_types
        )

    def writer(self, schema: SchemaRef) -> WriterVersion:
        """The writer version a frame's schema id or GUID names: prefetched, else resolved once; one
        that cannot be resolved is asked about once per batch (docs/semantics.md §8.2)."""
        schema_id = self.guids.get(str(schema)) if isinstance(schema, uuid.UUID) else schema
        known = (None if schema_id is None else self.writers.get(schema_id)) or self._cache.get(schema)
        if known is not None:
            return known
        missing = self._missing.get(schema)
        if missing is not None:
            raise SerializationError(str(missing)) from missing.__cause__
        try:
            known = self._cache[schema] = self.late.resolve(schema)
        except SerializationError as e:
            self._missing[schema] = e
            raise
        return known

    def next_batch(self) -> None:
        """Forget which ids and GUIDs the last batch could not resolve: a new batch asks again."""
        self._missing.clear()


def writer_column(version: int) -> str:
    """The column holding the records of a natively migrated writer version, in its own shape."""
    return f"__contract_writer_{version}"


def decode(
    df: DataFrame,
    decoder: Decoder,
    router: Router,
    keep_value: bool = True,
    leading: LeadingRules | None = None,
) -> DataFrame:
    """Add the decoded record (target shape) and `_contract` to `df`, keeping every column (the
    frames too, unless `keep_value` is False: nothing after the pass needs them); the records the
    pass itself rejects (decode failures under DLQ, migrations in Python) go through `router` in
    the same pass, so every row leaving it is still valid. A tombstone (a null frame) is not a
    record: it leaves with a null record and the TOMBSTONE status, which every later migration
    and rule skips, until release_tombstones.

    `leading` rules run on the decoded records in the same pass (`fuses` says when they can),
    adding their outcome columns; the rows they reject leave with their status, as a rules pass
    leaves them, for the rules' own routing after the counts."""
    from pyspark.sql.types import StructField, StructType

    df = with_partition(df)
    target = StructType.fromJson(json.loads(decoder.target_type_json))
    writers = [
        StructField(writer_column(version), StructType.fromJson(json.loads(type_json)), True)
        for version, type_json in decoder.native_types.items()
    ]
    decoded = StructType(
        [
            *df.schema.fields,
            *writers,
            StructField(RECORD, target, True),
            StructField(STATUS, status_type(), True),
            *(
                []
                if leading is None
                else [*leading.outcome_fields(), StructField(RULE_STATUS, status_type())]
            ),
            failure_field(),
        ]
    )
    # The router takes the PARTITION column out; without the frames when nothing after needs them.
    dropped = {PARTITION, RULE_STATUS} if keep_value else {PARTITION, RULE_STATUS, decoder.value_column}
    output = StructType([f for f in decoded.fields if f.name not in dropped])
    return raise_failures(
        df.mapInArrow(_DecodePass(decoder, decoded.json(), router, output.fieldNames(), leading), output)
    )


def fuses(decoder: Decoder, leading: LeadingRules | None) -> LeadingRules | None:
    """`leading` when the decode pass can run it: no writer is migrated after the pass (the rules
    must see every record in the target's shape) and the decoded records are what a rules pass
    would read back from Spark (the format `decodes_as_read_back`: Avro's, whose unions tell their
    branches by value, a Python pass reading them untagged; JSON and Protobuf records are shaped
    by their readers)."""
    if leading is None or decoder.native_types or not decodes_as_read_back(decoder.schema_format):
        return None
    return None if decoder.schema_format.needs_tags(decoder.target_schema) else leading


@dataclass(frozen=True)
class _DecodePass:
    decoder: Decoder
    decoded_json: str
    router: Router
    output_names: list[str]
    leading: LeadingRules | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.types import StructType

        decoded = arrow_schema(StructType.fromJson(json.loads(self.decoded_json)))
        leading = self.leading
        routed = self.router(self._decoded(batch, decoded) for batch in batches)
        tombstone = pa.scalar(self.decoder.tombstone_status, type=decoded.field(STATUS).type)
        for batch in routed:
            if leading is not None:
                # The router took the rows the decode rejected; the rules' rejects leave now.
                index = batch.schema.get_field_index(STATUS)
                batch = batch.set_column(index, batch.schema.field(index), batch.column(RULE_STATUS))
            batch = mark_tombstones(batch, self.decoder.value_column, tombstone)
            yield batch.select(self.output_names)

    def _decoded(self, batch: pa.RecordBatch, decoded: pa.Schema) -> pa.RecordBatch:
        try:
            with gc_paused():
                return decode_batch(self.decoder, batch, decoded, self.leading)
        except DataContractError as error:
            if not batch.num_rows:
                raise
            return failed_batch(batch, decoded, in_one_line(error))  # fails the job as one line


def decode_batch(
    decoder: Decoder, batch: pa.RecordBatch, output: pa.Schema, leading: LeadingRules | None = None
) -> pa.RecordBatch:
    """`batch` with the decoded columns `output` adds after its own (writers, RECORD, STATUS,
    FAILURE, and with `leading` rules their outcomes and RULE_STATUS); a null frame is skipped
    (the callers mark tombstones)."""
    decoder.next_batch()
    frames = batch.column(decoder.value_column).to_pylist()
    id_headers = schema_id_headers(batch, decoder.headers_column, decoder.id_header)
    records: list[Any] = [None] * len(frames)
    statuses: list[dict[str, Any] | None] = [None] * len(frames)
    failures: list[str | None] = [None] * len(frames)
    to_migrate: dict[int, tuple[WriterVersion, list[int]]] = {}
    for i, frame in enumerate(frames):
        if frame is None:
            continue  # a tombstone: no record (_DecodePass marks it)
        try:
            writer, records[i] = read_frame(decoder, frame, None if id_headers is None else id_headers[i])
        except PayloadRefused as e:
            statuses[i], failures[i] = e.status, e.failure
            continue
        except SerializationError as e:
            statuses[i] = undecodable_status(decoder, batch, i, e)
            continue
        if writer.version != decoder.target_version:
            to_migrate.setdefault(writer.version, (writer, []))[1].append(i)
    natives: dict[int, pa.Array] = {}
    migrated: list[int] = []  # rows migrated here, in Python
    for writer, rows in to_migrate.values():
        if writer.version in decoder.native_types:
            column = writer_column(writer.version)
            record_type = output.field(column).type
            natives[writer.version] = _packed_rows(
                records, rows, writer, decoder.keeps_branches(writer), record_type
            )
            for i in rows:
                records[i] = None
        else:
            _migrate_rows(decoder, writer, rows, records, statuses, failures, batch)
            migrated.extend(rows)
    writers = [
        natives.get(version, pa.nulls(batch.num_rows, output.field(writer_column(version)).type))
        for version in decoder.native_types
    ]
    status_arrow = output.field(STATUS).type
    if any(status is not None for status in statuses):
        pairs = zip(records, statuses, strict=True)
        records = [None if status is not None else record for record, status in pairs]
        status_column = pa.array(statuses, type=status_arrow)
    else:
        status_column = pa.nulls(batch.num_rows, status_arrow)
    ruled = []
    if leading is not None:
        ruled = _run_leading(decoder, leading, (frames, records, statuses, failures), migrated, output)
    schema_format = decoder.schema_format
    record_column = schema_format.to_struct(
        records,
        decoder.target_schema,
        output.field(RECORD).type,
        schema_format.needs_tags(decoder.target_schema),
    )
    failure_column = pa.array(failures, type=output.field(FAILURE).type)
    columns = [*batch.columns, *writers, record_column, status_column, *ruled, failure_column]
    return pa.RecordBatch.from_arrays(columns, schema=output)


def _run_leading(
    decoder: Decoder,
    leading: LeadingRules,
    decoded: tuple[list[Any], list[Any], list[dict[str, Any] | None], list[str | None]],
    migrated: list[int],
    output: pa.Schema,
) -> list[pa.Array]:
    """Run `leading` on the `decoded` records (with their frames, statuses and failures) in place:
    their outcome columns, then RULE_STATUS (the statuses the rules gave). They skip the rows the
    decode rejected and tombstones, and a batch in which the decode failed the job (an ERROR policy
    or action), which fails before any rule runs, as it would before a rules pass. The records
    `migrated` in Python are read back from their struct first, as a rules pass would read them."""
    frames, records, statuses, failures = decoded
    rows = len(records)
    if any(failure is not None for failure in failures):
        outcomes: dict[str, list[bool | None]] = {}
        ruled: list[dict[str, Any] | None] = [None] * rows
    else:
        tombstone = decoder.tombstone_status
        seen = [
            tombstone if frame is None else status for frame, status in zip(frames, statuses, strict=True)
        ]
        unreadable = _read_back(decoder, records, [i for i in migrated if statuses[i] is None], output)
        outcomes = leading.run(records, seen, failures, unreadable)
        ruled = [
            None if frame is None or before is not None else after
            for frame, before, after in zip(frames, statuses, seen, strict=True)
        ]
    columns = [
        pa.array(outcomes.get(name, [None] * rows), type=pa.bool_()) for name in leading.outcome_names()
    ]
    status_arrow = output.field(RULE_STATUS).type
    if all(status is None for status in ruled):
        return [*columns, pa.nulls(rows, status_arrow)]
    return [*columns, pa.array(ruled, type=status_arrow)]


def _read_back(decoder: Decoder, records: list[Any], rows: list[int], output: pa.Schema) -> dict[int, str]:
    """Replace the records at `rows` by what their struct reads back as (a migrated record's values
    come from JSON: an int default of a double field becomes a float); a row read back with
    replacements keeps its record and is returned with the reason, as a rules pass reports it."""
    if not rows:
        return {}
    schema_format, schema = decoder.schema_format, decoder.target_schema
    column = schema_format.to_struct([records[i] for i in rows], schema, output.field(RECORD).type)
    read = schema_format.read_struct(column, schema)
    for position, (i, record) in enumerate(zip(rows, read.records, strict=True)):
        if position not in read.unreadable:
            records[i] = record
    return {rows[position]: reason for position, reason in read.unreadable.items()}


def _packed_rows(
    records: list[Any], rows: list[int], writer: WriterVersion, tagged: bool, record_type: pa.DataType
) -> pa.Array:
    """The records at `rows` (of `writer`, union branches `tagged` or not) as a struct column of
    `record_type`, null elsewhere."""
    chosen = set(rows)
    chosen_records = [r if i in chosen else None for i, r in enumerate(records)]
    return writer.schema_format.to_struct(chosen_records, writer.schema, record_type, tagged)


def read_frame(decoder: Decoder, frame: Any, id_header: bytes | None) -> tuple[WriterVersion, Any]:
    """Decode one frame (its schema named by `id_header` when the row has one, else by its prefix):
    with the reader schema when written by the target, else as writer data."""
    if id_header is not None:
        schema_id: SchemaRef = decode_schema_id(id_header, decoder.id_header)
        body = frame if isinstance(frame, bytes) else bytes(frame)
    else:
        schema_id, body = decode_frame(frame)
    writer = decoder.writer(schema_id)
    if writer.failure is not None:
        raise SerializationError(writer.failure)
    schema_format = decoder.schema_format
    if writer.payload:
        try:
            clear, payload = split_clear(schema_format, body)
        except ValueError as e:
            raise SerializationError(
                f"{display_name(schema_format)} body of {describe(schema_id)} cannot be decoded: {e}"
            ) from e
        body = clear + PayloadRules(writer.payload).apply(payload)
    reader = decoder.target_schema if writer.version == decoder.target_version else None
    tagged = writer.chooses_branches and decoder.keeps_branches(writer)
    try:
        return writer, schema_format.decode(body, writer.schema, reader, tagged)
    except Exception as e:
        kind = display_name(schema_format)
        raise SerializationError(f"{kind} body of {describe(schema_id)} cannot be decoded: {e}") from e


def _migrate_rows(
    decoder: Decoder,
    writer: WriterVersion,
    rows: list[int],
    records: list[Any],
    statuses: list[dict[str, Any] | None],
    failures: list[str | None],
    batch: pa.RecordBatch,
) -> None:
    """Migrate one writer version's rows to the target, then project them onto its schema; a row
    whose ERROR action fired keeps no record, only its failure."""
    group = [records[i] for i in rows]
    group_statuses = [statuses[i] for i in rows]
    group_failures = [failures[i] for i in rows]
    made_by = python_migration.migrate(writer.migrations, group, group_statuses, group_failures)
    migrated = zip(rows, group, group_statuses, group_failures, made_by, strict=True)
    for i, record, status, failure, rule in migrated:
        statuses[i], failures[i] = status, failure
        if failure is not None:
            records[i] = None
        if status is not None or failure is not None:
            continue
        try:
            records[i] = python_migration.project(record, decoder.target_schema, decoder.schema_format, rule)
        except SerializationError as e:
            statuses[i] = undecodable_status(decoder, batch, i, e)


def undecodable_status(decoder: Decoder, batch: pa.RecordBatch, i: int, error: Exception) -> dict[str, Any]:
    """The status of a row the policy sends to the DLQ; under ERROR, the job fails here."""
    where = row_position(batch, i)
    reason = printable(str(error))  # a decoder's message may quote text no UTF-8 holds (§8.6)
    if decoder.policy.action == "ERROR":
        message = f"cannot deserialize the record{where} of subject {decoder.subject!r}: {reason}"
        raise SerializationError(message) from error
    return {
        "rule": DECODE_RULE,
        "mode": "READ",
        "action": "DLQ",
        "reason": reason,
        "topic": decoder.policy.topic,
        "subject": decoder.subject,
        "version": decoder.target_version,
    }


def unreadable_status(decoder: Decoder, columns: list[str]) -> Any:
    """For rows found undecodable after the pass (a natively migrated record missing a field):
    `reason` Column → the status the policy gives, exactly as `undecodable_status` words it."""
    from pyspark.sql import functions as F

    def status(reason: Any) -> Any:
        if decoder.policy.action == "ERROR":
            parts = [
                F.concat(F.lit(f"{name} "), F.coalesce(F.col(name).cast("string"), F.lit("None")))
                for name in ("topic", "partition", "offset")
                if name in columns
            ]
            where = F.concat(F.lit(" at "), F.concat_ws(", ", *parts)) if parts else F.lit("")
            prefix = F.lit("cannot deserialize the record")
            message = F.concat(prefix, where, F.lit(f" of subject {decoder.subject!r}: "), reason)
            return F.raise_error(message)
        fields = {
            "rule": F.lit(DECODE_RULE),
            "mode": F.lit("READ"),
            "action": F.lit("DLQ"),
            "reason": reason,
            "topic": F.lit(decoder.policy.topic),
            "subject": F.lit(decoder.subject),
            "version": F.lit(decoder.target_version),
        }
        return F.struct(*[fields[f.name].cast(f.dataType).alias(f.name) for f in status_type().fields])

    return status
