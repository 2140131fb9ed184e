"""What a call touches: operation keys and the paths rules see (commands are read by ``shell``).

Pure functions, no I/O beyond resolving a path's symlinks (``os.path.realpath``), which only
informs the decision: the built-in tools enforce confinement themselves when they open.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

from hooks import JSONValue

from .._fs import expand_home
from .._tools.base import Tool
from .shell import command_key

# What a path pattern would read as a wildcard: escaped in operation keys (which become allow
# rules when approved for good), nothing else ("-" is special only inside brackets).
_GLOB_SPECIAL = re.compile(r"[*?\[\]\\{}]")


def _escape(path: str) -> str:
    return _GLOB_SPECIAL.sub(lambda m: "\\" + m.group(0), path)


__all__ = ["CallTarget", "describe_call", "rule_paths"]


@frozen(kw_only=True)
class CallTarget:
    """What one call touches (see :class:`PermissionRequest` for the fields)."""

    operation_key: str
    target: str | None
    paths: tuple[str, ...]
    leaves_cwd: bool
    resolved: str | None = None
    """The path's absolute form with symlinks resolved (None for commands and no target)."""


def _inside(root: str, path: str) -> str | None:
    if path == root:
        return "."
    if path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return None


def describe_call(tool: Tool, input: Mapping[str, JSONValue], cwd: Path) -> CallTarget:
    """The operation key, target, rule paths and cwd escape of one call of ``tool``.

    Raises:
        ValueError: the path holds a NUL byte.
        OSError, RuntimeError, RecursionError: the path cannot be resolved (a symlink chain
            too long or changing under us).
    """
    raw = input.get(tool.target) if tool.target is not None else None
    if tool.target is None or (raw is None and tool.kind == "execute"):
        return CallTarget(operation_key=tool.name, target=None, paths=(), leaves_cwd=False)
    if tool.kind == "execute":
        command = str(raw)
        return CallTarget(
            operation_key=command_key(tool.name, command),
            target=command,
            paths=(),
            leaves_cwd=False,
        )
    given = "." if raw is None or raw == "" else str(raw)
    paths, leaves, resolved = rule_paths(given, cwd)
    return CallTarget(
        operation_key=f"{tool.name}({_escape(paths[0])})",
        target=given,
        paths=paths,
        leaves_cwd=leaves,
        resolved=resolved,
    )


def rule_paths(given: str, cwd: Path) -> tuple[tuple[str, ...], bool, str]:
    """The paths path rules are matched against for ``given`` (relative to ``cwd`` or
    absolute): as written (normalised) and with symlinks resolved, each relative to ``cwd``
    or absolute outside it, the written one first; whether either leaves ``cwd``; and the
    resolved absolute path. One function for a tool's call and for a file the harness reads
    on its own (a context file, a skill), so both are judged alike.

    Raises:
        ValueError: the path holds a NUL byte.
        OSError, RuntimeError, RecursionError: the path cannot be resolved.
    """
    if "\0" in given:  # the kernel refuses it; a lexical ``..`` must not normalise it away
        raise ValueError(f"the path {given!r} holds a NUL byte")
    base = os.path.abspath(cwd)
    real_base = os.path.realpath(base)
    # ~ expanded as the tools expand it (one function), so rules see the file they open
    lexical = os.path.normpath(os.path.join(base, expand_home(given)))
    resolved = os.path.realpath(lexical)
    lexical_rel = _inside(base, lexical) or _inside(real_base, lexical)
    resolved_rel = _inside(real_base, resolved)
    leaves = lexical_rel is None or resolved_rel is None
    shown = lexical_rel if lexical_rel is not None else lexical
    paths = tuple(dict.fromkeys((shown, resolved_rel if resolved_rel is not None else resolved)))
    return paths, leaves, resolved
