"""The Confluent extra CEL functions (isEmail, isHostname, …) with confluent-kafka 2.16.1's answers.

Each check follows the reference's rules (SEMANTICS.md §3): the same stdlib parsers
(`email.utils.parseaddr`, `ipaddress`, `urllib.parse.urlparse`, `uuid.UUID`) and the same
hostname rules, so odd-but-valid inputs get the same answer. A wrong argument type raises a
CELEvalError, which the runtime turns into a rule failure.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable
from email.utils import parseaddr
from typing import Any
from urllib.parse import urlparse

from celpy import CELEvalError, celtypes

_MAX_HOSTNAME = 253
_MAX_LABEL = 63
_MAX_EMAIL = 254
_MAX_LOCAL_PART = 64


def valid_hostname(host: str) -> bool:
    """Whether `host` is a DNS hostname: ASCII labels of 1-63 letters, digits and inner hyphens."""
    if not host or len(host) > _MAX_HOSTNAME:
        return False
    labels = (host[:-1] if host.endswith(".") else host).split(".")
    if not all(_valid_label(label) for label in labels):
        return False
    # The reference rejects a name whose *last* label is all digits (so "1.2.3.4" is not a
    # hostname but "123.example" is).
    return not labels[-1].isdigit()


def _valid_label(label: str) -> bool:
    if not 0 < len(label) <= _MAX_LABEL or label[0] == "-" or label[-1] == "-":
        return False
    return all(("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9") or c == "-" for c in label)


def valid_email(address: str) -> bool:
    """Whether `address` is a bare RFC 5322 address (no display name) with a valid hostname domain."""
    # parseaddr must give the text back unchanged: "Name <a@b.c>" and comments are refused.
    if parseaddr(address)[1] != address or len(address) > _MAX_EMAIL:
        return False
    parts = address.split("@")
    # An empty local part passes, as in the reference ("@example.com" is an email there).
    return len(parts) == 2 and len(parts[0]) <= _MAX_LOCAL_PART and valid_hostname(parts[1])


def _valid_ip(value: str | bytes, address_type: type[ipaddress._BaseAddress]) -> bool:
    # Bytes are packed addresses (4 or 16 bytes), as `ipaddress` reads them.
    try:
        address_type(value)
    except ValueError:
        return False
    return True


def valid_uuid(value: str) -> bool:
    """Whether `uuid.UUID` accepts `value` (braces, a `urn:uuid:` prefix, no hyphens, any case)."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _require_string(value: Any) -> None:
    # Only a CEL string: a plain `str` (CEL_FIELD's `name`, `fullName`, `typeName`) is refused,
    # as the reference refuses it.
    if not isinstance(value, celtypes.StringType):
        raise CELEvalError("invalid argument, expected string")


def _require_string_or_bytes(value: Any) -> None:
    if not isinstance(value, celtypes.StringType | celtypes.BytesType):
        raise CELEvalError("invalid argument, expected string or bytes")


def is_email(value: Any) -> celtypes.BoolType:
    """CEL `isEmail()`."""
    _require_string(value)
    return celtypes.BoolType(valid_email(value))


def is_hostname(value: Any) -> celtypes.BoolType:
    """CEL `isHostname()`."""
    _require_string(value)
    return celtypes.BoolType(valid_hostname(value))


def is_ipv4(value: Any) -> celtypes.BoolType:
    """CEL `isIpv4()`: a dotted quad string, or 4 packed bytes."""
    _require_string_or_bytes(value)
    return celtypes.BoolType(_valid_ip(value, ipaddress.IPv4Address))


def is_ipv6(value: Any) -> celtypes.BoolType:
    """CEL `isIpv6()`: an IPv6 string (a `%zone` suffix allowed), or 16 packed bytes."""
    _require_string_or_bytes(value)
    return celtypes.BoolType(_valid_ip(value, ipaddress.IPv6Address))


def is_uri(value: Any) -> celtypes.BoolType:
    """CEL `isUri()`: an absolute URI with a scheme, an authority and a non-empty path."""
    _require_string(value)
    # urlparse's own ValueError (a malformed "[...]" host) is left to escape, as in the
    # reference, where celpy reports it as an evaluation error.
    parsed = urlparse(value)
    return celtypes.BoolType(bool(parsed.scheme and parsed.netloc and parsed.path))


def is_uri_ref(value: Any) -> celtypes.BoolType:
    """CEL `isUriRef()`: false only when a fragment comes without both a scheme and a path."""
    _require_string(value)
    parsed = urlparse(value)
    return celtypes.BoolType(bool(parsed.scheme and parsed.path) or not parsed.fragment)


