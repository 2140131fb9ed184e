"""Every file access of the harness, in one place: opened by the kernel beneath a root, never
blocking, never reading more than a cap.

Checking a path (``resolve()``, ``is_relative_to``) and then opening it leaves a gap in which a
folder on the path can be swapped for a symlink that points elsewhere; measured before this
module, 7 to 32 of 5,000 racing reads escaped. Here the kernel resolves the path and enforces
the rule in the same call, ``openat2(2)`` (Linux 5.6+), relative to a descriptor of the root:

- ``beneath`` (:func:`beneath`): ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``. Symlinks that stay
  under the root work; ``..`` past it, an absolute symlink, one pointing out, and ``/proc``
  magic links fail (``EXDEV``/``ELOOP``). The root is the working folder for the tools, the
  scope's folder for skills, templates and context files, the project for its settings.
- ``no_symlinks`` (:func:`no_symlinks`): ``RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` from
  ``/``, for an absolute path the supervisor approved outside the working folder, resolved when
  it decided: any symlink on the path (one swapped in after the decision) fails the open.
- ``inside``: both, ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``: beneath the root through no
  symlink at all, not even one that stays inside (a rewind's writes: a symlink could name the
  same folder a second way, e.g. the checkpoint store's, and dodge a check by path).

Where the kernel lacks ``openat2`` (or a sandbox forbids it), each component is opened with
``O_NOFOLLOW`` relative to its parent's descriptor instead, which refuses every symlink.

A file opened to be read is first opened ``O_PATH`` (which opens nothing: a FIFO does not
block, a device driver is not called) and ``fstat``-ed; only a regular file is then opened for
reading, ``O_NONBLOCK | O_NOCTTY``, and must be the same file. Sizes are checked before reading
and reads stop at the cap. Refusals raise :class:`FileRefusedError`, an ``OSError`` whose
``strerror`` says what was refused and why.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final, Literal

from attrs import frozen

__all__ = [
    "NAME_MAX",
    "PATH_MAX",
    "SYSTEM_FOLDERS",
    "FileRefusedError",
    "Location",
    "beneath",
    "check_length",
    "expand_home",
    "no_symlinks",
    "open_dir",
    "open_parent",
    "open_regular",
    "open_regular_at",
    "program_path",
    "read_capped",
    "read_regular",
    "read_regular_at",
    "read_regular_file",
    "relative_to",
    "replace_file",
    "root_only",
    "tool_location",
    "write_file",
]

_SYS_OPENAT2: Final = 437  # the same number on every Linux architecture (generic table)
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08
_CLOEXEC: Final = os.O_CLOEXEC
_O_PATH: Final = getattr(os, "O_PATH", 0)  # Linux; elsewhere the lstat fallback checks first
_EAGAIN_TRIES: Final = 16  # openat2 asks for a retry when a rename raced its ".." checks
_READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK

Rule = Literal["beneath", "no_symlinks", "inside"]


class FileRefusedError(OSError):
    """A file access refused before anything was read or written: the path leads outside its
    root (``EXDEV``), has a symlink where none may be (``ELOOP``), names no regular file
    (``EINVAL``; ``EISDIR`` for a folder), is larger than the cap (``EFBIG``), or cannot be a
    path at all (``EINVAL``: a NUL byte). ``strerror`` is the reason, ``filename`` the path."""

    def __init__(self, code: int, reason: str, path: str) -> None:
        super().__init__(code, reason, path)

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


@frozen
class Location:
    """Where one access goes: ``rel`` (``/``-separated, normalised, ``.`` for the root itself)
    beneath the folder ``root``, resolved under ``rule`` (see the module's docstring).

    ``root`` itself is opened the ordinary way: it is trusted (the working folder, a scope's
    folder, ``/``); only what lies beneath it is not."""

    root: str
    rel: str
    rule: Rule = "beneath"

    @property
    def path(self) -> str:
        """The path as one string, for messages."""
        return self.root if self.rel == "." else os.path.join(self.root, self.rel)

    def child(self, name: str) -> Location:
        """The location of ``name`` inside this one (a single path component)."""
        return Location(self.root, name if self.rel == "." else f"{self.rel}/{name}", self.rule)


class _Kernel:
    """Whether ``openat2`` works here, found out by the first call that tries it."""

    available: bool | None = None
    libc: ctypes.CDLL | None = None


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _openat2(dir_fd: int, rel: str, flags: int, mode: int, resolve: int) -> int:
    """``openat2(dir_fd, rel, flags, resolve)``; raises ``OSError``, or ``NotImplementedError``
    when the kernel (or a seccomp filter) has no ``openat2``."""
    if _Kernel.available is False or not _O_PATH:
        raise NotImplementedError
    if _Kernel.libc is None:
        _Kernel.libc = ctypes.CDLL(None, use_errno=True)
    # openat2 refuses a mode without O_CREAT (EINVAL), unlike openat.
    how = _OpenHow(flags | _CLOEXEC, mode if flags & os.O_CREAT else 0, resolve)
    encoded = os.fsencode(rel)
    for _ in range(_EAGAIN_TRIES):
        fd = int(
            _Kernel.libc.syscall(
                _SYS_OPENAT2, dir_fd, encoded, ctypes.byref(how), ctypes.sizeof(how)
            )
        )
        if fd >= 0:
            _Kernel.available = True
            return fd
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EPERM) and _Kernel.available is None:
            _Kernel.available = False
            raise NotImplementedError
        if code != errno.EAGAIN:
            break
    raise OSError(code, os.strerror(code), rel)


def _walk_open(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    """The fallback: open ``rel`` one component at a time, never following a symlink."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts:
        return os.open(".", flags | _CLOEXEC, mode, dir_fd=dir_fd)
    if ".." in parts:  # without the kernel's help ".." could climb out: refuse it
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), rel)
    current = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            step = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW | _CLOEXEC, dir_fd=current)
            os.close(current)
            current = step
        return os.open(parts[-1], flags | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=current)
    finally:
        os.close(current)


