"""What a tool call changed in the workspace: a file's content before and after (``write``,
``edit``, any tool that names a path), or a comparison of the whole workspace before and after
(``bash``).

The whole-workspace comparison goes through git's index when the working folder is in a git
repository: ``git status`` lists what differs from the index (modified, deleted, untracked),
so only those files are read and stored before the command runs; a clean tracked file's
content is already in git's objects, and is copied into the store only if the command changes
it. When the command changes the index itself (``git add``, ``commit``, ``checkout``,
``stash``), the index entries before and after are compared too. Elsewhere a stat scan walks
the folder (at most ``max_files`` files), storing every file not stored with the same stat
since, and compares stats afterwards.

Blind spots (docs/checkpoints.md): files git ignores (in a repository); files past the scan's
cap (elsewhere); symlinks, folders, FIFOs and devices (only regular files are recorded); files
larger than the store's file cap; what is outside the working folder; git's own state (HEAD,
branches, the index: a rewind puts files back, not commits). A change it cannot record is
listed as *missed* in the entry.

Every file is read through ``harness._fs`` beneath the working folder: a regular file only, at
most the store's file cap, never through a symlink that leads out.

A deferred capture (:meth:`Workspace.capture_deferred`, for ``write``/``edit``) reads the file
on the spot but hashes and stores it on a worker thread once handed over (:meth:`flush`;
hashing and writing a large content release the GIL), returning a :class:`Pending` whose ref
the store maps to the blob once it is stored (blob first, then the ref).
``Checkpoints.settle`` waits for that work; a plain :meth:`Workspace.capture` of a file whose
content is still pending waits for it too.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import pwd
import re
import secrets
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from pathlib import Path
from typing import Final, Literal, TypeAlias, overload

from attrs import define, frozen

from .._fs import (
    FileRefusedError,
    Location,
    beneath,
    open_regular,
    program_path,
    read_capped,
    read_regular_at,
    root_only,
)
from .._permissions import ProtectedPaths
from .records import Change, FileState, Missed, Pending
from .store import CheckpointStore

__all__ = [
    "DEFAULT_MAX_FILES",
    "Snapshot",
    "Unknown",
    "Workspace",
    "home_dot_path",
    "same_file",
]

_log = logging.getLogger("harness")

DEFAULT_MAX_FILES: Final = 10_000
"""The most entries (files, folders, symlinks...) a stat scan (outside git) looks at, or files a
git scan stores before a command."""
DEFAULT_MAX_SCAN_BYTES: Final = 256 * 1024**2
"""The most bytes one scan (before or after a command) reads into the store, 256 MiB: files
past it are not read (listed as missed when they change), so a huge folder never makes a
command wait for all of it."""
INDEX_MAX_BYTES: Final = 256 * 1024**2
"""The largest git index a scan reads (a 10,000-file repository's is about 1 MB)."""
DEFER_MAX_BYTES: Final = 64 * 1024**2
"""The most bytes of contents read for deferred captures and not stored yet, 64 MiB: past it a
capture waits for the worker first, so memory stays bounded however fast files change."""
SPARE_BUFFERS: Final = 4
"""How many read buffers deferred captures keep for reuse."""
SPARE_MAX_BYTES: Final = 16 * 1024**2
"""The largest file a deferred capture reads into a buffer kept for reuse (larger ones get
their own)."""
GIT_TIMEOUT_S: Final = 60.0
_ZERO_SHA: Final = "0" * 40
# git reads no repository hook or file-system monitor for us: only what it must to compare.
_GIT_SAFETY: Final = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "safe.bareRepository=explicit",
    "-c",
    "protocol.allow=never",  # no fetch, lazy (a promisor remote) or not: review 6, finding 18
    # a repository's `protocol.<name>.allow=always` wins over protocol.allow (review 10, 3)
    *(
        arg
        for name in ("file", "git", "ssh", "http", "https", "ext", "fd", "ftp", "ftps")
        for arg in ("-c", f"protocol.{name}.allow=never")
    ),
)
_FILTER_KEY = re.compile(rb"^filter\.(.+)\.(?:clean|smudge|process|required)$", re.IGNORECASE)


def _add_config(env: dict[str, str], pairs: Sequence[tuple[str, str]]) -> None:
    """Add ``pairs`` to git's command-line configuration in ``env``, after any the
    environment already gives (``GIT_CONFIG_COUNT``; an unreadable count is replaced)."""
    if not pairs:
        return
    try:
        count = max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        count = 0
    for i, (key, value) in enumerate(pairs, start=count):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    env["GIT_CONFIG_COUNT"] = str(count + len(pairs))


def _trusted_path() -> str:
    """``$PATH`` for the scan's git: its entries no user but root can change (for root, the
    system folders). git runs programs a config names by bare name (a filter's ``git-lfs``)
    through ``$PATH``, and a sandboxed command can plant one in ``~/.local/bin``, which would
    run outside the sandbox at the next scan (review 10, finding 5)."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    kept = [e for e in entries if os.path.isabs(e) and root_only(os.path.realpath(e))]
    return os.pathsep.join(dict.fromkeys(kept)) or "/usr/bin:/bin"


def _homes() -> set[str]:
    """The user's home folder, resolved: ``$HOME``'s and the password database's."""
    found = set()
    with contextlib.suppress(KeyError, OSError):
        found.add(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir))
    home = os.environ.get("HOME")
    if home and os.path.isabs(home):
        found.add(os.path.realpath(home))
    return found


