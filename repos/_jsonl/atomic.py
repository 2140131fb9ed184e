"""Publishing whole files atomically.

Guarantee: after :func:`publish_atomically` returns, ``destination`` holds exactly ``lines`` and
survives a power loss (file and folder fsynced); if it raises, ``destination`` is untouched and no
temporary file is left. A new file (``exclusive``) is written as an unnamed ``O_TMPFILE`` inode
where the platform has them and then linked into place, so a killed writer leaves nothing behind;
otherwise, and for a replacement, through a named temp file: a process killed mid-way leaves it
behind, but the writer holds an advisory lock on it throughout, so :func:`sweep_temp_files` can
tell a dead writer's temp file (lock free: removed) from a live one's. Callers must not publish to
one destination from two threads at once.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import cast

__all__ = ["fsync_dir", "make_folders", "publish_atomically", "sweep_temp_files"]

log = logging.getLogger("repos")


def fsync_dir(folder: Path) -> None:
    """fsync a folder so a rename or create inside it is durable (no-op where unsupported)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and any missing parents, durably: each new folder's entry is fsynced in
    its parent (so a crash cannot lose the folder of a file published inside it).

    Returns:
        The folders created, outermost first (empty if ``folder`` existed).
    """
    missing: list[Path] = []
    current = folder
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    if not missing:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    missing.reverse()
    for created in missing:
        fsync_dir(created.parent)
    return missing


def publish_atomically(
    destination: Path,
    lines: Iterable[bytes],
    *,
    exclusive: bool,
    check: Callable[[Path], object] | None = None,
    durable: bool = True,
    write: Callable[[int], object] | None = None,
    adopt: Callable[[int], object] | None = None,
    folder_ready: bool = False,
) -> None:
    """Write ``lines`` to a temp file beside ``destination``, fsync, publish it under that name
    (link or rename), fsync the folder.

    Args:
        exclusive: refuse to replace an existing file (``FileExistsError``); used by create and
            fork, whose file names must be new. New files are private (0600); a replaced file
            keeps its permissions.
        check: called with a path that opens the written temp file (a ``/proc/self/fd`` link
            for an unnamed one) before it is published; if it raises, nothing is published
            (the temp file is removed) and the error propagates.
        durable: fsync the file and its folder (False for an ``fsync="never"`` repository:
            still atomic for readers and other processes, not across a power loss).
        write: called with the temp file's descriptor after ``lines`` are written, to write
            the rest itself (a fork copies byte ranges from its source file).
        adopt: called with the temp file's descriptor (read-write, switched to ``O_APPEND``)
            before it is published, after ``check``; when it returns, the descriptor is the
            callee's to close, even if publishing fails afterwards (a create keeps it to read
            and append through, instead of opening the new file again). If it raises, the
            descriptor is closed here.
        folder_ready: the caller made sure ``destination``'s folder exists (no check here).
    """
    folder = destination.parent
    if not folder_ready:
        make_folders(folder)
    fd, unnamed = _unnamed(folder) if exclusive else (-1, None)
    named: Path | None = None
    if unnamed is None:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=folder)
        named = Path(tmp_name)
        # Held until the temp file is gone: marks it as a live writer's for sweep_temp_files.
        fcntl.flock(fd, fcntl.LOCK_EX)
    tmp: str | Path = named if named is not None else cast(str, unnamed)
    adopted = False
    try:
        if named is not None and not exclusive and destination.exists():
            # A rewrite keeps the file's permissions (mkstemp makes 0600 files).
            os.chmod(fd, stat.S_IMODE(destination.stat().st_mode))
        data = b"".join(lines)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if write is not None:
            write(fd)
        if durable:
            os.fsync(fd)
        if check is not None:
            check(Path(tmp))
        if adopt is not None:
            fcntl.fcntl(fd, fcntl.F_SETFL, os.O_APPEND)
            adopt(fd)
            adopted = True
        if named is None:
            # link() fails if the name exists, unlike rename(), so two creators cannot both win.
            # Linking a /proc/self/fd entry needs linkat(AT_SYMLINK_FOLLOW), which os.link uses
            # only with a directory descriptor.
            folder_fd = os.open(folder, _DIR_ONLY | os.O_DIRECTORY)
            try:
                os.link(tmp, destination.name, dst_dir_fd=folder_fd)
            finally:
                os.close(folder_fd)
        elif exclusive:
            os.link(named, destination)
            named.unlink()
        else:
            os.replace(named, destination)
    except BaseException:
        if named is not None:
            named.unlink(missing_ok=True)
        raise
    finally:
        if not adopted:
            os.close(fd)
        elif named is not None:
            # The temp file's lock marked a live writer; the adopted descriptor must not keep
            # it (appends through it take and release their own).
            fcntl.flock(fd, fcntl.LOCK_UN)
    if durable:
        fsync_dir(folder)


_PROC_FD = Path("/proc/self/fd")
# A descriptor naming the folder, not reading it: linkat needs no read permission on it.
_DIR_ONLY = getattr(os, "O_PATH", os.O_RDONLY)
_TMPFILE = getattr(os, "O_TMPFILE", 0) if _PROC_FD.is_dir() else 0


def _unnamed(folder: Path) -> tuple[int, str | None]:
    """An unnamed file in ``folder`` (``O_TMPFILE``, 0600) and the ``/proc/self/fd`` path that
    links or opens it; (-1, None) where the platform or the file system has none."""
    if not _TMPFILE:
        return -1, None
    try:
        fd = os.open(folder, _TMPFILE | os.O_RDWR, 0o600)
    except OSError:
        return -1, None  # e.g. EOPNOTSUPP: a file system without O_TMPFILE
    return fd, f"{_PROC_FD}/{fd}"


def sweep_temp_files(folder: Path, *, min_age_s: float = 1.0) -> list[Path]:
    """Remove the temp files (``.<name>.*.tmp``) that killed writers left in ``folder``.

    A temp file whose lock can be taken has no live writer: it is removed (a fork's temp file
    may be hard-linked to the published session; removing the name leaves the session whole).
    Files younger than ``min_age_s`` seconds are left alone: a writer takes its lock just after
    creating the file. Returns the files removed; errors are logged, never raised.
    """
    removed: list[Path] = []
    try:
        candidates = [p for p in folder.iterdir() if p.name.startswith(".") and p.suffix == ".tmp"]
    except OSError:
        return removed
    for tmp in candidates:
        try:
            if time.time() - tmp.lstat().st_mtime < min_age_s:
                continue
            fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live writer holds it
        try:
            tmp.unlink()
            removed.append(tmp)
        except OSError as exc:
            log.warning("could not remove a stale temp file %s: %s", tmp, exc)
        finally:
            os.close(fd)
    return removed
