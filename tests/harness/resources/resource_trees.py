"""Builders of real skill trees for tests/harness/resources (loaded as ``resource_trees``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness import Resources, SkillContext, SkillListing


def write_skill(
    root: Path,
    name: str,
    description: str | None = "Does a task",
    body: str = "Step one.",
    *,
    folder: str | None = None,
    extra: str = "",
) -> Path:
    """``root/<folder or name>/SKILL.md`` with YAML frontmatter; returns the file."""
    path = root / (folder or name) / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = f"name: {name}\n" + (f"description: {description}\n" if description else "") + extra
    path.write_text(f"---\n{meta}---\n{body}\n")
    return path


def listing(resources: Resources, cwd: Path) -> SkillListing:
    """``resources.listing`` for a context at ``cwd`` (from a sync test)."""
    return asyncio.run(resources.listing(SkillContext(session_id=None, cwd=cwd)))
