"""RE2 regular expressions, as every rule type and format matches them (docs/semantics.md §3.7):
CEL `matches()`, JSON Schema `pattern` and `patternProperties`, JSONata regexes.

RE2 decides in Python, in time linear in the text (`compiled`). In Spark, a pattern runs as a
java.util.regex (`java_form`) only where Java finds a match exactly when RE2 does, in time linear
in the text and with a stack the pattern bounds, never the text. java.util.regex backtracks: a
repetition followed by text it could also match (`.*.*=`, `\\d+\\d+x`) is tried every way the text
splits, polynomially or exponentially many; each start position of an unanchored search begins
again (`(a|b)*c` on 100,000 characters); and a repeated group of alternatives recurses once per
repetition, which overflows a task's stack on a few thousand characters. So a pattern is
translated only when, after the rewrites below, Java never needs to backtrack:

- Each choice is decided by the next character: a repetition's part and what may follow it start
  with disjoint characters, as do the alternatives of a group, none of them empty. Then the
  repetitions are possessive and the groups atomic (`a*+`, `(?>ab|c)`): the same matches, no
  backtracking, a loop per repetition instead of a recursion.
- One unbounded repetition of a single character in a pattern anchored at its start may be left
  greedy when the rest after it is decided by the next character and is at most MAX_WIDTH
  characters long (`^.*\\.csv$`): Java gives back a character at a time, each time trying that
  bounded rest.
- A search is anchored at the start (`^`, `\\A`), or it matches at most MAX_WIDTH characters from
  where it starts. Before that is judged, a repetition that begins an unanchored pattern is cut to
  its least count, and one that ends it likewise (`(a|b)*c$` searches as `c$`, `[0-9]+` as
  `[0-9]`): a match of the longer form contains a match of the shorter one, so `matches()`, which
  asks only whether there is one, answers the same.
- A group of single-character alternatives is one character class (`([A-Za-z0-9]|[-_])+` is
  `[A-Za-z0-9\\-_]+`), anchors sit only at the ends of the top-level alternatives, and the syntax
  is the part RE2 and Java read alike.

Everything else raises NotInJava with the reason, and the caller evaluates it with RE2 in Python.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from contracts.bounded import BoundedCache
from contracts.errors import DataContractError

__all__ = ["MAX_WIDTH", "NotInJava", "compiled", "java_form", "refusal"]

MAX_WIDTH = 256
"""The most characters one attempt of an unanchored pattern may match (each position of the text
may start one), and the longest rest after a greedy repetition (each character it gives back
tries it)."""
_MAX_NESTING = 50  # groups nested deeper are left to RE2 (Java compiles a pattern recursively)
_MAX_LENGTH = 4096  # longer patterns too
_MAX_CODE_POINT = 0x10FFFF


class NotInJava(DataContractError, ValueError):
    """The pattern has no java.util.regex form that is exact, linear and stack-bounded; says why."""


def compiled(pattern: str, *, case_insensitive: bool = False, multiline: bool = False) -> Any:
    """The RE2 pattern, compiled once per process; `re2.error` when RE2 refuses it (nothing logged:
    a pattern a contract holds is judged once per record, and its error belongs in the reason)."""
    key = (pattern, case_insensitive, multiline)
    found = _COMPILED.get(key)
    if found is None:
        import re2

        options = re2.Options()
        options.log_errors = False
        options.case_sensitive = not case_insensitive
        found = _COMPILED.put(key, re2.compile(f"(?m){pattern}" if multiline else pattern, options))
    return found


_COMPILED: BoundedCache[tuple[str, bool, bool], Any] = BoundedCache(1024)


def refusal(pattern: str) -> str | None:
    """Why RE2 refuses `pattern` (its own message), or None when it compiles."""
    import re2

    try:
        compiled(pattern)
    except re2.error as e:
        detail = e.args[0] if e.args else e
        return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
    return None


def java_form(pattern: str) -> str:
    """The java.util.regex whose `find` succeeds exactly where RE2's search of `pattern` does, in
    linear time and a bounded stack. Raises NotInJava with the reason when there is none (RE2
    refusing the pattern included)."""
    refused = refusal(pattern)
    if refused is not None:
        raise NotInJava(f"a pattern RE2 refuses ({refused})")
    if len(pattern) > _MAX_LENGTH:
        raise NotInJava(f"a pattern longer than {_MAX_LENGTH} characters")
    tree = _simplify(_Parser(pattern).parse())
    assert isinstance(tree, _Group)
    return "|".join(_alternative(sequence) for sequence in tree.alternatives)


# -- character sets: sorted, disjoint, non-adjacent ranges of code points -----------------------

Codes = tuple[tuple[int, int], ...]


def _normalized(ranges: Any) -> Codes:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def _union(*sets: Codes) -> Codes:
    return _normalized(itertools.chain.from_iterable(sets))


def _complement(codes: Codes) -> Codes:
    out, start = [], 0
    for low, high in codes:
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= _MAX_CODE_POINT:
        out.append((start, _MAX_CODE_POINT))
    return tuple(out)


def _overlap(one: Codes, other: Codes) -> bool:
    i = j = 0
    while i < len(one) and j < len(other):
        if one[i][1] < other[j][0]:
            i += 1
        elif other[j][1] < one[i][0]:
            j += 1
        else:
            return True
    return False


_NOTHING: Codes = ()
_DIGITS: Codes = ((48, 57),)
_WORD: Codes = ((48, 57), (65, 90), (95, 95), (97, 122))
_SPACE: Codes = ((9, 10), (12, 13), (32, 32))

# -- the pattern's tree ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Char:
    """One character: a literal, an escape class, a bracketed class or `.`, as a Java atom.

    `members` is the Java class body it stands for when it can join a union (a positive class of
    literals and ranges); `codes` the code points it matches.
    """

    java: str
    members: str | None
    codes: Codes


@dataclass(frozen=True)
class _Anchor:
    java: str
    start: bool


@dataclass(frozen=True)
class _Group:
    alternatives: tuple[tuple[_Node, ...], ...]
    text: str = ""


@dataclass(frozen=True)
class _Repeat:
    node: _Node
    low: int
    high: int | None
    lazy: bool
    text: str = ""


_Node = _Char | _Anchor | _Group | _Repeat


class _Parser:
    """Recursive descent over an RE2 pattern that RE2 itself has accepted."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.i = 0

    def parse(self) -> _Group:
        group = self.alternation(0)
        if self.i < len(self.pattern):
            raise NotInJava("an unbalanced parenthesis")
        return group

    def alternation(self, depth: int) -> _Group:
        start = self.i
        alternatives = [self.sequence(depth)]
        while self.peek("|"):
            self.i += 1
            alternatives.append(self.sequence(depth))
        return _Group(tuple(alternatives), self.pattern[start : self.i])

    def sequence(self, depth: int) -> tuple[_Node, ...]:
        items: list[_Node] = []
        while self.i < len(self.pattern) and self.pattern[self.i] not in "|)":
            start = self.i
            items.append(self.quantified(self.atom(depth), start))
        return tuple(items)

    def peek(self, text: str) -> bool:
        return self.pattern.startswith(text, self.i)

    def atom(self, depth: int) -> _Node:
        c = self.pattern[self.i]
        if c == "(":
            return self.group(depth)
        if c == "[":
            return self.char_class()
        if c == "\\":
            return self.escape()
        self.i += 1
        if c == ".":
            # RE2's `.` excludes only \n; Java's excludes \r, \u0085, \u2028 and \u2029 too.
            return _Char(r"[^\n]", None, _complement(((10, 10),)))
        if c == "^":
            return _Anchor("^", start=True)
        if c == "$":
            return _Anchor(
                r"\z", start=False
            )  # RE2's `$` is the end of the text; Java's also before a final \n
        if c in "*+?":
            raise NotInJava("a repetition operator without an operand")
        return _literal(c)

    def group(self, depth: int) -> _Group:
        if self.peek("(?") and not self.peek("(?:"):
            raise NotInJava("regex flags or named groups")
        if depth >= _MAX_NESTING:
            raise NotInJava("groups nested too deeply")
        start = self.i
        self.i += 3 if self.peek("(?:") else 1
        group = self.alternation(depth + 1)
        if not self.peek(")"):
            raise NotInJava("an unterminated group")
        self.i += 1
        return _Group(group.alternatives, self.pattern[start : self.i])

    def escape(self) -> _Node:
        if self.i + 1 >= len(self.pattern):
            raise NotInJava("a trailing backslash")
        c = self.pattern[self.i + 1]
        self.i += 2
        if c in _ANCHOR_ESCAPES:
            return _Anchor(_ANCHOR_ESCAPES[c], start=c == "A")
        if c in _CLASS_ESCAPES:
            members, codes = _CLASS_ESCAPES[c]
            return _Char(f"[{members}]", members, codes)
        if c in _NEGATED_ESCAPES:
            java, codes = _NEGATED_ESCAPES[c]
            return _Char(java, None, codes)
        if c in _CONTROL_CHARACTERS:
            return _literal(_CONTROL_CHARACTERS[c])
        if c in _PUNCTUATION:
            return _literal(c)
        raise NotInJava(f"the regex escape \\{c}")

    def char_class(self) -> _Char:
        """`[...]` of literals, ranges and \\d \\w \\s, read as RE2 reads it; Java's nested classes
        and && stay out. Every member is escaped, so classes can be joined into one."""
        body: list[str] = []
        codes: list[tuple[int, int]] = []
        self.i += 1
        negated = self.peek("^")
        if negated:
            self.i += 1
        first = True
        while self.i < len(self.pattern):
            if self.peek("]") and not first:
                self.i += 1
                members, matched = "".join(body), _normalized(codes)
                if negated:
                    return _Char(f"[^{members}]", None, _complement(matched))
                return _Char(f"[{members}]", members, matched)
            first = False
            if self.peek("[") or self.peek("&&"):
                raise NotInJava("a character class Java reads differently")
            low = self.class_member()
            if isinstance(low, tuple):
                body.append(low[0])
                codes.extend(low[1])
                continue
            # RE2: a single character, `-`, and anything but `]` make a range.
            if self.peek("-") and self.i + 1 < len(self.pattern) and self.pattern[self.i + 1] != "]":
                self.i += 1
                high = self.class_member()
                if isinstance(high, tuple):
                    raise NotInJava("a range ending in a class")
                body.append(f"{_literal(chr(low)).java}-{_literal(chr(high)).java}")
                codes.append((low, high))
            else:
                body.append(_literal(chr(low)).java)
                codes.append((low, low))
        raise NotInJava("an unterminated character class")

    def class_member(self) -> int | tuple[str, Codes]:
        """One member of a class: a character (its code point) or a class escape (its Java members
        and code points)."""
        c = self.pattern[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        if self.i + 1 >= len(self.pattern):
            raise NotInJava("a trailing backslash")
        escaped = self.pattern[self.i + 1]
        self.i += 2
        if escaped in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[escaped]
        if escaped in _CONTROL_CHARACTERS:
            return ord(_CONTROL_CHARACTERS[escaped])
        if escaped in _PUNCTUATION:
            return ord(escaped)
        raise NotInJava(f"the regex escape \\{escaped} in a class")

    def quantified(self, node: _Node, start: int) -> _Node:
        """The atom with the repetition operator after it, if any (RE2 refuses a second one)."""
        bounds = self.repetition()
        if bounds is None:
            return node
        if isinstance(node, _Anchor):
            raise NotInJava("a repeated anchor")
        low, high = bounds
        lazy = self.peek("?")
        if lazy:
            self.i += 1
        return _Repeat(node, low, high, lazy, self.pattern[start : self.i])

    def repetition(self) -> tuple[int, int | None] | None:
        if self.i >= len(self.pattern):
            return None
        c = self.pattern[self.i]
        simple = {"*": (0, None), "+": (1, None), "?": (0, 1)}
        if c in simple:
            self.i += 1
            return simple[c]
        if c != "{":
            return None
        close = self.pattern.find("}", self.i)
        counts = _repetition_counts(self.pattern[self.i + 1 : close]) if close > 0 else None
        if counts is not None:
            self.i = close + 1
        return counts


def _repetition_counts(text: str) -> tuple[int, int | None] | None:
    """The counts of `{n}`, `{n,}` or `{n,m}`; None for any other text, and then RE2 reads the
    brace as a literal (`a{,3}` matches "a{,3}")."""
    low, comma, high = text.partition(",")
    if not _digits(low) or (high and not _digits(high)):
        return None
    if not comma:
        return int(low), int(low)
    return int(low), int(high) if high else None


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _literal(c: str) -> _Char:
    """One character matched literally in Java, also inside a class and next to another class's
    members: punctuation escaped, code points beyond printable ASCII as \\x{...}."""
    if c.isascii() and (c.isalnum() or c in " _,:=<>!@#%~'\"`;/"):
        java = c
    elif c.isascii() and c.isprintable():
        java = "\\" + c
    else:
        java = f"\\x{{{ord(c):x}}}"
    return _Char(java, java, ((ord(c), ord(c)),))


_ANCHOR_ESCAPES = {"A": r"\A", "z": r"\z"}
_CLASS_ESCAPES: dict[str, tuple[str, Codes]] = {
    "d": ("0-9", _DIGITS),
    "w": ("0-9A-Za-z_", _WORD),
    "s": (r"\t\n\f\r ", _SPACE),
}
_NEGATED_ESCAPES: dict[str, tuple[str, Codes]] = {
    "D": ("[^0-9]", _complement(_DIGITS)),
    "W": ("[^0-9A-Za-z_]", _complement(_WORD)),
    "S": (r"[^\t\n\f\r ]", _complement(_SPACE)),
}
_CONTROL_CHARACTERS = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}
_PUNCTUATION = set("\\.+*?()|[]{}^$-/")


