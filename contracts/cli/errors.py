"""How the CLI tells a user error: one line naming what went wrong, the traceback only with --debug.

A user error is anything the user can fix without touching the code: a bad contract or registry
(DataContractError), a bad path or file (OSError, ValueError such as malformed JSON), and whatever
Spark says about the input (PySparkException, or on a classic session a JVM exception such as a
malformed JSON-lines file). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from contracts.errors import DataContractError

_TRACEBACK = "Traceback (most recent call last):"
_MODULE_PATH = re.compile(r"^(?:[A-Za-z_][\w]*\.)+(?=[A-Za-z_]\w*(?::|$))")
_MAX_CAUSES = 20


class UsageError(Exception):
    """Arguments that parse but do not make sense together, or name something that cannot be used
    (a plugin that does not load): one line on stderr, exit status 2."""


def is_user_error(error: BaseException) -> bool:
    """Whether `error` is the user's to fix (reported in one line) rather than a bug."""
    return isinstance(error, DataContractError | OSError | ValueError) or _is_spark_error(error)


def _is_spark_error(error: BaseException) -> bool:
    """Whether `error` is Spark's: only possible once pyspark is imported, so a command that ran
    without Spark (`dlq show`) does not import it to report its own error."""
    errors = sys.modules.get("pyspark.errors")
    return (errors is not None and isinstance(error, errors.PySparkException)) or _is_jvm_error(error)


def one_line(error: BaseException) -> str:
    """`Type: what happened`, on one line.

    A JVM exception gives its own first line and its root cause's; an exception raised in a Python
    worker gives the worker's exception, not the wrapper's banner.
    """
    if _is_jvm_error(error):
        return _jvm_summary(error)
    text = str(error)
    if isinstance(error, DataContractError):
        # The project's own message ends with where it happened (subject, version, rule): keep all.
        return (
            f"{type(error).__name__}: {' '.join(line.strip() for line in text.splitlines() if line.strip())}"
        )
    worker = _worker_exception(text)
    if worker is not None:
        return worker
    line = f"{type(error).__name__}: {_first_line(text) or type(error).__name__}"
    root = _root_cause(error)
    return f"{line} (caused by {root})" if root and root.split(": ", 1)[-1] not in line else line


def _is_jvm_error(error: BaseException) -> bool:
    protocol = sys.modules.get("py4j.protocol")
    return protocol is not None and isinstance(error, protocol.Py4JJavaError)


def _jvm_summary(error: Any) -> str:
    """The JVM exception's class and first line, plus its root cause's when that says more."""
    from py4j.protocol import Py4JError

    try:
        causes = []
        current = error.java_exception
        while current is not None and len(causes) < _MAX_CAUSES:
            causes.append((current.getClass().getSimpleName(), _first_line(current.getMessage() or "")))
            current = current.getCause()
    except Py4JError:
        return f"{type(error).__name__}: {_first_line(str(error))}"
    (name, message), (root_name, root_message) = causes[0], causes[-1]
    if len(causes) == 1 or not root_message or root_message in message:
        return f"{name}: {message}"
    return f"{name}: {message} (caused by {root_name}: {root_message})"


def _root_cause(error: BaseException) -> str | None:
    """The innermost `Caused by:` of the JVM stack trace a PySpark exception carries (Spark Connect
    sends the server's), as `Class: message`; None without one."""
    stack_trace = getattr(error, "getStackTrace", None)
    trace = stack_trace() if callable(stack_trace) else None
    if not isinstance(trace, str):
        return None
    causes = [line[len("Caused by: ") :] for line in trace.splitlines() if line.startswith("Caused by: ")]
    return _MODULE_PATH.sub("", causes[-1].strip()) if causes else None


def _worker_exception(text: str) -> str | None:
    """The exception a Python worker's traceback ends with (`RuleError: …`), its message's lines
    joined on one line, if `text` holds one (Spark's own lines after it, e.g. its JVM stack trace
    past a blank line, are left out)."""
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    lines = text[start + len(_TRACEBACK) :].splitlines()
    for at, line in enumerate(lines):
        if line.strip() and not line[0].isspace():
            message = [line.strip()]
            for more in lines[at + 1 :]:
                if not more.strip() or more.startswith("JVM stacktrace:"):
                    break
                message.append(more.strip())
            return _MODULE_PATH.sub("", " ".join(message))
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
