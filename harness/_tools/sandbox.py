"""The bash tool's sandbox: a mount namespace (bubblewrap) in which the paths a supervisor
protects are read-only and its private folders empty, so a command the supervisor approved
without a person seeing it cannot reach them by any spelling the supervisor's reading of the
command missed: the kernel refuses the write or shows nothing to read.

Claude Code's bash sandbox uses bubblewrap on Linux the same way. Without ``bwrap`` (another
system, or a kernel that refuses the namespaces it needs) commands run unsandboxed and the
harness logs a warning once; ``bash_tool(sandbox="required")`` refuses them instead.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable, Iterable
from typing import TypeAlias

from attrs import field, frozen

from .._fs import SYSTEM_FOLDERS, root_only

__all__ = [
    "Identity",
    "Node",
    "Sandbox",
    "identities",
    "sandbox_available",
    "sandboxed",
    "set_aside",
]

_log = logging.getLogger("harness")
_PROBE_S = 10.0  # how long the one-time check that bwrap works may take


@frozen(kw_only=True)
class Sandbox:
    """What a sandboxed command may not change or read (absolute paths), or how to find it
    when the command starts (``make``).

    Attributes:
        read_only: files and folders the command sees as they are but cannot change, remove
            or rename (a write fails with ``EROFS``, a rename with ``EBUSY``).
        pinned: folders the command may change inside but cannot remove, rename or replace
            (a repository's ``.git``, whose ``config`` and ``hooks`` are ``read_only``).
        hidden: files and folders the command sees empty (a folder as an empty read-only
            folder, a file as an empty read-only file).
        watched: protected names (as written, not resolved) that no mount can hold because
            they do not exist yet or are symlinks (a link can be replaced, a missing name
            made): whatever the command leaves at one of them that was not there before is
            moved aside (:func:`set_aside`).
        writable: the folders the command may write in (Claude Code's sandbox: the working
            folder, the additional directories, the temporary folder); everything else is
            read-only. None: the whole file system as it is, but for the paths above.
    """

    read_only: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    watched: tuple[str, ...] = ()
    writable: tuple[str, ...] | None = None
    make: Callable[[], Sandbox] | None = field(default=None, eq=False, repr=False)
    """When given, the sandbox is found by calling it when the command starts
    (:meth:`current`), not when the call was decided: an earlier call of the same reply may
    have made a protected path since (a person-approved ``git init`` made ``.git``, which a
    sandbox found at decision time did not hold: review 10, finding 9)."""

    @classmethod
    def when_run(cls, make: Callable[[], Sandbox]) -> Sandbox:
        """A sandbox found by ``make()`` when the command starts."""
        return cls(make=make)

    def current(self) -> Sandbox:
        """The sandbox as the file system is now: ``make()`` when given, else this one."""
        return self.make() if self.make is not None else self


Node: TypeAlias = "tuple[int, int, int, str | None] | None"
"""One name's (device, inode, file type, a symlink's target) without following a symlink,
None if missing."""
Identity: TypeAlias = "tuple[Node, ...]"
"""A path's :data:`Node` for each of its components as written, outermost first, the name
itself last: a folder above it made or replaced (a link ``~/.local/lib -> elsewhere``) changes
it as surely as the name does."""


def identities(paths: Iterable[str]) -> dict[str, Identity]:
    """Each absolute path's :data:`Identity` (a component shared by several paths is looked
    at once)."""
    nodes: dict[str, Node] = {}
    out: dict[str, Identity] = {}
    for path in paths:
        out[path] = tuple(_node(p, nodes) for p in _components(path))
    return out


def _components(path: str) -> list[str]:
    """``/a/b/c`` as ``["/a", "/a/b", "/a/b/c"]``."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _node(path: str, nodes: dict[str, Node]) -> Node:
    if path not in nodes:
        try:
            st = os.lstat(path)
            link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
            nodes[path] = (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), link)
        except (OSError, ValueError):
            nodes[path] = None
    return nodes[path]


