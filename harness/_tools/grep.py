"""The built-in ``grep`` tool: lines matching a regular expression, ``.gitignore`` respected."""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Mapping

from attrs import define, field
from wcmatch import fnmatch, glob

from hooks import JSONValue

from .._errors import ToolError
from ._fs import open_file
from ._walk import walk
from .base import Tool, ToolResult, ToolRun, safe_text

__all__ = ["grep_tool"]

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Regular expression (Python syntax)"},
        "path": {"type": "string", "description": "File or folder to search (default: the cwd)"},
        "glob": {"type": "string", "description": "Only files matching this glob, e.g. '*.py'"},
        "ignoreCase": {"type": "boolean", "description": "Case-insensitive search"},
        "literal": {"type": "boolean", "description": "Treat pattern as plain text"},
        "context": {"type": "integer", "minimum": 0, "description": "Lines around each match"},
        "limit": {"type": "integer", "minimum": 1, "description": "Most matches (default 100)"},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

_MAX_FILE_BYTES = 10_000_000  # larger files are skipped (logs, data), and counted
_MAX_LINE_CHARS = 500  # a longer matching line is shown cut
_BINARY_SNIFF = 8192


@define
class _Found:
    lines: list[str] = field(factory=list)
    matches: int = 0
    files: int = 0
    skipped: int = 0
    truncated: bool = False


def grep_tool(*, default_limit: int = 100) -> Tool:
    """A ``grep`` tool with pi's name and parameters (``pattern``, ``path``, ``glob``,
    ``ignoreCase``, ``literal``, ``context``, ``limit``).

    Searches one file, or every file under a folder except ``.git``, what a ``.gitignore``
    excludes, binary files (a NUL byte in the first 8 KiB), files over 10 MB and symlinks
    (never followed). Output lines are ``path:line: text`` for matches and ``path-line- text``
    for context, paths relative to the working directory; long lines are cut at 500
    characters. At most ``limit`` matches, with a note when more were found. ``details`` is
    ``{"matches", "files", "truncated", "skippedFiles"}``.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        text = str(input["pattern"])
        source = re.escape(text) if input.get("literal") else text
        try:
            regex = re.compile(source, re.IGNORECASE if input.get("ignoreCase") else 0)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {text!r}: {exc}") from None
        path = str(input.get("path") or ".")
        limit = int(input.get("limit") or default_limit)
        context = int(input.get("context") or 0)
        file_glob = input.get("glob")
        try:
            found = await asyncio.to_thread(
                _grep,
                run,
                path,
                regex,
                None if file_glob is None else str(file_glob),
                context,
                limit,
            )
        except OSError as exc:
            raise ToolError(f"cannot search {safe_text(path)}: {exc.strerror or exc}") from exc
        out = "\n".join(found.lines) or "No matches found"
        if found.truncated:
            out += f"\n[more than {limit} matches; narrow the search or raise limit]"
        return ToolResult(
            content=out,
            details={
                "matches": found.matches,
                "files": found.files,
                "truncated": found.truncated,
                "skippedFiles": found.skipped,
            },
        )

    return Tool(
        name="grep",
        description=(
            "Search file contents with a regular expression (respects .gitignore); "
            "returns path:line: text."
        ),
        parameters=_PARAMETERS,
        execute=execute,
        kind="read",
        target="path",
    )


def _grep(
    run: ToolRun, path: str, regex: re.Pattern[str], file_glob: str | None, context: int, limit: int
) -> _Found:
    found = _Found()
    fd = open_file(run.cwd, path, os.O_RDONLY, confined=run.confined)
    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    if not is_dir:
        with os.fdopen(fd, "rb") as f:
            _search(f.read(_MAX_FILE_BYTES + 1), path, regex, context, limit, found)
        return found
    os.close(fd)
    base = "" if path in ("", ".") else path.rstrip("/") + "/"
    for item in walk(run.cwd, path, confined=run.confined):
        if item.is_dir or (file_glob is not None and not _glob_hit(item.rel, item.name, file_glob)):
            continue
        try:
            file_fd = os.open(
                item.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=item.dir_fd
            )
        except OSError:  # a symlink (ELOOP), a socket, a file gone meanwhile
            continue
        with os.fdopen(file_fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(file_fd).st_mode):
                continue
            _search(f.read(_MAX_FILE_BYTES + 1), base + item.rel, regex, context, limit, found)
        if found.truncated:
            break
    return found


def _glob_hit(rel: str, name: str, pattern: str) -> bool:
    if "/" in pattern:
        return glob.globmatch(rel, pattern, flags=glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE)
    return fnmatch.fnmatch(name, pattern, flags=fnmatch.DOTMATCH | fnmatch.BRACE)


def _search(
    data: bytes, shown: str, regex: re.Pattern[str], context: int, limit: int, found: _Found
) -> None:
    if len(data) > _MAX_FILE_BYTES or b"\0" in data[:_BINARY_SNIFF]:
        found.skipped += 1
        return
    lines = data.decode("utf-8", "replace").splitlines()
    hits = [i for i, line in enumerate(lines) if regex.search(line)]
    if not hits:
        return
    found.files += 1
    hit_set = set(hits)
    name = safe_text(shown)
    printed = -1  # the last line index written, so context windows do not repeat lines
    for i in hits:
        if found.matches == limit:
            found.truncated = True
            return
        found.matches += 1
        for j in range(max(i - context, printed + 1), min(i + context, len(lines) - 1) + 1):
            sep = ":" if j in hit_set else "-"
            found.lines.append(f"{name}{sep}{j + 1}{sep} {_cut(lines[j])}")
            printed = j


def _cut(line: str) -> str:
    return line if len(line) <= _MAX_LINE_CHARS else line[:_MAX_LINE_CHARS] + " [line cut]"
