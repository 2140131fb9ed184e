"""The built-in ``read`` tool: a text file inside the working directory, by lines."""

from __future__ import annotations

from collections.abc import Mapping

from hooks import JSONValue

from .._errors import ToolError
from .base import Tool, ToolResult, ToolRun, resolve_in_cwd

__all__ = ["read_tool"]

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the working directory"},
        "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
        "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def read_tool(*, max_bytes: int = 50_000) -> Tool:
    """A ``read`` tool confined to the working directory.

    Args:
        max_bytes: longest text returned; longer output is cut with a note saying how to read on
            (``offset``), like pi's read tool.

    The result's ``details`` is ``{"path", "lines", "truncated"}``.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        path = resolve_in_cwd(run.cwd, str(input["path"]))
        if not path.is_file():
            raise ToolError(f"no such file: {input['path']}")
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"{input['path']} is a binary file")
        lines = data.decode("utf-8", errors="replace").splitlines()
        offset = int(input.get("offset", 1))
        limit = input.get("limit")
        selected = lines[offset - 1 : offset - 1 + int(limit) if limit is not None else None]
        text = "\n".join(selected)
        truncated = len(text.encode()) > max_bytes
        if truncated:
            text = text.encode()[:max_bytes].decode("utf-8", errors="ignore")
            shown = text.count("\n") + 1
            text += f"\n[output truncated: use offset={offset + shown} to read on]"
        return ToolResult(
            content=text,
            details={"path": str(path), "lines": len(selected), "truncated": truncated},
        )

    return Tool(
        name="read",
        description="Read a text file in the working directory. Use offset/limit for long files.",
        parameters=_PARAMETERS,
        execute=execute,
    )
