"""LocalTopicSink: exact round trips, atomic commits, idempotent retries, and Spark tasks as writers."""

from __future__ import annotations

import errno
import json
import os
import pickle
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from actions.dlq import local_topic
from actions.dlq.local_topic import LocalRunSink, LocalTopicSink
from actions.dlq.sink import (
    DlqBatch,
    DlqError,
    DlqRecord,
    DlqSink,
    RunScopedSink,
    in_run,
    validate_topic,
    writer_id,
)

# The mapInArrow functions below run on Spark workers, which cannot import test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def record(topic: str = "bad-users", value: bytes | None = b"v", **fields: Any) -> DlqRecord:
    return DlqRecord(
        topic=topic,
        key=fields.get("key", b"k"),
        value=value,
        headers=fields.get("headers", (("__rule.name", b"positiveAge"),)),
        timestamp_ms=fields.get("timestamp_ms", 1_700_000_000_000),
    )


@pytest.fixture
def sink(tmp_path: Path) -> LocalTopicSink:
    return LocalTopicSink(tmp_path / "dlq")


def visible_and_hidden(sink: LocalTopicSink, topic: str) -> tuple[list[str], list[str]]:
    names = sorted(os.listdir(os.path.join(sink.root, topic)))
    return [n for n in names if not n.startswith(".")], [n for n in names if n.startswith(".")]


def test_records_round_trip_exactly(sink: LocalTopicSink) -> None:
    records = [
        record(key=None, value=None, headers=()),
        record(value=bytes(range(256)), key=b"\x00\xff"),
        record(
            headers=(("naïve-名前", b"\x00"), ("dup", b"1"), ("dup", b"2"), ("dup", None), ("empty", b""))
        ),
        record(value=b"", key=b"", timestamp_ms=0),
    ]
    with sink.open("run-00000") as writer:
        for r in records:
            writer.write(r)
    assert sink.read("bad-users") == records
    assert sink.count("bad-users") == 4
    assert sink.topics() == ["bad-users"]


def test_file_format_is_json_lines_with_base64_and_offsets(sink: LocalTopicSink) -> None:
    with sink.open("run-00000") as writer:
        writer.write(record(key=None, value=b"hi", headers=(("h", b"x"), ("n", None))))
        writer.write(record(value=None))
    lines = Path(sink.root, "bad-users", "run-00000.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "offset": 0,
            "timestamp_ms": 1_700_000_000_000,
            "key": None,
            "value": "aGk=",
            "headers": [["h", "eA=="], ["n", None]],
        },
        {
            "offset": 1,
            "timestamp_ms": 1_700_000_000_000,
            "key": "aw==",
            "value": None,
            "headers": [["__rule.name", "cG9zaXRpdmVBZ2U="]],
        },
    ]


def test_a_batch_writes_the_lines_its_records_write_one_by_one(tmp_path: Path) -> None:
    shared = (("__rule.name", b"positiveAge"), ("__rule.exception", None))
    records = [
        record(topic="bad-a", key=None, value=b"1", headers=shared),
        record(topic="bad-b", value=None, headers=()),
        record(topic="bad-a", value=b"3", headers=shared),
        record(topic="bad-a", value=b"4", headers=(("h", b"x"), *shared)),
    ]
    stamp = records[0].timestamp_ms
    one_by_one, batched = LocalTopicSink(tmp_path / "one"), LocalTopicSink(tmp_path / "batch")
    with one_by_one.open("run-00000") as writer:
        for r in [*records, *records]:
            writer.write(r)
    batch = DlqBatch(
        [r.topic for r in records],
        [r.key for r in records],
        [r.value for r in records],
        [r.headers for r in records],
        stamp,
    )
    with batched.open("run-00000") as writer:
        writer.write_batch(batch)
        writer.write_batch(batch)  # offsets go on from the first batch's
    for topic in ("bad-a", "bad-b"):
        expected = Path(one_by_one.root, topic, "run-00000.jsonl").read_text()
        assert Path(batched.root, topic, "run-00000.jsonl").read_text() == expected
    assert batched.read("bad-a") == [r for r in [*records, *records] if r.topic == "bad-a"]


def test_a_batch_to_a_topic_kafka_refuses_writes_nothing(sink: LocalTopicSink) -> None:
    batch = DlqBatch(["bad-users", "no/such"], [b"k", b"k"], [b"1", b"2"], [(), ()], 0)
    with pytest.raises(DlqError, match="no/such"), sink.open("run-00000") as writer:
        writer.write_batch(batch)
    assert sink.read("bad-users") == []


