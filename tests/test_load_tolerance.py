"""What keeps the suite from failing by luck on a loaded machine: the streaming start retried only
when the query's Python worker did not connect back, no per-example deadline for property tests."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from query_start import start


class Writer:
    """A DataStreamWriter stand-in whose first `failures` starts raise `error`."""

    def __init__(self, error: Exception, failures: int) -> None:
        self.error = error
        self.failures = failures
        self.calls: list[dict[str, Any]] = []

    def start(self, **options: Any) -> str:
        self.calls.append(options)
        if len(self.calls) <= self.failures:
            raise self.error
        return "query"


def test_a_worker_that_did_not_connect_back_is_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("query_start.time.sleep", lambda seconds: None)
    writer = Writer(RuntimeError("SparkException: Python worker failed to connect back."), failures=4)
    assert start(writer, path="out") == "query"
    assert writer.calls == [{"path": "out"}] * 5


def test_other_failures_and_a_fifth_timeout_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("query_start.time.sleep", lambda seconds: None)
    other = Writer(RuntimeError("checkpoint is corrupt"), failures=1)
    with pytest.raises(RuntimeError, match="corrupt"):
        start(other)
    assert len(other.calls) == 1
    stuck = Writer(RuntimeError("Python worker failed to connect back."), failures=5)
    with pytest.raises(RuntimeError, match="connect back"):
        start(stuck)
    assert len(stuck.calls) == 5


@pytest.mark.parametrize("profile", ["ci", "dev", "fuzz"])
def test_no_hypothesis_profile_fails_a_slow_example(profile: str) -> None:
    assert settings.get_profile(profile).deadline is None
