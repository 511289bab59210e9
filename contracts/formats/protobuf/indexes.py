"""Confluent's message indexes: where a Protobuf frame says which message of the schema it holds.

After the schema id comes a zig-zag varint count, then that many zig-zag varints: the index of
a top-level message in the file, then of a nested message in it, and so on. A count of 0 (the
single byte 0) stands for [0], the file's first message.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_DEPTH = 100
"""The most indexes a frame may give: deeper than any nesting protoc accepts."""
_MAX_VARINT_BYTES = 10


def read_indexes(body: bytes) -> tuple[list[int], int]:
    """The message indexes at the start of `body` and where the message's bytes start; ValueError
    for a truncated or implausible list."""
    count, at = _read_zigzag(body, 0, "the message index count")
    if count == 0:
        return [0], at
    if not 0 < count <= MAX_DEPTH:
        raise ValueError(f"message index count {count} is not between 0 and {MAX_DEPTH}")
    indexes = []
    for n in range(count):
        index, at = _read_zigzag(body, at, f"message index {n + 1} of {count}")
        indexes.append(index)
    return indexes, at


def write_indexes(indexes: Sequence[int]) -> bytes:
    """The encoded message indexes ([0] as the single byte 0)."""
    if list(indexes) == [0]:
        return b"\x00"
    return b"".join(_zigzag(value) for value in [len(indexes), *indexes])


def _read_zigzag(data: bytes, at: int, what: str) -> tuple[int, int]:
    value = shift = 0
    for n in range(_MAX_VARINT_BYTES):
        if at + n >= len(data):
            raise ValueError(f"the body ends inside {what} (a varint at byte {at})")
        byte = data[at + n]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at + n + 1
    raise ValueError(f"{what} at byte {at} is a varint longer than {_MAX_VARINT_BYTES} bytes")


def _zigzag(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)