def is_uuid(value: Any) -> celtypes.BoolType:
    """CEL `isUuid()`."""
    _require_string(value)
    return celtypes.BoolType(valid_uuid(value))


def format_string(template: Any, args: Any) -> Any:
    """CEL `"…".format([args])`: printf-style %s %d %f %e %x %X %o %b and %%, as the reference."""
    if not isinstance(template, celtypes.StringType) or not isinstance(args, celtypes.ListType):
        # The reference's own check calls a helper celpy 0.5 lacks, so celpy reports it as
        # "no such overload"; a TypeError gets the same report here.
        raise TypeError("format() requires a string and a list")
    out: list[str] = []
    used = 0
    i = 0
    while i < len(template):
        char = template[i]
        if char != "%":
            out.append(char)
            i += 1
            continue
        if template[i + 1 : i + 2] == "%":
            out.append("%")
            i += 2
            continue
        if used >= len(args):
            return CELEvalError("format() not enough arguments for format string")
        arg = args[used]
        used += 1
        i, precision = _precision(template, i + 1)
        if i >= len(template):
            return CELEvalError("format() incomplete format specifier")
        rendered = _render(template[i], arg, precision)
        if isinstance(rendered, CELEvalError):
            return rendered
        out.append(rendered)
        i += 1
    if used < len(args):
        return CELEvalError("format() too many arguments for format string")
    return celtypes.StringType("".join(out))


def _precision(template: str, i: int) -> tuple[int, int]:
    """Read an optional `.digits` precision at `i`; the default is 6."""
    if template[i : i + 1] != ".":
        return i, 6
    i += 1
    start = i
    while i < len(template) and template[i].isdigit():
        i += 1
    # The reference accumulates int(char) per digit, so any Unicode digit counts.
    precision = 0
    for digit in template[start:i]:
        precision = precision * 10 + int(digit)
    return i, precision


def _render(verb: str, arg: Any, precision: int) -> str | CELEvalError:
    if verb in "fe":
        if isinstance(arg, celtypes.DoubleType):
            return f"{arg:.{precision}{verb}}"
        return _render_int(arg)
    if verb == "d":
        return _render_int(arg)
    if verb == "s":
        return _render_text(arg)
    if verb in "xX":
        rendered = _render_hex(arg)
        return rendered.upper() if verb == "X" and isinstance(rendered, str) else rendered
    if verb == "o":
        return f"{arg:o}" if _is_integer(arg) else CELEvalError("format_oct() requires an integer argument")
    if verb == "b":
        if _is_integer(arg) or isinstance(arg, celtypes.BoolType):
            return f"{arg:b}"
        return CELEvalError("format_bin() requires an integer argument")
    return CELEvalError("format() unknown format specifier: " + verb)


def _is_integer(arg: Any) -> bool:
    return isinstance(arg, celtypes.IntType | celtypes.UintType)


def _render_int(arg: Any) -> str | CELEvalError:
    if _is_integer(arg):
        return str(celtypes.StringType(arg))
    return CELEvalError("format_int() requires an integer argument")


def _render_hex(arg: Any) -> str | CELEvalError:
    if _is_integer(arg):
        return f"{arg:x}"
    if isinstance(arg, celtypes.BytesType):
        return arg.hex()
    if isinstance(arg, celtypes.StringType):
        return arg.encode("utf-8").hex()
    return CELEvalError("format_hex() requires an integer, string, or binary argument")


def _render_text(arg: Any) -> str | CELEvalError:
    if isinstance(arg, celtypes.StringType):
        return str(arg)
    if isinstance(arg, celtypes.BytesType):
        return arg.hex()
    if isinstance(arg, celtypes.ListType):
        return _render_list(arg)
    # celpy's StringType of anything else is Python's str() of it ("True", "{'a': 1}").
    return str(celtypes.StringType(arg))


def _render_list(items: celtypes.ListType) -> str | CELEvalError:
    parts = []
    for item in items:
        rendered = _quote(item) if isinstance(item, str) else _render_text(item)
        if isinstance(rendered, CELEvalError):
            return rendered
        parts.append(rendered)
    return "[" + ", ".join(parts) + "]"


_QUOTED = str.maketrans(
    {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}
    | {"\\": r"\\", '"': r"\""}
)


def _quote(text: str) -> str:
    return '"' + text.translate(_QUOTED) + '"'


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isEmail": is_email,
    "isHostname": is_hostname,
    "isIpv4": is_ipv4,
    "isIpv6": is_ipv6,
    "isUri": is_uri,
    "isUriRef": is_uri_ref,
    "isUuid": is_uuid,
    "format": format_string,
}
