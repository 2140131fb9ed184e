"""The built-in ``write`` tool: create or overwrite a text file inside the working directory."""

from __future__ import annotations

from collections.abc import Mapping

from hooks import JSONValue

from .._errors import ToolError
from .._fs import write_file
from ._files import locate, tool_error
from .base import Tool, ToolResult, ToolRun, safe_text

__all__ = ["write_tool"]

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the working directory"},
        "content": {"type": "string", "description": "The whole new content of the file"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


def write_tool() -> Tool:
    """A ``write`` tool confined to the working directory, with pi's name and parameters
    (``path``, ``content``). Controlled: every call needs the supervisor's approval.

    Creates missing parent folders and replaces the file atomically (temp file + rename), so a
    reader never sees half a file. Folders are created and opened beneath the working directory
    by the kernel (see ``harness._fs``), so a folder swapped for a symlink cannot move the write
    outside; approved outside it, no symlink on the path is followed. A symlink at the file's
    own name is replaced, not followed. A replaced file keeps its permission bits (a symlink's
    target's, for a symlink at the name); a new one gets 0o666 less the umask. A folder, FIFO,
    device or socket at the name is refused. The result's ``details``
    is ``{"path", "bytes", "created"}`` (``path`` as given, normalised); paths in the result show
    undecodable bytes as ``\\xNN`` escapes, so it always encodes as JSON.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        name = safe_text(str(input["path"]))
        try:
            data = str(input["content"]).encode()
        except UnicodeEncodeError as exc:  # a lone surrogate cannot be written as UTF-8
            raise ToolError(f"content is not valid text: {exc}") from exc
        try:
            loc = locate(run, str(input["path"]))
            created = write_file(loc, data)
        except OSError as exc:
            raise tool_error("write", name, exc) from None
        verb = "Created" if created else "Wrote"
        return ToolResult(
            content=f"{verb} {name} ({len(data)} bytes)",
            details={
                "path": safe_text(loc.path),
                "bytes": len(data),
                "created": created,
            },
        )

    return Tool(
        name="write",
        description="Write a text file in the working directory (replaces it if it exists).",
        parameters=_PARAMETERS,
        execute=execute,
        sequential=True,  # two writes to one file in one batch must not race
        kind="edit",
        controlled=True,
        target="path",
    )