def test_commit_makes_records_visible_at_once(sink: LocalTopicSink) -> None:
    writer = sink.open("run-00000")
    writer.write(record(value=b"1"))
    writer.write(record(value=b"2"))
    assert sink.read("bad-users") == []
    assert sink.topics() == []
    writer.commit()
    assert [r.value for r in sink.read("bad-users")] == [b"1", b"2"]
    assert visible_and_hidden(sink, "bad-users") == (["run-00000.jsonl"], [])


def test_abort_leaves_nothing(sink: LocalTopicSink) -> None:
    writer = sink.open("run-00000")
    writer.write(record())
    writer.abort()
    assert sink.topics() == []
    assert visible_and_hidden(sink, "bad-users") == ([], [])
    with pytest.raises(DlqError, match="aborted"):
        writer.commit()


def test_context_manager_aborts_on_error(sink: LocalTopicSink) -> None:
    with pytest.raises(ValueError), sink.open("run-00000") as writer:
        writer.write(record())
        raise ValueError("task failed")
    assert sink.topics() == []


def test_context_manager_commits_when_a_generator_is_closed_early(sink: LocalTopicSink) -> None:
    def task() -> Iterator[int]:
        with sink.open("run-00000") as writer:
            for i in range(10):
                writer.write(record(value=str(i).encode()))
                yield i

    rows = task()
    assert [next(rows), next(rows)] == [0, 1]
    rows.close()
    assert [r.value for r in sink.read("bad-users")] == [b"0", b"1"]


def test_a_closed_writer_rejects_records(sink: LocalTopicSink) -> None:
    writer = sink.open("run-00000")
    writer.commit()
    writer.commit()
    writer.abort()
    with pytest.raises(DlqError, match="committed") as caught:
        writer.write(record())
    assert caught.value.writer_id == "run-00000"


def test_the_same_writer_id_committed_twice_keeps_only_the_second(sink: LocalTopicSink) -> None:
    for attempt in (b"first", b"second"):
        with sink.open("run-00003") as writer:
            writer.write(record(value=attempt))
            writer.write(record(value=attempt))
    assert [r.value for r in sink.read("bad-users")] == [b"second", b"second"]
    assert visible_and_hidden(sink, "bad-users") == (["run-00003.jsonl"], [])


def test_a_retry_replaces_files_in_topics_it_no_longer_writes(sink: LocalTopicSink) -> None:
    with sink.open("run-00000") as writer:
        writer.write(record(topic="a"))
        writer.write(record(topic="b"))
    with sink.open("run-00001") as writer:
        writer.write(record(topic="b"))
    with sink.open("run-00000") as writer:
        writer.write(record(topic="a"))
    assert (sink.count("a"), sink.count("b")) == (1, 1)
    with sink.open("run-00000"):
        pass
    assert sink.topics() == ["b"]


def test_one_writer_writes_several_topics_one_file_each(sink: LocalTopicSink) -> None:
    with sink.open("run-00000") as writer:
        for topic in ("age", "name", "age"):
            writer.write(record(topic=topic, value=topic.encode()))
    assert sink.topics() == ["age", "name"]
    assert [r.value for r in sink.read("age")] == [b"age", b"age"]
    assert all(r.topic == "age" for r in sink.read("age"))
    assert visible_and_hidden(sink, "name") == (["run-00000.jsonl"], [])


