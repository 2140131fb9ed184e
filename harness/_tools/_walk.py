"""Walking a folder tree for ``grep`` and ``find``: beneath the folder opened by the rules of
:mod:`harness._fs`, never through a symlink, skipping ``.git`` and what ``.gitignore`` files
exclude (matched with ``pathspec``'s git-compatible rules, so negations and folder-only
patterns behave as in git)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from attrs import frozen

from .._fs import Location, open_dir, read_regular, read_regular_at
from .base import safe_text

if TYPE_CHECKING:
    import pathspec

__all__ = ["MAX_DEPTH", "WalkedFile", "too_deep_note", "walk"]

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


MAX_DEPTH = 128
"""Folders below the walk's start it enters, at most: a deeper one is met (yielded) but not
entered, and named in the walk's ``too_deep`` list (review finding 11: a chain of 3000 folders
made ``os.fwalk`` recurse past Python's limit, and held a descriptor per level)."""


def walk(start: Location, too_deep: list[str] | None = None) -> Iterator[WalkedFile]:
    """Every folder and file under ``start`` (top-down, names sorted), ``.gitignore``
    respected; beneath a root, the root's own ``.gitignore`` applies below it too. Folders
    are entered without recursion, at most :data:`MAX_DEPTH` deep: the ``rel`` of each
    folder not entered for its depth is appended to ``too_deep``.

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
    # The folders being walked, outermost first: (rel, descriptor, how many rules were known
    # before its .gitignore, its sub-folders still to enter).
    stack: list[tuple[str, int, int, list[str]]] = []
    try:
        known = len(rules)
        subfolders = yield from _listed("", top, rules, prefix)
        stack.append(("", top, known, subfolders))
        while stack:
            here, fd, known, subfolders = stack[-1]
            if not subfolders:
                stack.pop()
                del rules[known:]  # its .gitignore covers nothing further on
                if fd != top:
                    os.close(fd)
                continue
            name = subfolders.pop(0)
            rel = f"{here}/{name}" if here else name
            if len(stack) > MAX_DEPTH:
                if too_deep is not None:
                    too_deep.append(rel)
                continue
            child = _enter(fd, name)
            if child is None:
                continue
            try:
                known = len(rules)
                inner = yield from _listed(rel, child, rules, prefix)
            except BaseException:
                os.close(child)
                raise
            stack.append((rel, child, known, inner))
    finally:
        for _here, fd, _known, _left in stack:
            if fd != top:
                os.close(fd)
        os.close(top)


def too_deep_note(too_deep: list[str], verb: str) -> str:
    """The note a tool's result ends with when ``too_deep`` folders were not entered."""
    first = safe_text(too_deep[0])
    if len(first) > 200:
        first = f"…{first[-200:]}"
    return (
        f"[{len(too_deep)} folder(s) nested more than {MAX_DEPTH} levels deep were not {verb} "
        f"(the first: {first}); give a path inside one to go deeper]"
    )


def _listed(
    here: str, dir_fd: int, rules: list[tuple[str, pathspec.GitIgnoreSpec]], prefix: str
) -> Generator[WalkedFile, None, list[str]]:
    """Yield the folder's entries (its folders, then its files, names sorted), reading its
    ``.gitignore`` into ``rules``; return the folders to enter (as ``os.fwalk`` lists them:
    a symlink to a folder is met as a folder, and never entered)."""
    spec = _ignore_spec(dir_fd)
    if spec is not None:
        rules.append(((prefix + here).rstrip("/"), spec))
    folders: list[str] = []
    files: list[str] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                try:
                    (folders if entry.is_dir() else files).append(entry.name)
                except OSError:
                    with contextlib.suppress(OSError):
                        if entry.is_symlink():  # a dangling symlink (os.fwalk's rule)
                            files.append(entry.name)
    except OSError:
        return []  # a folder that cannot be listed (os.fwalk skips it)
    kept: list[str] = []
    for name in sorted(folders):
        rel = f"{here}/{name}" if here else name
        if name == ".git" or _ignored(rules, prefix + rel, True):
            continue
        kept.append(name)
        yield WalkedFile(rel, dir_fd, name, True)
    for name in sorted(files):
        rel = f"{here}/{name}" if here else name
        if not _ignored(rules, prefix + rel, False):
            yield WalkedFile(rel, dir_fd, name, False)
    return kept


def _enter(dir_fd: int, name: str) -> int | None:
    """A descriptor of the folder ``name`` in ``dir_fd``, or None when it is a symlink, no
    longer a folder, or cannot be opened (``os.fwalk``'s rule: the folder opened must be the
    one listed)."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISDIR(before.st_mode):
            return None
        fd = os.open(name, _ENTER_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if os.path.samestat(before, os.fstat(fd)):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


_ENTER_FLAGS = (
    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
)
