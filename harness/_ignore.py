"""Compiling a ``.gitignore`` (skill discovery, and the ``find`` and ``grep`` tools' walk), with
bounds, so that a project's ignore file can never crash or stall the harness.

``pathspec`` builds one RE2 ``Set`` of a file's patterns; RE2 refuses a set past its memory
budget (one 40 KB line of ``*a*a...``, or 5,000 ordinary lines) with ``re2.error``, and
``pathspec`` raises on a pattern it rejects (``foo\\``, ``!``, ``[z-a]``). A file that cannot be
used is never an exception: :func:`compile_ignore` raises :class:`IgnoreFileError`, whose text
says why, and the caller reports the file by name (a diagnostic, or a note) and goes on without
it. A file is used whole or not at all: one past a bound is not cut to its first patterns (a
later ``!negation`` dropped would change what the earlier ones mean).

The bounds keep the cost of one file under a second, and of one walk's under about 15 s: at
most :data:`MAX_IGNORE_BYTES` bytes, :data:`MAX_IGNORE_PATTERNS` patterns and
:data:`MAX_IGNORE_PATTERN_CHARS` characters in one pattern (a single 1 MB line took
``pathspec`` 80 s to compile), and :data:`MAX_IGNORE_BYTES_PER_WALK` bytes of them in one walk.
Real ignore files are far smaller (GitHub's templates are a few KB and a few hundred
patterns at most)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

__all__ = [
    "MAX_IGNORE_BYTES",
    "MAX_IGNORE_BYTES_PER_WALK",
    "MAX_IGNORE_PATTERNS",
    "MAX_IGNORE_PATTERN_CHARS",
    "IgnoreFileError",
    "compile_ignore",
]

MAX_IGNORE_BYTES = 64 * 1024
"""A larger ignore file is not read (callers pass this to their capped read)."""
MAX_IGNORE_PATTERNS = 1000
"""An ignore file with more patterns (lines that are neither blank nor comments) is not used."""
MAX_IGNORE_PATTERN_CHARS = 1024
"""An ignore file with a longer pattern is not used (a real one is far shorter)."""
MAX_IGNORE_BYTES_PER_WALK = 1_000_000
"""The ignore files one walk (a ``find`` or ``grep`` call, the scan of one skills root)
compiles, together at most this many bytes: past it, a further one is not used (and named),
so that a tree of many large ignore files cannot stall a search or the harness's start for
minutes (each costs up to a second to compile)."""


class IgnoreFileError(ValueError):
    """An ignore file that is not used; ``str()`` says why, without quoting the file."""


def compile_ignore(text: str) -> pathspec.GitIgnoreSpec:
    """The patterns of an ignore file's ``text`` (git's rules: negations, folder-only patterns).

    Raises:
        IgnoreFileError: more than :data:`MAX_IGNORE_PATTERNS` patterns, one longer than
            :data:`MAX_IGNORE_PATTERN_CHARS`, or patterns that cannot be compiled.
    """
    lines = text.splitlines()
    patterns = [line for line in lines if line.strip() and not line.startswith("#")]
    if len(patterns) > MAX_IGNORE_PATTERNS:
        raise IgnoreFileError(f"it has {len(patterns)} patterns, more than {MAX_IGNORE_PATTERNS}")
    if any(len(line) > MAX_IGNORE_PATTERN_CHARS for line in patterns):
        raise IgnoreFileError(f"a pattern is longer than {MAX_IGNORE_PATTERN_CHARS} characters")
    import pathspec  # here: `import harness` stays fast (issue 24)

    try:
        with warnings.catch_warnings():
            # Python's `re` warns of a "possible nested set" (`[[x]]`) on stderr, where the
            # terminal interface draws: the file's text decides nothing printed there.
            warnings.simplefilter("ignore")
            return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception as exc:  # re2.error, pathspec's pattern errors, re.error, or whatever else
        # The exception's text may quote a pattern (the file's own text): it is not shown.
        what = (
            "RE2 refuses them: too many, too large, or one it cannot read"
            if type(exc).__module__.startswith("re2")
            else "a pattern is invalid"
        )
        raise IgnoreFileError(f"its patterns cannot be compiled ({what})") from None
