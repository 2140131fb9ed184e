"""The built-in ``read`` tool: a text file inside the working directory, by lines."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from attrs import frozen

from hooks import JSONValue

from .._errors import ToolError
from .base import Tool, ToolResult, ToolRun, resolve_in_cwd, safe_text

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

_BINARY_SNIFF = 8192  # a NUL byte in this many leading bytes makes a file binary
_SKIP_CHUNK = 65536  # lines before ``offset`` are read (and dropped) this much at a time


def read_tool(*, max_bytes: int = 50_000) -> Tool:
    """A ``read`` tool confined to the working directory (symlinks resolved).

    Lines end at ``\\n`` (a ``\\r`` before it is dropped); invalid UTF-8 shows as U+FFFD. A file
    with a NUL byte in its first 8 KiB is refused as binary. The file is read only as far as the
    answer needs (``offset`` + ``limit`` lines, at most ``max_bytes`` of text), never whole, so a
    huge file or one enormous line costs no more memory than what is returned.

    Args:
        max_bytes: longest text returned. Longer output stops after the last whole line that fits,
            with a note giving the ``offset`` to read on from, like pi's read tool; a single line
            longer than that shows its first ``max_bytes`` and the note points past it.

    The result's ``details`` is ``{"path", "lines", "truncated"}``: the resolved path (undecodable
    bytes as ``\\xNN`` escapes), the number of lines shown, and whether the output was cut.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        name = safe_text(str(input["path"]))
        path = resolve_in_cwd(run.cwd, str(input["path"]))
        offset = int(input.get("offset", 1))
        limit = input.get("limit")
        try:
            if not path.is_file():
                raise ToolError(f"no such file: {name}")
            page = await asyncio.to_thread(
                _read_page, path, offset, None if limit is None else int(limit), max_bytes
            )
        except OSError as exc:
            raise ToolError(f"cannot read {name}: {exc.strerror or exc}") from exc
        if page.binary:
            raise ToolError(f"{name} is a binary file")
        text = "\n".join(page.lines)
        if page.long_line:
            text += (
                f"\n[line {offset} is longer than {max_bytes} bytes; showing its start."
                f" Use offset={offset + 1} to read on, or bash (e.g. cut -c) for the rest]"
            )
        elif page.truncated:
            text += f"\n[output truncated: use offset={offset + len(page.lines)} to read on]"
        return ToolResult(
            content=text,
            details={
                "path": safe_text(path),
                "lines": len(page.lines),
                "truncated": page.truncated,
            },
        )

    return Tool(
        name="read",
        description="Read a text file in the working directory. Use offset/limit for long files.",
        parameters=_PARAMETERS,
        execute=execute,
    )


@frozen
class _Page:
    lines: list[str]
    truncated: bool = False
    long_line: bool = False  # the first line alone is longer than max_bytes; its start is shown
    binary: bool = False


def _read_page(path: Path, offset: int, limit: int | None, max_bytes: int) -> _Page:
    with path.open("rb") as f:
        if b"\0" in f.read(_BINARY_SNIFF):
            return _Page([], binary=True)
        f.seek(0)
        for _ in range(offset - 1):
            if not _skip_line(f):
                return _Page([])
        lines: list[str] = []
        size = 0  # bytes of "\n".join(lines), as UTF-8
        while limit is None or len(lines) < limit:
            # Room for what still fits, one byte more to see it does not, and the line end.
            cap = max(max_bytes - size, 0) + 3
            raw = f.readline(cap)
            if not raw:
                break
            ended = raw.endswith(b"\n")
            if not ended and len(raw) == cap:  # longer than the room left
                if not lines:
                    start = raw[:max_bytes].decode("utf-8", errors="ignore")
                    return _Page([start], truncated=True, long_line=True)
                return _Page(lines, truncated=True)
            line = raw.removesuffix(b"\n").removesuffix(b"\r") if ended else raw
            text = line.decode("utf-8", errors="replace")
            grown = size + len(text.encode()) + (1 if lines else 0)
            if grown > max_bytes:
                if not lines:
                    start = text.encode()[:max_bytes].decode("utf-8", errors="ignore")
                    return _Page([start], truncated=True, long_line=True)
                return _Page(lines, truncated=True)
            lines.append(text)
            size = grown
            if not ended:  # the last line, without a newline
                break
        return _Page(lines)


def _skip_line(f: BinaryIO) -> bool:
    """Read past one line, in bounded chunks; False at the end of the file."""
    while chunk := f.readline(_SKIP_CHUNK):
        if chunk.endswith(b"\n"):
            return True
    return False
