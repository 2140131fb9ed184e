"""Claude Code's spelling of permission modes and tool names, mapped onto ours.

Kept apart from the rule engine so that the engine keeps one vocabulary: settings files, code
and the command line may write a mode or a rule's tool as Claude Code does, and this module
turns the name into ours before anything compares it (docs/permissions.md, "Claude Code's
spelling").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias, cast

from .decisions import PermissionMode

__all__ = [
    "CLAUDE_CODE_MODES",
    "CLAUDE_CODE_TOOLS",
    "ClaudeCodeMode",
    "ModeName",
    "claude_code_mode",
    "permission_mode",
]

ClaudeCodeMode: TypeAlias = Literal[
    "default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"
]
"""Claude Code's names of the permission modes (``permissions.defaultMode``)."""

ModeName: TypeAlias = PermissionMode | ClaudeCodeMode
"""A permission mode in our spelling or in Claude Code's."""

CLAUDE_CODE_MODES: Mapping[str, PermissionMode] = {
    "default": "default",
    "acceptEdits": "accept_edits",
    "plan": "plan",
    "bypassPermissions": "bypass",
    "dontAsk": "dont_ask",
}
"""Claude Code's mode name -> ours."""

_OURS: tuple[PermissionMode, ...] = ("default", "accept_edits", "plan", "bypass", "dont_ask")

CLAUDE_CODE_TOOLS: Mapping[str, str] = {"glob": "find", "multiedit": "edit"}
"""Claude Code's tool names (lower-cased) whose tool here has another name. The others agree
once case is ignored: ``Bash``, ``Read``, ``Write``, ``Edit``, ``Grep``, ``LS``."""


def permission_mode(name: str) -> PermissionMode:
    """Our mode for ``name``, written either way (``accept_edits`` or ``acceptEdits``).

    Raises:
        ValueError: not a mode in either spelling (the message lists both).
    """
    if name in _OURS:
        return name
    found = CLAUDE_CODE_MODES.get(name)
    if found is None:
        raise ValueError(
            f"mode {name!r} is not one of {', '.join(_OURS)} "
            f"(or Claude Code's {', '.join(CLAUDE_CODE_MODES)})"
        )
    return found


def claude_code_mode(mode: PermissionMode) -> ClaudeCodeMode:
    """Claude Code's name of one of our modes (what a command hook reads as
    ``permission_mode``)."""
    return next(cast(ClaudeCodeMode, cc) for cc, ours in CLAUDE_CODE_MODES.items() if ours == mode)