def _simplify(node: _Node) -> _Node:
    """The same pattern with every group of single-character alternatives under a repetition as one
    character class, and each group of one alternative outside a repetition spliced into its
    sequence; groups keep no captures for `matches()`."""
    if isinstance(node, _Group):
        alternatives = tuple(
            _flat(tuple(_simplify(item) for item in sequence)) for sequence in node.alternatives
        )
        return _Group(alternatives, node.text)
    if not isinstance(node, _Repeat):
        return node
    inner = _simplify(node.node)
    if isinstance(inner, _Group):
        inner = _single_character(inner) or inner
    return _Repeat(inner, node.low, node.high, node.lazy, node.text)


def _flat(sequence: tuple[_Node, ...]) -> tuple[_Node, ...]:
    out: list[_Node] = []
    for item in sequence:
        if isinstance(item, _Group) and len(item.alternatives) == 1:
            out.extend(item.alternatives[0])
        else:
            out.append(item)
    return tuple(out)


def _single_character(group: _Group) -> _Char | None:
    """The one character a group of one-character alternatives matches, when it is one."""
    if not all(len(sequence) == 1 and isinstance(sequence[0], _Char) for sequence in group.alternatives):
        return None
    chars = [sequence[0] for sequence in group.alternatives if isinstance(sequence[0], _Char)]
    if len(chars) == 1:
        return chars[0]
    members = [char.members for char in chars]
    if any(member is None for member in members):
        return None
    union = "".join(member for member in members if member is not None)
    return _Char(f"[{union}]", union, _union(*(char.codes for char in chars)))


