"""The built-in ``ls`` tool: the entries of one folder."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from hooks import JSONValue

from .._errors import ToolError
from .._fs import open_dir
from ._files import locate, tool_error
from .base import Tool, ToolResult, ToolRun, safe_text

__all__ = ["ls_tool"]

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Folder to list (default: the cwd)"},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10000,
            "description": "Most entries (default 500, at most 10000)",
        },
    },
    "additionalProperties": False,
}


def ls_tool(*, default_limit: int = 500) -> Tool:
    """An ``ls`` tool with pi's name and parameters (``path``, ``limit``).

    Lists every entry (hidden ones too) sorted case-insensitively, folders ending in ``/`` and
    symlinks in ``@`` (not followed); at most ``limit`` entries, with a note when there are
    more. The folder is opened beneath the working directory (see ``read_tool``); a FIFO or any
    other non-folder is refused without blocking. ``details`` is
    ``{"entries", "truncated", "hidden"}``: entries the supervisor keeps from being read
    (``ToolRun.hidden``) are left out and counted.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        path = str(input.get("path") or ".")
        limit = int(input.get("limit") or default_limit)
        try:
            names, hidden = await asyncio.to_thread(_list, run, path)
        except NotADirectoryError:
            raise ToolError(f"{safe_text(path)} is not a folder") from None
        except OSError as exc:
            raise tool_error("list", safe_text(path), exc) from None
        shown = names[:limit]
        text = "\n".join(safe_text(n) for n in shown) or "(empty folder)"
        if len(names) > limit:
            text += f"\n[{len(names) - limit} more entries; raise limit to see them]"
        if hidden:
            text += f"\n[{hidden} entries left out: permission rules keep them from being read]"
        return ToolResult(
            content=text,
            details={"entries": len(names), "truncated": len(names) > limit, "hidden": hidden},
        )

    return Tool(
        name="ls",
        description="List a folder in the working directory (folders end in /).",
        parameters=_PARAMETERS,
        execute=execute,
        kind="read",
        target="path",
    )


def _list(run: ToolRun, path: str) -> tuple[list[str], int]:
    fd = open_dir(locate(run, path))
    hidden = 0
    try:
        with os.scandir(fd) as entries:
            names = []
            for e in entries:
                if run.hidden is not None and run.hidden(e.name):  # a deny/ask read rule's
                    hidden += 1
                    continue
                names.append(e.name + ("@" if e.is_symlink() else "/" if e.is_dir() else ""))
    finally:
        os.close(fd)
    return sorted(names, key=lambda n: (n.lower(), n)), hidden
