"""RE2 patterns (CEL `matches()`) as java.util.regex patterns with the same matches and a bounded stack.

java.util.regex backtracks by recursion: each node of a pattern calls the next one, and each
repetition of a group whose body can match texts of different lengths (an alternation, a quantifier,
a character that may be one or two UTF-16 units) is one more level. `^([A-Za-z0-9]|[-_])+$` on a
few thousand characters overflows a task thread's stack, and the JVM error takes the SparkContext
down. A pattern is therefore translated only when the recursion it can reach is bounded by the
pattern itself, never by the input:

- a quantifier on one character (`[a-z]*`, `a+?`, `.{2,5}`) is a loop in Java;
- a group repeated without bound must have a body of fixed width in UTF-16 units with no
  alternation (`(?:ab)*`, `(?:[0-9]{3}-)+`): Java repeats those in a loop too;
- a group repeated a bounded number of times costs that many levels, counted below;
- a repeated group whose alternatives are single characters is rewritten as one character class
  (`([A-Za-z0-9]|[-_])+` → `[A-Za-z0-9\\-_]+`): `matches()` only asks whether there is a match, so
  which alternative matched, or what a group captured, plays no part.

Everything else raises NotNativeCel and the rule runs with cel-python, which matches with RE2 in
linear time, as the reference does. The translation covers the syntax RE2 and Java read alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from executors.cel._native_types import NotNativeCel

__all__ = ["MAX_FRAMES", "translate_re2"]

# An upper bound on the recursion a translated pattern may reach, in Java stack frames (estimated
# generously: one per pattern character, plus each bounded repetition of a group in full). A task
# thread's default 1 MB stack held about 8,000 such frames in interpreted code; this keeps a wide
# margin for frame sizes and for the frames Spark itself has below the regex.
MAX_FRAMES = 1000
# Groups nested deeper than this are left to RE2 (Java compiles a pattern recursively, too).
_MAX_NESTING = 50
_ITERATION_FRAMES = 4  # a Loop iteration's own frames: Loop, GroupHead, GroupTail, Prolog


@dataclass(frozen=True)
class _Char:
    """One character: a literal, an escape class, a bracketed class or `.`, as a Java atom.

    `members` is the Java class body it stands for when it can join a union (a positive class of
    literals and ranges); `fixed` says it always matches one UTF-16 unit (no supplementary code point).
    """

    java: str
    members: str | None
    fixed: bool


@dataclass(frozen=True)
class _Anchor:
    java: str


@dataclass(frozen=True)
class _Group:
    alternatives: tuple[tuple[_Node, ...], ...]


@dataclass(frozen=True)
class _Repeat:
    node: _Node
    low: int
    high: int | None
    lazy: bool


_Node = _Char | _Anchor | _Group | _Repeat


def translate_re2(pattern: str) -> str:
    """The Java regex with the same matches as the RE2 `pattern` and a stack bounded by MAX_FRAMES.

    Raises NotNativeCel outside the common syntax, or when Java's recursion could grow with the input.
    """
    tree = _simplify(_Parser(pattern).parse())
    frames = _frames(tree)
    if frames is None:
        raise NotNativeCel("a repeated group Java would match by recursing once per repetition")
    if frames > MAX_FRAMES:
        raise NotNativeCel(f"a pattern Java may recurse about {frames} levels deep into")
    return "|".join(_sequence_java(sequence) for sequence in tree.alternatives)


class _Parser:
    """Recursive descent over an RE2 pattern that RE2 itself has accepted."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.i = 0

    def parse(self) -> _Group:
        group = self.alternation(0)
        if self.i < len(self.pattern):
            raise NotNativeCel("an unbalanced parenthesis")
        return group

    def alternation(self, depth: int) -> _Group:
        alternatives = [self.sequence(depth)]
        while self.peek("|"):
            self.i += 1
            alternatives.append(self.sequence(depth))
        return _Group(tuple(alternatives))

    def sequence(self, depth: int) -> tuple[_Node, ...]:
        items: list[_Node] = []
        while self.i < len(self.pattern) and self.pattern[self.i] not in "|)":
            items.append(self.quantified(self.atom(depth)))
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
            return _Char(r"[^\n]", None, False)
        if c == "^":
            return _Anchor("^")
        if c == "$":
            return _Anchor(r"\z")  # RE2's `$` is the end of the text; Java's also matches before a final \n
        if c in "*+?":
            raise NotNativeCel("a repetition operator without an operand")
        return _literal(c)

    def group(self, depth: int) -> _Group:
        if self.peek("(?") and not self.peek("(?:"):
            raise NotNativeCel("regex flags or named groups")
        if depth >= _MAX_NESTING:
            raise NotNativeCel("groups nested too deeply")
        self.i += 3 if self.peek("(?:") else 1
        group = self.alternation(depth + 1)
        if not self.peek(")"):
            raise NotNativeCel("an unterminated group")
        self.i += 1
        return group

    def escape(self) -> _Node:
        if self.i + 1 >= len(self.pattern):
            raise NotNativeCel("a trailing backslash")
        c = self.pattern[self.i + 1]
        self.i += 2
        if c in _ANCHOR_ESCAPES:
            return _Anchor(_ANCHOR_ESCAPES[c])
        if c in _CLASS_ESCAPES:
            members = _CLASS_ESCAPES[c]
            return _Char(f"[{members}]", members, True)
        if c in _NEGATED_ESCAPES:
            return _Char(_NEGATED_ESCAPES[c], None, False)
        if c in _CONTROL_CHARACTERS:
            return _literal(_CONTROL_CHARACTERS[c])
        if c in _PUNCTUATION:
            return _literal(c)
        raise NotNativeCel(f"the regex escape \\{c}")

    def char_class(self) -> _Char:
        """`[...]` of literals, ranges and \\d \\w \\s, read as RE2 reads it; Java's nested classes
        and && stay out. Every member is escaped, so classes can be joined into one."""
        body: list[str] = []
        fixed = True
        self.i += 1
        negated = self.peek("^")
        if negated:
            self.i += 1
        first = True
        while self.i < len(self.pattern):
            if self.peek("]") and not first:
                self.i += 1
                members = "".join(body)
                if negated:
                    return _Char(f"[^{members}]", None, False)
                return _Char(f"[{members}]", members, fixed)
            first = False
            if self.peek("[") or self.peek("&&"):
                raise NotNativeCel("a character class Java reads differently")
            low = self.class_member()
            if isinstance(low, str):
                body.append(low)
                continue
            # RE2: a single character, `-`, and anything but `]` make a range.
            if self.peek("-") and self.i + 1 < len(self.pattern) and self.pattern[self.i + 1] != "]":
                self.i += 1
                high = self.class_member()
                if isinstance(high, str):
                    raise NotNativeCel("a range ending in a class")
                fixed = fixed and high <= 0xFFFF
                body.append(f"{_literal(chr(low)).java}-{_literal(chr(high)).java}")
            else:
                fixed = fixed and low <= 0xFFFF
                body.append(_literal(chr(low)).java)
        raise NotNativeCel("an unterminated character class")

    def class_member(self) -> int | str:
        """One member of a class: a character (its code point) or a class escape (its Java members)."""
        c = self.pattern[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        if self.i + 1 >= len(self.pattern):
            raise NotNativeCel("a trailing backslash")
        escaped = self.pattern[self.i + 1]
        self.i += 2
        if escaped in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[escaped]
        if escaped in _CONTROL_CHARACTERS:
            return ord(_CONTROL_CHARACTERS[escaped])
        if escaped in _PUNCTUATION:
            return ord(escaped)
        raise NotNativeCel(f"the regex escape \\{escaped} in a class")

    def quantified(self, node: _Node) -> _Node:
        """The atom with the repetition operator after it, if any (RE2 refuses a second one)."""
        bounds = self.repetition()
        if bounds is None:
            return node
        if isinstance(node, _Anchor):
            raise NotNativeCel("a repeated anchor")
        low, high = bounds
        lazy = self.peek("?")
        if lazy:
            self.i += 1
        return _Repeat(node, low, high, lazy)

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
    return _Char(java, java, ord(c) <= 0xFFFF)


_ANCHOR_ESCAPES = {"A": r"\A", "z": r"\z"}
_CLASS_ESCAPES = {"d": "0-9", "w": "0-9A-Za-z_", "s": r"\t\n\f\r "}
_NEGATED_ESCAPES = {"D": "[^0-9]", "W": "[^0-9A-Za-z_]", "S": r"[^\t\n\f\r ]"}
_CONTROL_CHARACTERS = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}
_PUNCTUATION = set("\\.+*?()|[]{}^$-/")