# -- judging a top-level alternative -----------------------------------------------------------


def _alternative(sequence: tuple[_Node, ...]) -> str:
    """One top-level alternative's Java form, or NotInJava."""
    starts = bool(sequence) and isinstance(sequence[0], _Anchor) and sequence[0].start
    ends = bool(sequence) and isinstance(sequence[-1], _Anchor) and not sequence[-1].start
    core = sequence[1 if starts else 0 : len(sequence) - 1 if ends else len(sequence)]
    if any(_has_anchor(item) for item in core):
        raise NotInJava("an anchor inside the pattern")
    if not starts:
        core = _trimmed(core)
    if not ends:
        core = tuple(reversed(_trimmed(tuple(reversed(core)))))
    head = sequence[0].java if starts and isinstance(sequence[0], _Anchor) else ""
    tail = sequence[-1].java if ends and isinstance(sequence[-1], _Anchor) else ""
    if not starts:
        width = _width(core)
        if width is None or width > MAX_WIDTH:
            kind = "an unbounded repetition" if width is None else f"matches of up to {width} characters"
            raise NotInJava(
                f"a pattern with {kind} and no `^` (java.util.regex would try it from every position)"
            )
    problem = _problem(core, _NOTHING)
    if problem is None:
        return head + _sequence_java(core) + tail
    relaxed = _greedy_last(core) if starts else None
    if relaxed is None:
        raise NotInJava(f"a pattern java.util.regex may backtrack on without bound ({problem})")
    return head + relaxed + tail