def set_aside(before: dict[str, Identity]) -> list[tuple[str, str]]:
    """Move aside what a sandboxed command left at a watched name that is not what was there
    before it ran (a new ``.mcp.json``, a first ``.git``, a link replaced), or at a folder
    above it that was missing (``~/.local/lib`` made a link, so the user site resolved to
    another folder: review 12, finding 4; the thing the link led to is never touched):
    renamed, never deleted, to ``NAME.blocked-<pid>-<n>`` beside it (the first free one), so
    nothing is lost and nothing there grants or runs anything; a symlink that was there (and
    was removed or replaced) is made again as it was. Returns ``(path, where it went)`` pairs;
    a name that cannot be moved is removed instead (never left to grant or run anything) and
    returned with ``""``."""
    moved: list[tuple[str, str]] = []
    for watched, was_all in before.items():
        # looked at anew for each: one moved with a folder above it is as it was again
        now_all = identities([watched])[watched]
        if now_all == was_all:
            continue
        # the outermost component that is not what it was: the command's doing
        i = next(i for i, (a, b) in enumerate(zip(was_all, now_all, strict=True)) if a != b)
        path, was, now = _components(watched)[i], was_all[i], now_all[i]
        if now is None:
            _relink(path, was)
            continue
        for n in itertools.count():
            target = _blocked_name(path, n)
            if not os.path.lexists(target):
                break
        try:
            _rename(path, target)
        except OSError as exc:
            # left in place it would grant or run what the command wrote: removed instead
            _log.error("could not move aside %s, which a sandboxed command made: %s", path, exc)
            target = ""
            try:
                _remove(path)
            except OSError as again:
                _log.error("could not remove %s either: %s", path, again)
            else:
                _relink(path, was)
        else:
            _relink(path, was)
        moved.append((path, target))
    return moved


_NAME_MAX = 255  # bytes in one name (Linux)


def _blocked_name(path: str, n: int) -> str:
    """``NAME.blocked-<pid>-<n>`` beside ``path``, NAME cut short so the name fits in
    :data:`_NAME_MAX` bytes (a 250-byte name failed to move with ``ENAMETOOLONG`` and stayed:
    review 9, finding 9)."""
    folder, name = os.path.split(path)
    suffix = os.fsencode(f".blocked-{os.getpid()}-{n}")
    kept = os.fsencode(name)[: _NAME_MAX - len(suffix)]
    return os.path.join(folder, os.fsdecode(kept + suffix))


def _remove(path: str) -> None:
    """Remove what lies at ``path`` (a folder with what is in it), never following a link."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _rename(path: str, target: str) -> None:
    """``os.rename``, first making the folder writable for its owner when the command took
    that away (``chmod a-w`` on the folder keeps its file from being moved: review 8, finding
    2); the folder's mode is put back after."""
    try:
        os.rename(path, target)
        return
    except PermissionError:
        folder = os.path.dirname(path) or "."
        mode = stat.S_IMODE(os.lstat(folder).st_mode)
        os.chmod(folder, mode | stat.S_IWUSR | stat.S_IXUSR)
        try:
            os.rename(path, target)
        finally:
            os.chmod(folder, mode)


def _relink(path: str, was: Node) -> None:
    """Make again the symlink ``was`` describes at ``path`` (nothing if it was no link)."""
    if was is None or was[3] is None:
        return
    try:
        os.symlink(was[3], path)
    except OSError as exc:
        _log.error("could not make the symlink %s -> %s again: %s", path, was[3], exc)


_lock = threading.Lock()
_works: dict[str, bool] = {}


_found: list[str | None] = []


def _bwrap() -> str | None:
    """The bubblewrap program, looked up once per process in PATH's absolute entries, taking
    only one that no user but root can change: the file and its folder owned by root and
    writable by nobody else (for root: in the system's folders, ``/usr``, ``/bin``, ...,
    read-only in the sandbox). A ``bwrap`` a command can write (``~/.local/bin``, the working
    folder) would otherwise be every later command's sandbox (review 7, finding 11)."""
    with _lock:
        if not _found:
            entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
            _found.append(
                next(
                    (
                        real
                        for e in entries
                        if os.path.isabs(e)
                        and (found := shutil.which("bwrap", path=e)) is not None
                        and root_only(real := os.path.realpath(found))
                    ),
                    None,
                )
            )
        return _found[0]


def sandbox_available() -> bool:
    """Whether bubblewrap is installed and can make a mount namespace here (checked once per
    process by running ``bwrap ... true``, at most 10 s; a failure is logged)."""
    program = _bwrap()
    if program is None:
        return False
    with _lock:
        if program not in _works:
            try:
                done = subprocess.run(
                    [*_base(program), "--ro-bind", "/", "/", "true"],
                    stdin=subprocess.DEVNULL,  # never the harness's own (rpc's protocol)
                    capture_output=True,
                    timeout=_PROBE_S,
                    check=False,
                )
                _works[program] = done.returncode == 0
                if done.returncode:
                    _log.warning(
                        "bubblewrap cannot sandbox bash commands here (%s): %s",
                        program,
                        done.stderr.decode(errors="replace").strip()[:500],
                    )
            except (OSError, subprocess.TimeoutExpired) as exc:
                _log.warning("bubblewrap cannot sandbox bash commands here: %s", exc)
                _works[program] = False
        return _works[program]