def _simplify(node: _Node) -> _Node:
    """The same pattern with every group of single-character alternatives under a repetition as one
    character class, and single-item groups unwrapped; groups keep no captures for `matches()`."""
    if isinstance(node, _Group):
        alternatives = tuple(tuple(_simplify(item) for item in sequence) for sequence in node.alternatives)
        return _Group(alternatives)
    if not isinstance(node, _Repeat):
        return node
    inner = _simplify(node.node)
    if isinstance(inner, _Group):
        inner = _single_character(inner) or inner
    return _Repeat(inner, node.low, node.high, node.lazy)


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
    return _Char(f"[{union}]", union, all(char.fixed for char in chars))


def _frames(node: _Node | tuple[_Node, ...]) -> int | None:
    """A generous bound on the Java stack frames matching `node` can take; None when it grows with
    the input."""
    if isinstance(node, tuple):
        total = 0
        for item in node:
            frames = _frames(item)
            if frames is None:
                return None
            total += frames
        return total
    if isinstance(node, _Char):
        return len(node.java)
    if isinstance(node, _Anchor):
        return 1
    if isinstance(node, _Group):
        costs = [_frames(sequence) for sequence in node.alternatives]
        if any(cost is None for cost in costs):
            return None
        return max(cost for cost in costs if cost is not None) + 3
    body = _frames(node.node)
    if body is None:
        return None
    if isinstance(node.node, _Char):
        # One character repeated is a loop, except that greedy counted repetition recurses where
        # consecutive characters differ in width (one or two UTF-16 units).
        if node.node.fixed or node.lazy or node.high is None:
            return body + 1
        return node.high * 2 + body
    if _fixed_width(node.node):
        return body + _ITERATION_FRAMES
    if node.high is None:
        return None
    return node.high * (body + _ITERATION_FRAMES) + 1


