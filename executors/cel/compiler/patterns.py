"""`matches()` and the Confluent validators (isEmail, isHostname, isIpv4) as Java regular expressions.

Each native form gives exactly the reference's answer on every string: isEmail reproduces the
round trip through Python's `email.utils.parseaddr` the reference requires (atoms, quoted
strings, blanks between words, an all-whitespace last atom dropped before `.` or `@`), then its
hostname rules. The other validators (isIpv6's scoped and embedded forms, isUri/isUriRef's
`urlparse`, isUuid's `int(…, 16)` leniency) have no exact regex here and run in Python.
`matches()` patterns are RE2's, translated by `contracts.formats.regex` where Java matches them
alike, in linear time and with a bounded stack. The validators' own patterns recurse per
repetition of a group (labels, words) but only ever meet strings already checked to be short (at
most 254 characters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.formats.regex import NotInJava, java_form
from executors.cel.compiler.terms import CelType, Env, NotNativeCel, Term, Val, any_error, derived, error_term

if TYPE_CHECKING:
    from pyspark.sql import Column


def _ascii_class(members: str) -> str:
    """A Java character class listing each ASCII member: one bit-table lookup per character,
    where ranges (`A-Z`) are tested one after another."""
    return "[" + "".join("\\" + c if c in "\\^-[]&" else c for c in members) + "]"


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
# Java regex pieces. `\z` is the end of input: Java's `$` also matches before a final newline.
# A label: 1-63 letters, digits or hyphens, not starting or ending with a hyphen (possessive: a
# label never contains the dot that follows it). The last label must not be all digits: it holds
# a letter or hyphen after its leading digits (checked only there, so no backtracking over labels).
# A label starts with a letter or digit rather than behind a `(?!-)`: that lookahead made the
# whole address check about a third slower.
_LABEL_CHAR = _ascii_class(_LETTERS + _DIGITS + "-")
_LABEL = rf"{_ascii_class(_LETTERS + _DIGITS)}{_LABEL_CHAR}{{0,62}}+(?<!-)"
_LAST_LABEL_HAS_LETTER = rf"(?={_ascii_class(_DIGITS)}*{_ascii_class(_LETTERS + '-')})"
_HOSTNAME = rf"(?:{_LABEL}\.)*{_LAST_LABEL_HAS_LETTER}{_LABEL}\.?\z"
# Characters Python's str.strip() removes: an atom made only of them is dropped by parseaddr.
_PY_SPACE = r"\t\n\x0B\f\r\x1C-\x1F \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
_ATOM_CHAR = r'[^()<>@,:;."\[\] \t\r\n]'
_SOLID_CHAR = rf'[^()<>@,:;."\[\]{_PY_SPACE}]'
_QUOTED = r'"(?:[^"\\\r]|\\["\\])*"'
_WORD = rf"(?:{_ATOM_CHAR}|{_QUOTED})+"
# An atom character Python strips: the last word's final atom must not consist only of these.
_SPACE_ATOM_CHAR = r"[\x0B\f\x1C-\x1F\x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
_LAST_WORD = rf"(?:{_ATOM_CHAR}|{_QUOTED})*(?:{_QUOTED}|{_SOLID_CHAR}{_SPACE_ATOM_CHAR}*)"
_PHRASE = rf"(?:(?:{_WORD}[ \t]+)*{_LAST_WORD})?"
_LOCAL = rf"^{_PHRASE}(?:\.{_PHRASE})*\z"
_PLAIN_LOCAL_CHAR = _ascii_class(_LETTERS + _DIGITS + "!#$%&'*+/=?^_`{|}~.-")
_PLAIN_EMAIL = rf"^{_PLAIN_LOCAL_CHAR}*@{_HOSTNAME}"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = rf"^(?:{_OCTET}\.){{3}}{_OCTET}\z"

VALIDATORS = frozenset({"isEmail", "isHostname", "isIpv4", "isIpv6", "isUri", "isUriRef", "isUuid"})


def validator(name: str, operand: Term) -> Term:
    """A Confluent validator on a string; a null (or another type) fails, as in the reference."""
    check = {"isEmail": _is_email, "isHostname": _is_hostname, "isIpv4": _is_ipv4}.get(name)
    if check is None:
        raise NotNativeCel(f"{name} has no exact native form")
    if operand.type.kind != "string":
        if operand.type.kind in ("int", "double", "bool", "null"):
            return error_term()
        raise NotNativeCel(f"{name} on {operand.type.kind}")

    def emit(env: Env) -> Val:
        val = operand.emit(env)
        null_error = val.value.isNull() if operand.type.nullable else None
        return Val(check(val.value), any_error(val.error, null_error))

    # isEmail reads the string in a dozen places (its parts, their sizes, two regexes).
    fails = operand.fails or operand.type.nullable
    return derived(CelType("bool"), emit, [(operand, (11, 0, 1, 1))], fails=fails, depth=8)


def _is_hostname(s: Column) -> Column:
    from pyspark.sql import functions as F

    return F.when(_at_most(s, 253), s.rlike("^" + _HOSTNAME)).otherwise(False)


def _is_email(s: Column) -> Column:
    from pyspark.sql import functions as F

    local, domain = F.substring_index(s, "@", 1), F.substring_index(s, "@", -1)
    local_size, domain_size = F.char_length(local), F.char_length(domain)
    # Exactly one `@`: the text before the first and after the last then make up the rest.
    one_at = local_size + domain_size + 1 == F.char_length(s)
    sizes = one_at & (local_size <= 64) & (domain_size <= 253)
    general = F.when(sizes, domain.rlike("^" + _HOSTNAME) & local.rlike(_LOCAL)).otherwise(False)
    # Most addresses have a local part of plain atom characters and dots, which always survives
    # parseaddr: one regex decides those; the full grammar runs only for the rest. The total
    # size comes first so that no regex meets a long string.
    plain = (F.instr(s, "@") <= 65) & s.rlike(_PLAIN_EMAIL)
    return F.when(_at_most(s, 254), plain | general).otherwise(False)


def _at_most(s: Column, size: int) -> Column:
    """At most `size` characters: the byte count (constant time) decides for most strings."""
    from pyspark.sql import functions as F

    return (F.octet_length(s) <= size) | (F.char_length(s) <= size)


def _is_ipv4(s: Column) -> Column:
    return s.rlike(_IPV4)


def matches(receiver: Term, pattern: Term) -> Term:
    """`s.matches(re)`: RE2's search for a constant pattern, in Java where `java_form` gives one.

    Any other pattern (one Java could match differently, slowly or with an unbounded stack, or
    one RE2 refuses, which fails each record as in the reference) raises NotNativeCel: RE2 in
    Python decides it, and `explain()` says why.
    """
    if receiver.type.kind != "string" or pattern.type.kind != "string" or not pattern.is_constant:
        raise NotNativeCel("matches() needs a string and a constant pattern")
    try:
        java = java_form(str(pattern.constant))
    except NotInJava as e:
        raise NotNativeCel(f"matches() with {e}") from e

    def emit(env: Env) -> Val:
        val = receiver.emit(env)
        null_error = val.value.isNull() if receiver.type.nullable else None
        return Val(val.value.rlike(java), any_error(val.error, null_error))

    fails = receiver.fails or receiver.type.nullable
    return derived(CelType("bool"), emit, [(receiver, (1, 0, 1, 1))], fails=fails, depth=1)
