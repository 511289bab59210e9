"""LocalTopicSink: the embedded default DLQ sink, an append-only directory of JSON-lines files per topic.

Layout: `<root>/<topic>/<writer id>.jsonl`, one file per (writer, topic). A writer writes each
topic's records to a hidden temporary file (`.<writer id>.<random>.tmp`), fsyncs it and renames it
into place on commit, so readers see a writer's records for a topic all at once or not at all; a
retried task (same writer id) replaces its earlier files, and a crashed one leaves only hidden
temporary files that readers skip.

A run with a caller-chosen id starts with `begin_run`: it records a new generation of the run in
`<root>/.runs/<run id>`, then removes every file an earlier run with that id committed. The run's
files carry its generation (`<writer id>.g<generation>.jsonl`), and a writer commits only while
its generation is the current one, so a straggler of the earlier run cannot add to the rerun:
delivery is exactly once per run id. Each line is one record:

    {"offset": 0, "timestamp_ms": 1700000000000, "key": "<base64>" | null,
     "value": "<base64>" | null, "headers": [["<name>", "<base64>" | null], ...]}

`offset` numbers the records of one file from 0; headers keep their order and duplicates.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from actions.dlq import frame
from actions.dlq.sink import DlqBatch, DlqError, DlqRecord, DlqWriter, in_run, is_run_id, validate_topic

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from contracts.formats.protocol import ParsedSchema

SUFFIX = ".jsonl"
DEFAULT_DLQ_DIR = "dlq-topics"
"""The root of a contract's LocalTopicSink unless it is given another, in the working directory."""
# A leading '.' is what hides temporary files, so a writer id cannot start with one; 200 characters
# leave room for the temporary name's prefix and random suffix within a 255-byte file name.
_WRITER_ID = re.compile(r"[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,199}")
_RUNS = ".runs"  # hidden, so never taken for a topic
_GENERATION = re.compile(r"\.g[0-9a-f]{16}$")
_HEADER_CACHE = 256  # distinct header lists a writer keeps encoded


@dataclass(frozen=True, init=False)
class LocalTopicSink:
    """A directory of DLQ topics on a filesystem every Spark task can reach; holds only its root path."""

    root: str

    def __init__(self, root: str | os.PathLike[str]) -> None:
        # Absolute on the driver, so Spark workers with another working directory write to the same place.
        object.__setattr__(self, "root", os.path.abspath(os.fspath(root)))

    def open(self, writer_id: str) -> LocalTopicWriter:
        """Open the writer of one task attempt; its files are named from `writer_id`."""
        return LocalTopicWriter(self.root, _checked_writer_id(writer_id))

    def begin_run(self, run_id: str) -> LocalRunSink:
        """Start run `run_id` afresh (RunScopedSink): a new generation first, so the earlier run's
        writers can no longer commit, then its committed files removed, in every topic."""
        if not is_run_id(run_id):
            raise DlqError("run id must be 1-100 ASCII letters, digits, '_' or '-'", writer_id=str(run_id))
        run = LocalRunSink(self.root, run_id, uuid.uuid4().hex[:16])
        try:
            replace_durably(run.marker, run.generation)
            for topic in _subdirectories(self.root):
                _remove(self._files(topic), lambda name: in_run(_GENERATION.sub("", name), run_id))
        except OSError as e:
            raise DlqError(f"cannot start run {run_id!r} in {self.root}: {e}") from e
        return run

    def topics(self) -> list[str]:
        """The topics holding at least one committed record file, sorted."""
        return sorted(topic for topic in _subdirectories(self.root) if self._files(topic))

    def read(self, topic: str) -> list[DlqRecord]:
        """Every committed record of `topic`, ordered by file name then line; empty for an unknown topic."""
        return [record for _, _, record in self.scan(topic)]

    def scan(self, topic: str) -> Iterator[tuple[str, int, DlqRecord]]:
        """Each committed record of `topic` with the path of the file holding it and its offset
        there, file by file, line by line, read as it is consumed."""
        for path in self.files(topic):
            for number, line in _lines(path):
                yield path, number - 1, _decode(topic, line, path, number)

    def read_df(self, spark: SparkSession, topic: str, schema: ParsedSchema | None = None) -> DataFrame:
        """`topic` as a DataFrame read by Spark from the topic's files: `key`, `value`, `topic`,
        `writer`, `offset`, `timestamp`, `headers` (Kafka-shaped, bytes decoded), the `__rule.*`
        headers as `rule`, `mode`, `subject`, `source_topic` and `reason`, and, given the record's
        `schema` (a DataContract), `record`: the value read back as that record where it holds one
        (actions.dlq.frame). The files are those committed when this is called."""
        files = self.files(topic)
        return frame.decode_dlq(frame.read_local_topic(spark, topic, files), schema)

    def count(self, topic: str, run_id: str | None = None) -> int:
        """How many committed records `topic` holds (those of run `run_id`, given one), without
        decoding them."""
        paths = self.files(topic)
        if run_id is not None:
            paths = [p for p in paths if in_run(writer_of(p), run_id)]
        return sum(1 for path in paths for _ in _lines(path))

    def files(self, topic: str) -> list[str]:
        """The paths of `topic`'s committed record files, sorted by name; none for an unknown topic."""
        return self._files(validate_topic(topic))

    def _files(self, topic: str) -> list[str]:
        directory = os.path.join(self.root, topic)
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [
            os.path.join(directory, name)
            for name in sorted(names)
            if name.endswith(SUFFIX) and not name.startswith(".")
        ]


