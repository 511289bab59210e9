"""Reading the registry's HTTP answers defensively: a size cap on the body (decompressed), JSON that
can exhaust neither memory nor the stack, Confluent's error bodies, and Retry-After.

Every way an answer can be unusable ends as a RegistryError naming the call, never as an httpx,
JSON, recursion or overflow error from deep inside.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import math
import zlib
from dataclasses import dataclass
from typing import Any

import httpx

from contracts.errors import RegistryError
from contracts.registry import content_encoding

_LONGEST_WAIT = 86_400.0  # seconds: a larger Retry-After is read as this (it is capped by the backoff anyway)


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read in full (within the size cap)."""

    status: int
    headers: httpx.Headers
    content: bytes


def read_answer(call: str, response: httpx.Response, limit: int) -> Answer:
    """The body of a streamed `response`, refused (RegistryError) once it holds more than `limit`
    bytes, decompressed (counted as each bounded piece is decoded: a small compressed body cannot
    grow past the cap in memory), or declares more; a body that does not decompress, or in an
    encoding not asked for, is a RegistryError too."""
    declared = response.headers.get("Content-Length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise _too_large(call, response.status_code, limit)
    chunks: list[bytes] = []
    size = 0
    try:
        codings = content_encoding.encodings(response.headers.get("Content-Encoding", ""))
        for piece in content_encoding.decoded(codings, response.iter_raw()):
            size += len(piece)
            if size > limit:
                raise _too_large(call, response.status_code, limit)
            chunks.append(piece)
    except (content_encoding.UnsupportedEncoding, zlib.error) as error:
        raise RegistryError(
            f"the schema registry answered {call} with a body that does not decode: {error}",
            status=response.status_code,
        ) from error
    return Answer(response.status_code, response.headers, b"".join(chunks))


def decoded(call: str, answer: Answer) -> Any:
    """The JSON of a successful answer (None for an empty one); an error answer as its RegistryError."""
    if not 200 <= answer.status < 300:
        raise error_from(call, answer)
    if answer.status == 204 or not answer.content:
        return None
    try:
        return _parse(answer.content)
    except (ValueError, RecursionError) as error:
        raise _not_json(call, answer, error) from error


def error_from(call: str, answer: Answer) -> RegistryError:
    """Confluent's `{"error_code": …, "message": …}` as a RegistryError, or the bare status."""
    try:
        body = _parse(answer.content)
    except (ValueError, RecursionError) as error:
        return _not_json(call, answer, error)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        code = body.get("error_code")
        known = code if isinstance(code, int) and not isinstance(code, bool) else None
        return RegistryError(body["message"], status=answer.status, error_code=known)
    return RegistryError(f"the schema registry answered {call} with an error", status=answer.status)


def retry_after(answer: Answer) -> float | None:
    """The seconds a Retry-After header asks to wait (a number of seconds or an HTTP date), if any."""
    value = answer.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        return _LONGEST_WAIT if len(value) > 5 else min(float(value), _LONGEST_WAIT)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    wait = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    return min(max(wait, 0.0), _LONGEST_WAIT)


def _parse(content: bytes) -> Any:
    """JSON with finite numbers only: `1e999` or `NaN` would turn into values no id or version holds."""
    return json.loads(content, parse_float=_finite, parse_constant=_not_a_number)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:40]} is out of range")
    return number


def _not_a_number(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number")


def _too_large(call: str, status: int, limit: int) -> RegistryError:
    return RegistryError(
        f"the schema registry answered {call} with a body larger than max_response_bytes={limit}",
        status=status,
    )


def _not_json(call: str, answer: Answer, error: Exception) -> RegistryError:
    reason = "is nested too deeply" if isinstance(error, RecursionError) else "is not JSON"
    start = answer.content[:80].decode("utf-8", "replace")
    return RegistryError(
        f"the schema registry answered {call} with a body that {reason}: {start!r}", status=answer.status
    )
