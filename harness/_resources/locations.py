"""Where resources are looked for: the working folder's ancestors up to the repository root,
and the user's config folder (platformdirs)."""

from __future__ import annotations

from pathlib import Path

import platformdirs

__all__ = ["PROJECT_FOLDERS", "project_folders", "repository_root", "user_folder"]

PROJECT_FOLDERS = (".agents", ".harness")
"""Folders of a project holding ``skills/`` and ``prompts/``, in precedence order."""


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or a file)."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def project_folders(cwd: Path) -> tuple[Path, ...]:
    """``cwd`` and its ancestors up to the repository root, nearest first.

    Outside a repository only ``cwd`` itself counts: walking on to ``/`` would pick up whatever
    lies in ``/tmp`` or the home folder.
    """
    start = cwd.resolve()
    root = repository_root(start)
    if root is None:
        return (start,)
    folders = [start]
    for parent in start.parents:
        if not parent.is_relative_to(root):
            break
        folders.append(parent)
    return tuple(folders)


def user_folder() -> Path:
    """``platformdirs.user_config_path("harness")``: ``$XDG_CONFIG_HOME/harness`` on Linux."""
    return platformdirs.user_config_path("harness")