def _refused(loc: Location, exc: OSError) -> OSError:
    """The refusal an ``EXDEV``/``ELOOP`` from the kernel means, else ``exc`` itself."""
    if exc.errno == errno.EXDEV:
        return FileRefusedError(
            errno.EXDEV, f"leads outside {loc.root} (through '..' or a symlink)", loc.path
        )
    if exc.errno == errno.ELOOP:
        reason = (
            "a symlink is on the path (access outside the working folder follows none)"
            if loc.rule == "no_symlinks"
            else "a symlink is on the path (a rewind follows none)"
            if loc.rule == "inside"
            else f"a symlink on the path leads outside {loc.root}, or loops"
        )
        return FileRefusedError(errno.ELOOP, reason, loc.path)
    return exc


@contextmanager
def _root_fd(loc: Location) -> Iterator[int]:
    fd = os.open(loc.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def _open_in(root_fd: int, loc: Location, rel: str, flags: int, mode: int) -> int:
    resolve = (
        _RESOLVE_NO_MAGICLINKS
        | {
            "beneath": _RESOLVE_BENEATH,
            "no_symlinks": _RESOLVE_NO_SYMLINKS,
            "inside": _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS,
        }[loc.rule]
    )
    try:
        try:
            return _openat2(root_fd, rel, flags, mode, resolve)
        except NotImplementedError:
            return _walk_open(root_fd, rel, flags, mode)
    except OSError as exc:
        raise _refused(loc, exc) from None


def _open(loc: Location, flags: int, mode: int = 0o666) -> int:
    with _root_fd(loc) as root:
        return _open_in(root, loc, loc.rel, flags, mode)


def expand_home(path: str) -> str:
    """``path`` with a leading ``~`` or ``~/`` as the user's home folder; any other path
    (``./~/x``, ``~user/x``, ``a/~``) as it is.

    The one place a tool's path is expanded: the supervisor (``describe_call``) and the tools
    (:func:`tool_location`) both call it, so a rule judges the file the tool opens (a ``~``
    folder in the working folder is ``./~``, never the home folder, and the home folder never
    that folder).
    """
    if path == "~" or path.startswith("~/"):
        return os.path.expanduser("~") + path[1:]
    return path


def absolute_path_variable(value: str | None = None, *, outside: Path | str | None = None) -> str:
    """``$PATH`` (or ``value``) with only its absolute entries: an empty or relative entry
    (``PATH=:/usr/bin``, ``.``) finds programs in the working folder, which an untrusted
    project can ship (review 5, finding 16; review 13, finding 13). With ``outside`` (a
    working folder), also without the entries in it (symlinks resolved): an activated
    ``.venv/bin`` or ``node_modules/.bin`` there is written by the model's sandboxed commands
    and edits, and what the harness itself starts unsandboxed (command hooks, stdio MCP
    servers) must not run what they wrote (review 15, finding 2)."""
    entries = (os.environ.get("PATH", os.defpath) if value is None else value).split(os.pathsep)
    kept = [e for e in entries if os.path.isabs(e)]
    if outside is not None:
        folder = os.path.realpath(outside).rstrip("/") + "/"
        kept = [e for e in kept if not (os.path.realpath(e) + "/").startswith(folder)]
    return os.pathsep.join(kept)


def program_path(name: str) -> str:
    """The absolute path of the program ``name`` on ``$PATH``, looked up in its absolute
    entries only: an empty or relative entry (``PATH=:/usr/bin``, ``.``) would find a program
    of that name in the working folder, which an untrusted project can ship (a ``bash`` there
    would run every command instead of bash; review 5, finding 16). A copy no user but root
    can change (the file and its folder owned by root, writable by nobody else) comes first:
    a sandboxed command can write ``~/.local/bin``, and a ``git`` it planted there would be
    the one the harness's checkpoint scan runs outside the sandbox (review 7, finding 11).
    ``name`` itself when not found, so starting it fails with the usual error."""
    entries = [e for e in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(e)]
    found = [f for e in entries if (f := shutil.which(name, path=e)) is not None]
    for candidate in found:
        if root_only(os.path.realpath(candidate)):
            return candidate
    return found[0] if found else name


SYSTEM_FOLDERS: Final = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/boot",
)
"""The system's folders: root's sandboxed commands see them read-only."""