def _has_anchor(node: _Node) -> bool:
    if isinstance(node, _Anchor):
        return True
    if isinstance(node, _Repeat):
        return _has_anchor(node.node)
    if isinstance(node, _Group):
        return any(_has_anchor(item) for sequence in node.alternatives for item in sequence)
    return False


def _trimmed(core: tuple[_Node, ...]) -> tuple[_Node, ...]:
    """An unanchored end of a search cut down: leading repetitions that may match nothing dropped,
    the first other one held to its least count (a match with more repetitions holds one with
    fewer, starting later)."""
    while core and isinstance(core[0], _Repeat):
        first = core[0]
        if first.low > 0:
            return (_Repeat(first.node, first.low, first.low, False, first.text), *core[1:])
        core = core[1:]
    return core


def _problem(sequence: tuple[_Node, ...], follow: Codes) -> str | None:
    """Why matching `sequence` (before text starting with `follow`) needs a choice the next
    character does not decide; None when every choice is so decided."""
    for i, item in enumerate(sequence):
        rest = sequence[i + 1 :]
        after = _union(_first(rest), follow) if _nullable(rest) else _first(rest)
        problem = _node_problem(item, after)
        if problem is not None:
            return problem
    return None


def _node_problem(node: _Node, follow: Codes) -> str | None:
    if isinstance(node, _Group):
        if len(node.alternatives) > 1:
            if any(_nullable(sequence) for sequence in node.alternatives):
                return f"`{node.text}` has an alternative that matches empty text"
            for one, other in itertools.combinations(node.alternatives, 2):
                if _overlap(_first(one), _first(other)):
                    return f"`{node.text}` has alternatives that can start with the same character"
        for sequence in node.alternatives:
            problem = _problem(sequence, follow)
            if problem is not None:
                return problem
        return None
    if isinstance(node, _Repeat):
        if _nullable((node.node,)):
            return f"`{node.text}` repeats a part that can match empty text"
        inner = _first((node.node,))
        if node.high != node.low and _overlap(inner, follow):
            return f"`{node.text}` is followed by text it can also match"
        return _node_problem(node.node, _union(inner, follow))
    return None