@dataclass(frozen=True)
class LocalRunSink:
    """The sink one generation of a run's tasks write to (made by `LocalTopicSink.begin_run`):
    picklable, it names the root, the run and the generation its writers' files carry."""

    root: str
    run_id: str
    generation: str

    @property
    def marker(self) -> str:
        """The file holding the run's current generation."""
        return os.path.join(self.root, _RUNS, self.run_id)

    def open(self, writer_id: str) -> LocalTopicWriter:
        """Open the writer of one task attempt of this generation of the run."""
        return LocalTopicWriter(self.root, _checked_writer_id(writer_id), run=self)

    def is_current(self) -> bool:
        """Whether no later `begin_run` of the same run id has started since this one."""
        try:
            with open(self.marker, encoding="ascii") as marker:
                return marker.read() == self.generation
        except FileNotFoundError:
            return False


@dataclass
class _TopicFile:
    """A topic's temporary file while its writer is open."""

    temporary: str
    final: str
    handle: IO[bytes]
    offset: int = 0


class LocalTopicWriter(DlqWriter):
    """Writes one task attempt's records, one hidden temporary file per topic until commit."""

    def __init__(self, root: str, writer_id: str, run: LocalRunSink | None = None) -> None:
        self.root = root
        self.writer_id = writer_id
        self._run = run
        self._name = writer_id + (f".g{run.generation}" if run is not None else "") + SUFFIX
        self._files: dict[str, _TopicFile] = {}
        self._outcome: str | None = None
        self._headers: dict[tuple[tuple[str, bytes | None], ...], str] = {}

    def write(self, record: DlqRecord) -> None:
        """Append `record` to its topic's temporary file."""
        self.write_batch(
            DlqBatch([record.topic], [record.key], [record.value], [record.headers], record.timestamp_ms)
        )

    def write_batch(self, batch: DlqBatch) -> None:
        """Append the batch's records to their topics' temporary files, each topic's lines in one write."""
        if self._outcome is not None:
            raise DlqError(f"cannot write to a writer already {self._outcome}", writer_id=self.writer_id)
        topics = batch.topics
        rows = range(len(batch))
        by_topic = {topics[0]: rows} if len(set(topics)) == 1 else _rows_by_topic(topics)
        for topic, chosen in by_topic.items():
            file = self._files.get(topic) or self._start(topic)
            every = chosen is rows
            keys = batch.keys if every else [batch.keys[i] for i in chosen]
            values = batch.values if every else [batch.values[i] for i in chosen]
            headers = batch.headers if every else [batch.headers[i] for i in chosen]
            try:
                file.handle.write(
                    _record_lines(file.offset, batch.timestamp_ms, keys, values, self._header_texts(headers))
                )
            except OSError as e:
                raise DlqError(
                    f"cannot write a DLQ record: {e}", topic=topic, writer_id=self.writer_id
                ) from e
            file.offset += len(keys)

    def _header_texts(self, headers: Sequence[tuple[tuple[str, bytes | None], ...]]) -> list[str]:
        """Each record's headers as JSON: the records of one rule share their list, so each distinct
        list (told by identity, then from this writer's cache by value) is encoded once."""
        distinct = dict(zip(map(id, headers), headers, strict=True))
        texts = {key: self._encoded_headers(listed) for key, listed in distinct.items()}
        return list(map(texts.__getitem__, map(id, headers)))

    def _encoded_headers(self, headers: tuple[tuple[str, bytes | None], ...]) -> str:
        """`headers` as JSON, from this writer's cache of distinct lists when there."""
        text = self._headers.get(headers)
        if text is None:
            text = _encode_headers(headers)
            if len(self._headers) < _HEADER_CACHE:
                self._headers[headers] = text
        return text

    def commit(self) -> None:
        """Make every written record durable and visible, replacing this writer id's earlier files."""
        if self._outcome == "committed":
            return
        if self._outcome == "aborted":
            raise DlqError("cannot commit a writer already aborted", writer_id=self.writer_id)
        try:
            self._check_current()
            for file in self._files.values():
                _close_durably(file.handle)
            for file in self._files.values():
                os.replace(file.temporary, file.final)
                _sync_directory(os.path.dirname(file.final))
            if self._files:
                _sync_directory(self.root)  # a topic directory this writer created
            self._remove_stale()
            # A begin_run between the check above and the renames listed the directories before
            # these files arrived: this writer removes them itself.
            self._check_current(committed=True)
        except OSError as e:
            self.abort()
            raise DlqError(f"DLQ records not delivered: {e}", writer_id=self.writer_id) from e
        self._outcome = "committed"

    def _check_current(self, committed: bool = False) -> None:
        """Fail, leaving nothing behind, when the run this writer belongs to was started again."""
        if self._run is None or self._run.is_current():
            return
        if committed:
            _remove((file.final for file in self._files.values()), lambda name: True)
        self.abort()
        raise DlqError(
            f"run {self._run.run_id!r} was started again since this writer opened; its records are"
            " left to the new run",
            writer_id=self.writer_id,
        )

    def abort(self) -> None:
        """Remove the temporary files; a writer already committed keeps its records.

        Closing a file flushes what it buffers, which fails again on a full disk: the file is closed
        all the same, and removed, whatever the close said (the error that aborted is the one raised)."""
        if self._outcome == "committed":
            return
        self._outcome = "aborted"
        for file in self._files.values():
            with contextlib.suppress(OSError):
                file.handle.close()
            with contextlib.suppress(FileNotFoundError):
                os.remove(file.temporary)

    def _start(self, topic: str) -> _TopicFile:
        try:
            directory = os.path.join(self.root, validate_topic(topic))
        except DlqError as e:
            raise DlqError(e.reason, topic=e.topic, writer_id=self.writer_id) from e
        try:
            os.makedirs(directory, exist_ok=True)
            temporary = os.path.join(directory, f".{self.writer_id}.{uuid.uuid4().hex}.tmp")
            handle = open(temporary, "xb")  # noqa: SIM115 - closed on commit or abort
        except OSError as e:
            raise DlqError(f"cannot open a DLQ file: {e}", topic=topic, writer_id=self.writer_id) from e
        file = _TopicFile(temporary, os.path.join(directory, self._name), handle)
        self._files[topic] = file
        return file

    def _remove_stale(self) -> None:
        """Delete this writer id's files in topics it did not write to this time.

        A re-executed task (same writer id) may route its rows to other topics than the attempt it
        replaces, when its input is not deterministic; its output must replace that attempt's whole.
        """
        name = self._name
        for topic in _subdirectories(self.root):
            if topic in self._files:
                continue
            directory = os.path.join(self.root, topic)
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                continue
            _sync_directory(directory)


