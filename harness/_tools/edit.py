"""The built-in ``edit`` tool: exact, unique replacements of text spans in one file."""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Mapping, Sequence

from hooks import JSONValue

from .._errors import ToolError
from .._fs import read_regular, write_file
from ._files import locate, tool_error
from .base import Tool, ToolResult, ToolRun, safe_text

__all__ = ["edit_tool"]

_EDIT: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "oldText": {"type": "string", "minLength": 1, "description": "Exact text to replace"},
        "newText": {"type": "string", "description": "The replacement"},
    },
    "required": ["oldText", "newText"],
    "additionalProperties": False,
}
_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the working directory"},
        "edits": {
            "type": "array",
            "minItems": 1,
            "items": _EDIT,
            "description": "Replacements, each oldText matching exactly once in the file",
        },
        "oldText": {"type": "string", "minLength": 1, "description": "One edit: exact text"},
        "newText": {"type": "string", "description": "One edit: its replacement"},
    },
    "required": ["path"],
    "anyOf": [{"required": ["edits"]}, {"required": ["oldText", "newText"]}],
    "additionalProperties": False,
}
_MAX_BYTES = 10_000_000


def edit_tool() -> Tool:
    """An ``edit`` tool with pi's name and parameters: ``path`` and ``edits`` (a list of
    ``{oldText, newText}``), or one ``oldText``/``newText`` pair as older pi versions send.

    Every ``oldText`` must occur exactly once in the file as it was before the call, and no two
    may overlap; otherwise nothing is written and the error says which edit failed and why
    (not found: re-read the file and copy the text exactly; several matches: add surrounding
    lines). A file with CRLF line ends is matched with LF and keeps its CRLF. The file is
    read as ``read_tool`` reads (only a regular file, at most 10 MB, refused otherwise) and
    replaced atomically, keeping its permission bits, as ``write_tool`` does.
    Controlled: every call needs the supervisor's approval.

    ``details`` is ``{"path", "diff", "firstChangedLine"}``: a unified diff of the change and the
    1-based line of its first change, as pi's edit reports.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        path = str(input["path"])
        name = safe_text(path)
        edits = _edits(input)
        try:
            loc = locate(run, path)
            raw = read_regular(loc, _MAX_BYTES)
        except FileNotFoundError:
            raise ToolError(f"no such file: {name} (use write to create it)") from None
        except OSError as exc:
            raise tool_error("read", name, exc) from None
        try:
            before = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{name} is not UTF-8 text; edit it with bash") from None
        crlf = "\r\n" in before
        text = before.replace("\r\n", "\n") if crlf else before
        after = _apply(
            text, [(o.replace("\r\n", "\n"), n.replace("\r\n", "\n")) for o, n in edits], name
        )
        if after == text:
            raise ToolError(f"the edits leave {name} unchanged")
        try:
            write_file(loc, (after.replace("\n", "\r\n") if crlf else after).encode())
        except OSError as exc:
            raise tool_error("write", name, exc) from None
        diff = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True), after.splitlines(keepends=True), name, name
            )
        )
        first = next(
            (
                i
                for i, (a, b) in enumerate(
                    zip(text.splitlines(), after.splitlines(), strict=False), 1
                )
                if a != b
            ),
            min(len(text.splitlines()), len(after.splitlines())) + 1,
        )
        count = len(edits)
        return ToolResult(
            content=f"Edited {name} ({count} replacement{'s' if count > 1 else ''})",
            details={"path": name, "diff": safe_text(diff), "firstChangedLine": first},
        )

    return Tool(
        name="edit",
        description=(
            "Edit a file by replacing exact text: each oldText must match exactly once "
            "(copy it from read, whitespace included)."
        ),
        parameters=_PARAMETERS,
        execute=execute,
        sequential=True,  # two edits of one file in one batch must not race
        kind="edit",
        controlled=True,
        target="path",
    )


def _edits(input: Mapping[str, JSONValue]) -> list[tuple[str, str]]:
    given = input.get("edits")
    if isinstance(given, Sequence) and not isinstance(given, str):
        pairs = [(str(e["oldText"]), str(e["newText"])) for e in given if isinstance(e, Mapping)]
    else:
        pairs = []
    if "oldText" in input:
        pairs.append((str(input["oldText"]), str(input.get("newText", ""))))
    return pairs


def _apply(text: str, edits: list[tuple[str, str]], name: str) -> str:
    """Apply every edit to ``text`` at once (all matched against the original)."""
    spans: list[tuple[int, int, str]] = []
    for number, (old, new) in enumerate(edits, 1):
        which = f"edit {number}" if len(edits) > 1 else "oldText"
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"{which} not found in {name}: read the file again and copy the text exactly, "
                "whitespace and indentation included"
            )
        if count > 1:
            raise ToolError(
                f"{which} matches {count} places in {name}: include more surrounding lines "
                "so it matches exactly one"
            )
        start = text.index(old)
        spans.append((start, start + len(old), new))
    spans.sort()
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        if start < end:
            raise ToolError(f"two edits overlap in {name}: merge them into one")
    out, at = [], 0
    for start, end, new in spans:
        out += [text[at:start], new]
        at = end
    out.append(text[at:])
    return "".join(out)
