"""The built-in ``read`` tool: a text file (by lines) or an image inside the working directory."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Mapping
from typing import BinaryIO

from attrs import frozen

from hooks import ImageContent, JSONValue, TextContent

from .._errors import ToolError
from .._fs import Location, open_regular
from ._files import locate, tool_error
from .base import Tool, ToolResult, ToolRun, safe_text

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
_IMAGE_MAGIC = (  # pi's read returns these as image blocks (by content, not by file name)
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def read_tool(*, max_bytes: int = 50_000, max_image_bytes: int = 5_000_000) -> Tool:
    """A ``read`` tool confined to the working directory, with pi's name and parameters
    (``path``, ``offset``, ``limit``).

    The file is opened beneath the working directory by the kernel (see ``harness._fs``), so a
    symlink swapped onto the path cannot take the read outside; a path outside needs the
    supervisor's approval, and is then opened through no symlink at all. Only a regular file is
    read: a folder, FIFO, device or socket is refused before it is opened for reading, so
    nothing blocks. A PNG, JPEG, GIF or WebP file (recognised by its first bytes) is returned as an
    image block with a short text note, as pi's read does; one larger than ``max_image_bytes`` is
    refused.

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
        offset = int(input.get("offset", 1))
        limit = input.get("limit")
        try:
            loc = locate(run, str(input["path"]))
            fd, _ = open_regular(loc)
        except FileNotFoundError:
            raise ToolError(f"no such file: {name}") from None
        except OSError as exc:
            raise tool_error("read", name, exc) from None
        with os.fdopen(fd, "rb") as f:
            shown = safe_text(_opened_path(fd, loc))
            try:
                image = await asyncio.to_thread(_read_image, f, max_image_bytes)
                if image is not None:
                    return _image_result(name, shown, image)
                page = await asyncio.to_thread(
                    _read_page, f, offset, None if limit is None else int(limit), max_bytes
                )
            except OSError as exc:
                raise tool_error("read", name, exc) from None
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
                "path": shown,
                "lines": len(page.lines),
                "truncated": page.truncated,
            },
        )

    return Tool(
        name="read",
        description=(
            "Read a file in the working directory: text by lines (use offset/limit for long "
            "files; a cut output says how to read on), images (png, jpeg, gif, webp) as images."
        ),
        parameters=_PARAMETERS,
        execute=execute,
        kind="read",
        target="path",
    )


def _opened_path(fd: int, loc: Location) -> str:
    """The path the kernel opened (symlinks resolved), for ``details``."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc: the resolved path, looked up again
        return os.path.realpath(loc.path)


@frozen
class _Image:
    data: bytes
    mime_type: str


def _read_image(f: BinaryIO, max_image_bytes: int) -> _Image | None:
    head = f.read(16)
    f.seek(0)
    mime = next((m for magic, m in _IMAGE_MAGIC if head.startswith(magic)), None)
    if mime is None and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        mime = "image/webp"
    if mime is None:
        return None
    data = f.read(max_image_bytes + 1)
    if len(data) > max_image_bytes:
        raise ToolError(f"the image is larger than {max_image_bytes} bytes")
    return _Image(data, mime)


def _image_result(name: str, shown: str, image: _Image) -> ToolResult:
    return ToolResult(
        content=[
            TextContent(text=f"Read image {name} ({image.mime_type}, {len(image.data)} bytes)"),
            ImageContent(data=base64.b64encode(image.data).decode(), mime_type=image.mime_type),
        ],
        details={"path": shown, "mimeType": image.mime_type, "bytes": len(image.data)},
    )


@frozen
class _Page:
    lines: list[str]
    truncated: bool = False
    long_line: bool = False  # the first line alone is longer than max_bytes; its start is shown
    binary: bool = False


def _read_page(f: BinaryIO, offset: int, limit: int | None, max_bytes: int) -> _Page:
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
