"""Walking a folder tree for ``grep`` and ``find``: beneath the folder opened by the rules of
:mod:`harness._fs`, never through a symlink, skipping ``.git`` and what ``.gitignore`` files
exclude (matched with ``pathspec``'s git-compatible rules, so negations and folder-only
patterns behave as in git). A ``.gitignore`` that cannot be used (:mod:`harness._ignore`: too
large, too many patterns, patterns RE2 cannot compile) never fails the walk: the walk goes on
without it and names it in its ``unused_ignores`` list, for the tool's note."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING

from attrs import frozen

from .._fs import Location, open_dir, read_regular, read_regular_at
from .._ignore import (
    MAX_IGNORE_BYTES,
    MAX_IGNORE_BYTES_PER_WALK,
    IgnoreFileError,
    compile_ignore,
)
from .base import safe_text

if TYPE_CHECKING:
    import pathspec

__all__ = [
    "MAX_DEPTH",
    "WalkedFile",
    "too_deep_note",
    "unused_ignores_note",
    "walk",
]


@frozen
class WalkedFile:
    """A file met by :func:`walk`: ``rel`` relative to the walk's start (``/``-separated),
    ``dir_fd`` its folder's descriptor (valid until the walk moves on) and ``name`` in it."""

    rel: str
    dir_fd: int
    name: str
    is_dir: bool


class _Ignores:
    """One walk's account of its ``.gitignore`` files: the bytes compiled so far, and those not
    used (``"path: why"``, the path relative to the walk's root) when the caller keeps a list."""

    def __init__(self, unused: list[str] | None) -> None:
        self.compiled = 0
        self.unused = unused

    def spec(self, read: Callable[[], bytes], shown: str) -> pathspec.GitIgnoreSpec | None:
        """The patterns of the file ``read`` returns; None when there is none, or it cannot be
        used. One that is no regular file (a FIFO, a symlink) is not read, silently: it is no
        real one. One too large, past the walk's budget, or that cannot be compiled is named in
        ``unused``."""
        try:
            data = read()
        except OSError as exc:
            if exc.errno == errno.EFBIG:
                self._unused(shown, f"it is larger than {MAX_IGNORE_BYTES} bytes")
            return None
        if self.compiled + len(data) > MAX_IGNORE_BYTES_PER_WALK:
            self._unused(
                shown, f"this search's ignore files pass {MAX_IGNORE_BYTES_PER_WALK} bytes"
            )
            return None
        self.compiled += len(data)
        try:
            return compile_ignore(data.decode("utf-8", "replace"))
        except IgnoreFileError as exc:
            self._unused(shown, str(exc))
            return None

    def _unused(self, shown: str, why: str) -> None:
        if self.unused is not None:
            self.unused.append(f"{shown}: {why}")


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


def walk(
    start: Location, too_deep: list[str] | None = None, unused_ignores: list[str] | None = None
) -> Iterator[WalkedFile]:
    """Every folder and file under ``start`` (top-down, names sorted), ``.gitignore``
    respected; beneath a root, the root's own ``.gitignore`` applies below it too. Folders
    are entered without recursion, at most :data:`MAX_DEPTH` deep: the ``rel`` of each
    folder not entered for its depth is appended to ``too_deep``. Each ``.gitignore`` that
    cannot be used is appended to ``unused_ignores`` (``"path: why"``, the path from the
    root); the walk goes on as if it were not there.

    Raises:
        FileRefusedError: ``start`` leaves its root, or has a forbidden symlink.
        OSError: ``start`` is no folder, or cannot be opened.
    """
    within = start.rule == "beneath" and start.rel != "."
    prefix = f"{start.rel}/" if within else ""
    rules: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    ignores = _Ignores(unused_ignores)
    if within:
        top_spec = ignores.spec(
            lambda: read_regular(Location(start.root, ".gitignore"), MAX_IGNORE_BYTES),
            ".gitignore",
        )
        if top_spec is not None:
            rules.append(("", top_spec))
    top = open_dir(start)
    # The folders being walked, outermost first: (rel, descriptor, how many rules were known
    # before its .gitignore, its sub-folders still to enter).
    stack: list[tuple[str, int, int, list[str]]] = []
    try:
        known = len(rules)
        subfolders = yield from _listed("", top, rules, prefix, ignores)
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
                inner = yield from _listed(rel, child, rules, prefix, ignores)
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


def unused_ignores_note(unused: list[str], verb: str) -> str:
    """The one-line note a tool's result ends with when ``.gitignore`` files were not used."""
    first = safe_text(unused[0])
    if len(first) > 300:
        first = f"…{first[-300:]}"
    more = f" (and {len(unused) - 1} more)" if len(unused) > 1 else ""
    return f"[a .gitignore was not used, so what it excludes was {verb} too: {first}{more}]"


def _listed(
    here: str,
    dir_fd: int,
    rules: list[tuple[str, pathspec.GitIgnoreSpec]],
    prefix: str,
    ignores: _Ignores,
) -> Generator[WalkedFile, None, list[str]]:
    """Yield the folder's entries (its folders, then its files, names sorted), reading its
    ``.gitignore`` into ``rules``; return the folders to enter (as ``os.fwalk`` lists them:
    a symlink to a folder is met as a folder, and never entered)."""
    base = (prefix + here).rstrip("/")
    spec = ignores.spec(
        lambda: read_regular_at(dir_fd, ".gitignore", MAX_IGNORE_BYTES, ".gitignore"),
        f"{base}/.gitignore" if base else ".gitignore",
    )
    if spec is not None:
        rules.append((base, spec))
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
