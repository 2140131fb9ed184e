"""Context files: ``AGENTS.md`` (or ``CLAUDE.md``) added to the system prompt, as pi and
Claude Code do.

Order, widest first so that nearer instructions come later and read as refinements: the user's
(``<user config folder>/AGENTS.md``), then one per folder from the repository root down to the
working folder. In each folder ``AGENTS.md`` is taken, else ``CLAUDE.md`` (pi's rule: one file a
folder, so a ``CLAUDE.md`` linking to ``AGENTS.md`` is not read twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from attrs import frozen

from .records import ResourceDiagnostic

__all__ = ["CONTEXT_FILE_NAMES", "ContextFile", "context_block", "scan_context_files"]

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")


@frozen(kw_only=True)
class ContextFile:
    """One context file: its ``path``, ``content`` and ``scope`` (``user`` or ``project``)."""

    path: str
    content: str
    scope: Literal["user", "project"]


def scan_context_files(
    project: Sequence[Path], user: Path | None
) -> tuple[list[ContextFile], list[ResourceDiagnostic]]:
    """Context files of ``user`` (a folder, or None) and ``project`` (folders, nearest first)."""
    found: list[ContextFile] = []
    diagnostics: list[ResourceDiagnostic] = []
    seen: set[Path] = set()
    places: list[tuple[Path, Literal["user", "project"]]] = []
    if user is not None:
        places.append((user, "user"))
    places += [(folder, "project") for folder in reversed(project)]
    for folder, scope in places:
        for name in CONTEXT_FILE_NAMES:
            path = folder / name
            if not path.is_file():
                continue
            real = path.resolve()
            if real not in seen:
                seen.add(real)
                try:
                    content = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    diagnostics.append(
                        ResourceDiagnostic(
                            code="read_failed",
                            kind="context_file",
                            message=f"cannot read {path}: {exc}",
                            path=str(path),
                            dropped=True,
                        )
                    )
                else:
                    found.append(ContextFile(path=str(path), content=content, scope=scope))
            break
    return found, diagnostics


def context_block(files: Sequence[ContextFile]) -> str:
    """The files as a system prompt section, each under its path; empty for none."""
    if not files:
        return ""
    parts = ["# Project context", "Instructions from context files, widest first:"]
    for f in files:
        parts.append(f"## {f.path}\n\n{f.content.strip()}")
    return "\n\n".join(parts)
