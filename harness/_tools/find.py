"""The built-in ``find`` tool: file names matching a glob, ``.gitignore`` respected."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from hooks import JSONValue

from .._errors import ToolError
from .._globs import GlobError, compile_glob
from ._files import locate, tool_error
from ._walk import too_deep_note, unused_ignores_note, walk
from .base import Tool, ToolResult, ToolRun, safe_text

__all__ = ["find_tool"]

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Glob: '*.py' matches file names anywhere, 'src/**/*.py' whole paths",
        },
        "path": {"type": "string", "description": "Folder to search (default: the cwd)"},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10000,
            "description": "Most results (default 1000, at most 10000)",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


def find_tool(*, default_limit: int = 1000) -> Tool:
    """A ``find`` tool with pi's name and parameters (``pattern``, ``path``, ``limit``).

    A pattern without ``/`` matches file and folder names at any depth (``*.py``); one with ``/``
    matches paths relative to ``path`` (``src/**/test_*.py``, ``harness._globs``, linear time in
    the path: ``**`` spans folders, ``{a,b}`` alternates, hidden files match). ``.git`` and
    whatever a ``.gitignore`` excludes are skipped, and symlinks are never followed. Results are
    sorted paths relative to ``path``, folders ending in ``/``, at most ``limit`` of them with a
    note when more matched; paths the supervisor keeps from being read (``ToolRun.hidden``) are
    left out and counted. ``details`` is ``{"matches", "truncated", "hidden"}``. Folders more
    than ``MAX_DEPTH`` (128) levels below ``path`` are not entered: a note names the first,
    and ``details`` counts them in ``tooDeep``. A ``.gitignore`` that cannot be used (too
    large, too many patterns, or patterns that cannot be compiled) is never an error: the
    search goes on without it, a note names it, and ``details`` counts them in
    ``unusedIgnores``.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        pattern = str(input["pattern"])
        path = str(input.get("path") or ".")
        limit = int(input.get("limit") or default_limit)
        try:
            too_deep: list[str] = []
            unused: list[str] = []
            found, more, hidden = await asyncio.to_thread(
                _find, run, path, pattern, limit, too_deep, unused
            )
        except NotADirectoryError:
            raise ToolError(f"{safe_text(path)} is not a folder") from None
        except OSError as exc:
            raise tool_error("search", safe_text(path), exc) from None
        text = "\n".join(safe_text(f) for f in found) or "No files found"
        if more:
            text += f"\n[more than {limit} matches; narrow the pattern or raise limit]"
        if hidden:
            text += f"\n[{hidden} matches left out: permission rules keep them from being read]"
        details: dict[str, JSONValue] = {"matches": len(found), "truncated": more, "hidden": hidden}
        if too_deep:
            text += "\n" + too_deep_note(too_deep, "looked into")
            details["tooDeep"] = len(too_deep)
        if unused:
            text += "\n" + unused_ignores_note(unused, "listed")
            details["unusedIgnores"] = len(unused)
        return ToolResult(content=text, details=details)

    return Tool(
        name="find",
        description="Find files by glob pattern in the working directory (respects .gitignore).",
        parameters=_PARAMETERS,
        execute=execute,
        kind="read",
        target="path",
    )


def _find(
    run: ToolRun, path: str, pattern: str, limit: int, too_deep: list[str], unused: list[str]
) -> tuple[list[str], bool, int]:
    by_name = "/" not in pattern
    try:
        glob = compile_glob(pattern)
    except GlobError as exc:
        raise ToolError(f"invalid pattern {safe_text(pattern)!r}: {exc}") from None
    found: list[str] = []
    hidden = 0
    for item in walk(locate(run, path), too_deep, unused):
        hit = glob.matches(item.name if by_name else item.rel)
        if hit and run.hidden is not None and run.hidden(item.rel):  # a deny/ask read rule's
            hidden += 1
        elif hit:
            if len(found) == limit:
                return found, True, hidden
            found.append(item.rel + "/" if item.is_dir else item.rel)
    return found, False, hidden
