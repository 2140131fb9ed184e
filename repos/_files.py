"""Opening the files the stores and importers read: regular files only, without blocking.

A session path or a transcript is untrusted (``docs/security.md``): it may name a FIFO, whose
open for reading waits for a writer that never comes, a device such as ``/dev/zero`` that reads
for ever, or a folder. :func:`open_regular` opens with ``O_NONBLOCK`` (a FIFO's open returns at
once; a regular file's reads and writes are unaffected) and refuses anything but a regular file
before a byte is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ._errors import SessionNotFoundError

__all__ = ["NOT_REGULAR", "open_regular"]

NOT_REGULAR = "not a regular file (a folder, a FIFO or a device)"


def open_regular(path: Path | str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the regular file at ``path``, opened with ``flags`` (plus
    ``O_NONBLOCK | O_NOCTTY``); symlinks are followed, as a path given by the user may be one.

    Raises:
        SessionNotFoundError: ``path`` is not a regular file (reason :data:`NOT_REGULAR`), or
            is a folder opened for writing.
        OSError: the open failed otherwise (``FileNotFoundError``, ``PermissionError``, ...).
    """
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY)
    except IsADirectoryError:
        raise SessionNotFoundError(str(path), NOT_REGULAR) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise SessionNotFoundError(str(path), NOT_REGULAR)
    return fd
