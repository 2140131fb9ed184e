"""Context files: ``AGENTS.md`` (or ``CLAUDE.md``) added to the system prompt, as pi and
Claude Code do.

Order, widest first so that nearer instructions come later and read as refinements: the user's
(``<user config folder>/AGENTS.md``), then one per folder from the repository root down to the
working folder. In each folder ``AGENTS.md`` is taken, else ``CLAUDE.md`` (pi's rule: one file a
folder, so a ``CLAUDE.md`` linking to ``AGENTS.md`` is not read twice). Each file is at most
:data:`MAX_CONTEXT_FILE_BYTES`, and all of them together at most
:data:`MAX_CONTEXT_TOTAL_BYTES`: a file past that budget is left out, with a diagnostic.
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
    "MAX_CONTEXT_TOTAL_BYTES",
    "ContextFile",
    "context_block",
    "scan_context_files",
]

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_CONTEXT_FILE_BYTES = 262_144
"""Largest context file read (256 KiB: it goes into every request's system prompt); a larger
one is refused with a ``read_failed`` diagnostic."""
MAX_CONTEXT_TOTAL_BYTES = 262_144
"""Largest sum of the context files taken (256 KiB, one file's cap: they all go into every
request's system prompt, and a repository can hold one per folder). Files are taken in prompt
order (the user's first); one that would pass the budget is left out, with an ``over_budget``
diagnostic. Claude Code warns past 40,000 characters of one ``CLAUDE.md``; Codex stops adding
``AGENTS.md`` files at 32 KiB in all."""


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
    ``read_failed`` diagnostic and is not replaced by the folder's other name. A file that
    would bring the total past :data:`MAX_CONTEXT_TOTAL_BYTES` is left out (``over_budget``);
    later, smaller ones may still fit."""
    found: list[ContextFile] = []
    diagnostics: list[ResourceDiagnostic] = []
    seen: set[tuple[int, int]] = set()
    left = MAX_CONTEXT_TOTAL_BYTES
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
                raw = read_capped(fd, st, MAX_CONTEXT_FILE_BYTES, str(path))
                content = raw.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                diagnostics.append(_failed(path, exc))
            else:
                if len(raw) > left:
                    diagnostics.append(_over_budget(path, len(raw), left))
                else:
                    left -= len(raw)
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


def _over_budget(path: Path, size: int, left: int) -> ResourceDiagnostic:
    return ResourceDiagnostic(
        code="over_budget",
        kind="context_file",
        message=f"{path} was left out: its {size} bytes would bring the context files past "
        f"{MAX_CONTEXT_TOTAL_BYTES} bytes in all ({left} left); they go into every request",
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