def _fixed_width(node: _Node | tuple[_Node, ...]) -> bool:
    """Whether `node` always matches the same number of UTF-16 units without choosing between
    alternatives (java.util.regex's deterministic groups, which it repeats without recursion)."""
    if isinstance(node, tuple):
        return all(_fixed_width(item) for item in node)
    if isinstance(node, _Char):
        return node.fixed
    if isinstance(node, _Group):
        return len(node.alternatives) == 1 and _fixed_width(node.alternatives[0])
    if isinstance(node, _Repeat):
        return node.low == node.high and _fixed_width(node.node)
    return False


def _java(node: _Node) -> str:
    if isinstance(node, _Char | _Anchor):
        return node.java
    if isinstance(node, _Group):
        return "(?:" + "|".join(_sequence_java(sequence) for sequence in node.alternatives) + ")"
    operand = _java(node.node)
    if not isinstance(node.node, _Char | _Group):
        operand = f"(?:{operand})"
    if (node.low, node.high) == (0, None):
        quantifier = "*"
    elif (node.low, node.high) == (1, None):
        quantifier = "+"
    elif (node.low, node.high) == (0, 1):
        quantifier = "?"
    elif node.high is None:
        quantifier = f"{{{node.low},}}"
    elif node.low == node.high:
        quantifier = f"{{{node.low}}}"
    else:
        quantifier = f"{{{node.low},{node.high}}}"
    return operand + quantifier + ("?" if node.lazy else "")


def _sequence_java(sequence: tuple[_Node, ...]) -> str:
    return "".join(_java(item) for item in sequence)