def writer_of(path: str) -> str:
    """The writer id that committed the record file at `path` (its name without the run's
    generation and SUFFIX)."""
    return _GENERATION.sub("", os.path.basename(path)[: -len(SUFFIX)])


def _checked_writer_id(writer_id: str) -> str:
    if not isinstance(writer_id, str) or not _WRITER_ID.fullmatch(writer_id):
        raise DlqError(
            "writer id must be 1-200 characters of ASCII letters, digits, '.', '_' or '-'"
            " and not start with '.'",
            writer_id=str(writer_id),
        )
    return writer_id


def _remove(paths: Iterable[str], chosen: Callable[[str], bool]) -> None:
    """Delete the record files among `paths` whose writer part (the name without SUFFIX) is `chosen`,
    and persist the removals."""
    directories = set()
    for path in paths:
        if chosen(os.path.basename(path)[: -len(SUFFIX)]):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            directories.add(os.path.dirname(path))
    for directory in directories:
        _sync_directory(directory)


def replace_durably(path: str, text: str) -> None:
    """Write `text` to `path` in one atomic rename, durably; on failure (a full disk) the temporary
    file is removed and `path` is as it was."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temporary, "x", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
    _sync_directory(os.path.dirname(path))


def _record_lines(
    first_offset: int,
    timestamp_ms: int,
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: list[str],
) -> bytes:
    """The records' lines, numbered from `first_offset`: what `json.dumps` writes for each record's
    fields (compact, so ASCII), `headers` already JSON; built column by column in Arrow and joined
    there (imported here: reading a topic, as `spark-contracts dlq show` does, needs neither Arrow
    nor Spark)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(keys)
    offsets = pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), count)), first_offset - 1)
    joined = pc.binary_join_element_wise(
        b'{"offset":',
        offsets.cast(pa.string()).cast(pa.binary()),
        f',"timestamp_ms":{timestamp_ms:d},"key":'.encode("ascii"),
        _b64_json_column(keys),
        b',"value":',
        _b64_json_column(values),
        b',"headers":',
        pa.array(headers, pa.string()).cast(pa.binary()),
        b"}\n",
        b"",
    )
    return _concatenated(joined)