def _greedy_last(core: tuple[_Node, ...]) -> str | None:
    """The Java form of an anchored alternative whose last unbounded repetition is of one character
    and is followed by a bounded rest decided by each next character: that repetition greedy
    (giving back a character at a time), everything else possessive; None otherwise."""
    unbounded = [i for i, item in enumerate(core) if isinstance(item, _Repeat) and item.high is None]
    if not unbounded:
        return None
    i = unbounded[-1]
    last = core[i]
    assert isinstance(last, _Repeat)
    before, rest = core[:i], core[i + 1 :]
    width = _width(rest)
    if not isinstance(last.node, _Char) or last.low > 1 or width is None or width > MAX_WIDTH:
        return None
    if _problem(rest, _NOTHING) is not None or _problem(before, _first(core[i:])) is not None:
        return None
    return _sequence_java(before) + _java(last, possessive=False) + _sequence_java(rest)


def _first(sequence: tuple[_Node, ...]) -> Codes:
    """The characters a match of `sequence` can start with."""
    found: list[Codes] = []
    for item in sequence:
        found.append(_node_first(item))
        if not _nullable((item,)):
            break
    return _union(*found)


def _node_first(node: _Node) -> Codes:
    if isinstance(node, _Char):
        return node.codes
    if isinstance(node, _Repeat):
        return _NOTHING if node.high == 0 else _node_first(node.node)
    if isinstance(node, _Group):
        return _union(*(_first(sequence) for sequence in node.alternatives))
    return _NOTHING


