"""The built-in ``write`` tool: create or overwrite a text file inside the working directory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from hooks import JSONValue

from .._errors import ToolError
from .base import Tool, ToolResult, ToolRun, resolve_in_cwd, safe_text

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
    """A ``write`` tool confined to the working directory (symlinks resolved).

    Creates missing parent folders and replaces the file atomically (temp file + rename), so a
    reader never sees half a file. The result's ``details`` is ``{"path", "bytes", "created"}``;
    paths in the result show undecodable bytes as ``\\xNN`` escapes, so it always encodes as JSON.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        name = safe_text(str(input["path"]))
        path = resolve_in_cwd(run.cwd, str(input["path"]))
        try:
            data = str(input["content"]).encode()
        except UnicodeEncodeError as exc:  # a lone surrogate cannot be written as UTF-8
            raise ToolError(f"content is not valid text: {exc}") from exc
        created = not path.exists()
        try:
            _replace(path, data)
        except OSError as exc:
            raise ToolError(f"cannot write {name}: {exc.strerror or exc}") from exc
        verb = "Created" if created else "Wrote"
        return ToolResult(
            content=f"{verb} {name} ({len(data)} bytes)",
            details={"path": safe_text(path), "bytes": len(data), "created": created},
        )

    return Tool(
        name="write",
        description="Write a text file in the working directory (replaces it if it exists).",
        parameters=_PARAMETERS,
        execute=execute,
        sequential=True,  # two writes to one file in one batch must not race
    )


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