def home_dot_path(path: str, root: str) -> str | None:
    """The home folder's dot-file or dot-folder the recorded ``path`` (relative to ``root``) is
    or lies in (``~/.bashrc``, ``~/.ssh``), when ``root`` is the home folder or holds it; None
    otherwise. A rewind or fork never writes there: shell start-up files, ``.ssh``,
    ``.config`` run code or grant logins, and any file the stat scan saw in the home folder (a
    download) is in the store for a session file to name (issue 26 attack, finding 9)."""
    real = os.path.realpath(root)
    for home in _homes():
        if home == real:
            rest = path
        elif home.startswith(real.rstrip("/") + "/"):
            inner = home[len(real.rstrip("/")) + 1 :]
            if not path.startswith(inner + "/"):
                continue
            rest = path[len(inner) + 1 :]
        else:
            continue
        first = rest.split("/", 1)[0]
        if first.startswith("."):
            return f"~/{first}"
    return None


def command_folder_path(path: str, root: str) -> str | None:
    """The folder of ``$PATH`` (an absolute entry) the recorded ``path`` (relative to
    ``root``) lies in, or None. A rewind or fork never writes there: a file there is a command
    the user's next shell runs by its bare name (``~/bin/git`` when the working folder is the
    home folder; issue 26 recheck)."""
    try:
        where = os.path.realpath(os.path.join(root, os.path.dirname(path)))
    except OSError:
        return None  # a link swapped on the way: the write goes through no symlink anyway
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isabs(entry):
            continue
        folder = os.path.realpath(entry)
        if where == folder or where.startswith(folder.rstrip("/") + "/"):
            return entry
    return None


@frozen
class Unknown:
    """A file whose state could not be recorded, and why."""

    reason: str


@frozen
class _GitRef:
    """A file whose content is git's blob ``sha`` (the index's), with the index's ``mode``."""

    sha: str
    mode: int


Seen: TypeAlias = FileState | _GitRef | Unknown | None
_StatKey: TypeAlias = tuple[int, int, int, int, int, int]


def same_file(a: FileState | Pending | None, b: FileState | Pending | None) -> bool:
    """Whether two states hold the same file: the same content and executable bit (git's
    notion of a mode; other bits vary with the umask), or both no file. A pending content is
    the same only as itself (its digest is not known yet)."""
    if isinstance(a, FileState) and isinstance(b, FileState):
        return a.digest == b.digest and bool(a.mode & 0o111) == bool(b.mode & 0o111)
    return a == b


@define
class Snapshot:
    """A workspace before a command: what was seen, and how."""

    kind: Literal["git", "stat"]
    seen: dict[str, Seen]
    index: bytes | None = None
    mark_ns: int = 0
    stats: dict[str, _StatKey] | None = None
    complete: bool = True
    refs: dict[str, _GitRef] | None = None


@frozen
class _Git:
    toplevel: str
    prefix: str
    index: str
    git_dir: str


def git_folders_made(judge: ProtectedPaths, written: Iterable[str]) -> dict[str, str]:
    """Why each of the ``written`` paths (relative to ``judge``'s folder) is never written by
    a rewind or a fork: written together they would make a git folder
    (:meth:`ProtectedPaths.git_folders_made`); paths not listed may be written."""
    return {
        path: f"with the others it would make {folder or 'the working folder'} a git folder "
        "(HEAD, objects, refs), whose config and hooks git runs: never written"
        for path, folder in judge.git_folders_made(written).items()
    }