def _nullable(sequence: tuple[_Node, ...]) -> bool:
    """Whether `sequence` can match empty text."""
    return all(_node_nullable(item) for item in sequence)


def _node_nullable(node: _Node) -> bool:
    if isinstance(node, _Char):
        return False
    if isinstance(node, _Repeat):
        return node.low == 0 or _node_nullable(node.node)
    if isinstance(node, _Group):
        return any(_nullable(sequence) for sequence in node.alternatives)
    return True


def _width(sequence: tuple[_Node, ...]) -> int | None:
    """The most characters `sequence` can match; None when unbounded."""
    total = 0
    for item in sequence:
        width = _node_width(item)
        if width is None:
            return None
        total += width
    return total


def _node_width(node: _Node) -> int | None:
    if isinstance(node, _Char):
        return 1
    if isinstance(node, _Repeat):
        if node.high == 0:
            return 0
        inner = _node_width(node.node)
        return None if node.high is None or inner is None else node.high * inner
    if isinstance(node, _Group):
        widths = [_width(sequence) for sequence in node.alternatives]
        return None if any(w is None for w in widths) else max(w for w in widths if w is not None)
    return 0


# -- Java text ---------------------------------------------------------------------------------


def _java(node: _Node, possessive: bool = True) -> str:
    """`node` in Java: repetitions possessive and groups of alternatives atomic, unless
    `possessive` is off for this repetition (its parts inside stay so)."""
    if isinstance(node, _Char | _Anchor):
        return node.java
    if isinstance(node, _Group):
        opening = "(?>" if len(node.alternatives) > 1 else "(?:"
        return opening + "|".join(_sequence_java(sequence) for sequence in node.alternatives) + ")"
    operand = _java(node.node)
    if not isinstance(node.node, _Char | _Group):
        operand = f"(?:{operand})"
    if node.low == node.high:
        return operand if node.low == 1 else f"{operand}{{{node.low}}}"
    if (node.low, node.high) == (0, None):
        quantifier = "*"
    elif (node.low, node.high) == (1, None):
        quantifier = "+"
    elif (node.low, node.high) == (0, 1):
        quantifier = "?"
    elif node.high is None:
        quantifier = f"{{{node.low},}}"
    else:
        quantifier = f"{{{node.low},{node.high}}}"
    if possessive:
        return operand + quantifier + "+"
    return operand + quantifier + ("?" if node.lazy else "")


def _sequence_java(sequence: tuple[_Node, ...]) -> str:
    return "".join(_java(item) for item in sequence)
