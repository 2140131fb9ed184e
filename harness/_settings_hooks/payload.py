"""What a command hook reads on stdin, in Claude Code's shape, and how an ``updatedInput``
comes back.

Every event carries Claude Code's common fields (``session_id``, ``transcript_path``,
``cwd``, ``permission_mode``, ``hook_event_name``) and its own. A built-in tool whose Claude
Code counterpart is named, or names a field, differently is shown both ways: ``tool_name`` is
Claude Code's (``Bash``, ``Read``, ``Glob``, ...), ``harness_tool_name`` ours, and
``tool_input`` holds our fields and Claude Code's (``path`` and ``file_path``, ...), so a
script written for either reads what it expects.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import frozen

from hooks import JSONValue

__all__ = [
    "CLAUDE_CODE_TOOL_NAMES",
    "FIELD_ALIASES",
    "InputAliases",
    "claude_code_tool_name",
    "from_claude_code",
    "to_claude_code",
]

CLAUDE_CODE_TOOL_NAMES: Mapping[str, str] = {
    "bash": "Bash",
    "read": "Read",
    "write": "Write",
    "edit": "Edit",
    "grep": "Grep",
    "find": "Glob",
    "ls": "LS",
    "task": "Task",
}
"""Our built-in tool's name -> its Claude Code counterpart's."""

FIELD_ALIASES: Mapping[str, tuple[tuple[str, str], ...]] = {
    "read": (("path", "file_path"),),
    "write": (("path", "file_path"),),
    "edit": (("path", "file_path"), ("oldText", "old_string"), ("newText", "new_string")),
    "grep": (("ignoreCase", "-i"), ("context", "-C"), ("limit", "head_limit")),
}
"""Our field -> Claude Code's, per built-in tool (``bash``, ``find``/``Glob`` and ``ls``/``LS``
share their field names; ``bash``'s ``timeout`` is seconds here and milliseconds there, so it
is shown only as ours). ``file_path`` is absolute, as in Claude Code; an ``edit`` with one
replacement in ``edits`` shows it as ``old_string``/``new_string`` too."""


def claude_code_tool_name(tool_name: str) -> str:
    """Claude Code's name of one of our tools (others keep their name)."""
    return CLAUDE_CODE_TOOL_NAMES.get(tool_name, tool_name)


# Where one of our fields sits in an input: a top-level key, or (for edit) inside edits[0].
_Where = tuple[str | int, ...]


@frozen
class InputAliases:
    """The Claude Code spellings added to one input: each alias key, where its value comes
    from in our input, and the value shown (to tell whether a hook changed it)."""

    tool_name: str
    aliases: tuple[tuple[str, _Where, JSONValue], ...]


def _get(value: Any, where: _Where) -> Any:
    for step in where:
        if isinstance(step, int):
            if not isinstance(value, list) or len(value) <= step:
                return _MISSING
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return _MISSING
            value = value[step]
    return value


def _set(value: Any, where: _Where, new: Any) -> None:
    for step in where[:-1]:
        value = value[step]
    value[where[-1]] = new


_MISSING = object()


def _absolute(cwd: Path) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if not isinstance(value, str) or not value or "\0" in value:
            return value
        return os.path.normpath(os.path.join(cwd, os.path.expanduser(value)))

    return convert


def to_claude_code(
    tool_name: str, tool_input: Mapping[str, JSONValue], cwd: Path
) -> tuple[dict[str, JSONValue], InputAliases]:
    """``tool_input`` with Claude Code's spelling of each field added beside ours (see
    :data:`FIELD_ALIASES`), and what was added, for :func:`from_claude_code`."""
    shown: dict[str, JSONValue] = dict(tool_input)
    added: list[tuple[str, _Where, JSONValue]] = []
    for ours, theirs in FIELD_ALIASES.get(tool_name, ()):
        where: _Where = (ours,)
        if tool_name == "edit" and ours in ("oldText", "newText") and ours not in tool_input:
            edits = tool_input.get("edits")
            if not (isinstance(edits, list) and len(edits) == 1):
                continue  # several replacements have no single old_string
            where = ("edits", 0, ours)
        value = _get(tool_input, where)
        if value is _MISSING or theirs in tool_input:
            continue
        if theirs == "file_path":
            value = _absolute(cwd)(value)
        shown[theirs] = value
        added.append((theirs, where, value))
    return shown, InputAliases(tool_name=tool_name, aliases=tuple(added))


def from_claude_code(
    updated: Mapping[str, JSONValue],
    original: Mapping[str, JSONValue],
    aliases: InputAliases,
) -> dict[str, JSONValue]:
    """A hook's ``updatedInput`` back in our spelling: a Claude Code field it changed is
    written into ours, the added spellings are dropped.

    Raises:
        ValueError: the hook changed both spellings of one field, to different values.
    """
    result: dict[str, JSONValue] = copy.deepcopy(dict(updated))
    for theirs, where, shown in aliases.aliases:
        if theirs not in result:
            continue
        value = result.pop(theirs)
        if value == shown:
            continue  # unchanged: our spelling (maybe changed itself) stands
        ours_now = _get(result, where)
        ours_before = _get(original, where)
        if ours_now is not _MISSING and ours_now != ours_before and ours_now != value:
            raise ValueError(
                f"updatedInput changes both {where[-1]!r} and {theirs!r}, to different values"
            )
        try:
            _set(result, where, value)
        except (KeyError, IndexError, TypeError):
            raise ValueError(
                f"updatedInput changes {theirs!r}, but has no {'.'.join(map(str, where))} "
                "to put it in"
            ) from None
    return result
