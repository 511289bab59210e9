"""The Confluent extra CEL functions (isEmail, isHostname, …) with confluent-kafka 2.16.1's answers.

Each check follows the reference's rules (docs/semantics.md §3): the same stdlib parsers
(`email.utils.parseaddr`, `ipaddress`, `urllib.parse.urlparse`, `uuid.UUID`) and the same
hostname rules, so odd-but-valid inputs get the same answer. A wrong argument type raises a
CELEvalError, which the runtime turns into a rule failure.
"""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import uuid
from collections.abc import Callable
from email.utils import parseaddr
from typing import Any
from urllib.parse import urlparse

from celpy import CELEvalError, celtypes
from celpy.evaluation import base_functions

from contracts.formats.regex import compiled

_MAX_HOSTNAME = 253
_MAX_LABEL = 63
_MAX_EMAIL = 254
_MAX_LOCAL_PART = 64
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_BASE_TIMESTAMP = base_functions["timestamp"]


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


# The reference replaces celpy's `timestamp`, `string` and `double` (its timestamp and decimal
# extensions); these are those replacements' answers for the values an Avro record holds.


def timestamp(*args: Any) -> Any:
    """CEL `timestamp()`: also epoch seconds `timestamp(int)` and `timestamp(value, precision)`."""
    if len(args) == 2:
        return _timestamp_at_precision(*args)
    if len(args) == 1:
        return _timestamp_of(args[0])
    return _BASE_TIMESTAMP(*args)


def _is_cel_int(value: Any) -> bool:
    # BoolType and UintType subclass int but are other CEL types.
    return isinstance(value, int) and not isinstance(value, bool | celtypes.BoolType | celtypes.UintType)


def _timestamp_at_precision(value: Any, precision: Any) -> celtypes.TimestampType:
    if not _is_cel_int(value):
        raise CELEvalError(f"timestamp: epoch value must be int, got {type(value).__name__}")
    if not _is_cel_int(precision):
        raise CELEvalError(f"timestamp: precision must be int, got {type(precision).__name__}")
    try:
        return _from_epoch(int(value), int(precision))
    except (OverflowError, ValueError, OSError) as e:
        raise CELEvalError(f"timestamp: epoch value out of range: {int(value)}") from e


def _timestamp_of(value: Any) -> Any:
    if value is None:
        raise CELEvalError("timestamp: cannot convert null to Timestamp")
    if isinstance(value, bool | celtypes.BoolType):
        raise CELEvalError("timestamp: cannot convert bool to Timestamp")
    if isinstance(value, celtypes.TimestampType):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            # An Avro local-timestamp is refused, not read as UTC.
            raise CELEvalError(
                "timestamp: naive datetime (no timezone) cannot be converted. "
                "Use the regular timestamp-* logical type (UTC by spec), or pass "
                "an offset-adjusted epoch value via timestamp(value, precision)."
            )
        return celtypes.TimestampType(value)
    if isinstance(value, celtypes.UintType):
        raise CELEvalError("timestamp: expected an int epoch, got uint")
    if isinstance(value, int):
        try:
            return _from_epoch(int(value), 0)
        except (OverflowError, ValueError, OSError) as e:
            raise CELEvalError(f"timestamp: epoch seconds value out of range: {int(value)}") from e
    return _BASE_TIMESTAMP(value)


def _from_epoch(value: int, precision: int) -> celtypes.TimestampType:
    """The instant `value` units after the epoch, a unit being 10^-precision s; floors to microseconds."""
    scale = {0: 1_000_000, 3: 1_000, 6: 1}
    if precision in scale:
        micros = value * scale[precision]
    elif precision == 9:
        micros = value // 1_000
    else:
        raise CELEvalError(
            f"timestamp: unknown precision {precision}; expected 0 (seconds), "
            "3 (millis), 6 (micros) or 9 (nanos)"
        )
    return celtypes.TimestampType(_EPOCH + datetime.timedelta(microseconds=micros))


