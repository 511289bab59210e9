"""Moving Confluent frames between registries: each source schema is registered under its subject in
the destination and the 4-byte schema id of every frame rewritten, the body untouched (docs/semantics.md §8).
Frames that name their schema by GUID (magic byte 1) or in a schema id header are refused, not
rewritten.

When a topic is replicated to a cluster with its own registry the ids inside its frames mean nothing
there (or, worse, another schema); `remap_schema_ids` makes them mean the same schema again.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from contracts.bounded import BoundedCache
from contracts.codes import NOT_REGISTERED
from contracts.engine.id_headers import is_kafka_headers, schema_id_headers
from contracts.engine.positions import row_position
from contracts.errors import RegistryError, SerializationError
from contracts.formats.wire import (
    HEADER_SIZE,
    MAGIC_BYTE,
    MAGIC_BYTE_V1,
    SubjectNameStrategy,
    decode_frame,
    encode_frame,
    schema_id_header,
    writer_schema,
)
from contracts.model import RegisteredSchema, Schema, SchemaReference
from contracts.registry import LocalRegistry, Registry
from contracts.registry.references import referenced_schemas

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# A custom strategy: (topic or None, is_key, the source schema) -> the destination subject.
SubjectStrategy = Callable[[str | None, bool, Schema], str]

_TOPIC_COLUMN = "topic"
_HEADERS_COLUMN = "headers"

# Per Python worker: (remap call, source id, topic, is_key) -> destination id, so each distinct
# id is looked up and registered once per worker however many batches and tasks carry it.
_DESTINATION_IDS: BoundedCache[tuple[str, int, str | None, bool], int] = BoundedCache(4096)


def remap_schema_ids(
    df: DataFrame,
    source_registry: Registry,
    destination_registry: Registry,
    *,
    topic: str | None = None,
    subject_strategy: SubjectNameStrategy | str | SubjectStrategy = SubjectNameStrategy.TOPIC_NAME,
    key_col: str | None = "key",
    value_col: str | None = "value",
) -> DataFrame:
    """`df` with the Confluent frames in `key_col` and `value_col` pointing at `destination_registry`:
    each distinct source id's schema (text, references, metadata, ruleSet) is registered under the
    subject `subject_strategy` names, and the id in every frame rewritten; bodies are untouched.

    Lazy, one `mapInArrow` pass, the output schema equal to the input's. The topic for the subject
    is `topic`, else each row's `topic` column. A null key or value passes through; a frame that is
    not Confluent wire format or whose id the source does not know fails the job with a
    SerializationError naming the row's topic/partition/offset, and so does one that names its
    schema by GUID (magic byte 1) or in a `__key_schema_id`/`__value_schema_id` header of the
    row's Kafka `headers`: only 4-byte ids in the prefix are rewritten. Pass `key_col=None` when
    keys are not framed (plain strings, say).
    """
    from pyspark.sql.types import BinaryType

    columns = tuple((name, name == key_col) for name in (key_col, value_col) if name is not None)
    if not columns:
        raise ValueError("nothing to remap: key_col and value_col are both None")
    if key_col == value_col:
        raise ValueError(f"key_col and value_col are both {key_col!r}: a column holds keys or values")
    for name, _ in columns:
        if name not in df.columns:
            raise ValueError(f"column {name!r} is not in the DataFrame (columns: {df.columns})")
        if not isinstance(df.schema[name].dataType, BinaryType):
            raise ValueError(
                f"column {name!r} must be binary (Confluent frames), not {df.schema[name].dataType}"
            )
    strategy = _strategy(subject_strategy)
    topic_column = _TOPIC_COLUMN if topic is None and _TOPIC_COLUMN in df.columns else None
    kafka_headers = _HEADERS_COLUMN in df.columns and is_kafka_headers(df.schema[_HEADERS_COLUMN].dataType)
    if topic is None and topic_column is None and strategy in _NEEDS_TOPIC:
        raise ValueError(f"{strategy.value} needs a topic: pass topic=… or give the rows a 'topic' column")
    if isinstance(destination_registry, LocalRegistry) and destination_registry.path is None:
        # Each Spark worker would register into its own pickled copy, and the ids written would
        # point at schemas the destination never holds.
        raise ValueError("the destination LocalRegistry must have a directory: an in-memory one cannot be")
    remapper = _Remapper(
        source_registry,
        destination_registry,
        strategy,
        topic,
        topic_column,
        columns,
        uuid.uuid4().hex,
        _HEADERS_COLUMN if kafka_headers else None,
    )
    return df.mapInArrow(remapper, df.schema)


_NEEDS_TOPIC = (SubjectNameStrategy.TOPIC_NAME, SubjectNameStrategy.TOPIC_RECORD_NAME)


def _strategy(value: SubjectNameStrategy | str | SubjectStrategy) -> SubjectNameStrategy | SubjectStrategy:
    """A Confluent strategy by member or name ("TopicNameStrategy", …), or a custom callable."""
    if isinstance(value, SubjectNameStrategy) or callable(value):
        return value
    try:
        return SubjectNameStrategy(value)
    except ValueError as e:
        names = ", ".join(member.value for member in SubjectNameStrategy)
        raise ValueError(
            f"unknown subject name strategy {value!r}: expected one of {names} or a callable"
        ) from e


@dataclass(frozen=True)
class _Remapper:
    """The picklable function Spark runs per partition: rewrites the id of every frame in place."""

    source: Registry
    destination: Registry
    strategy: SubjectNameStrategy | SubjectStrategy
    topic: str | None
    topic_column: str | None
    columns: tuple[tuple[str, bool], ...]  # (name, is_key)
    call_id: str
    headers_column: str | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            arrays = list(batch.columns)
            topics = None if self.topic_column is None else batch.column(self.topic_column).to_pylist()
            for name, is_key in self.columns:
                index = batch.schema.get_field_index(name)
                arrays[index] = self._rewritten(batch, index, is_key, topics)
            yield pa.RecordBatch.from_arrays(arrays, schema=batch.schema)

    def _rewritten(
        self, batch: pa.RecordBatch, index: int, is_key: bool, topics: list[str | None] | None
    ) -> pa.Array:
        """The column with each frame's 4 id bytes replaced in a copy of its data buffer: bodies,
        offsets and nulls are the input's own, so nothing but the ids can change."""
        array = batch.column(index)
        validity, offsets_buffer, data = array.buffers()
        offsets = memoryview(offsets_buffer).cast("q" if pa.types.is_large_binary(array.type) else "i")
        out = bytearray(data) if data is not None else bytearray()
        valid = array.is_valid().to_pylist() if array.null_count else None
        starts: list[int] = []
        seen: list[tuple[bytes, str | None]] = []  # per framed row: (its 4 id bytes, its topic)
        first_rows: dict[tuple[bytes, str | None], int] = {}
        id_headers = schema_id_headers(batch, self.headers_column, schema_id_header(is_key))
        for row in range(len(array)):
            if valid is not None and not valid[row]:
                continue
            if id_headers is not None and id_headers[row] is not None:
                error = SerializationError(
                    f"its schema id is in the {schema_id_header(is_key)} header: remap_schema_ids"
                    " rewrites schema ids in the frame's prefix only"
                )
                raise _unremappable(batch, row, is_key, error)
            start, end = offsets[array.offset + row], offsets[array.offset + row + 1]
            if end - start < HEADER_SIZE or out[start] != MAGIC_BYTE:
                try:
                    decode_frame(out[start:end])  # raises, saying what is wrong with the frame
                    if out[start] == MAGIC_BYTE_V1:
                        raise SerializationError(
                            "the frame names its schema by GUID (magic byte 1): remap_schema_ids"
                            " rewrites 4-byte schema ids (magic byte 0) only"
                        )
                except SerializationError as e:
                    raise _unremappable(batch, row, is_key, e) from e
            key = (bytes(out[start + 1 : start + HEADER_SIZE]), self.topic if topics is None else topics[row])
            starts.append(start)
            seen.append(key)
            first_rows.setdefault(key, row)
        new_ids: dict[tuple[bytes, str | None], bytes] = {}
        # Registries hand out ids in ascending order, so registering a batch's new ids in that
        # order keeps the source's version order in the destination (when one batch has them all).
        for key, row in sorted(first_rows.items(), key=lambda item: (item[0][0], item[0][1] or "")):
            try:
                source_id = int.from_bytes(key[0], "big")
                new_ids[key] = encode_frame(self.destination_id(source_id, key[1], is_key), b"")[1:]
            except SerializationError as e:
                raise _unremappable(batch, row, is_key, e) from e
        for start, key in zip(starts, seen, strict=True):
            out[start + 1 : start + HEADER_SIZE] = new_ids[key]
        return pa.Array.from_buffers(
            array.type,
            len(array),
            [validity, offsets_buffer, pa.py_buffer(out)],
            null_count=array.null_count,
            offset=array.offset,
        )

    def destination_id(self, source_id: int, topic: str | None, is_key: bool) -> int:
        """The destination id of a source id's schema, registered on first sight (per worker)."""
        key = (self.call_id, source_id, topic, is_key)
        known = _DESTINATION_IDS.get(key)
        if known is None:
            schema = writer_schema(self.source, source_id)
            subject = self._subject(topic, is_key, schema)
            try:
                with _held(self.destination):
                    known = _DESTINATION_IDS.put(key, self._copy(subject, schema).schema_id)
            except RegistryError as e:
                raise RegistryError(
                    f"cannot register source schema id {source_id} under destination subject"
                    f" {subject!r}: {e.reason}",
                    status=e.status,
                    error_code=e.error_code,
                ) from e
        return known

    def _subject(self, topic: str | None, is_key: bool, schema: Schema) -> str:
        if not isinstance(self.strategy, SubjectNameStrategy):
            return self.strategy(topic, is_key, schema)
        if topic is None and self.strategy in _NEEDS_TOPIC:
            raise SerializationError(f"{self.strategy.value} needs a topic and the row's topic is null")
        return self.strategy.subject(topic or "", is_key=is_key, record_name=_record_name(schema))

    def _copy(self, subject: str, schema: Schema) -> RegisteredSchema:
        """Register `schema` under `subject` in the destination unless it is there already, the
        schemas it references first (each under its own subject, each version once:
        contracts/registry/references.py), pointed at their destination versions."""
        copied: dict[tuple[str, int], int] = {}  # a source (subject, version): its destination version

        def fetch(ref: SchemaReference) -> Schema:
            return self.source.get_version(ref.subject, ref.version).schema

        for found in referenced_schemas(schema, fetch):
            link = (found.reference.subject, found.reference.version)
            if link not in copied:
                copied[link] = self._copy_one(link[0], found.schema, copied).version
        return self._copy_one(subject, schema, copied)

    def _copy_one(self, subject: str, schema: Schema, copied: dict[tuple[str, int], int]) -> RegisteredSchema:
        """`schema` registered under `subject` (unless there already), its references pointed at
        the destination versions in `copied`."""
        references = tuple(
            SchemaReference(ref.name, ref.subject, copied[(ref.subject, ref.version)])
            for ref in schema.references
        )
        # Only what a register request carries: an answer's other keys (ts, schemaTags, …) stay behind.
        target = Schema(schema.schema_str, schema.schema_type, references, schema.metadata, schema.rule_set)
        found = _find(self.destination, subject, target)
        if found is not None:
            return found
        self.destination.register_schema(subject, target)
        return self.destination.lookup_schema(subject, target)


def _unremappable(batch: pa.RecordBatch, row: int, is_key: bool, error: Exception) -> SerializationError:
    """The error failing the job, naming the row's topic/partition/offset when it has them."""
    return SerializationError(
        f"cannot remap the {'key' if is_key else 'value'}{row_position(batch, row)}: {error}"
    )


def _find(registry: Registry, subject: str, schema: Schema) -> RegisteredSchema | None:
    """The version of `subject` holding `schema`, or None: looking up first keeps a remap that
    finds everything in place from writing to the destination at all."""
    try:
        return registry.lookup_schema(subject, schema)
    except RegistryError as e:
        if e.error_code in NOT_REGISTERED:
            return None
        raise


def _record_name(schema: Schema) -> str | None:
    """The full name of the schema's top-level named type, as the record name strategies use it."""
    try:
        parsed = json.loads(schema.schema_str)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
        return None
    name, namespace = parsed["name"], parsed.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _held(registry: Registry) -> contextlib.AbstractContextManager[None]:
    """A LocalRegistry held across the lookup and the registration, so each distinct id is
    registered once however many tasks meet it; a registry server needs no such hold."""
    return registry.exclusive() if isinstance(registry, LocalRegistry) else contextlib.nullcontext()