def sandboxed(argv: list[str], sandbox: Sandbox, cwd: str) -> list[str]:
    """``argv`` run by bubblewrap in a mount namespace where the whole file system is as it is
    (read-only but for ``sandbox.writable`` when it is given) except ``sandbox``'s paths,
    started in ``cwd``, in a process namespace of
    its own (so its background jobs end with it), killed when this process dies. Paths that
    no longer exist, or are no longer what they were (a file now a folder), are left out:
    bubblewrap would make a mount point for them.

    Raises:
        FileNotFoundError: bubblewrap is not installed.
    """
    program = _bwrap()
    if program is None:
        raise FileNotFoundError("bwrap (bubblewrap) is not installed")
    mounts: list[tuple[str, list[str]]] = []
    read_only = [p for p in sandbox.read_only if _kind(p) is not None]
    hidden = [(p, k) for p in sandbox.hidden if (k := _kind(p)) is not None]
    system = _SYSTEM if os.geteuid() == 0 else ()
    # a folder in something read-only or hidden cannot be renamed anyway; binding it writable
    # again would undo the read-only mount above it
    held = (*read_only, *(p for p, k in hidden if k == "dir"), *system)
    writable = sandbox.writable
    if writable is not None:
        writable = tuple(p for p in writable if _kind(p) == "dir")
        for path in writable:
            mounts.append((path, ["--bind", path, path]))
    for path in sandbox.pinned:
        # in something held, or outside the writable folders, a pinned folder cannot be
        # renamed anyway, and binding it would make it writable again
        if (
            _kind(path) == "dir"
            and _deepest(path, writable or ("/",)) > _deepest(path, held)
            and (writable is None or path not in writable)
        ):
            mounts.append((path, ["--bind", path, path]))
    for path in read_only:
        mounts.append((path, ["--ro-bind", path, path]))
    for path, kind in hidden:
        if kind == "dir":
            mounts.append((path, ["--tmpfs", path, "--remount-ro", path]))
        else:
            mounts.append((path, ["--ro-bind", "/dev/null", path]))
    # what lies in a hidden folder is hidden with it (and no mount point can be made there)
    empty = [p for p, k in hidden if k == "dir"]
    mounts = [m for m in mounts if not _under(os.path.dirname(m[0]), empty)]
    # parents before what lies beneath them, so an inner mount is not covered by an outer one
    mounts.sort(key=lambda m: (m[0].count("/"), m[0]))
    out = _base(program, read_only=writable is not None)
    for _path, args in mounts:
        out += args
    return [*out, "--chdir", cwd, "--", *argv]


def _deepest(path: str, folders: Iterable[str]) -> int:
    """How deep the deepest of ``folders`` holding ``path`` lies (-1: none does)."""
    return max((f.rstrip("/").count("/") for f in folders if _under(path, [f])), default=-1)


def _under(path: str, folders: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``folders`` or lies in one."""
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _base(program: str, *, read_only: bool = False) -> list[str]:
    """The namespace every sandboxed command gets: the file system as it is (but ``/dev``;
    read-only with ``read_only``), a
    process namespace of its own with its own ``/proc`` (another process's
    ``/proc/PID/root`` would lead back to the file system outside), and for root no
    capabilities (with them a command could unmount what covers a protected path)."""
    # A /dev of its own (null, zero, urandom, tty, its own pts and shm): the host's terminals
    # (/dev/pts/N) are not there, so a command cannot draw on the user's terminal past every
    # escaper, and a session of its own, so no TIOCSTI into one (review 10, finding 4).
    root = ["--ro-bind", "/", "/"] if read_only else ["--dev-bind", "/", "/"]
    out = [program, *root, "--dev", "/dev", "--unshare-pid", "--proc", "/proc"]
    out.append("--new-session")
    # The kernel's own settings stay read-only (root without capabilities could still write
    # /proc/sys/kernel/core_pattern, a program the kernel runs as root: review 7, finding 12),
    # and so does bubblewrap itself.
    for path in (*_KERNEL, program):
        if os.path.exists(path):
            out += ["--ro-bind", path, path]
    if os.geteuid() == 0:
        out += ["--cap-drop", "ALL"]
        # root owns the system's programs and libraries: bwrap's, bash's, git's
        for path in _SYSTEM:
            if _kind(path) == "dir":
                out += ["--ro-bind", path, path]
    return [*out, "--die-with-parent"]


_KERNEL = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/sys")
_SYSTEM = SYSTEM_FOLDERS


def _kind(path: str) -> str | None:
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return None  # a symlink (its target is listed on its own) or a device: not mounted over
