"""Hypothesis profiles: CI never passes or fails by the luck of the draw; local runs explore.

`ci` (chosen when CI=true) is derandomized, keeps no example database and prints a reproduction
blob for any failure. `dev` (local runs) draws random examples. `fuzz` (`make fuzz`) draws random
examples too, and `examples()` multiplies each property test's example count by FUZZ_SCALE. No
profile has a per-example deadline (a loaded machine would fail a test by luck).
A profile named in HYPOTHESIS_PROFILE wins over both defaults. On Spark Connect (SPARK_REMOTE set:
the second pass of `make test`) a property test draws a quarter of its examples: the classic pass
has checked the property in full, this pass proves it runs on Connect.
"""

from __future__ import annotations

import os

from hypothesis import settings

FUZZ_SCALE = 10
CONNECT_SHARE = 4

# No per-example deadline: on a loaded machine one example (the first, importing a module) can take
# seconds, and Hypothesis would fail the test as flaky by luck. The example counts bound the time.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True, deadline=None)
settings.register_profile("fuzz", database=None, print_blob=True, deadline=None)


def chosen_profile() -> str:
    """The profile this run uses: HYPOTHESIS_PROFILE, else `ci` under CI=true, else `dev`."""
    if os.environ.get("HYPOTHESIS_PROFILE"):
        return os.environ["HYPOTHESIS_PROFILE"]
    return "ci" if os.environ.get("CI", "").lower() == "true" else "dev"


def examples(count: int) -> int:
    """A property test's example count: as written, FUZZ_SCALE times more under `make fuzz`, a
    CONNECT_SHARE-th (at least 5) on Spark Connect."""
    if chosen_profile() == "fuzz":
        return count * FUZZ_SCALE
    if os.environ.get("SPARK_REMOTE"):
        return min(count, max(5, count // CONNECT_SHARE))
    return count