def test_writers_in_parallel_threads(sink: LocalTopicSink) -> None:
    def task(partition: int) -> None:
        with sink.open(f"run-{partition:05d}") as writer:
            for i in range(200):
                writer.write(record(topic=("even", "odd")[i % 2], value=f"{partition}:{i}".encode()))

    threads = [threading.Thread(target=task, args=(p,)) for p in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    values = [r.value for topic in sink.topics() for r in sink.read(topic)]
    assert sorted(values) == sorted(f"{p}:{i}".encode() for p in range(8) for i in range(200))
    # Ordered by file name (the zero-padded partition), then by line.
    assert [r.value for r in sink.read("even")][:2] == [b"0:0", b"0:2"]


def test_a_crashed_writer_leaves_only_a_hidden_file(sink: LocalTopicSink) -> None:
    crashed = sink.open("run-00000")
    crashed.write(record(value=b"lost with the task"))
    crashed._files["bad-users"].handle.flush()  # as far as a process killed mid-task gets
    assert sink.topics() == []
    assert sink.read("bad-users") == []
    assert sink.count("bad-users") == 0
    visible, hidden = visible_and_hidden(sink, "bad-users")
    assert visible == [] and len(hidden) == 1
    with sink.open("run-00000") as retry:
        retry.write(record(value=b"retried"))
    assert [r.value for r in sink.read("bad-users")] == [b"retried"]


class _FullDisk:
    """A file on a disk that is full from `room` characters on: a write beyond fails with ENOSPC,
    and so do the flush and the close that would write what the file still holds."""

    def __init__(self, handle: Any, room: int, fail_at: str) -> None:
        self.handle, self.room, self.fail_at, self.failed = handle, room, fail_at, False

    def write(self, text: str) -> int:
        if self.fail_at == "write" and len(text) > self.room:
            self.failed = True
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(text)
        return int(self.handle.write(text))

    def flush(self) -> None:
        if self.fail_at == "flush":
            self.failed = True
        if self.failed:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.handle.flush()

    def fileno(self) -> int:
        return int(self.handle.fileno())

    def close(self) -> None:
        self.handle.close()
        if self.failed:
            raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("fail_at", ["write", "flush"])
def test_a_full_disk_fails_the_writer_and_leaves_no_file_behind(
    sink: LocalTopicSink, fail_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def opened(path: str, *args: Any, **kwargs: Any) -> _FullDisk:
        # Room for the first record's line, not the second's.
        return _FullDisk(open(path, *args, **kwargs), room=200, fail_at=fail_at)

    monkeypatch.setattr(local_topic, "open", opened, raising=False)
    with pytest.raises(DlqError, match="No space left on device"), sink.open("run-00000") as writer:
        writer.write(record())
        writer.write(record(value=b"x" * 100))
    assert os.listdir(os.path.join(sink.root, "bad-users")) == []


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "../escape", "has space", "ü", "x" * 250, "a\nb"])
def test_invalid_topic_names_are_rejected(sink: LocalTopicSink, topic: str) -> None:
    with pytest.raises(DlqError) as caught:
        sink.open("run-00000").write(record(topic=topic))
    assert caught.value.writer_id == "run-00000"
    with pytest.raises(DlqError):
        sink.read(topic)
    assert not os.path.exists(sink.root) or os.listdir(sink.root) == []


def test_kafka_legal_topic_names_are_accepted() -> None:
    for topic in ("a", "x" * 249, "orders.dlq_v2-EU", "..."):
        assert validate_topic(topic) == topic


@pytest.mark.parametrize("writer_id", ["", ".hidden", "a/b", "x" * 201])
def test_invalid_writer_ids_are_rejected(sink: LocalTopicSink, writer_id: str) -> None:
    with pytest.raises(DlqError, match="writer id"):
        sink.open(writer_id)


def test_sink_is_a_picklable_path_only(sink: LocalTopicSink, tmp_path: Path) -> None:
    assert isinstance(sink, DlqSink)
    assert vars(sink) == {"root": str(tmp_path / "dlq")}
    assert pickle.loads(pickle.dumps(sink)) == sink
    assert not os.path.exists(sink.root)


def test_relative_roots_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert LocalTopicSink("dlq").root == str(tmp_path / "dlq")


def test_a_corrupt_file_is_a_clear_error(sink: LocalTopicSink) -> None:
    os.makedirs(os.path.join(sink.root, "bad-users"))
    Path(sink.root, "bad-users", "x.jsonl").write_text('{"offset": 0}\n')
    with pytest.raises(DlqError, match=r"x\.jsonl:1: not a DLQ record"):
        sink.read("bad-users")


def test_writer_ids_name_the_run_and_nothing_else_claims_them() -> None:
    assert writer_id("r1", 3) == "r1.00003"
    assert writer_id("r1", 3, batch_id="12", stage="decode") == "r1.decode.b12.00003"
    assert writer_id("r1", 3, input_partition=3) == "r1.00003"
    assert writer_id("r1", 0, input_partition=7) == "r1.00000p00007"
    assert in_run("r1.decode.b12.00003", "r1")
    # Run ids sharing a prefix, a foreach_batch run id, and foreign names are not run r1's.
    for other in ("r1-2.00000", "r.00000", "r1x.00000", "r1-b4.00000", "r1.00000.extra", "r1.x.y.00000"):
        assert not in_run(other, "r1"), other