def to_string(value: Any) -> celtypes.StringType:
    """CEL `string()`: CEL spellings (`true`, RFC 3339 with fractions, plain decimals), not Python's."""
    if isinstance(value, celtypes.TimestampType):
        return celtypes.StringType(_format_timestamp(value))
    if isinstance(value, decimal.Decimal):
        # No negative zero, as Java's BigDecimal ("-0.00" renders "0.00").
        plain = abs(value) if not value and value.is_signed() else value
        return celtypes.StringType(format(plain, "f"))
    if isinstance(value, bool | celtypes.BoolType):
        return celtypes.StringType("true" if value else "false")
    if isinstance(value, bytes | bytearray):
        return celtypes.StringType(bytes(value).decode("utf-8"))
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, int | float | datetime.timedelta):
        return celtypes.StringType(str(value))
    raise CELEvalError(f"found no matching overload for 'string' applied to ({_type_name(value)})")


def _format_timestamp(value: datetime.datetime) -> str:
    """RFC 3339 in UTC with `Z`: no fraction when whole seconds, else 3 or 6 digits."""
    utc = value.astimezone(datetime.timezone.utc)
    text = f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    if utc.microsecond % 1000:
        text += f".{utc.microsecond:06d}"
    elif utc.microsecond:
        text += f".{utc.microsecond // 1000:03d}"
    return text + "Z"


def to_double(value: Any) -> celtypes.DoubleType:
    """CEL `double()`: also of a decimal; a bool or bytes has no overload (Python's float takes both)."""
    if isinstance(value, decimal.Decimal):
        return celtypes.DoubleType(float(value))
    if isinstance(value, bool | celtypes.BoolType | bytes | bytearray):
        raise CELEvalError(f"found no matching overload for 'double' applied to ({_type_name(value)})")
    return celtypes.DoubleType(value)


def _type_name(value: Any) -> str:
    """The CEL type name the reference's "no matching overload" messages use."""
    names: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (bool | celtypes.BoolType, "bool"),
        (celtypes.UintType, "uint"),
        (bytes | bytearray, "bytes"),
        (str, "string"),
        (int, "int"),
        (float, "double"),
        (list | tuple, "list"),
        (dict, "map"),
    )
    if value is None:
        return "null"
    return next((name for kind, name in names if isinstance(value, kind)), type(value).__name__)


def logical_and(x: Any, y: Any) -> Any:
    """CEL `&&`, with the reference's answers."""
    _require_a_boolean(x, y, "and")
    return celtypes.logical_and(x, y)


def logical_or(x: Any, y: Any) -> Any:
    """CEL `||`, with the reference's answers."""
    _require_a_boolean(x, y, "or")
    return celtypes.logical_or(x, y)


def _require_a_boolean(x: Any, y: Any, operator: str) -> None:
    # celpy's own check puts both operands' reprs in its TypeError, an error's repr holds the error
    # under it, and along a chain of failing `&&` terms building them took time doubling with each
    # term (the reference hangs on 30). The same TypeError, then a failure, without the reprs.
    if not isinstance(x, celtypes.BoolType) and not isinstance(y, celtypes.BoolType):
        raise TypeError(f"{operator} of {_type_name(x)} and {_type_name(y)}: neither is a boolean")


def matches(text: Any, pattern: Any) -> Any:
    """`matches()` as cel-python answers it, RE2's search, with each pattern compiled once per
    process and a pattern RE2 refuses failing the record with RE2's message, never logged per record."""
    import re2

    try:
        found = compiled(pattern).search(text)
    except re2.error as ex:
        return CELEvalError("match error", ex.__class__, ex.args)
    return celtypes.BoolType(found is not None)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isEmail": is_email,
    "isHostname": is_hostname,
    "isIpv4": is_ipv4,
    "isIpv6": is_ipv6,
    "isUri": is_uri,
    "isUriRef": is_uri_ref,
    "isUuid": is_uuid,
    "format": format_string,
    "matches": matches,
    "timestamp": timestamp,
    "string": to_string,
    "double": to_double,
    "_&&_": logical_and,
    "_||_": logical_or,
}
