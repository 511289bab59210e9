"""Starting a streaming query in the tests, tolerant of one Spark start-up race on a loaded machine.

On Spark Connect a `foreachBatch` query starts a Python process on the server (Spark's
StreamingPythonRunner) that must connect back within a fixed 10 seconds (PythonWorkerFactory's
`createSimpleWorker` in Spark 4.x: no setting changes it). On a busy 2-core machine importing
PySpark there (about 1 s of CPU) can take longer, and `start()` fails with "Python worker failed
to connect back" before the query has done anything. Only that failure is retried, after a pause
that grows (load comes in bursts): nothing has run, so starting again (with the same checkpoint)
is the same query.
"""

from __future__ import annotations

import time
from typing import Any

_NOT_CONNECTED = "Python worker failed to connect back"
_ATTEMPTS = 5


def start(writer: Any, **options: Any) -> Any:
    """`writer.start(**options)`, started again (up to five attempts, 2 to 16 s apart) when the
    query's Python worker did not connect back in time."""
    for attempt in range(1, _ATTEMPTS):
        try:
            return writer.start(**options)
        except Exception as error:
            if _NOT_CONNECTED not in str(error):
                raise
            time.sleep(2.0**attempt)
    return writer.start(**options)
