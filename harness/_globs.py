"""Path globs matched in time linear in the path: permission rules' paths and the ``find`` and
``grep`` tools' ``glob`` filters.

A pattern (``src/**``, ``**/*.py``, ``*.{js,ts}``) is translated to one RE2 expression, whose
matching time is linear in the path whatever the pattern holds: ``**/a*/**/a*/**/a*/b`` against
a deep path took wcmatch's backtracking ``re`` expression minutes, and a settings file (even an
untrusted project's deny rule) or the model (a tool's ``glob``) chooses the pattern. Braces are
expanded by ``bracex`` first, at most :data:`MAX_BRACE_EXPANSIONS` alternatives (``{a,b}`` twelve
times is 4,096), and a pattern is at most :data:`MAX_PATTERN_CHARS` long.

The language (gitignore-style ``**``, as Claude Code's rules; what wcmatch's ``GLOBSTAR |
DOTGLOB | BRACE`` matched):

- ``/`` separates folders; ``*`` is any text within one name, ``?`` one character of a name,
  ``[abc]``, ``[a-z]``, ``[!a]``/``[^a]`` and ``[[:alpha:]]`` one character of a name (never
  ``/``);
- ``**`` as a whole name is any number of folders: ``**/x`` is ``x`` at any depth, ``a/**/b``
  is ``a/b`` and ``a/x/y/b``, ``a/**`` everything beneath ``a`` (not ``a`` itself); elsewhere
  (``a**``) it is ``*``;
- names starting with ``.`` match like any other (``*`` matches ``.env``);
- ``{a,b}`` and ``{1..3}`` are alternatives; ``\\`` makes the next character literal;
- the pattern matches the whole path, case-sensitively.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import bracex
import re2

__all__ = [
    "MAX_BRACE_EXPANSIONS",
    "MAX_EXPANDED_CHARS",
    "MAX_PATTERN_CHARS",
    "Glob",
    "GlobError",
    "compile_glob",
    "expanded_chars",
]

MAX_BRACE_EXPANSIONS = 256
"""A pattern whose braces expand to more alternatives is refused (:class:`GlobError`)."""
MAX_PATTERN_CHARS = 4096
"""A longer pattern is refused (:class:`GlobError`)."""
MAX_EXPANDED_CHARS = 16_384
"""A pattern whose brace alternatives hold more characters in all is refused
(:class:`GlobError`): 256 alternatives of a 950-character pattern took RE2 0.6 s and 8 MB to
compile, and a settings file may hold a thousand such rules (review 12, finding 10)."""

# POSIX classes, as RE2 spells them, without "/" (punct, graph and print hold it: spelt out).
_PUNCT = "!\"#$%&'()*+,\\-.:;<=>?@\\[\\\\\\]^_`{|}~"
_CLASSES = {
    "alnum": "[:alnum:]",
    "alpha": "[:alpha:]",
    "blank": "[:blank:]",
    "cntrl": "[:cntrl:]",
    "digit": "[:digit:]",
    "lower": "[:lower:]",
    "space": "[:space:]",
    "upper": "[:upper:]",
    "word": "[:word:]",
    "xdigit": "[:xdigit:]",
    "punct": _PUNCT,
    "graph": "[:alnum:]" + _PUNCT,
    "print": "[:alnum:] " + _PUNCT,
}
_SLASH = ord("/")
_SURROGATE = re.compile("[\ud800-\udfff]")
_WILD = re.compile(r"(?<!\\)(?:\\\\)*[*?\[]")


def _unescaped(pattern: str) -> str:
    return re.sub(r"\\(.)", r"\1", pattern, flags=re.S)


class GlobError(ValueError):
    """A pattern that is too long, expands to too many alternatives, or RE2 refuses."""


class Glob:
    """A compiled pattern: :meth:`matches` a path (relative or absolute, ``/``-separated)."""

    __slots__ = ("_literals", "_regex", "pattern")

    def __init__(self, pattern: str, regex: Any, literals: frozenset[str]) -> None:
        self.pattern = pattern
        self._regex = regex  # a compiled RE2 expression (google-re2 ships no type hints)
        self._literals = literals  # the alternatives without wildcards, unescaped

    def matches(self, path: str) -> bool:
        """Whether the pattern matches all of ``path`` (one trailing ``/`` ignored). A name
        ``.`` or ``..`` is matched only by the same name written out, never by a wildcard."""
        if len(path) > 1 and path.endswith("/"):
            path = path[:-1]
        if any(name in (".", "..") for name in path.split("/")):
            return path in self._literals
        # a byte that is no UTF-8 (os.fsdecode makes it a lone surrogate) is one character
        # that no literal names: RE2 would match no wildcard over the raw byte
        text = _SURROGATE.sub("\ufffd", path)
        return self._regex.fullmatch(text.encode("utf-8")) is not None


def _class(pattern: str, start: int) -> tuple[str, int] | None:
    """The bracket expression starting at ``pattern[start] == "["`` as an RE2 class that never
    matches ``/``, and the index after it; None when it is not closed (a literal ``[``)."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    items: list[str] = []
    first = True
    while i < len(pattern):
        c = pattern[i]
        if c == "]" and not first:
            body = "".join(items)
            return ("[^/" + body + "]" if negate else "[" + body + "]"), i + 1
        first = False
        if c == "[" and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            name = pattern[i + 2 : end] if end >= 0 else ""
            if name in _CLASSES:
                items.append(_CLASSES[name])
                i = end + 2
                continue
        if c == "\\" and i + 1 < len(pattern):
            i += 1
            c = pattern[i]
        if c == "/":
            return None  # a "/" ends a name: no class spans it (wcmatch reads "[" literally)
        lo = hi = ord(c)
        if pattern[i + 1 : i + 2] == "-" and i + 2 < len(pattern) and pattern[i + 2] != "]":
            end_char = pattern[i + 2]
            if end_char == "\\" and i + 3 < len(pattern):
                end_char = pattern[i + 3]
                i += 1
            hi = ord(end_char)
            i += 2
        i += 1
        if hi < lo:
            continue  # an empty range matches nothing
        for a, b in ((lo, min(hi, _SLASH - 1)), (max(lo, _SLASH + 1), hi)):
            if a <= b:
                items.append(_escape_char(a) if a == b else _escape_char(a) + "-" + _escape_char(b))
    return None


def _escape_char(code: int) -> str:
    return f"\\x{{{code:x}}}"


def _name(part: str) -> str:
    """One name of the pattern (no ``/``) as RE2 text."""
    out: list[str] = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "\\" and i + 1 < len(part):
            out.append(_escape_char(ord(part[i + 1])))
            i += 2
            continue
        if c == "*":
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1  # a** is a*
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (found := _class(part, i)) is not None:
            out.append(found[0])
            i = found[1]
            continue
        else:
            out.append(_escape_char(ord(c)))
        i += 1
    return "".join(out)


def _translate(pattern: str) -> str:
    """One brace-free pattern as an RE2 expression over the whole path."""
    names = pattern.split("/")
    out = ""
    for index, name in enumerate(names):
        last = index == len(names) - 1
        if name == "**":
            if last:
                out += ".*" if index == 0 else ".+" if out.endswith("/") else "/.+"
            else:
                out += "(?:.*/)?"  # zero or more folders, each with its "/"
            continue
        out += _name(name) + ("" if last else "/")
    return out


MAX_BRACE_DEPTH = 8
"""Brace nesting a pattern may have (``{a,{b,{c}}}`` is 3)."""


def _brace_depth(pattern: str) -> int:
    depth = deepest = 0
    escaped = False
    for c in pattern:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif c == "}" and depth:
            depth -= 1
    return deepest


@functools.lru_cache(maxsize=1024)
def _expanded(pattern: str) -> list[str]:
    """``pattern``'s brace alternatives (bracex), at most :data:`MAX_BRACE_EXPANSIONS` of
    them and :data:`MAX_EXPANDED_CHARS` characters in all (counted as they are made).

    Raises:
        GlobError: past either cap, or braces nested too deep."""
    out: list[str] = []
    chars = 0
    try:
        for alternative in bracex.iexpand(pattern, keep_escapes=True, limit=MAX_BRACE_EXPANSIONS):
            chars += len(alternative)
            if chars > MAX_EXPANDED_CHARS:
                raise GlobError(
                    f"the pattern's braces expand to more than {MAX_EXPANDED_CHARS:,} characters"
                )
            out.append(alternative)
    except bracex.ExpansionLimitException:
        raise GlobError(
            f"the pattern's braces expand to more than {MAX_BRACE_EXPANSIONS} alternatives"
        ) from None
    except RecursionError:
        raise GlobError("the pattern's braces nest too deep") from None
    return out


def expanded_chars(pattern: str) -> int:
    """How many characters ``pattern``'s brace alternatives hold in all (what compiling it
    costs), without compiling it.

    Raises:
        GlobError: as :func:`compile_glob` for the length, nesting and expansion caps."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise GlobError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    if _brace_depth(pattern) > MAX_BRACE_DEPTH:
        raise GlobError(f"the pattern's braces nest deeper than {MAX_BRACE_DEPTH} levels")
    return sum(map(len, _expanded(pattern))) or len(pattern)


def compile_glob(pattern: str) -> Glob:
    """Compile ``pattern`` (see the module doc); cached.

    Raises:
        GlobError: the pattern is longer than :data:`MAX_PATTERN_CHARS`, its braces nest deeper
            than :data:`MAX_BRACE_DEPTH` or expand to more than :data:`MAX_BRACE_EXPANSIONS`
            alternatives or :data:`MAX_EXPANDED_CHARS` characters, or RE2 refuses it.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise GlobError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    if _brace_depth(pattern) > MAX_BRACE_DEPTH:
        # bracex recurses once per level before any cap applies: a 600-byte rule in a cloned
        # project's settings raised RecursionError (review 6, finding 23)
        raise GlobError(f"the pattern's braces nest deeper than {MAX_BRACE_DEPTH} levels")
    patterns = _expanded(pattern) or [pattern]
    alternatives = dict.fromkeys(_translate(p) for p in patterns)
    literals = frozenset(_unescaped(p) for p in patterns if not _WILD.search(p))
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    options.dot_nl = True  # a name may hold a newline
    try:
        regex = re2.compile(("(?:" + "|".join(alternatives) + ")").encode(), options)
    except re2.error as exc:
        raise GlobError(f"the pattern cannot be compiled: {exc}") from None
    return Glob(pattern, regex, literals)
