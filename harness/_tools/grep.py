"""The built-in ``grep`` tool: lines matching a regular expression, ``.gitignore`` respected.

Patterns run on RE2 (``google-re2``), whose matching time is linear in the text searched:
a pattern such as ``(a+)+$``, which makes a backtracking engine (Python's ``re``) run for
ever on a line of ``a``s, costs here what any other pattern costs.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import re2
from attrs import define, field

from hooks import JSONValue

from .._errors import ToolError
from .._fs import FileRefusedError, open_regular, open_regular_at
from .._globs import Glob, GlobError, compile_glob
from ._files import locate, tool_error
from ._walk import too_deep_note, unused_ignores_note, walk
from .base import Tool, ToolResult, ToolRun, safe_text

__all__ = ["grep_tool"]

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Regular expression, RE2 syntax (no backreferences or lookaround)",
        },
        "path": {"type": "string", "description": "File or folder to search (default: the cwd)"},
        "glob": {"type": "string", "description": "Only files matching this glob, e.g. '*.py'"},
        "ignoreCase": {"type": "boolean", "description": "Case-insensitive search"},
        "literal": {"type": "boolean", "description": "Treat pattern as plain text"},
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": 20,
            "description": "Lines around each match (at most 20)",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "description": "Most matches (default 100, at most 1000)",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

_MAX_FILE_BYTES = 10_000_000  # larger files are skipped (logs, data), and counted
_MAX_LINE_CHARS = 500  # a longer matching line is shown cut
_BINARY_SNIFF = 8192
_CHECK_EVERY = 1024  # lines searched between two looks at the clock
_RE2_UNSUPPORTED = (
    "RE2 syntax has no backreferences (\\1), lookahead or lookbehind ((?=...), (?!...), "
    "(?<=...)), possessive or atomic groups (a++, (?>...)), \\Z (use \\z or $) or "
    "repetition counts over 1000; rewrite the pattern without them, or set literal=true"
)


@define
class _Found:
    lines: list[str] = field(factory=list)
    matches: int = 0
    files: int = 0
    skipped: int = 0
    hidden: int = 0
    truncated: bool = False
    timed_out: bool = False
    too_deep: list[str] = field(factory=list)  # folders not entered: nested too deep
    unused_ignores: list[str] = field(factory=list)  # .gitignore files not used, and why


@define
class _Search:
    """One call's pattern and bounds, shared by the files it searches."""

    regex: Any  # a compiled RE2 pattern (google-re2 ships no type hints)
    context: int
    limit: int
    deadline: float  # time.monotonic() at which the search stops
    stop: threading.Event  # set when the call is cancelled

    def over(self, found: _Found) -> bool:
        if self.stop.is_set() or time.monotonic() > self.deadline:
            found.timed_out = True
        return found.timed_out