BASH_LOG_PREFIX: Final = "harness-bash-"
"""How the bash tool's kept full outputs are named (``harness-bash-PID-*.log``), and the
folder that holds them (``harness-bash-logs-UID``) in the temporary folder."""


def bash_log_folder() -> str | None:
    """The folder where every harness process of this user keeps its bash outputs:
    ``$TMPDIR/harness-bash-logs-UID``, made mode 0700 if missing. One folder for all of them,
    so a sandbox can hide it whole, logs made after its command started included (review 11,
    finding 2). None when the name is taken by something that is not this user's private
    folder (a link, another user's folder in a shared ``/tmp``): then logs go to
    ``$TMPDIR`` itself, as before."""
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"{BASH_LOG_PREFIX}logs-{os.geteuid()}")
    with suppress(FileExistsError, OSError):
        os.mkdir(path, 0o700)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    private = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077
    return path if private else None


def root_only(path: str) -> bool:
    """Whether ``path`` and its folder are owned by root and writable by nobody else; for a
    process run as root, also in :data:`SYSTEM_FOLDERS` (root's sandboxed commands can write
    any other folder root owns, such as its ``~/.local/bin``)."""
    if os.geteuid() == 0 and not any(path == f or path.startswith(f + "/") for f in SYSTEM_FOLDERS):
        return False
    for p in (path, os.path.dirname(path)):
        try:
            st = os.stat(p)
        except OSError:
            return False
        if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


