"""Publishing whole files atomically.

Guarantee: after :func:`publish_atomically` returns, ``destination`` holds exactly ``lines`` and
survives a power loss (file and folder fsynced); if it raises, ``destination`` is untouched and no
temporary file is left. Callers must not publish to one destination from two threads at once.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["fsync_dir", "make_folders", "publish_atomically"]


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
) -> None:
    """Write ``lines`` to a temp file beside ``destination``, fsync, rename, fsync the folder.

    Args:
        exclusive: refuse to replace an existing file (``FileExistsError``); used by create and
            fork, whose file names must be new. New files are private (0600); a replaced file
            keeps its permissions.
        check: called with the written temp file before it is published; if it raises, nothing
            is published (the temp file is removed) and the error propagates.
    """
    folder = destination.parent
    make_folders(folder)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        if not exclusive and destination.exists():
            # A rewrite keeps the file's permissions (mkstemp makes 0600 files).
            os.chmod(fd, stat.S_IMODE(destination.stat().st_mode))
        with os.fdopen(fd, "wb") as out:
            for line in lines:
                out.write(line)
            out.flush()
            os.fsync(out.fileno())
        if check is not None:
            check(tmp)
        if exclusive:
            # link() fails if the name exists, unlike rename(), so two creators cannot both win.
            os.link(tmp, destination)
            tmp.unlink()
        else:
            os.replace(tmp, destination)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(folder)