def _concatenated(array: pa.Array) -> bytes:
    """The values of a binary array without nulls, one after another: the span of its data buffer
    its offsets bound, copied once."""
    _, offsets, data = array.buffers()
    bounds = memoryview(offsets).cast("i")
    return bytes(memoryview(data)[bounds[array.offset] : bounds[array.offset + len(array)]])


def _b64_json_column(data: Sequence[bytes | None]) -> pa.Array:
    """Each value as a JSON string of its base64, null as `null`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    nulls = data.count(None)
    if nulls == len(data):
        return pa.repeat(pa.scalar(b"null", pa.binary()), len(data))
    if nulls:
        encoded = pa.array([None if value is None else _b64_bytes(value) for value in data], pa.binary())
    else:
        encoded = pa.array(list(map(_b64_bytes, data)), pa.binary())
    quoted = pc.binary_join_element_wise(b'"', encoded, b'"', b"")
    return pc.fill_null(quoted, b"null")


_b64_bytes = functools.partial(binascii.b2a_base64, newline=False)


def _rows_by_topic(topics: Sequence[str]) -> dict[str, list[int]]:
    """The rows of each topic, in order."""
    rows: dict[str, list[int]] = {}
    for i, topic in enumerate(topics):
        rows.setdefault(topic, []).append(i)
    return rows


def _encode_headers(headers: tuple[tuple[str, bytes | None], ...]) -> str:
    return json.dumps([[name, _b64(value)] for name, value in headers], separators=(",", ":"))


def _decode(topic: str, line: str, path: str, number: int) -> DlqRecord:
    try:
        fields: dict[str, Any] = json.loads(line)
        return DlqRecord(
            topic=topic,
            key=_unb64(fields["key"]),
            value=_unb64(fields["value"]),
            headers=tuple((name, _unb64(value)) for name, value in fields["headers"]),
            timestamp_ms=int(fields["timestamp_ms"]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise DlqError(f"{path}:{number}: not a DLQ record: {e}", topic=topic) from e


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


def _lines(path: str) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8") as file:
        yield from enumerate(file, start=1)


def _subdirectories(root: str) -> list[str]:
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    return [entry.name for entry in entries if entry.is_dir() and not entry.name.startswith(".")]


def _close_durably(handle: IO[bytes]) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()


def _sync_directory(directory: str) -> None:
    """Persist a rename or removal in `directory` (POSIX only: Windows cannot open a directory)."""
    if os.name != "posix":
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