def relative_to(root: str | os.PathLike[str], path: str) -> str | None:
    """``path`` (relative to ``root`` or absolute) as a normalised relative path, or None when
    it lexically leaves ``root``. Symlinks are not looked at: the open enforces those."""
    base = os.path.abspath(root)
    joined = os.path.normpath(os.path.join(base, path))
    for top in dict.fromkeys((base, os.path.realpath(base))):
        if joined == top:
            return "."
        if joined.startswith(top.rstrip("/") + "/"):
            return joined[len(top.rstrip("/")) + 1 :]
    return None


def _check_text(path: str) -> None:
    if "\0" in path:
        raise FileRefusedError(errno.EINVAL, "the path holds a NUL byte", path.replace("\0", "\\0"))
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        raise FileRefusedError(
            errno.EINVAL, "the path holds a character no file name can", ascii(path)
        ) from None


def beneath(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Location:
    """The location of ``path`` (relative to ``root`` or absolute) beneath ``root``.

    Raises:
        FileRefusedError: the path lexically leaves ``root`` (``EXDEV``), or holds a NUL byte.
    """
    text = os.fspath(path)
    _check_text(text)
    rel = relative_to(root, text)
    if rel is None:
        raise FileRefusedError(errno.EXDEV, f"is outside {os.fspath(root)}", text)
    return Location(os.fspath(root), rel)


def no_symlinks(path: str) -> Location:
    """The location of the absolute ``path``, opened from ``/`` through no symlink at all.

    Raises:
        FileRefusedError: the path is not absolute, or holds a NUL byte.
    """
    _check_text(path)
    if not os.path.isabs(path):
        raise FileRefusedError(errno.EINVAL, "is not an absolute path", path)
    rel = os.path.normpath(path).lstrip("/") or "."
    return Location("/", rel, "no_symlinks")


def tool_location(
    cwd: Path, path: str, *, confined: bool, approved_path: str | None = None
) -> Location:
    """Where a built-in tool's ``path`` goes (see ``ToolRun``).

    Confined: beneath ``cwd``; with ``approved_path`` (the path the supervisor resolved when
    it decided) inside ``cwd``, exactly that path, through no symlink. Approved outside it:
    exactly ``approved_path``, through no symlink; with no ``approved_path`` (a
    supervisor that does not give one), the path made absolute and normalised lexically, again
    through no symlink.

    Raises:
        FileRefusedError: confined and the path lexically leaves ``cwd``, or a NUL byte.
    """
    path = expand_home(path)
    if confined:
        _check_text(path)
        rel = relative_to(cwd, path)
        if rel is None:
            raise FileRefusedError(
                errno.EXDEV,
                f"is outside the working directory {cwd} (the supervisor did not approve "
                "leaving it)",
                path,
            )
        if approved_path is not None:
            # The file the supervisor judged, through no symlink: one swapped in after the
            # decision (a folder turned into a link to .git or to a denied folder) is refused
            # rather than followed.
            real = os.path.realpath(cwd)
            decided = relative_to(Path(real), approved_path)
            if decided is not None and decided != ".":
                return Location(real, decided, "inside")
        return Location(os.fspath(cwd), rel)
    if approved_path is not None:
        return no_symlinks(approved_path)
    _check_text(path)
    return no_symlinks(os.path.normpath(os.path.join(os.path.realpath(cwd), path)))


_KINDS: Final = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symlink"),
)


def _not_regular(st: os.stat_result, path: str) -> FileRefusedError:
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    if stat.S_ISDIR(st.st_mode):
        return FileRefusedError(errno.EISDIR, "is a folder, not a file", path)
    if stat.S_ISLNK(st.st_mode):
        return FileRefusedError(errno.ELOOP, "is a symlink (not followed here)", path)
    return FileRefusedError(errno.EINVAL, f"is {kind}, not a regular file", path)


