"""Which records of a local DLQ topic each replay takes: only what no other replay took, the same
again on a rerun with the same run id, never its own output (docs/semantics.md §7.7)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actions.dlq import replays
from actions.dlq.local_topic import LocalTopicSink
from actions.dlq.sink import DlqError, DlqRecord

TOPIC = "bad-orders"


def _commit(sink: LocalTopicSink, writer_id: str, records: int = 1, topic: str = TOPIC) -> None:
    with sink.open(writer_id) as writer:
        for offset in range(records):
            writer.write(DlqRecord(topic, None, b"%d" % offset, (), 0))


def _taken(sink: LocalTopicSink, run_id: str) -> tuple[list[str], int, int]:
    taken = replays.take(sink, TOPIC, run_id)
    return [os.path.basename(path) for path in taken.files], taken.records, taken.skipped


def test_a_replay_takes_what_no_other_replay_took_and_a_rerun_the_same(tmp_path: Path) -> None:
    sink = LocalTopicSink(tmp_path)
    _commit(sink, "job.00000", records=2)
    _commit(sink, "job.00001")
    assert _taken(sink, "fix1") == (["job.00000.jsonl", "job.00001.jsonl"], 3, 0)
    # fix1 sends a record back (its part 0) and a new job rejects one more.
    sink.begin_run("fix1-0")
    _commit(sink, "fix1-0.00000")
    _commit(sink, "job2.00000")
    # A rerun of fix1 takes its records again and the new one, never its own output.
    assert _taken(sink, "fix1") == (["job.00000.jsonl", "job.00001.jsonl", "job2.00000.jsonl"], 4, 0)
    # Another replay takes what fix1 did not: what it sent back.
    (sent_back,) = [os.path.basename(p) for p in sink.files(TOPIC) if "fix1-0" in p]
    assert _taken(sink, "fix2") == ([sent_back], 1, 4)
    assert replays.taken(sink, TOPIC) == {sent_back, "job.00000.jsonl", "job.00001.jsonl", "job2.00000.jsonl"}
    # fix2 took fix1's output: a rerun of fix1 would replay it twice.
    with pytest.raises(DlqError, match="replay 'fix2' took records replay 'fix1' sent back to 'bad-orders'"):
        replays.take(sink, TOPIC, "fix1")
    # A replay whose output nobody took may run again.
    assert _taken(sink, "fix2") == ([sent_back], 1, 4)


def test_run_ids_that_share_a_prefix_are_told_apart() -> None:
    assert replays.written_by("fix-0.00000.jsonl", "fix")
    assert replays.written_by("fix-12.decode.00003p00001.g0123456789abcdef.jsonl", "fix")
    assert replays.written_by("fix-0-key.00000.jsonl", "fix")
    assert not replays.written_by("fix-0-0.00000.jsonl", "fix")  # replay "fix-0"'s part
    assert not replays.written_by("fix.00000.jsonl", "fix")  # a job run as "fix", no replay
    assert not replays.written_by("fixed-0.00000.jsonl", "fix")


def test_what_a_replay_took_is_recorded_per_topic_and_run(tmp_path: Path) -> None:
    sink = LocalTopicSink(tmp_path)
    _commit(sink, "job.00000")
    _commit(sink, "other-job.00000", topic="other")
    replays.take(sink, TOPIC, "fix")
    assert sink.topics() == [TOPIC, "other"]  # the records of replays are no topic
    assert replays.take(sink, "other", "fix").records == 1  # one run id may replay each topic
    Path(tmp_path, replays.REPLAYS, TOPIC, "fix").write_text("not json")
    with pytest.raises(DlqError, match=r"fix: not a replay's record"):
        replays.take(sink, TOPIC, "again")


def test_an_unusable_topic_or_run_id_is_refused(tmp_path: Path) -> None:
    sink = LocalTopicSink(tmp_path)
    with pytest.raises(DlqError, match="topic"):
        replays.take(sink, "../escape", "fix")
    with pytest.raises(DlqError, match="run id"):
        replays.take(sink, TOPIC, "a.b")
