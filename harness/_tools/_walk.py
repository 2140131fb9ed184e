"""Walking a folder tree for ``grep`` and ``find``: beneath the folder opened by the rules of
:mod:`harness._fs`, never through a symlink, skipping ``.git`` and what ``.gitignore`` files
exclude (matched with ``pathspec``'s git-compatible rules, so negations and folder-only
patterns behave as in git)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from attrs import frozen

from .._fs import Location, open_dir, read_regular, read_regular_at

if TYPE_CHECKING:
    import pathspec

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


def _spec(data: bytes) -> pathspec.GitIgnoreSpec:
    import pathspec  # here: `import harness` stays fast (issue 24)

    return pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", "replace").splitlines())


def _ignore_spec(dir_fd: int) -> pathspec.GitIgnoreSpec | None:
    """The folder's ``.gitignore``; one that is no regular file (a FIFO, a symlink), or too
    large, is not read: it is no real one."""
    try:
        return _spec(read_regular_at(dir_fd, ".gitignore", _GITIGNORE_MAX, ".gitignore"))
    except OSError:
        return None


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


def walk(start: Location) -> Iterator[WalkedFile]:
    """Every folder and file under ``start`` (top-down, names sorted), ``.gitignore``
    respected; beneath a root, the root's own ``.gitignore`` applies below it too.

    Raises:
        FileRefusedError: ``start`` leaves its root, or has a forbidden symlink.
        OSError: ``start`` is no folder, or cannot be opened.
    """
    within = start.rule == "beneath" and start.rel != "."
    prefix = f"{start.rel}/" if within else ""
    rules: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    if within:
        try:
            top_rules = read_regular(Location(start.root, ".gitignore"), _GITIGNORE_MAX)
        except OSError:
            pass
        else:
            rules.append(("", _spec(top_rules)))
    top = open_dir(start)
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
