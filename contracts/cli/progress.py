"""A progress line for the CLI while a Spark job runs: spinner, elapsed time, and task counts on Connect.

Only the DataFrame API is used (docs/semantics.md §9.8): a classic session's progress would need
the SparkContext's status tracker, so there the line shows elapsed time only; a Spark Connect
session reports stage and task counts to a registered progress handler.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any, TextIO

_FRAMES = "|/-\\"


class Progress:
    """Draws `label` with a spinner and elapsed seconds on `stream` until the block ends.

    On a terminal the line is redrawn every `interval` seconds; elsewhere (a log, a pipe) only the
    start and the outcome are written, so logs are not flooded with redraws.
    """

    def __init__(
        self,
        label: str,
        stream: TextIO,
        spark: Any = None,
        *,
        interval: float = 0.2,
        interactive: bool | None = None,
    ) -> None:
        self.label = label
        self._stream = stream
        self._spark = spark
        self._interval = interval
        self._interactive = stream.isatty() if interactive is None else interactive
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self._lock = threading.Lock()
        self._tasks: tuple[int, int] | None = None
        self._handler_registered = False

    def __call__(self, stages: Iterable[Any] | None, inflight_tasks: int, **_: Any) -> None:
        """Spark Connect's progress handler: remember completed and total tasks of the operation."""
        stages = list(stages or ())
        with self._lock:
            self._tasks = (
                sum(stage.num_completed_tasks for stage in stages),
                sum(stage.num_tasks for stage in stages),
            )

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self._register()
        if self._interactive:
            self._thread = threading.Thread(target=self._draw_until_stopped, name="spark-contracts-progress")
            self._thread.daemon = True
            self._thread.start()
        else:
            self._stream.write(f"{self.label} ...\n")
            self._stream.flush()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._handler_registered:
            self._spark.removeProgressHandler(self)
        outcome = "done" if exc_type is None else "FAILED"
        prefix = "\r\033[K" if self._interactive else ""
        self._stream.write(f"{prefix}{self.label}: {outcome} in {self.elapsed():.1f}s\n")
        self._stream.flush()

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def status(self, frame: int) -> str:
        """The line as drawn now: spinner frame, label, elapsed seconds, tasks when known."""
        with self._lock:
            tasks = self._tasks
        counts = f"  tasks {tasks[0]}/{tasks[1]}" if tasks else ""
        return f"{_FRAMES[frame % len(_FRAMES)]} {self.label}  {self.elapsed():.1f}s{counts}"

    def _draw_until_stopped(self) -> None:
        frame = 0
        while not self._stop.is_set():
            self._stream.write(f"\r\033[K{self.status(frame)}")
            self._stream.flush()
            frame += 1
            self._stop.wait(self._interval)

    def _register(self) -> None:
        """Listen to Spark Connect's progress; a classic session refuses, and keeps the plain line."""
        if self._spark is None:
            return
        from pyspark.errors import PySparkException

        try:
            self._spark.registerProgressHandler(self)
        except (PySparkException, AttributeError, NotImplementedError):
            return
        self._handler_registered = True