class Workspace:
    """Capture files of one working folder into a store; compare it before and after.

    Args:
        root: the working folder (trusted: the harness's ``cwd``).
        store: where contents go.
        exclude: folders (and files) inside ``root`` never scanned or rewound (the sessions
            root, the session's own file, when they lie inside the working folder).
        max_files: the stat scan's cap (see :data:`DEFAULT_MAX_FILES`).
        max_scan_bytes: the most bytes one scan reads (see :data:`DEFAULT_MAX_SCAN_BYTES`).
        git: the git program (None: never use git).
        git_timeout_s: the longest one git call may take; after one times out, the scans
            are stat scans for the rest of the workspace's life (the session's).

    The folders left alone (``exclude``, the store, git's folder) are known by identity
    (device and inode), not only by path: a symlink, a bind mount or any other spelling of
    them inside the working folder is left alone too.
    """

    def __init__(
        self,
        root: Path,
        store: CheckpointStore,
        *,
        exclude: Iterable[Path] = (),
        max_files: int = DEFAULT_MAX_FILES,
        max_scan_bytes: int = DEFAULT_MAX_SCAN_BYTES,
        git: str | None = "git",
        git_timeout_s: float = GIT_TIMEOUT_S,
    ) -> None:
        self.root = Path(os.path.abspath(root))
        self._real = os.path.realpath(self.root)
        self.store = store
        self.max_files = max_files
        self.watched: set[str] | None = None
        """Paths the session's own ``write``/``edit`` recorded, which a git scan compares even
        where git ignores them (None: not read yet; ``Checkpoints`` fills it)."""
        self.max_scan_bytes = max_scan_bytes
        self._left: int | None = None  # bytes the running scan may still read (None: no scan)
        self._over = False  # the running scan left a file unread at its byte cap
        self._folders = (*(Path(os.path.abspath(p)) for p in exclude), store.root)
        # A folder to leave alone that holds the whole working folder cannot be honoured.
        self._exclude = tuple(
            rel
            for rel in (self._inside(os.path.realpath(p)) for p in self._folders)
            if rel is not None and rel != "."
        )
        self._ids: frozenset[tuple[int, int]] = frozenset()
        self._judged: dict[str, bool] = {}
        self._protected = ProtectedPaths(Path(self.root))
        program = program_path(git) if git is not None else None
        self._git_program = program if program is not None and os.path.isabs(program) else None
        self._git: _Git | Literal[False] | None = False  # False: not looked up yet
        self._git_timeout_s = git_timeout_s
        # git timed out once (a FIFO named .gitignore blocks every status: issue 26 attack,
        # finding 5): every later scan is a stat scan, rather than each waiting it out again
        self.git_timed_out = False
        # config pairs turning the filter drivers off
        self._no_filters: tuple[tuple[str, str], ...] = ()
        self._cache: dict[str, tuple[_StatKey, FileState | Pending]] = {}
        self._writer: ThreadPoolExecutor | None = None
        self._queued: list[
            tuple[str, str, bytes | memoryview]
        ] = []  # (ref, file, content) not handed over
        # ref -> (its digest, bytes, the file): the worker's stores not forgotten yet
        self._writes: dict[str, tuple[Future[str], int, str]] = {}
        self._failed = False  # a deferred store failed: capture on the spot until one works
        self._spare: list[bytearray] = []  # read buffers the worker is done with
        self._spare_lock = threading.Lock()  # the worker gives them back

    def _inside(self, real: str) -> str | None:
        if real == self._real:
            return "."
        prefix = self._real.rstrip("/") + "/"
        return real[len(prefix) :] if real.startswith(prefix) else None

    def refresh_exclusions(self) -> None:
        """Look up the identities of the folders left alone again (before each scan and
        rewind plan: the store, say, may have been made since)."""
        ids = set()
        git = self.git_info()
        for folder in (*self._folders, *((git.git_dir,) if git is not None else ())):
            with contextlib.suppress(OSError):
                st = os.stat(folder)
                ids.add((st.st_dev, st.st_ino))
        self._ids = frozenset(ids)
        self._judged = {}
        self._protected = ProtectedPaths(Path(self.root))

    def excluded(self, rel: str) -> bool:
        """Whether ``rel`` (relative to the root) is or lies in a folder never scanned or
        rewound: by path, and by the identity of each folder on the way (as of the last
        :meth:`refresh_exclusions`)."""
        if self._excluded_by_path(rel):
            return True
        parts = rel.split("/")
        return any(self._is_excluded_dir("/".join(parts[:i])) for i in range(1, len(parts) + 1))

    def _excluded_by_path(self, rel: str) -> bool:
        return any(rel == ex or rel.startswith(ex + "/") for ex in self._exclude)

    def _is_excluded_dir(self, rel: str) -> bool:
        hit = self._judged.get(rel)
        if hit is None:
            try:
                st = os.lstat(os.path.join(self.root, rel))
            except OSError:
                hit = False
            else:
                hit = (st.st_dev, st.st_ino) in self._ids
            self._judged[rel] = hit
        return hit

    def git_folders_made(self, written: Iterable[str]) -> dict[str, str]:
        """:func:`git_folders_made` in the working folder."""
        return git_folders_made(self._protected, written)

    def locate(self, path: str) -> Location | str:
        """Where a rewind may write the recorded ``path``: beneath the working folder through
        no symlink (the ``inside`` rule), not in git's folder, the store or the sessions; or
        why not (an absolute path, a symlink on the way, one of those folders)."""
        if path.startswith("/"):
            return "an absolute path: a rewind writes only inside the working folder"
        if any(part.casefold() == ".git" for part in path.split("/")):
            return "in git's folder: a rewind never writes there"
        parts = path.split("/")
        for i in range(1, len(parts)):
            try:
                st = os.lstat(os.path.join(self.root, *parts[:i]))
            except (FileNotFoundError, NotADirectoryError):
                break  # made by the rewind
            except OSError as exc:
                return f"cannot look at {'/'.join(parts[:i])}: {exc.strerror}"
            if stat.S_ISLNK(st.st_mode):
                return f"{'/'.join(parts[:i])} is a symlink: a rewind writes through none"
        if self.excluded(path):
            return "in the sessions' folder, the checkpoint store or git's folder"
        dot = home_dot_path(path, str(self.root))
        if dot is not None:
            return f"{dot}, in the home folder: a rewind never writes its dot-files"
        commands = command_folder_path(path, str(self.root))
        if commands is not None:
            return f"in {commands}, a folder of $PATH: a rewind never writes commands"
        protected = self._protected(path)
        if protected is not None:
            # settings, hooks, .mcp.json: a session file (untrusted) that claims to have made
            # them could have a rewind remove a project's deny rules (review 5, finding 27)
            return f"a protected path, which a rewind never writes ({protected})"
        return Location(str(self.root), path, "inside")

    # --- one file ------------------------------------------------------------------------------

    def capture(self, loc: Location) -> FileState | Unknown | None:
        """The state of the file at ``loc``, its content stored: None when there is none.

        A file whose stat (device, inode, size, mtime, ctime, mode) is the one stored last
        time is not read again (when that content is still pending, this waits for it).

        Raises:
            OSError: the store cannot be written.
        """
        return self._capture(loc, defer=False)[0]

    def capture_deferred(self, loc: Location) -> FileState | Pending | Unknown | None:
        """As :meth:`capture`, but a content read now is kept for the worker thread, which
        hashes and stores it once :meth:`flush` hands it over (after the call's entry is
        written, so the worker never competes with the call): a :class:`Pending` until then.
        After a deferred store failed (logged), captures store on the spot again until one
        succeeds, so a store that cannot be written fails the next call before it runs.

        Raises:
            OSError: (after a failure) the store cannot be written.
        """
        return self._capture(loc, defer=not self._failed)[0]

    def flush(self) -> None:
        """Hand the contents deferred captures read to the worker thread."""
        queued, self._queued = self._queued, []
        if not queued:
            return
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="harness-checkpoints")
        for ref, shown, data in queued:
            size = len(data)  # before the worker releases the view
            self._writes[ref] = (self._writer.submit(self._store, ref, shown, data), size, shown)

    def unfinished(self) -> list[Future[str]]:
        """The worker's stores not done yet (after :meth:`flush`: contents not handed over are
        not among them)."""
        return [future for future, _, _ in self._writes.values() if not future.done()]

    def forget_finished(self) -> None:
        """Drop the stores that are done, the cache told what became of them: a stored
        content is known by its digest from now on (the next entry that names it says
        ``sha256``), a failed one is read again next time."""
        for ref, (future, _, shown) in list(self._writes.items()):
            if not future.done():
                continue
            del self._writes[ref]
            hit = self._cache.get(shown)
            if hit is None or not isinstance(hit[1], Pending) or hit[1].ref != ref:
                continue
            if future.exception() is None:
                pending = hit[1]
                self._cache[shown] = (
                    hit[0],
                    FileState(future.result(), pending.mode, pending.size),
                )
            else:
                del self._cache[shown]

    @property
    def pending(self) -> int:
        """How many deferred contents are not stored yet."""
        waiting = sum(not future.done() for future, _, _ in self._writes.values())
        return len(self._queued) + waiting

    @overload
    def _capture(
        self, loc: Location, *, defer: Literal[False]
    ) -> tuple[FileState | Unknown | None, int]: ...
    @overload
    def _capture(
        self, loc: Location, *, defer: bool
    ) -> tuple[FileState | Pending | Unknown | None, int]: ...
    def _capture(
        self, loc: Location, *, defer: bool
    ) -> tuple[FileState | Pending | Unknown | None, int]:
        """The state and the file's ctime in ns (0 when there is no file)."""
        shown = loc.path
        try:
            st = os.lstat(shown)
        except (FileNotFoundError, NotADirectoryError):
            return None, 0
        except OSError as exc:
            return Unknown(f"cannot stat: {exc.strerror}"), 0
        if not stat.S_ISREG(st.st_mode):
            return Unknown("not a regular file (only regular files are recorded)"), st.st_ctime_ns
        hit = self._cache.get(shown)
        if hit is not None and hit[0] == _key(st):
            known = hit[1] if defer else self._stored_state(shown, hit)
            if known is not None:
                return known, st.st_ctime_ns
        cap = self.store.max_file_bytes
        if st.st_size > cap:
            return Unknown(f"larger than the store's file cap ({cap} bytes)"), st.st_ctime_ns
        if self._left is not None:
            if st.st_size > self._left:
                self._over = True
                reason = f"past the scan's cap of {self.max_scan_bytes} bytes read"
                return Unknown(reason), st.st_ctime_ns
            cap = min(cap, self._left)  # a file that grew since the stat is not read past it
        try:
            fd, fst = open_regular(loc)
            try:
                data = (
                    self._read_spare(fd, fst, cap, shown)
                    if defer
                    else read_capped(fd, fst, cap, shown)
                )
            finally:
                os.close(fd)
        except (FileNotFoundError, NotADirectoryError):
            return None, 0
        except FileRefusedError as exc:
            return Unknown(str(exc.strerror)), st.st_ctime_ns
        except OSError as exc:
            return Unknown(f"cannot read: {exc.strerror}"), st.st_ctime_ns
        if self._left is not None:
            self._left -= len(data)
        mode = fst.st_mode & 0o7777
        state: FileState | Pending
        if defer:
            state = Pending(self._defer(shown, data), mode, len(data))
        else:
            state = FileState(self.store.put(data), mode, len(data))
            self._failed = False
        self._cache[shown] = (_key(fst), state)
        return state, fst.st_ctime_ns

    def _stored_state(
        self, shown: str, hit: tuple[_StatKey, FileState | Pending]
    ) -> FileState | None:
        """The cached state of ``shown`` with its content stored (waiting for the worker when
        it is pending); None when that store failed (the file must be read again)."""
        key, state = hit
        if isinstance(state, FileState):
            return state
        if any(ref == state.ref for ref, _, _ in self._queued):
            self.flush()
        write = self._writes.get(state.ref)
        try:
            digest = write[0].result() if write is not None else self.store.resolve(state.ref)
        except Exception:  # logged by the worker
            digest = None
        if digest is None:
            del self._cache[shown]
            return None
        stored = FileState(digest, state.mode, state.size)
        self._cache[shown] = (key, stored)
        return stored

    def _defer(self, shown: str, data: bytes | memoryview) -> str:
        """Keep ``data`` for the worker (:meth:`flush`); its new ref. Past
        :data:`DEFER_MAX_BYTES` not stored yet, the earlier contents are stored first."""
        self.forget_finished()
        waiting = sum(size for _, size, _ in self._writes.values())
        waiting += sum(len(queued) for _, _, queued in self._queued)
        if waiting + len(data) > DEFER_MAX_BYTES and (self._writes or self._queued):
            self.flush()
            wait_all([future for future, _, _ in self._writes.values()])
        ref = secrets.token_hex(32)
        self._queued.append((ref, shown, data))
        return ref

    def _store(self, ref: str, shown: str, data: bytes | memoryview) -> str:
        """On the worker: the blob first, then its ref, so a ref never names a blob that
        was not written. A spare buffer ``data`` views is given back afterwards."""
        try:
            digest = self.store.put(data)
            self.store.put_ref(ref, digest)
        except BaseException as exc:
            self._failed = True
            _log.warning("checkpoint content of %s could not be stored: %s", shown, exc)
            raise
        finally:
            if isinstance(data, memoryview) and isinstance(data.obj, bytearray):
                buffer = data.obj
                data.release()
                self._give_back(buffer)
        return digest

    def _read_spare(self, fd: int, st: os.stat_result, cap: int, shown: str) -> bytes | memoryview:
        """The whole content of ``fd`` (``st`` its ``fstat``), as :func:`read_capped` reads it,
        but into a buffer of earlier reads when one is large enough: a new buffer's memory
        costs a page fault per 4 KiB on first use, more than the read itself (0.7 ms for 1
        MB here against 0.05 ms). A file that grew since the ``fstat`` is read afresh."""
        want = st.st_size + 1  # a byte more: seeing the end
        if want > SPARE_MAX_BYTES or st.st_size > cap:
            return read_capped(fd, st, cap, shown)
        with self._spare_lock:
            buffer = next((b for b in self._spare if len(b) >= want), None)
            if buffer is not None:
                self._spare.remove(buffer)
        if buffer is None:
            buffer = bytearray(want)
        view = memoryview(buffer)[:want]
        got = 0
        while got < want and (n := os.readv(fd, [view[got:]])):
            got += n
        if got < want:
            return view[:got]
        view.release()  # it grew since the fstat
        self._give_back(buffer)
        os.lseek(fd, 0, os.SEEK_SET)
        return read_capped(fd, os.fstat(fd), cap, shown)

    def _give_back(self, buffer: bytearray) -> None:
        """Keep ``buffer`` for later reads: at most :data:`SPARE_BUFFERS`, the largest."""
        with self._spare_lock:
            self._spare.append(buffer)
            if len(self._spare) > SPARE_BUFFERS:
                self._spare.remove(min(self._spare, key=len))

    def _rel(self, rel: str) -> Location:
        return beneath(self.root, rel)

    # --- the whole workspace -------------------------------------------------------------------

    @contextlib.contextmanager
    def _scan(self) -> Iterator[None]:
        """One scan: the exclusions looked up again, at most ``max_scan_bytes`` read."""
        self.refresh_exclusions()
        self._left = self.max_scan_bytes
        self._over = False
        try:
            yield
        finally:
            self._left = None

    def before(self) -> Snapshot:
        """The workspace before a command (its changeable files' contents stored)."""
        with self._scan():
            git = self.git_info()
            if git is not None and not self.git_timed_out:
                with contextlib.suppress(subprocess.SubprocessError, OSError, ValueError):
                    return self._git_before(git)
            return self._stat_before()

    def after(self, snapshot: Snapshot) -> tuple[list[Change], list[Missed], bool]:
        """What changed since ``snapshot``: the changes (contents stored), what changed but
        could not be recorded, and whether the comparison saw everything it covers."""
        with self._scan():
            git = self.git_info()
            if snapshot.kind == "git" and git is not None:
                with contextlib.suppress(subprocess.SubprocessError, OSError, ValueError):
                    return self._git_after(git, snapshot)
                reason = "git failed after the command; changes not recorded"
                if self.git_timed_out:
                    reason = (
                        f"git took over {self._git_timeout_s:g} s after the command; changes "
                        "not recorded, and the session's later calls use the stat scan"
                    )
                missed = [Missed(".", reason)]
                return [], missed, False
            return self._stat_after(snapshot)

    # --- stat scan -----------------------------------------------------------------------------

    def _walk(self) -> tuple[dict[str, _StatKey], bool]:
        """Regular files under the root (relative path -> stat key); True when the walk saw
        every file. At most ``max_files`` entries are looked at, folders, symlinks and the
        rest counted with the files: a tree of empty folders bounds the walk as files do.
        Breadth first: the shallow files come first, so a deep ``.venv`` or ``node_modules``
        that reaches the cap never hides the project's own ``src/`` (issue 26 trial)."""
        found: dict[str, _StatKey] = {}
        looked = 0
        stack: collections.deque[str] = collections.deque([""])
        while stack:
            folder = stack.popleft()
            try:
                entries = os.scandir(os.path.join(self.root, folder) if folder else self.root)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    looked += 1
                    if looked > self.max_files:
                        return found, False
                    self._walk_one(folder, entry, found, stack)
        return found, True

    def _walk_one(
        self,
        folder: str,
        entry: os.DirEntry[str],
        found: dict[str, _StatKey],
        stack: collections.deque[str],
    ) -> None:
        rel = f"{folder}/{entry.name}" if folder else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                if (
                    entry.name != ".git"
                    and (st.st_dev, st.st_ino) not in self._ids
                    and not self._excluded_by_path(rel)
                ):
                    stack.append(rel)
            elif entry.is_file(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                if (st.st_dev, st.st_ino) not in self._ids:
                    found[rel] = _key(st)
        except OSError:
            return

    def _stat_before(self) -> Snapshot:
        mark = 0  # no clock (its file refused): every file past the cap before counts as missed
        with contextlib.suppress(OSError):
            mark = self._clock()
        stats, complete = self._walk()
        seen: dict[str, Seen] = {rel: self.capture(self._rel(rel)) for rel in stats}
        complete = complete and not self._over
        return Snapshot(kind="stat", seen=seen, stats=stats, complete=complete, mark_ns=mark)

    def _stat_after(self, snapshot: Snapshot) -> tuple[list[Change], list[Missed], bool]:
        stats, complete = self._walk()
        old = snapshot.stats or {}
        changes: list[Change] = []
        missed: list[Missed] = []
        for rel in sorted(old.keys() | stats.keys()):
            if rel in old and old[rel] == stats.get(rel):
                continue
            if rel not in old and not snapshot.complete:
                if stats[rel][4] < snapshot.mark_ns:
                    continue  # unchanged since before the command, past the cap then
                # Past the cap before: its earlier state is unknown.
                missed.append(Missed(rel, "past the stat scan's cap before the command"))
                continue
            before = _stored(snapshot.seen.get(rel), {})  # a stat scan holds no git blob
            # A capped walk may stop short of a file the walk before saw (files the command
            # made can come first): looked at by name, it is never taken as deleted unseen.
            after = self.capture(self._rel(rel)) if rel in stats or not complete else None
            _compare(rel, before, after, changes, missed)
        return changes, missed, complete and snapshot.complete and not self._over

    # --- git -----------------------------------------------------------------------------------

    def git_info(self) -> _Git | None:
        """The repository the working folder is in (looked up once), or None."""
        if self._git is False:
            self._git = None
            if self._git_program is not None:
                with contextlib.suppress(subprocess.SubprocessError, OSError, ValueError):
                    out = self.run_git(
                        [
                            "rev-parse",
                            "--show-toplevel",
                            "--show-prefix",
                            "--git-path",
                            "index",
                            "--absolute-git-dir",
                        ]
                    )
                    top, prefix, index, git_dir = os.fsdecode(out).split("\n")[:4]
                    keys = self._config_keys()
                    if b"extensions.partialclone" in {k.lower() for k in keys}:
                        # a promisor remote fetches a missing object, running what its config
                        # names: such a repository is scanned as a plain folder (finding 3)
                        return None
                    # no filter runs in a scan: a driver's program is the repository's or
                    # found through $PATH (finding 5); a file a filter would change is only
                    # seen as modified
                    drivers = {m.group(1) for k in keys if (m := _FILTER_KEY.match(k))}
                    # Given through GIT_CONFIG_KEY_n/VALUE_n, not -c: git splits a -c at its
                    # first "=", so a driver named "a=b" kept its clean (review 11, finding 4).
                    self._no_filters = tuple(
                        (f"filter.{os.fsdecode(d)}.{key}", value)
                        for d in sorted(drivers)
                        for key, value in (
                            ("clean", ""),
                            ("smudge", ""),  # a fork's checkout (finding 10 of the attack)
                            ("process", ""),
                            ("required", "false"),
                        )
                    )
                    self._git = _Git(top, prefix, os.path.join(self.root, index), git_dir)
        return self._git

    def _config_keys(self) -> set[bytes]:
        """The names of every config key git sees here (reading the config runs nothing), as
        git prints them: section and variable lowercased, a subsection's case kept (git
        compares subsections with case: lowercasing ``[filter "Evil"]`` missed its driver,
        review 11, finding 4)."""
        out = self.run_git(["config", "--null", "--name-only", "--list"])
        return {k for k in out.split(b"\0") if k}

    def run_git(
        self,
        args: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
    ) -> bytes:
        """git's output for ``args``, run in the working folder (no repository hook, filter
        driver or file system monitor, no fetch, no optional locks, programs found only in
        folders no user but root can change, ``git_timeout_s`` at most: 60 s by default).

        Raises:
            OSError: git is not installed; subprocess.SubprocessError: it failed or timed out.
        """
        if self._git_program is None:
            raise FileNotFoundError("git is not installed")
        environment = {
            **os.environ,
            "PATH": _trusted_path(),
            "GIT_NO_LAZY_FETCH": "1",  # git 2.45 on; older ones have the -c above
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
            **(env or {}),
        }
        _add_config(environment, self._no_filters)
        # Never the harness's stdin (rpc's protocol, chat's terminal): a repository config may
        # include /dev/stdin, and git would read it (review 11, finding 5); nor the user's
        # terminal: a session of its own has none, so an include of /dev/tty fails at once
        # instead of reading what the user types (review 13, finding 3).
        try:
            done = subprocess.run(
                [self._git_program, *_GIT_SAFETY, *args],
                cwd=self.root,
                input=input,
                stdin=subprocess.DEVNULL if input is None else None,
                capture_output=True,
                timeout=self._git_timeout_s,
                env=environment,
                check=True,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            self.git_timed_out = True
            raise
        return done.stdout

    def status(self, git: _Git) -> Iterator[tuple[str, str, str, str, int]]:
        """``(kind, Y, path, index sha, index mode)`` for each path under the root that
        differs from the index (``1``, ``u``) or is untracked (``?``)."""
        out = self.run_git(
            [
                "status",
                "--porcelain=v2",
                "-z",
                "--untracked-files=all",
                "--no-renames",
                "--ignore-submodules=all",
                "--",
                ".",
            ]
        )
        for raw in out.split(b"\0"):
            if not raw:
                continue
            kind = chr(raw[0])
            if kind == "1":
                fields = raw.split(b" ", 8)
                xy, m_index, sha, path = fields[1].decode(), fields[4], fields[7], fields[8]
                yield kind, xy[1], self._strip(git, path), sha.decode(), int(m_index, 8)
            elif kind == "u":
                path = raw.split(b" ", 10)[10]
                yield kind, "M", self._strip(git, path), _ZERO_SHA, 0
            elif kind == "?":
                yield kind, "?", self._strip(git, raw[2:]), _ZERO_SHA, 0

    def _strip(self, git: _Git, path: bytes) -> str:
        text = os.fsdecode(path)
        return text[len(git.prefix) :] if git.prefix and text.startswith(git.prefix) else text

    def _index_bytes(self, git: _Git) -> bytes | None:
        """The index file's bytes (None: there is none); a symlink at its name, anything but a
        regular file, or one over :data:`INDEX_MAX_BYTES` is refused (FileRefusedError)."""
        folder, name = os.path.split(git.index)
        try:
            dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            return read_regular_at(dir_fd, name, INDEX_MAX_BYTES, git.index)
        except FileNotFoundError:
            return None
        finally:
            os.close(dir_fd)

    def _listing(self, git: _Git, index: bytes | None) -> dict[str, _GitRef]:
        """Every index entry under the root: path -> blob and mode; of ``index`` (an index
        file's bytes) or the repository's own."""
        with tempfile.TemporaryDirectory(prefix="harness-index-") as tmp:
            env = None
            if index is not None:
                copy = os.path.join(tmp, "index")
                with open(copy, "wb") as f:
                    f.write(index)
                env = {"GIT_INDEX_FILE": copy}
            out = self.run_git(["ls-files", "-s", "-z", "--", "."], env=env)
        found = {}
        for raw in out.split(b"\0"):
            if raw:
                meta, path = raw.split(b"\t", 1)
                mode, sha, _ = meta.split(b" ")
                found[self._strip(git, path)] = _GitRef(sha.decode(), int(mode, 8))
        return found

    def _clock(self) -> int:
        """The file system's clock now, in ns: the ctime a file changed from now on gets at
        least (the kernel's coarse clock, which ``time`` may be ahead of), read off the store's
        ``.clock`` file, touched through its descriptor.

        Raises:
            FileRefusedError: ``.clock`` is a symlink (never followed: touching or creating
                its target would change a file elsewhere) or not a regular file.
        """
        os.makedirs(self.store.root, mode=0o700, exist_ok=True)
        folder = os.open(self.store.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                fd = os.open(".clock", flags, 0o600, dir_fd=folder)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                    raise
                raise FileRefusedError(
                    exc.errno, "is not a regular file (a symlink is never followed)", ".clock"
                ) from None
        finally:
            os.close(folder)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FileRefusedError(errno.EINVAL, "is not a regular file", ".clock")
            os.utime(fd)
            return os.fstat(fd).st_ctime_ns
        finally:
            os.close(fd)

    def _git_before(self, git: _Git) -> Snapshot:
        mark = self._clock()
        seen: dict[str, Seen] = {}
        refs: dict[str, _GitRef] = {}
        stored = 0
        complete = True
        for kind, y, path, sha, mode in self.status(git):
            if self.excluded(path):
                continue
            if kind == "1":
                refs[path] = _GitRef(sha, mode)
            if kind == "1" and y == ".":  # the file is as in the index
                seen[path] = None if sha == _ZERO_SHA else _GitRef(sha, mode)
            elif kind == "1" and y == "D":
                seen[path] = None
            elif stored >= self.max_files:
                seen[path] = Unknown("past the scan's cap of stored files")
                complete = False
            else:
                seen[path] = self.capture(self._rel(path))
                stored += 1
        # What the session's own write/edit recorded is compared even where git ignores it, so
        # a command changing such a file is not later taken as a change made outside the
        # session (issue 26 trial, finding 17).
        for path in sorted(self.watched or ()):
            if path in seen or self.excluded(path):
                continue
            if stored >= self.max_files:
                complete = False
                break
            seen[path] = self.capture(self._rel(path))
            stored += 1
        return Snapshot(
            kind="git",
            seen=seen,
            index=self._index_bytes(git),
            mark_ns=mark,
            complete=complete and not self._over,
            refs=refs,
        )

    def _git_after(self, git: _Git, snapshot: Snapshot) -> tuple[list[Change], list[Missed], bool]:
        listed = {path: (kind, y, sha, mode) for kind, y, path, sha, mode in self.status(git)}
        index = self._index_bytes(git)
        candidates = set(snapshot.seen) | {p for p in listed if not self.excluded(p)}
        old_refs = snapshot.refs or {}
        new_refs: dict[str, _GitRef] = {}
        index_changed = index != snapshot.index
        if index_changed:
            old_refs = self._listing(git, snapshot.index) if snapshot.index is not None else {}
            new_refs = self._listing(git, None)
            candidates |= {
                p
                for p in old_refs.keys() | new_refs.keys()
                if old_refs.get(p) != new_refs.get(p) and not self.excluded(p)
            }
        pairs: list[tuple[str, Seen, Seen]] = []
        for path in sorted(candidates):
            after, ctime = self._git_seen_after(path, listed, snapshot, new_refs, index_changed)
            if path in snapshot.seen:
                before: Seen = snapshot.seen[path]
            elif path in old_refs:  # clean before: the (old) index's content
                before = old_refs[path]
            elif not index_changed and listed.get(path, ("?",))[0] == "1":
                _, _, sha, mode = listed[path]  # clean before, the index unchanged: its entry
                before = None if sha == _ZERO_SHA else _GitRef(sha, mode)
            elif isinstance(after, FileState) and 0 < ctime < snapshot.mark_ns:
                continue  # unchanged since before the command (ignored then, shown now)
            else:
                before = None  # not in the index, not untracked: created by the command
            if isinstance(before, _GitRef) and isinstance(after, _GitRef) and before == after:
                continue
            pairs.append((path, before, after))
        blobs = self._blobs(
            {s.sha for _, b, a in pairs for s in (b, a) if isinstance(s, _GitRef) and _regular(s)}
        )
        changes: list[Change] = []
        missed: list[Missed] = []
        for path, before, after in pairs:
            _compare(path, _stored(before, blobs), _stored(after, blobs), changes, missed)
        return changes, missed, snapshot.complete and not self._over

    def _git_seen_after(
        self,
        path: str,
        listed: dict[str, tuple[str, str, str, int]],
        snapshot: Snapshot,
        new_refs: dict[str, _GitRef],
        index_changed: bool,
    ) -> tuple[Seen, int]:
        """A path's state after the command (contents stored unless git has them), with its
        ctime (0: not looked at)."""
        row = listed.get(path)
        if row is not None and row[0] == "1" and row[1] == ".":
            return (None if row[2] == _ZERO_SHA else _GitRef(row[2], row[3])), 0
        if row is not None and row[0] == "1" and row[1] == "D":
            return None, 0
        if row is None:  # clean now: as in the index, if it is in the index
            ref = new_refs.get(path) if index_changed else (snapshot.refs or {}).get(path)
            if ref is not None and ref.sha != _ZERO_SHA:
                return ref, 0
        loc = self._rel(path)
        seen, ctime = self._capture(loc, defer=False)
        if isinstance(seen, Unknown):
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(loc.path).st_mode):
                    # A file the command swapped for a folder is gone, as the stat scan sees
                    # it: git lists the folder's files apart (issue 26 trial, finding 15).
                    return None, 0
        return seen, ctime

    def _blobs(self, shas: set[str]) -> dict[str, FileState | Unknown]:
        """Git blobs copied into the store (their mode is the caller's to set), by sha. Sizes
        are asked first, so a blob over the file cap or the scan's byte cap is never read."""
        if not shas:
            return {}
        order = sorted(shas)
        listing = "".join(s + "\n" for s in order).encode()
        sizes: dict[str, int] = {}
        checked = self.run_git(["cat-file", "--batch-check"], input=listing)
        for sha, line in zip(order, checked.split(b"\n"), strict=False):
            header = line.split(b" ")
            if len(header) == 3 and header[1] == b"blob":
                sizes[sha] = int(header[2])
        blobs: dict[str, FileState | Unknown] = {}
        wanted = []
        for sha in order:
            size = sizes.get(sha)
            if size is None:
                blobs[sha] = Unknown("git no longer has the earlier content")
            elif size > self.store.max_file_bytes:
                blobs[sha] = Unknown(f"larger than {self.store.max_file_bytes} bytes")
            elif self._left is not None and size > self._left:
                self._over = True
                blobs[sha] = Unknown(f"past the scan's cap of {self.max_scan_bytes} bytes read")
            else:
                wanted.append(sha)
                if self._left is not None:
                    self._left -= size
        if not wanted:
            return blobs
        out = self.run_git(
            ["cat-file", "--batch"], input="".join(s + "\n" for s in wanted).encode()
        )
        at = 0
        for sha in wanted:
            end = out.index(b"\n", at)
            header = out[at:end].split(b" ")
            at = end + 1
            if len(header) != 3 or header[1] != b"blob":
                blobs[sha] = Unknown("git no longer has the earlier content")
                continue
            size = int(header[2])
            data = out[at : at + size]
            at += size + 1
            blobs[sha] = FileState(self.store.put(data), 0, size)
        return blobs


def _regular(ref: _GitRef) -> bool:
    """Whether an index entry is a regular file (100644, 100755): not a symlink (120000, its
    blob the link's text) nor a submodule (160000, a commit)."""
    return stat.S_ISREG(ref.mode)


def _stored(seen: Seen, blobs: dict[str, FileState | Unknown]) -> FileState | Unknown | None:
    """``seen`` with a git blob replaced by its stored state, in the index's mode; a symlink
    or submodule in the index is not a regular file, so not recorded (a rewind wrote a mode-0
    file holding a link's text: issue 26 attack, finding 4)."""
    if not isinstance(seen, _GitRef):
        return seen
    if not _regular(seen):
        return Unknown("a symlink or submodule in git's index, not a regular file")
    blob = blobs[seen.sha]
    return (
        FileState(blob.digest, seen.mode & 0o7777, blob.size)
        if isinstance(blob, FileState)
        else blob
    )


def _compare(
    path: str,
    before: FileState | Unknown | None,
    after: FileState | Unknown | None,
    changes: list[Change],
    missed: list[Missed],
) -> None:
    if isinstance(before, Unknown):
        missed.append(Missed(path, before.reason))
    elif isinstance(after, Unknown):
        missed.append(Missed(path, after.reason))
    elif not same_file(before, after):
        changes.append(Change(path, before, after))


def _key(st: os.stat_result) -> _StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