def test_beginning_a_run_removes_what_it_committed_before_in_every_topic_only(sink: LocalTopicSink) -> None:
    assert isinstance(sink, RunScopedSink)
    earlier = sink.begin_run("r1")
    run = [
        writer_id("r1", 0),
        writer_id("r1", 7),
        writer_id("r1", 0, stage="decode"),
        writer_id("r1", 0, input_partition=2),
    ]
    others = [writer_id("r1-2", 0), writer_id("r", 0), writer_id("r1-b4", 0), "x"]
    for name in run + others:
        with (earlier if name in run else sink).open(name) as writer:
            writer.write(record(topic="t1", key=name.encode()))
            writer.write(record(topic="t2", key=name.encode()))
    with sink.open(writer_id("r1", 1, batch_id="4")) as writer:  # r1 used on a stream, without a run
        writer.write(record(topic="t1", key=b"stream"))

    again = sink.begin_run("r1")

    for topic in ("t1", "t2"):
        assert sorted(r.key for r in sink.read(topic)) == sorted(name.encode() for name in others)
    with again.open(writer_id("r1", 0)) as writer:
        writer.write(record(topic="t1", key=b"rerun"))
    assert sink.count("t1") == len(others) + 1
    assert not os.path.exists(os.path.join(sink.root, ".runs", "r1-2"))
    assert sink.topics() == ["t1", "t2"]
    sink.begin_run("never-ran")
    with pytest.raises(DlqError, match="run id"):
        sink.begin_run("a.b")


def test_a_straggler_of_an_earlier_run_cannot_add_to_the_rerun(sink: LocalTopicSink) -> None:
    straggler = sink.begin_run("nightly").open(writer_id("nightly", 1))
    straggler.write(record(key=b"stale"))
    rerun = sink.begin_run("nightly")
    with rerun.open(writer_id("nightly", 0)) as writer:
        writer.write(record(key=b"fresh"))

    with pytest.raises(DlqError, match="started again") as caught:
        straggler.commit()

    assert caught.value.writer_id == writer_id("nightly", 1)
    assert [r.key for r in sink.read("bad-users")] == [b"fresh"]
    assert visible_and_hidden(sink, "bad-users")[1] == []


def test_a_straggler_that_renamed_as_the_run_began_removes_its_files(
    sink: LocalTopicSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    straggler = sink.begin_run("nightly").open(writer_id("nightly", 1))
    straggler.write(record(key=b"stale"))
    answers = iter([True, False])  # current before the rename, superseded right after it
    monkeypatch.setattr(LocalRunSink, "is_current", lambda self: next(answers))

    with pytest.raises(DlqError, match="started again"):
        straggler.commit()

    assert sink.read("bad-users") == []
    assert visible_and_hidden(sink, "bad-users") == ([], [])


def dead_letter_every_row(sink: LocalTopicSink, run_id: str, fail_partition: int | None = None) -> Any:
    """A mapInArrow task as the engine runs one: a writer per task, a DLQ record per row, then commit."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        with sink.open(f"{run_id}-{partition:05d}") as writer:
            for batch in batches:
                for row_id in batch.column("id").to_pylist():
                    writer.write(record(key=str(row_id).encode(), value=b"rejected"))
                if partition == fail_partition:
                    raise RuntimeError("task failed before commit")
                yield pa.RecordBatch.from_pydict({"id": batch.column("id")}).slice(0, 0)

    return task


def test_spark_tasks_write_each_row_once_however_often_the_plan_runs(
    spark: Any, sink: LocalTopicSink
) -> None:
    rows = 1000
    df = spark.range(rows).repartition(4)
    routed = df.mapInArrow(dead_letter_every_row(sink, "run-7f3a"), "id long")
    for _ in range(2):
        assert routed.count() == 0
        keys = [r.key for r in sink.read("bad-users")]
        assert sorted(keys) == sorted(str(i).encode() for i in range(rows))
    assert sorted(os.listdir(os.path.join(sink.root, "bad-users"))) == [
        f"run-7f3a-{p:05d}.jsonl" for p in range(4)
    ]


def test_a_failed_spark_task_leaves_nothing_and_its_rerun_no_duplicates(
    spark: Any, sink: LocalTopicSink
) -> None:
    df = spark.range(100).repartition(2)
    with pytest.raises(Exception, match="task failed before commit"):
        df.mapInArrow(dead_letter_every_row(sink, "run-1", fail_partition=1), "id long").collect()
    visible, hidden = visible_and_hidden(sink, "bad-users")
    assert "run-1-00001.jsonl" not in visible
    # Partition 0 may have been cancelled mid-task; the failed partition aborted and cleaned up.
    assert not [name for name in hidden if name.startswith(".run-1-00001.")]
    df.mapInArrow(dead_letter_every_row(sink, "run-1"), "id long").collect()
    assert sorted(r.key for r in sink.read("bad-users")) == sorted(str(i).encode() for i in range(100))
