"""Schema Registry base URLs: several comma-separated, with `user:password@` credentials taken out
so that no URL kept, logged or shown in an error ever holds them.

The userinfo runs to the last `@` after `scheme://`, so a password may hold `/`, `#`, `?`, `,`,
`:` or `@` unencoded (Confluent Cloud secrets can hold `/`); percent-escapes in it are decoded. A
`,` splits the list only where the next URL's `scheme://` follows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from contracts.errors import RegistryError

_NEXT_URL = re.compile(r",\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")
_BLANK_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def split_urls(url: str | Sequence[str]) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """Base URLs without trailing slashes or credentials, and the basic-auth credentials they carried
    (the same in every URL, else a ValueError); a ValueError never quotes a credential."""
    items = _NEXT_URL.split(url) if isinstance(url, str) else list(url)
    urls: list[str] = []
    credentials: set[tuple[str, str]] = set()
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"a schema registry URL is a string, not {type(item).__name__}")
        if not item.strip():
            continue
        base, userinfo = _base_url(item.strip())
        urls.append(base)
        if userinfo is not None:
            credentials.add(userinfo)
    if not urls:
        raise ValueError("no schema registry URL given")
    if len(credentials) > 1:
        raise ValueError(
            "the schema registry URLs carry different credentials; give them once, as basic_auth="
        )
    return tuple(urls), next(iter(credentials), None)


def _base_url(item: str) -> tuple[str, tuple[str, str] | None]:
    scheme, separator, rest = item.partition("://")
    userinfo, at, location = rest.rpartition("@")
    shown = f"{scheme}{separator}{'***@' if at else ''}{location}"  # what errors may quote
    if not separator or scheme.lower() not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {shown!r}")
    parts = urlsplit(f"{scheme.lower()}://{location}")
    try:
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number from 0 to 65535
    except ValueError as error:
        raise ValueError(f"not a valid schema registry URL: {shown!r}: {error}") from None
    if not parts.hostname or _BLANK_OR_CONTROL.search(location) or parts.query or parts.fragment:
        raise ValueError(
            f"not a valid schema registry URL: {shown!r} (a host, an optional port and path; no spaces,"
            " query or fragment; credentials with special characters can go in basic_auth=(user, password))"
        )
    base = urlunsplit(parts).rstrip("/")
    if not userinfo:
        return base, None
    user, _, password = userinfo.partition(":")
    try:
        return base, (unquote(user, errors="strict"), unquote(password, errors="strict"))
    except UnicodeDecodeError:
        raise ValueError(
            f"the credentials in {shown!r} do not percent-decode to UTF-8 text; give them as"
            " basic_auth=(user, password)"
        ) from None


def api_path(*segments: object) -> str:
    """An API path with each segment percent-encoded (subjects may contain '/', ':' or spaces); a
    segment `.` or `..` has its dots encoded too, as URL normalization would otherwise drop it
    (the subject "." would address /subjects/versions, the subject "versions")."""
    return "/" + "/".join(_segment(str(segment)) for segment in segments)


def _segment(text: str) -> str:
    try:
        encoded = quote(text, safe="")
    except UnicodeEncodeError as error:
        raise RegistryError(
            f"{text!r} cannot be sent to the registry: it is not Unicode text ({error})"
        ) from error
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded
