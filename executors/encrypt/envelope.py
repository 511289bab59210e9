"""The DEK version a rotated key's ciphertext starts with, as the reference writes it: a zero byte
and the version, 4 bytes big-endian (docs/semantics.md §11.3)."""

from __future__ import annotations

_VERSION_PREFIX = 0  # the reference's magic byte before a rotated DEK's version
_HEADER = 5


def with_version(version: int, ciphertext: bytes) -> bytes:
    """`ciphertext` prefixed with the DEK version that made it."""
    return bytes([_VERSION_PREFIX]) + version.to_bytes(4, "big") + ciphertext


def split_version(data: bytes) -> tuple[int, bytes] | None:
    """The DEK version and the ciphertext after it; None when `data` is too short to hold one."""
    if len(data) < _HEADER:
        return None
    return int.from_bytes(data[1:_HEADER], "big"), data[_HEADER:]
