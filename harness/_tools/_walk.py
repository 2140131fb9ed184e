"""Walking a folder tree for ``grep`` and ``find``: beneath the working folder, never through a
symlink, skipping ``.git`` and what ``.gitignore`` files exclude (matched with ``pathspec``'s
git-compatible rules, so negations and folder-only patterns behave as in git)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pathspec
from attrs import frozen

from ._fs import open_dir, relative_to_cwd

__all__ = ["WalkedFile", "walk"]

_GITIGNORE_MAX = 1_000_000  # a larger .gitignore is not read (it is no real one)


@frozen
class WalkedFile:
    """A file met by :func:`walk`: ``rel`` relative to the walk's start (``/``-separated),
    ``dir_fd`` its folder's descriptor (valid until the walk moves on) and ``name`` in it."""

    rel: str
    dir_fd: int
    name: str
    is_dir: bool


def _ignore_spec(dir_fd: int) -> pathspec.GitIgnoreSpec | None:
    try:
        fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(_GITIGNORE_MAX)
    return pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", "replace").splitlines())


def _ignored(rules: list[tuple[str, pathspec.GitIgnoreSpec]], rel: str, is_dir: bool) -> bool:
    """Whether ``rel`` (from the cwd) is ignored by the ``.gitignore`` of a folder above it;
    a deeper file's verdict wins, as in git."""
    verdict = False
    for base, spec in rules:
        if base and not rel.startswith(base + "/"):
            continue
        sub = rel[len(base) + 1 :] if base else rel
        result = spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            verdict = result.include
    return verdict


def walk(cwd: Path, path: str, *, confined: bool) -> Iterator[WalkedFile]:
    """Every folder and file under ``path`` (top-down, names sorted), ``.gitignore`` respected.

    Raises:
        ToolError: ``path`` leaves the working folder (confined).
        OSError: ``path`` is no folder, or cannot be opened.
    """
    start_rel = relative_to_cwd(cwd, path) if confined else None
    prefix = "" if start_rel in (None, ".") else f"{start_rel}/"
    rules: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    if prefix:  # the working folder's own .gitignore applies below it too
        root = open_dir(cwd, ".", confined=confined)
        try:
            spec = _ignore_spec(root)
        finally:
            os.close(root)
        if spec is not None:
            rules.append(("", spec))
    top = open_dir(cwd, path, confined=confined)
    try:
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(
            ".", dir_fd=top, follow_symlinks=False
        ):
            here = "" if dirpath == "." else dirpath[2:]
            spec = _ignore_spec(dir_fd)
            if spec is not None:
                rules.append(((prefix + here).rstrip("/"), spec))
            dirnames.sort()
            kept = []
            for name in dirnames:
                rel = f"{here}/{name}" if here else name
                if name == ".git" or _ignored(rules, prefix + rel, True):
                    continue
                kept.append(name)
                yield WalkedFile(rel, dir_fd, name, True)
            dirnames[:] = kept
            for name in sorted(filenames):
                rel = f"{here}/{name}" if here else name
                if not _ignored(rules, prefix + rel, False):
                    yield WalkedFile(rel, dir_fd, name, False)
    finally:
        os.close(top)