def _compile(pattern: str, *, literal: bool, ignore_case: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    options.literal = literal
    options.case_sensitive = not ignore_case
    options.never_capture = True  # groups are never read; this keeps matching cheap
    try:
        return re2.compile(pattern.encode("utf-8", "surrogateescape"), options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        shown = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise ToolError(
            f"invalid regular expression {safe_text(pattern)!r}: {shown}. {_RE2_UNSUPPORTED}"
        ) from None
    except UnicodeEncodeError:
        raise ToolError("the pattern holds a character that is not text") from None


def grep_tool(*, default_limit: int = 100, timeout_s: float = 30.0) -> Tool:
    """A ``grep`` tool with pi's name and parameters (``pattern``, ``path``, ``glob``,
    ``ignoreCase``, ``literal``, ``context``, ``limit``).

    Patterns are RE2 syntax, matched in linear time (no backreferences or lookaround: a
    pattern RE2 refuses is an error saying what it lacks). Searches one file, or every file
    under a folder except ``.git``, what a ``.gitignore`` excludes, and files skipped and
    counted: binary ones (a NUL byte in the first 8 KiB), ones over 10 MB, and anything that
    is no regular file (symlinks, never followed; FIFOs, devices, sockets, never opened for
    reading). Lines end at ``\\n`` (a ``\\r`` before it is dropped), numbered as ``read``
    numbers them. Output lines are ``path:line: text`` for matches and ``path-line- text`` for
    context, paths relative to the working directory; long lines are cut at 500 characters.
    At most ``limit`` matches, with a note when more were found. ``details`` is
    ``{"matches", "files", "truncated", "skippedFiles", "hiddenFiles", "timedOut"}``;
    files the supervisor keeps from being read (``ToolRun.hidden``) are not searched, and
    counted in ``hiddenFiles``. Folders more than ``MAX_DEPTH`` (128) levels below ``path``
    are not entered: a note names the first, and ``details`` counts them in ``tooDeep``. A
    ``.gitignore`` that cannot be used (too large, too many patterns, or patterns that cannot
    be compiled) is never an error: the search goes on without it, a note names it, and
    ``details`` counts them in ``unusedIgnores``.

    Args:
        default_limit: most matches when the call gives no ``limit``.
        timeout_s: the search stops after this many seconds (checked between files and every
            1024 lines) and returns what it found, with a note saying so.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        text = str(input["pattern"])
        regex = _compile(
            text, literal=bool(input.get("literal")), ignore_case=bool(input.get("ignoreCase"))
        )
        path = str(input.get("path") or ".")
        limit = int(input.get("limit") or default_limit)
        file_glob = None if input.get("glob") is None else _compile_glob(str(input["glob"]))
        search = _Search(
            regex=regex,
            context=int(input.get("context") or 0),
            limit=limit,
            deadline=time.monotonic() + timeout_s,
            stop=threading.Event(),
        )
        try:
            found = await asyncio.to_thread(_grep, run, path, search, file_glob)
        except OSError as exc:
            raise tool_error("search", safe_text(path), exc) from None
        finally:
            search.stop.set()  # a cancelled call's thread stops at its next check
        out = "\n".join(found.lines) or "No matches found"
        if found.truncated:
            out += f"\n[more than {limit} matches; narrow the search or raise limit]"
        if found.hidden:
            out += (
                f"\n[{found.hidden} files not searched: permission rules keep them from being read]"
            )
        if found.too_deep:
            out += "\n" + too_deep_note(found.too_deep, "searched")
        if found.unused_ignores:
            out += "\n" + unused_ignores_note(found.unused_ignores, "searched")
        if found.timed_out:
            out += (
                f"\n[search stopped after {timeout_s:g} s; these are the matches found so far:"
                " narrow the path or the glob]"
            )
        details: dict[str, JSONValue] = {
            "matches": found.matches,
            "files": found.files,
            "truncated": found.truncated,
            "skippedFiles": found.skipped,
            "hiddenFiles": found.hidden,
            "timedOut": found.timed_out,
        }
        if found.too_deep:
            details["tooDeep"] = len(found.too_deep)
        if found.unused_ignores:
            details["unusedIgnores"] = len(found.unused_ignores)
        return ToolResult(content=out, details=details)

    return Tool(
        name="grep",
        description=(
            "Search file contents with a regular expression (RE2 syntax; respects .gitignore); "
            "returns path:line: text."
        ),
        parameters=_PARAMETERS,
        execute=execute,
        kind="read",
        target="path",
    )


def _grep(run: ToolRun, path: str, search: _Search, file_glob: Glob | None) -> _Found:
    found = _Found()
    start = locate(run, path)
    try:
        fd, _ = open_regular(start)
    except FileRefusedError as exc:
        if exc.errno != errno.EISDIR:
            raise
    else:
        with os.fdopen(fd, "rb") as f:
            _search(f.read(_MAX_FILE_BYTES + 1), path, search, found)
        return found
    base = "" if path in ("", ".") else path.rstrip("/") + "/"
    for item in walk(start, found.too_deep, found.unused_ignores):
        if search.over(found):
            break
        if item.is_dir or (file_glob is not None and not _glob_hit(item.rel, item.name, file_glob)):
            continue
        if run.hidden is not None and run.hidden(item.rel):  # a deny/ask read rule's file
            found.hidden += 1
            continue
        try:
            file_fd, st = open_regular_at(item.dir_fd, item.name, item.rel)
        except OSError:  # a symlink, FIFO, device or socket; a file gone meanwhile
            found.skipped += 1
            continue
        with os.fdopen(file_fd, "rb") as f:
            if st.st_size > _MAX_FILE_BYTES:
                found.skipped += 1
                continue
            _search(f.read(_MAX_FILE_BYTES + 1), base + item.rel, search, found)
        if found.truncated or found.timed_out:
            break
    return found


def _compile_glob(pattern: str) -> Glob:
    try:
        return compile_glob(pattern)
    except GlobError as exc:
        raise ToolError(f"invalid glob {safe_text(pattern)!r}: {exc}") from None


def _glob_hit(rel: str, name: str, glob: Glob) -> bool:
    return glob.matches(rel if "/" in glob.pattern else name)


def _search(data: bytes, shown: str, search: _Search, found: _Found) -> None:
    if len(data) > _MAX_FILE_BYTES or b"\0" in data[:_BINARY_SNIFF]:
        found.skipped += 1
        return
    raw = data.split(b"\n")
    if raw[-1] == b"":  # the newline ending the last line starts no line of its own
        raw.pop()
    lines = [line.removesuffix(b"\r") for line in raw]
    hits: list[int] = []
    for i, line in enumerate(lines):
        if i % _CHECK_EVERY == 0 and search.over(found):
            break
        if search.regex.search(line) is not None:
            hits.append(i)
    if not hits:
        return
    found.files += 1
    hit_set = set(hits)
    name = safe_text(shown)
    printed = -1  # the last line index written, so context windows do not repeat lines
    context = search.context
    for i in hits:
        if found.matches == search.limit:
            found.truncated = True
            return
        found.matches += 1
        for j in range(max(i - context, printed + 1), min(i + context, len(lines) - 1) + 1):
            sep = ":" if j in hit_set else "-"
            found.lines.append(f"{name}{sep}{j + 1}{sep} {_cut(lines[j])}")
            printed = j


def _cut(raw: bytes) -> str:
    line = raw.decode("utf-8", "replace")
    return line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + " [line cut]"
