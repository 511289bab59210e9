"""Which records of a local DLQ topic each replay took, so a replay reads only what no other replay
read and a rerun with the same run id reads the same again (docs/semantics.md §7.7).

A replay of topic T with run id R takes, when it starts, every committed record file of T that no
other replay of T took and that R's own parts (run ids `R-<n>`, docs/semantics.md §7.6) did not
write, and records their names in `<root>/.replays/<T>/<R>` (one JSON object, replaced atomically).
What a replay sends back to a DLQ topic lands in new files of its parts, which the next replay
takes: each still-failing record is appended once per replay, and records a replay recovered are
never read again. A rerun of R (same run id) takes its files again, as its parts' earlier output
is replaced (`LocalTopicSink.begin_run`); it is refused once another replay took that output,
which the rerun would otherwise send through the contract a second time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from actions.dlq.local_topic import LocalTopicSink, replace_durably, writer_of
from actions.dlq.sink import DlqError, in_run, is_run_id, validate_topic

REPLAYS = ".replays"  # hidden, so never taken for a topic
_LOCK = ".lock"


@dataclass(frozen=True)
class Taken:
    """What a replay took of a topic: the record files it reads, how many records they hold, how
    many records of the topic other replays took before it, and those replays' run ids."""

    files: list[str]
    records: int
    skipped: int
    skipped_for: tuple[str, ...]


def take(sink: LocalTopicSink, topic: str, run_id: str) -> Taken:
    """The committed files of `topic` replay `run_id` reads, recorded as its own (module docstring);
    DlqError when another replay took what this run id wrote before."""
    validate_topic(topic)
    if not is_run_id(run_id):
        raise DlqError("run id must be 1-100 ASCII letters, digits, '_' or '-'", writer_id=str(run_id))
    directory = os.path.join(sink.root, REPLAYS, topic)
    try:
        with _locked(directory):
            others = [entry for entry in _replays(sink.root) if entry[:2] != (topic, run_id)]
            for other_topic, other_run, names in others:
                if any(written_by(name, run_id) for name in names):
                    raise DlqError(
                        f"replay {other_run!r} took records replay {run_id!r} sent back to {other_topic!r};"
                        f" rerunning {run_id!r} would replay them twice: replay with a new run id",
                        topic=topic,
                    )
            taken_by_others = {name: run for other, run, names in others if other == topic for name in names}
            files, records, skipped, skipped_for = [], 0, 0, set()
            for path in sink.files(topic):
                name = os.path.basename(path)
                if name in taken_by_others:
                    skipped += _records_in(path)
                    skipped_for.add(taken_by_others[name])
                elif not written_by(name, run_id):
                    files.append(path)
                    records += _records_in(path)
            record = {"files": [os.path.basename(path) for path in files]}
            replace_durably(os.path.join(directory, run_id), json.dumps(record))
    except OSError as e:
        raise DlqError(f"cannot record replay {run_id!r} of {topic!r}: {e}", topic=topic) from e
    return Taken(files, records, skipped, tuple(sorted(skipped_for)))


def taken(sink: LocalTopicSink, topic: str) -> set[str]:
    """The names of `topic`'s record files some replay took."""
    return {name for replayed, _, names in _replays(sink.root) if replayed == topic for name in names}


def sent_back(sink: LocalTopicSink, run_id: str) -> dict[str, int]:
    """How many records replay `run_id`'s parts committed, by topic (the topics it sent some to)."""
    sent = {}
    for topic in sink.topics():
        count = sum(_records_in(path) for path in sink.files(topic) if written_by(path, run_id))
        if count:
            sent[topic] = count
    return sent


def written_by(file_name: str, run_id: str) -> bool:
    """Whether a part of replay `run_id` (run id `<run_id>-<n>`, or its key pass `<run_id>-<n>-key`)
    committed the record file `file_name`."""
    writer = writer_of(file_name)
    part = writer.split(".", 1)[0]
    return re.fullmatch(re.escape(run_id) + r"-[0-9]+(?:-key)?", part) is not None and in_run(writer, part)


def _records_in(path: str) -> int:
    with open(path, "rb") as file:
        return sum(1 for _ in file)


def _replays(root: str) -> Iterator[tuple[str, str, list[str]]]:
    """Every recorded replay: its topic, run id and the names of the files it took."""
    replays = os.path.join(root, REPLAYS)
    for topic in _listed(replays, _is_topic):
        for run_id in _listed(os.path.join(replays, topic), is_run_id):
            path = os.path.join(replays, topic, run_id)
            try:
                with open(path, encoding="utf-8") as file:
                    names = json.load(file)["files"]
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as e:
                raise DlqError(f"{path}: not a replay's record: {e}", topic=topic) from e
            yield topic, run_id, names


def _listed(directory: str, chosen: Callable[[str], bool]) -> list[str]:
    """The names in `directory` that are `chosen`, sorted; none when it does not exist."""
    try:
        return sorted(name for name in os.listdir(directory) if chosen(name))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _is_topic(name: str) -> bool:
    if name.startswith("."):
        return False
    try:
        validate_topic(name)
    except DlqError:
        return False
    return True


@contextlib.contextmanager
def _locked(directory: str) -> Iterator[None]:
    """One replay at a time chooses its files from a topic (an advisory lock, released when its
    process ends, where the platform has one)."""
    os.makedirs(directory, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(os.path.join(directory, _LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
