"""Opening files beneath the working folder, with no window between the check and the open.

Checking a path (``resolve()``, ``is_relative_to``) and then opening it leaves a gap in which a
folder on the path can be swapped for a symlink that points outside; measured before this module,
7 to 32 of 5,000 racing reads escaped. Here the kernel resolves the path and enforces the
boundary in one call: ``openat2(2)`` with ``RESOLVE_BENEATH`` (Linux 5.6+) relative to a directory
descriptor of the working folder, so symlinks that stay inside still work and any step outside
(``..`` past the root, an absolute symlink, one pointing out) fails with ``EXDEV``. Where the
kernel lacks ``openat2`` (or a sandbox forbids it), each component is opened with ``O_NOFOLLOW``
relative to its parent's descriptor instead, which refuses every symlink on the path.

A call the supervisor approved to leave the working folder (``ToolRun.confined`` False) opens
paths the ordinary way.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

from .._errors import ToolError
from .base import safe_text

__all__ = ["open_dir", "open_file", "open_parent", "relative_to_cwd", "replace_file"]

_SYS_OPENAT2: Final = 437  # the same number on every Linux architecture (generic table)
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_BENEATH: Final = 0x08
_CLOEXEC: Final = os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Kernel:
    """Whether ``openat2`` works here, found out by the first call that tries it."""

    available: bool | None = None
    libc: ctypes.CDLL | None = None


def _openat2(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    """``openat2(dir_fd, rel, flags, RESOLVE_BENEATH)``; raises ``OSError``, or
    ``NotImplementedError`` when the kernel (or a seccomp filter) has no ``openat2``."""
    if _Kernel.available is False or not hasattr(os, "O_PATH"):
        raise NotImplementedError
    if _Kernel.libc is None:
        _Kernel.libc = ctypes.CDLL(None, use_errno=True)
    # openat2 refuses a mode without O_CREAT (EINVAL), unlike openat.
    how = _OpenHow(
        flags | _CLOEXEC,
        mode if flags & os.O_CREAT else 0,
        _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS,
    )
    fd = int(
        _Kernel.libc.syscall(
            _SYS_OPENAT2, dir_fd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how)
        )
    )
    if fd >= 0:
        _Kernel.available = True
        return fd
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM) and _Kernel.available is None:
        _Kernel.available = False
        raise NotImplementedError
    raise OSError(code, os.strerror(code), rel)


def _walk_open(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    """The fallback: open ``rel`` one component at a time, never following a symlink."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts:
        return os.open(".", flags | _CLOEXEC, mode, dir_fd=dir_fd)
    current = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
            step = os.open(part, flags_dir, dir_fd=current)
            os.close(current)
            current = step
        return os.open(parts[-1], flags | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=current)
    finally:
        os.close(current)


def _open_beneath(root_fd: int, rel: str, flags: int, mode: int) -> int:
    try:
        return _openat2(root_fd, rel, flags, mode)
    except NotImplementedError:
        return _walk_open(root_fd, rel, flags, mode)


def relative_to_cwd(cwd: Path, path: str) -> str | None:
    """``path`` (relative to ``cwd`` or absolute) as a normalised relative path, or None when
    it lexically leaves ``cwd``. Symlinks are not looked at: the open enforces those."""
    base = os.path.abspath(cwd)
    joined = os.path.normpath(os.path.join(base, path))
    for root in dict.fromkeys((base, os.path.realpath(base))):
        if joined == root:
            return "."
        if joined.startswith(root.rstrip("/") + "/"):
            return joined[len(root.rstrip("/")) + 1 :]
    return None


def _outside(cwd: Path, path: str) -> ToolError:
    return ToolError(
        f"{safe_text(path)!r} is outside the working directory {safe_text(cwd)}"
        " (the supervisor did not approve leaving it)"
    )


@contextmanager
def _root(cwd: Path) -> Iterator[int]:
    fd = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def open_file(cwd: Path, path: str, flags: int, *, confined: bool, mode: int = 0o666) -> int:
    """Open ``path`` with ``os.open`` ``flags``; confined, the kernel keeps it beneath ``cwd``.

    Returns:
        A new file descriptor (close-on-exec); the caller closes it.

    Raises:
        ToolError: confined and the path, or a symlink on it, leads outside ``cwd``.
        OSError: the open failed (missing file, permissions, ...).
    """
    if not confined:
        return os.open(os.path.join(cwd, path), flags | _CLOEXEC, mode)
    rel = relative_to_cwd(cwd, path)
    if rel is None:
        raise _outside(cwd, path)
    with _root(cwd) as root:
        try:
            return _open_beneath(root, rel, flags, mode)
        except OSError as exc:
            if exc.errno in (errno.EXDEV, errno.ELOOP):
                raise _outside(cwd, path) from None
            raise


def open_dir(cwd: Path, path: str, *, confined: bool) -> int:
    """A descriptor of the folder ``path`` (see :func:`open_file`)."""
    return open_file(cwd, path, os.O_RDONLY | os.O_DIRECTORY, confined=confined)


def open_parent(cwd: Path, path: str, *, confined: bool) -> tuple[int, str]:
    """A descriptor of the folder that holds ``path``, creating missing folders beneath
    ``cwd``, and the file's name in it.

    Raises:
        ToolError: the path leaves ``cwd`` (confined), or names no file (``.``, a trailing
            ``/``).
        OSError: a folder could not be created or opened.
    """
    rel = relative_to_cwd(cwd, path) if confined else os.path.abspath(os.path.join(cwd, path))
    if rel is None:
        raise _outside(cwd, path)
    parent, name = os.path.split(rel)
    if name in ("", ".", ".."):
        raise ToolError(f"{safe_text(path)!r} does not name a file")
    parts = [p for p in parent.split("/") if p not in ("", ".")]
    start = "." if confined else "/"
    current = open_file(cwd, start, os.O_RDONLY | os.O_DIRECTORY, confined=confined)
    try:
        for part in parts:
            with suppress(FileExistsError):
                os.mkdir(part, dir_fd=current)
            try:
                step = (
                    _open_beneath(current, part, os.O_RDONLY | os.O_DIRECTORY, 0)
                    if confined
                    else os.open(part, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC, dir_fd=current)
                )
            except OSError as exc:
                if exc.errno in (errno.EXDEV, errno.ELOOP):
                    raise _outside(cwd, path) from None
                raise
            os.close(current)
            current = step
    except BaseException:
        os.close(current)
        raise
    return current, name


def replace_file(dir_fd: int, name: str, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``name`` in the folder ``dir_fd`` atomically: a temporary file in the
    same folder, then a rename over ``name`` (which replaces a symlink there, never its target).
    ``mode``: permission bits to give the file (None: 0o666 less the umask)."""
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            out.write(data)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
