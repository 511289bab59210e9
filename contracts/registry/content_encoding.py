"""Decoding a registry answer's Content-Encoding a bounded piece at a time, so a size cap can count
decoded bytes before they exist.

httpx decodes each chunk it reads whole: 32 KiB of zstd (or gzip inside gzip) can become gigabytes
in one call, before any cap sees a byte. Here only gzip and deflate are asked for and decoded,
each step giving at most PIECE bytes (zlib's `max_length`), stacked encodings piece by piece; an
answer in any other encoding (zstd, br, …) was not asked for and is refused (docs/semantics.md
§10.13).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from contracts.errors import DataContractError

ACCEPT_ENCODING = "gzip, deflate"
"""What the client asks for: the encodings it decodes in bounded pieces."""

PIECE = 64 * 1024
"""The most bytes one decoding step produces."""

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class UnsupportedEncoding(DataContractError, ValueError):
    """A Content-Encoding this client did not ask for and does not decode."""


def encodings(header: str) -> list[str]:
    """The codings a Content-Encoding header names, in the order they were applied (identity left
    out); UnsupportedEncoding for one the client does not decode."""
    named = [part.strip().lower() for part in header.split(",") if part.strip()]
    codings = [name for name in named if name != "identity"]
    unknown = [name for name in codings if name not in _WBITS]
    if unknown:
        raise UnsupportedEncoding(f"Content-Encoding {unknown[0]!r} (asked only for {ACCEPT_ENCODING})")
    return codings


def decoded(codings: list[str], raw: Iterable[bytes]) -> Iterator[bytes]:
    """The body `raw` (chunks as they arrive) undone of `codings` (as `encodings` lists them), in
    pieces of at most PIECE bytes; zlib.error for a body that does not decode."""
    pieces: Iterable[bytes] = raw
    for coding in reversed(codings):  # the last coding applied is undone first
        pieces = _inflated(pieces, _WBITS[coding])
    return iter(pieces)


def _inflated(chunks: Iterable[bytes], wbits: int) -> Iterator[bytes]:
    """`chunks` inflated, each step bounded by PIECE, also for output zlib holds back."""
    inflater = zlib.decompressobj(wbits)
    seen = False
    for chunk in chunks:
        seen = seen or bool(chunk)
        data = chunk
        while data or inflater.unconsumed_tail:
            piece = inflater.decompress(data or inflater.unconsumed_tail, PIECE)
            data = b""
            if piece:
                yield piece
        while True:
            # Output a full piece may have left behind, with no input left to give.
            piece = inflater.decompress(b"", PIECE)
            if not piece:
                break
            yield piece
    if seen and not inflater.eof:
        raise zlib.error("the compressed body ends early")