def _ready(fd: int, before: os.stat_result | None, path: str) -> os.stat_result:
    """Check the just opened ``fd`` is a regular file (the one ``before`` described, if given)
    and make it blocking again; closes ``fd`` and raises when it is not."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(st, path)
        if before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise FileRefusedError(errno.EAGAIN, "changed while it was being opened", path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return st


def open_regular(loc: Location) -> tuple[int, os.stat_result]:
    """Open a regular file for reading, refusing anything else before it is opened for real.

    Returns:
        A blocking, close-on-exec descriptor (the caller closes it) and its ``fstat``.

    Raises:
        FileRefusedError: outside the root, a forbidden symlink, or not a regular file (a
            folder, FIFO, device, socket): nothing was read, nothing blocked.
        OSError: the open failed (``FileNotFoundError``, ``PermissionError``, ...).
    """
    before = None
    if _O_PATH:
        probe = _open(loc, _O_PATH)
        try:
            before = os.fstat(probe)
        finally:
            os.close(probe)
        if not stat.S_ISREG(before.st_mode):
            raise _not_regular(before, loc.path)
    fd = _open(loc, _READ_FLAGS)
    return fd, _ready(fd, before, loc.path)


def open_regular_at(dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    """Open ``name`` in the folder ``dir_fd`` for reading, following no symlink: a walk's file.
    ``shown`` names it in errors. Raises as :func:`open_regular` does."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISREG(before.st_mode):
        raise _not_regular(before, shown)
    fd = os.open(name, _READ_FLAGS | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    return fd, _ready(fd, before, shown)


def read_capped(fd: int, st: os.stat_result, max_bytes: int, shown: str) -> bytes:
    """The whole content of the regular file ``fd`` (``st`` its ``fstat``), refused when it
    is larger than ``max_bytes``, before reading or when it grew while read.

    Raises:
        FileRefusedError: larger than ``max_bytes`` (``EFBIG``); ``shown`` names the file.
        OSError: the read failed.
    """
    if st.st_size > max_bytes:
        raise _too_large(shown, max_bytes)
    chunks: list[bytes] = []
    size = 0
    # The size the fstat gave and a byte more, at once: one read into a buffer of the right
    # size (a 1 MiB read of a 1 MB file costs ten times as much: the buffer is shrunk after).
    while chunk := os.read(fd, min(max(st.st_size + 1 - size, 1 << 16), max_bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:  # it grew since the fstat
            raise _too_large(shown, max_bytes)
    return b"".join(chunks)


def _too_large(shown: str, max_bytes: int) -> FileRefusedError:
    return FileRefusedError(
        errno.EFBIG, f"is larger than {max_bytes} bytes, the most read; not read", shown
    )


def read_regular(loc: Location, max_bytes: int) -> bytes:
    """The whole content of a regular file of at most ``max_bytes`` bytes.

    A larger file is refused, not cut: what is read is always the whole file.

    Raises:
        FileRefusedError: as :func:`open_regular`, or larger than ``max_bytes`` (``EFBIG``).
        OSError: the open or the read failed.
    """
    fd, st = open_regular(loc)
    try:
        return read_capped(fd, st, max_bytes, loc.path)
    finally:
        os.close(fd)


def read_regular_at(dir_fd: int, name: str, max_bytes: int, shown: str) -> bytes:
    """:func:`read_regular` of ``name`` in the folder ``dir_fd``, following no symlink."""
    fd, st = open_regular_at(dir_fd, name, shown)
    try:
        return read_capped(fd, st, max_bytes, shown)
    finally:
        os.close(fd)


def read_regular_file(path: Path, *, max_bytes: int, root: Path | None = None) -> bytes | None:
    """The content of the regular file ``path``, or None when it does not exist.

    With ``root`` (e.g. a project folder for its ``.harness/settings.json``), the path is
    opened beneath it: a symlink leading out of ``root`` is refused. Without, ``path`` is
    opened as it is (the user's own files; symlinks followed), still only if it is a regular
    file of at most ``max_bytes`` bytes.

    Raises:
        FileRefusedError: outside ``root``, not a regular file (a FIFO, a device: nothing
            blocks), or larger than ``max_bytes``; ``str()`` names the file and the reason.
        OSError: the file exists but cannot be read (``PermissionError``, ...).
    """
    loc = beneath(root, path) if root is not None else _as_is(path)
    try:
        return read_regular(loc, max_bytes)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileRefusedError as exc:
        if loc.path == os.fspath(path):
            raise
        # Name the file asked for; the one a symlink led to is part of the reason.
        raise FileRefusedError(
            exc.errno or errno.EINVAL, f"{exc.strerror} ({loc.path})", os.fspath(path)
        ) from None


def _as_is(path: Path) -> Location:
    """``path`` opened with its symlinks followed: its folder as the root, its name beneath."""
    absolute = os.path.abspath(path)
    _check_text(absolute)
    folder, name = os.path.split(os.path.realpath(absolute))
    if not name:
        raise FileRefusedError(errno.EISDIR, "names no file", absolute)
    return Location(folder, name)


def open_dir(loc: Location) -> int:
    """A descriptor of the folder at ``loc`` (close-on-exec; the caller closes it).

    Raises:
        FileRefusedError: outside the root, or a forbidden symlink.
        NotADirectoryError: it is no folder (a FIFO is refused without blocking).
        OSError: the open failed.
    """
    return _open(loc, _DIR_FLAGS)


def open_parent(loc: Location) -> tuple[int, str]:
    """A descriptor of the folder that will hold ``loc``, creating missing folders on the way
    (beneath the root, under the location's rule), and the file's name in it.

    Raises:
        FileRefusedError: a folder on the way leads outside the root or is a forbidden
            symlink; the location names no file (``.``, a trailing ``/``); the path is longer
            than the kernel takes (:func:`check_length`), found before any folder is made.
        OSError: a folder could not be created or opened (the folders made are removed).
    """
    fd, name, _made = _open_parent(loc)
    return fd, name


PATH_MAX: Final = 4096
"""Bytes in a path the kernel takes, its NUL included (Linux's ``PATH_MAX``)."""
NAME_MAX: Final = 255
"""Bytes in one name of a path (Linux's ``NAME_MAX``)."""


def check_length(loc: Location) -> None:
    """Refuse a path the kernel could not open beneath the root: longer than
    :data:`PATH_MAX` less its NUL, or a name longer than :data:`NAME_MAX` (review finding 11:
    a ``write`` to ``a/a/a/…`` of thousands of names made 2049 folders before failing).

    Raises:
        FileRefusedError: ``ENAMETOOLONG``.
    """
    raw = os.fsencode(loc.rel)
    if len(raw) >= PATH_MAX:
        raise FileRefusedError(
            errno.ENAMETOOLONG,
            f"the path is too long ({len(raw)} bytes; at most {PATH_MAX - 1})",
            _shortened(loc.path),
        )
    if any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise FileRefusedError(
            errno.ENAMETOOLONG,
            f"a name on the path is too long (more than {NAME_MAX} bytes)",
            _shortened(loc.path),
        )


def _shortened(path: str, keep: int = 200) -> str:
    """``path`` for a message: at most ``keep`` characters of each end."""
    return path if len(path) <= 2 * keep else f"{path[:keep]}…{path[-keep:]}"


def _open_parent(loc: Location) -> tuple[int, str, list[str]]:
    """:func:`open_parent`, and the folders it made (relative to the root, outermost
    first); when it fails, those are removed again."""
    parent, name = os.path.split(loc.rel)
    if name in ("", ".", ".."):
        raise FileRefusedError(errno.EISDIR, "does not name a file", loc.path)
    check_length(loc)
    parts = [p for p in parent.split("/") if p not in ("", ".")]
    made: list[str] = []
    with _root_fd(loc) as root:
        current = _open_in(root, loc, ".", _DIR_FLAGS, 0)
        try:
            for i, part in enumerate(parts):
                folder = "/".join(parts[: i + 1])
                try:
                    os.mkdir(part, dir_fd=current)
                    made.append(folder)
                except FileExistsError:
                    pass
                # Opened again from the root, so the rule holds for the whole path so far
                # (a symlink inside the root may point to another folder inside it).
                step = _open_in(root, loc, folder, _DIR_FLAGS, 0)
                os.close(current)
                current = step
        except BaseException:
            os.close(current)
            _remove_made(loc, root, made)
            raise
    return current, name, made


def _remove_made(loc: Location, root: int, made: list[str]) -> None:
    """Remove the folders ``made`` (relative to ``root``), the deepest first, each opened
    under the location's rule; stops at the first that cannot go (another writer put
    something in it, or it was swapped)."""
    for folder in reversed(made):
        above, name = os.path.split(folder)
        try:
            fd = _open_in(root, loc, above or ".", _DIR_FLAGS, 0)
        except OSError:
            return
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            return
        finally:
            os.close(fd)


def replace_file(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    mode: int | None = None,
    create_mode: int = 0o666,
    durable: bool = False,
    tmp: str | None = None,
) -> None:
    """Write ``data`` to ``name`` in the folder ``dir_fd`` atomically: a temporary file in the
    same folder, then a rename over ``name`` (which replaces a symlink there, never its target).

    Args:
        mode: permission bits to give the file, as they are (None: ``create_mode``).
        create_mode: the bits the file is created with, less the umask (the kernel's).
        durable: fsync the file before the rename and the folder after it.
        tmp: the temporary file's name, created exclusively (default
            ``.NAME.<8 hex>.tmp``).
    """
    tmp = tmp or f".{name}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    fd = os.open(tmp, flags, create_mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            out.write(data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        os.fsync(dir_fd)


def _kept_mode(loc: Location, dir_fd: int, name: str) -> int | None:
    """The permission bits a rewrite of ``name`` keeps (None: a new file's default).

    A regular file keeps its own; for a symlink (replaced by the write, never followed) they
    are its target's, when that is a regular file the rule reaches. Set-id and sticky bits
    are dropped, as the kernel drops them when a file is written.

    Raises:
        FileRefusedError: ``name`` is a folder, FIFO, device or socket: it is not replaced.
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return st.st_mode & 0o777
    if not stat.S_ISLNK(st.st_mode):
        raise _not_regular(st, loc.path)
    try:
        probe = _open(loc, _O_PATH or _READ_FLAGS)
    except OSError:  # dangling, or leading out: the file written is a new one
        return None
    try:
        target = os.fstat(probe)
    finally:
        os.close(probe)
    return target.st_mode & 0o777 if stat.S_ISREG(target.st_mode) else None


def write_file(loc: Location, data: bytes, *, durable: bool = False) -> bool:
    """Replace the file at ``loc`` with ``data`` atomically (:func:`replace_file`), creating
    missing folders beneath the root; an existing file's permission bits are kept (a
    symlink's target's, for a symlink at the name, which is replaced and never followed).

    Returns:
        True when the file was created, False when one was replaced.

    Raises:
        FileRefusedError: the path leaves the root, names a folder, FIFO, device or socket, or
            is too long (:func:`check_length`).
        OSError: the write failed; the folders it made are removed again.
    """
    parent, name, made = _open_parent(loc)
    try:
        existed = True
        try:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            existed = False
        replace_file(parent, name, data, mode=_kept_mode(loc, parent, name), durable=durable)
    except BaseException:
        if made:  # a failed write leaves no folders it made behind (review finding 11)
            with _root_fd(loc) as root:
                _remove_made(loc, root, made)
        raise
    finally:
        os.close(parent)
    return not existed
