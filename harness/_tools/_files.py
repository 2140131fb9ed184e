"""The built-in tools' side of :mod:`harness._fs`: where a call's path goes, and a refusal as
the model reads it."""

from __future__ import annotations

from .._errors import ToolError
from .._fs import Location, tool_location
from .base import ToolRun, safe_text

__all__ = ["locate", "tool_error"]


def locate(run: ToolRun, path: str) -> Location:
    """Where ``path`` goes for this call: beneath the working folder, or (approved outside it)
    the supervisor's resolved path through no symlink (see ``ToolRun.approved_path``).

    Raises:
        FileRefusedError: confined and the path leaves the working folder, or a NUL byte.
    """
    return tool_location(run.cwd, path, confined=run.confined, approved_path=run.approved_path)


def tool_error(verb: str, name: str, exc: OSError) -> ToolError:
    """``cannot <verb> <name>: <reason>``, UTF-8 safe."""
    return ToolError(f"cannot {verb} {name}: {safe_text(exc.strerror or str(exc))}")
