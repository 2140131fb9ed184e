"""Context files: ``AGENTS.md`` (or ``CLAUDE.md``) added to the system prompt, as pi and
Claude Code do.

Order, widest first so that nearer instructions come later and read as refinements: the user's
(``<user config folder>/AGENTS.md``), then one per folder from the repository root down to the
working folder. In each folder ``AGENTS.md`` is taken, else ``CLAUDE.md`` (pi's rule: one file a
folder, so a ``CLAUDE.md`` linking to ``AGENTS.md`` is not read twice).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from attrs import frozen

from .._fs import beneath, read_capped
from .discovery import ReadCheck, open_resource, refusal_code, refusal_text
from .records import ResourceDiagnostic

__all__ = [
    "CONTEXT_FILE_NAMES",
    "MAX_CONTEXT_FILE_BYTES",
    "ContextFile",
    "context_block",
    "scan_context_files",
]

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_CONTEXT_FILE_BYTES = 262_144
"""Largest context file read (256 KiB: it goes into every request's system prompt); a larger
one is refused with a ``read_failed`` diagnostic."""


@frozen(kw_only=True)
class ContextFile:
    """One context file: its ``path``, ``content`` and ``scope`` (``user`` or ``project``)."""

    path: str
    content: str
    scope: Literal["user", "project"]


def scan_context_files(
    project: Sequence[Path], user: Path | None, check: ReadCheck | None = None
) -> tuple[list[ContextFile], list[ResourceDiagnostic]]:
    """Context files of ``user`` (a folder, or None) and ``project`` (folders, nearest first;
    the last, the widest, is the project's boundary and holds the others). A file ``check``
    refuses (``discovery.check_opened``: a link to a file a ``read`` rule denies) is a
    ``read_failed`` diagnostic and is not replaced by the folder's other name."""
    found: list[ContextFile] = []
    diagnostics: list[ResourceDiagnostic] = []
    seen: set[tuple[int, int]] = set()
    places: list[tuple[Path, Path, Literal["user", "project"]]] = []
    if user is not None:
        places.append((user, user, "user"))
    places += [(folder, project[-1], "project") for folder in reversed(project)]
    for folder, boundary, scope in places:
        for name in CONTEXT_FILE_NAMES:
            path = folder / name
            try:
                loc = beneath(boundary, path)
                fd, st = open_resource(loc, check)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                diagnostics.append(_failed(path, exc))
                break
            try:
                if (st.st_dev, st.st_ino) in seen:
                    break
                seen.add((st.st_dev, st.st_ino))
                content = read_capped(fd, st, MAX_CONTEXT_FILE_BYTES, str(path)).decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                diagnostics.append(_failed(path, exc))
            else:
                found.append(ContextFile(path=str(path), content=content, scope=scope))
            finally:
                os.close(fd)
            break
    return found, diagnostics


def _failed(path: Path, exc: BaseException) -> ResourceDiagnostic:
    return ResourceDiagnostic(
        code=refusal_code(exc),
        kind="context_file",
        message=f"cannot read {path}: {refusal_text(exc)}",
        path=str(path),
        dropped=True,
    )


def context_block(files: Sequence[ContextFile]) -> str:
    """The files as a system prompt section, each under its path; empty for none."""
    if not files:
        return ""
    parts = ["# Project context", "Instructions from context files, widest first:"]
    for f in files:
        parts.append(f"## {f.path}\n\n{f.content.strip()}")
    return "\n\n".join(parts)
