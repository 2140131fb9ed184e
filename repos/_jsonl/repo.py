"""``JsonlSessionRepo``: the session lifecycle over one folder of JSONL files."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import logging
import operator
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISDIR, S_ISLNK, S_ISREG
from typing import Any

import orjson
from attrs import define, evolve

# hooks' session events and its bus are imported where an event is sent: opening, reading
# and listing sessions need neither (a fast start, issue 24 point 6).
from .._codec import (
    CodecError,
    decode_header,
    dumps_line,
    encode_header,
    loads_line,
    parse_iso,
)
from .._entries import SessionHeader
from .._errors import (
    InvalidSessionIdError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from .._files import open_regular
from .._fork import check_fork_allowed, fork_header, fork_plan
from .._repo import ForkPosition, ForkScope, SessionInfo
from .._session import FsyncPolicy, Session, header_line, iso_now
from .._tree import Row, Tree
from . import list_cache
from .atomic import make_folders, publish_atomically, sweep_temp_files
from .paths import (
    absolute_cwd,
    check_under_root,
    default_root,
    session_path,
    validate_session_id,
)
from .storage import (
    JsonlStore,
    index_copied,
    live_session,
    load_file,
    open_session,
    register_live,
)

__all__ = ["JsonlSessionRepo"]

log = logging.getLogger("repos")


@define
class _ListState:
    """What ``list`` knows of one file, so a later call reads only what was appended."""

    identity: tuple[int, int, int]  # inode, size, mtime (ns) when last read
    offset: int
    session_id: str  # the header's id, timestamp, cwd and parentSession
    timestamp: str
    cwd: str
    parent_session: str | None
    fingerprint: str = ""  # of the bytes before `offset`: see _fingerprint
    name: str | None = None
    message_count: int = 0
    last_activity_ms: int | None = None
    first_message: str = ""
    info: SessionInfo | None = None  # built from the fields above, dropped when they change

    def to_row(self) -> builtins.list[Any]:
        """The persistent cache's row: a flat list, quick to write and to read back."""
        ino, size, mtime = self.identity
        return [
            ino,
            size,
            mtime,
            self.offset,
            self.fingerprint,
            self.session_id,
            self.timestamp,
            self.cwd,
            self.parent_session,
            self.name,
            self.message_count,
            self.last_activity_ms,
            self.first_message,
        ]

    @classmethod
    def from_row(cls, row: builtins.list[Any]) -> _ListState | None:
        """A state from a persistent cache row, or None if the row is not one we wrote."""
        if len(row) != 13:
            return None
        ino, size, mtime, offset, fp, sid, ts, cwd, parent, name, count, last, first = row
        if not (
            type(ino) is int
            and type(size) is int
            and type(mtime) is int
            and type(offset) is int
            and type(count) is int
            and ino >= 0
            and 0 <= offset <= size
            and count >= 0
            and (last is None or (type(last) is int and 0 <= last < 2**53))
            and type(fp) is str
            and type(sid) is str
            and type(ts) is str
            and type(cwd) is str
            and type(first) is str
            and (parent is None or type(parent) is str)
            and (name is None or type(name) is str)
        ):
            return None  # not what we write: summarise the file again
        return cls((ino, size, mtime), offset, sid, ts, cwd, parent, fp, name, count, last, first)


class JsonlSessionRepo:
    """Sessions as pi-compatible JSONL files under ``root``.

    Layout: ``<root>/--<encoded cwd>--/<timestamp>_<id>.jsonl`` (pi's). ``root`` defaults to
    ``$HARNESS_SESSIONS_DIR``, else ``platformdirs.user_data_path("harness") / "sessions"``.

    A *ref* is a session id (validated, looked up under the root) or the path of a ``.jsonl``
    file (an explicit choice of the caller; it may lie outside the root for ``open`` and as a
    fork source, but ``delete`` only touches files under the root).

    Args:
        root: the sessions folder.
        fsync: durability policy of opened sessions: ``never``, ``turn`` (default: at each save
            point) or ``always`` (every append).
        strict: raise ``CorruptSessionError`` on any malformed line instead of skipping it.
        list_cache: keep what ``list`` learnt of each file in the user cache folder
            (``$HARNESS_CACHE_DIR``, else ``platformdirs.user_cache_path("harness")``), so the
            first ``list`` of a new process reads only files that changed. False: memory only.
    """

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        fsync: FsyncPolicy = "turn",
        strict: bool = False,
        list_cache: bool = True,
    ) -> None:
        self._root = Path(root).expanduser() if root is not None else default_root()
        self._fsync: FsyncPolicy = fsync
        self._strict = strict
        self._list_cache: dict[str, _ListState] = {}
        self._persistent = list_cache
        self._persisted_loaded = False
        # The last list() call's infos in folder order and sorted: see _list.
        self._last_listed: tuple[list[SessionInfo], list[SessionInfo]] = ([], [])
        self._swept: set[Path] = set()
        # create and fork check that an id is free, then publish: one at a time per repo.
        self._publish_lock = threading.Lock()
        self.list_problems: tuple[tuple[Path, str], ...] = ()
        """Files the last ``list`` call skipped, with the reason (also logged)."""

    @classmethod
    def pi(cls) -> JsonlSessionRepo:
        """The pi coding agent's own sessions folder, ``~/.pi/agent/sessions``."""
        return cls(Path.home() / ".pi" / "agent" / "sessions")

    @property
    def root(self) -> Path:
        return self._root

    def __repr__(self) -> str:
        return f"JsonlSessionRepo({str(self._root)!r})"

    # --- lifecycle ---------------------------------------------------------------------------

    async def create(
        self,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        """Create a session file holding only its header, atomically.

        Args:
            cwd: the working directory it belongs to (default: the process's).
            session_id: default a new UUID4.

        Raises:
            InvalidSessionIdError: a bad id, or a cwd holding a NUL or a lone surrogate.
            SessionExistsError: the id is taken (checked under a lock within this repo
                object; two processes creating one id at once can still both succeed).
            StorageError: the file system refused (a name too long, no permission, ...).
            InvalidEntryError: ``metadata`` is no JSON a line can hold (NaN, a set, ..., or
                nested deeper than ``MAX_NESTING``); nothing is written.
        """
        sid = validate_session_id(session_id) if session_id is not None else str(uuid.uuid4())
        header = SessionHeader(
            id=sid,
            timestamp=iso_now(),
            cwd=absolute_cwd(cwd),
            parent_session=parent_session,
            metadata=metadata,
        )
        lines = [header_line(header)]
        # A fresh UUID4 cannot be taken: only an id the caller chose is looked for on disk.
        check = session_id is not None
        if self._fsync == "never":
            # No fsync: a few system calls, cheaper than handing them to a thread.
            session = self._publish(header, lines, check_id=check)
        else:
            session = await asyncio.to_thread(self._publish, header, lines, check_id=check)
        from hooks import SessionCreatedEvent, notify

        await notify(
            self,
            SessionCreatedEvent(
                session_id=session.id,
                path=str(session.path),
                parent_session=session.header.parent_session,
            ),
        )
        return session

    async def open(self, ref: str | Path) -> Session:
        """Open a session by id or path. Reading never writes.

        Raises:
            InvalidSessionIdError: a bad id.
            SessionNotFoundError: no such session.
            CorruptSessionError: no valid header; in strict mode, any malformed line.
        """
        path = self.resolve(ref)
        return await asyncio.to_thread(open_session, path, strict=self._strict, fsync=self._fsync)

    async def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        """Every session under the root (only those whose header has exactly ``cwd``, if
        given), newest activity first. Files are read once and then only what was appended
        since; files without a valid header are skipped, logged and kept in ``list_problems``.
        """
        return await asyncio.to_thread(self._list, cwd)

    async def delete(self, ref: str | Path) -> None:
        """Delete a session file under the root; deleting a missing session does nothing.

        Raises:
            InvalidSessionIdError: a bad id, or a path outside the root.
            SessionNotFoundError: the id or path names a folder, not a session file.
            StorageError: the file system refused (no permission, ...).
        """
        path = self._resolve_for_delete(ref)
        if path is not None:
            # A fork killed mid-way may have left a temp file hard-linked to this session.
            await asyncio.to_thread(sweep_temp_files, path.parent)
        if path is not None and await asyncio.to_thread(_unlink, path):
            self._list_cache.pop(str(path), None)
            session_id = path.stem.split("_", 1)[1] if "_" in path.stem else path.stem
            from hooks import SessionDeletedEvent, notify

            await notify(self, SessionDeletedEvent(session_id=session_id, path=str(path)))

    async def fork(
        self,
        source: str | Path | Session,
        *,
        entry_id: str | None = None,
        position: ForkPosition | None = None,
        scope: ForkScope = "branch",
        cwd: str | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Copy a session's branch (or whole tree) into a new file under the root.

        Follows pi's fork (reference §2.3): the new header's ``parentSession`` is the source's
        path, its id equals the id in its file name, and the source is never modified.

        Args:
            source: id or path of the session to fork, or an open file ``Session`` (forked from
                what it has indexed, without reading the file again; left open). Given an id or
                a path with an ``entry_id`` (or ``scope="tree"``), a session of this process
                open on that file is forked from the same way when its index is what reading
                the file now would give (it holds every byte, nothing was appended since by
                others, nothing was reported); otherwise the file is read and indexed.
            entry_id: the entry to cut at; None means the source's current leaf.
            position: ``before`` stops at the entry's parent, ``at`` includes it (default: ``at``
                for the leaf, ``before`` for a given entry).
            scope: ``branch`` copies the root-to-target path; ``tree`` copies every entry.
            cwd: the fork's working directory (default: the source's).

        Returns:
            The new session, open.

        Raises:
            SessionNotFoundError, InvalidSessionIdError: bad source.
            InvalidForkTargetError: ``entry_id`` is not in the source, or is a ``leaf`` entry.
            SessionExistsError: ``session_id`` is taken.
            CorruptSessionError: in strict mode, the fork would not read back cleanly; no file
                is left behind (the fork is checked before it is published).
            StorageError: the file system refused.
            ForkCancelledError: a ``session_before_fork`` hook cancelled (nothing is written).

        Events (sender: this repo): ``session_before_fork`` before anything is written, then
        ``session_fork``.
        """
        if session_id is not None:
            validate_session_id(session_id)  # before any file is read
        held = False  # whether src is another owner's session, held while it is copied
        if isinstance(source, Session):
            # An open session forks from what it has indexed: nothing is read again.
            if source.path is None:
                raise InvalidSessionIdError(source.id, "an in-memory session has no file to fork")
            path = source.path
            src = source
            owned: contextlib.AbstractContextManager[Session] = contextlib.nullcontext(source)
        else:
            path = self.resolve(source)
            # A session of this process that indexed the file as it is now stands in for
            # reading it again (the index the file had when last opened). Without a target
            # entry the fork follows the leaf, which a session moves its own way: read then.
            live = (
                live_session(path, strict=self._strict)
                if entry_id is not None or scope == "tree"
                else None
            )
            if live is not None:
                src, owned = live, contextlib.nullcontext(live)
                held = True
            else:
                src = await asyncio.to_thread(
                    open_session, path, strict=self._strict, fsync=self._fsync
                )
                owned = src
        with owned:
            await check_fork_allowed(self, src, entry_id=entry_id, position=position, scope=scope)
            header = fork_header(
                src, session_id=session_id, cwd=cwd, parent_session=str(path.resolve())
            )
            fork = await asyncio.to_thread(
                self._publish_fork,
                src,
                header,
                entry_id=entry_id,
                position=position,
                scope=scope,
                held=path if held else None,
            )
        from hooks import SessionForkEvent, notify

        await notify(
            self, SessionForkEvent(source_id=src.id, session_id=fork.id, path=str(fork.path))
        )
        return fork

    # --- resolution --------------------------------------------------------------------------

    def resolve(self, ref: str | Path) -> Path:
        """The file of a session id or path.

        Raises:
            InvalidSessionIdError: a bad id.
            SessionNotFoundError: no such session.
        """
        if isinstance(ref, Path) or ref.endswith(".jsonl"):
            path = Path(ref).expanduser()
            if path.is_dir():
                raise SessionNotFoundError(str(ref), "it is a folder, not a session file")
            if not path.is_file():
                raise SessionNotFoundError(str(ref), "no such file")
            return path
        if "/" in ref or os.sep in ref:
            where = Path(ref).expanduser()
            hint = (
                "a folder, not a session file"
                if where.is_dir()
                else "not a .jsonl file"
                if where.exists()
                else "no such file (a session path ends in .jsonl)"
            )
            raise InvalidSessionIdError(ref, f"{hint}; give a session id or a .jsonl path")
        matches = self._find(validate_session_id(ref))
        if not matches:
            raise SessionNotFoundError(ref, f"no file *_{ref}.jsonl under {self._root}")
        if len(matches) > 1:
            raise SessionError(f"session id {ref!r} matches several files: {matches}")
        return matches[0]

    def _find(self, session_id: str) -> builtins.list[Path]:
        if not self._root.is_dir():
            return []
        # Ids may hold "_", so the glob also matches "<stamp>_a_<id>.jsonl": keep exact ids.
        name = f"{session_id}.jsonl"
        return [
            check_under_root(self._root, p)
            for p in sorted(self._root.glob(f"*/*_{name}"))
            if p.name.partition("_")[2] == name
        ]

    def _resolve_for_delete(self, ref: str | Path) -> Path | None:
        if isinstance(ref, Path) or ref.endswith(".jsonl"):
            path = check_under_root(self._root, Path(ref).expanduser())
        else:
            matches = self._find(validate_session_id(ref))
            if len(matches) > 1:
                raise SessionError(f"session id {ref!r} matches several files: {matches}")
            if not matches:
                return None
            path = matches[0]
        if path.is_dir():
            raise SessionNotFoundError(str(ref), "it is a folder, not a session file")
        return path

    # --- file work (runs in a thread) ---------------------------------------------------------

    def _publish_fork(
        self,
        src: Session,
        header: SessionHeader,
        *,
        entry_id: str | None,
        position: ForkPosition | None,
        scope: ForkScope,
        held: Path | None = None,
    ) -> Session:
        """``held``: ``src`` is a session of this process standing in for the file at that path
        (another owner's): it is held while it is read and copied, so that its owner neither
        appends to it nor closes it (its descriptors) meanwhile. Closed already: the file is
        read instead."""
        if held is not None:
            with src.held() as still_open:
                if still_open:
                    return self._publish_fork(
                        src, header, entry_id=entry_id, position=position, scope=scope
                    )
            with open_session(held, strict=self._strict, fsync=self._fsync) as src:
                return self._publish_fork(
                    src, header, entry_id=entry_id, position=position, scope=scope
                )
        ids, extra = fork_plan(src, entry_id=entry_id, position=position, scope=scope)
        copied: builtins.list[tuple[Row, int]] = []

        def write(fd: int) -> None:
            # The source's lines as stored (copied inside the kernel where they lie together),
            # then the fork's own lines.
            copied.extend(src.copy_lines(ids, fd))
            data = memoryview(b"".join(extra))
            while data:
                data = data[os.write(fd, data) :]

        return self._publish(header, [dumps_line(encode_header(header))], write, copied, extra)

    def _publish(
        self,
        header: SessionHeader,
        lines: builtins.list[bytes],
        write: Callable[[int], None] | None = None,
        copied: Sequence[tuple[Row, int]] = (),
        extra: Sequence[bytes] = (),
        *,
        check_id: bool = True,
    ) -> Session:
        """Publish a new session file: ``lines`` (the header first), then what ``write``
        writes (a fork: ``copied`` source rows with their lengths, then ``extra`` lines)."""
        # The header may be anyone's (an import): the folder and the name are one each.
        path = session_path(self._root, header.cwd, header.timestamp, header.id)
        folder = path.parent
        # File names differ by timestamp, so the exclusive link alone cannot stop two creates
        # of one id: the check and the publish happen under one lock (per repo object; other
        # processes can still race).
        with self._publish_lock:
            if check_id and self._find(header.id):
                raise SessionExistsError(header.id)
            # A folder that is there already (not a symlink) needs no more checks: nothing
            # here changes it. One made now is checked again (a symlink may have raced it).
            existed = self._check_folder(folder)
            try:
                created = [] if existed else make_folders(folder)
            except OSError as exc:
                raise StorageError.wrap(folder, exc, "creating the session folder") from exc
            if folder not in self._swept:
                # Once per folder and repository object (list() sweeps whenever it sees some):
                # listing a folder of a thousand sessions on every create would cost more
                # than the create.
                sweep_temp_files(folder)
                self._swept.add(folder)
            opened: builtins.list[Session] = []

            def read_back(tmp: Path) -> None:
                # A fork is checked before it is published, so a failing check leaves no file;
                # the session reads the same inode once linked. A strict repo reads a fork back
                # (every body decoded); otherwise its index is derived from what was copied.
                if self._strict:
                    opened.append(load_file(tmp, path, strict=True, fsync=self._fsync))
                else:
                    first = len(lines[0])
                    opened.append(
                        index_copied(tmp, path, header, first, copied, extra, fsync=self._fsync)
                    )

            def adopt(fd: int) -> None:
                opened.append(self._created(fd, path, header, len(lines[0])))

            try:
                if not existed:
                    self._check_folder(folder)
                publish_atomically(
                    path,
                    lines,
                    exclusive=True,
                    check=read_back if write is not None else None,
                    durable=self._fsync != "never",
                    write=write,
                    adopt=adopt if write is None else None,
                    folder_ready=True,
                )
            except BaseException as exc:
                for session in opened:
                    session.close()
                _remove_empty(created)
                if isinstance(exc, FileExistsError) and not isinstance(exc, SessionError):
                    raise SessionExistsError(header.id) from None
                if isinstance(exc, OSError) and not isinstance(exc, SessionError):
                    raise StorageError.wrap(path, exc, "publishing the session file") from exc
                raise
        return opened[0]

    def _check_folder(self, folder: Path) -> bool:
        """:func:`check_under_root` for a cwd folder (one name under the root): it can only
        lead out of the root as a symlink, so a folder that is none (or not there yet) needs
        no resolving of every component. Returns whether it is a directory already (and no
        symlink)."""
        try:
            mode = os.lstat(folder).st_mode
            if not S_ISLNK(mode):
                return S_ISDIR(mode)
        except FileNotFoundError:
            return False
        except (OSError, ValueError):
            pass  # the full check says what is wrong
        check_under_root(self._root, folder)
        return False

    def _created(self, fd: int, path: Path, header: SessionHeader, end: int) -> Session:
        """The session of a file just created with only its header, through ``fd`` (its
        unpublished temp file's descriptor, read-write and appending, which it takes): reads
        keep going to this file even if its name is taken over later. One descriptor reads
        and appends (the session was created to be written)."""
        try:
            stat = os.fstat(fd)
        except OSError as exc:
            raise StorageError.wrap(path, exc, "opening the new session file") from exc
        store = JsonlStore(
            path,
            identity=(stat.st_dev, stat.st_ino),
            end=end,
            lines=1,
            read_fd=fd,
            write_fd=fd,
        )
        session = Session(
            header=header,
            tree=Tree(load=store.read, load_many=store.read_many, load_bodies=store.read_bodies),
            store=store,
            fsync=self._fsync,
            strict=self._strict,
        )
        return register_live(session, store, strict=self._strict)

    def _list(self, cwd: str | None) -> builtins.list[SessionInfo]:
        problems: list[tuple[Path, str]] = []
        infos: list[SessionInfo] = []
        if self._persistent and not self._persisted_loaded:
            self._load_persisted()
        before = self._list_cache
        seen: dict[str, _ListState] = {}
        changed = False
        for folder, entry in self._session_files(problems):
            key = entry.path
            try:
                if entry.is_symlink():
                    check_under_root(self._root, Path(key))
                stat = entry.stat()  # the one stat per file: cached by the entry
                if not S_ISREG(stat.st_mode):
                    continue
                state = before.get(key)
                if state is None or state.identity != _identity(stat):
                    state = self._scan(key, state)
                    changed = True
            except (OSError, SessionError) as exc:
                problems.append((Path(key), str(exc)))
                log.warning("skipping %r: %s", key, exc)
                continue
            seen[key] = state
            if cwd is not None and state.cwd != cwd:
                continue
            if state.info is None:
                try:
                    state.info = _info(folder / entry.name, state, stat)
                except (ValueError, OverflowError, OSError) as exc:  # e.g. a year 3,170,843
                    problems.append((Path(key), f"cannot be summarised: {exc}"))
                    log.warning("skipping %r: cannot be summarised: %s", key, exc)
                    continue
            infos.append(state.info)
        self._list_cache = seen
        self.list_problems = tuple(problems)
        # Nothing rescanned and as many files as before: the same files, unchanged.
        if self._persistent and (changed or len(seen) != len(before)):
            prefix = os.path.join(self._root, "")
            list_cache.save(
                list_cache.cache_file(self._root),
                self._root,
                {p.removeprefix(prefix): s.to_row() for p, s in seen.items()},
            )
        last_in, last_out = self._last_listed
        if len(infos) != len(last_in) or any(map(operator.is_not, infos, last_in)):
            # The same infos in the same order sort the same: a repeat call skips the sort.
            last_in, last_out = infos, sorted(infos, key=_modified, reverse=True)
            self._last_listed = last_in, last_out
        return last_out.copy()

    def _session_files(
        self, problems: builtins.list[tuple[Path, str]]
    ) -> Iterator[tuple[Path, os.DirEntry[str]]]:
        """Each ``*.jsonl`` entry of each cwd folder under the root, with its folder.

        One ``scandir`` per folder, iterated as it goes (no list of a thousand entries). Only
        symlinked folders are resolved (to refuse what leads out of the root). Temp files
        killed writers left behind are swept once their folder was listed.
        """
        try:
            folders = list(os.scandir(self._root))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError.wrap(self._root, exc, "listing the sessions folder") from exc
        for folder in folders:
            path = Path(folder.path)
            temp = False
            try:
                if not folder.is_dir():
                    continue
                if folder.is_symlink():
                    check_under_root(self._root, path)
                with os.scandir(folder.path) as entries:
                    for entry in entries:
                        name = entry.name
                        if name.startswith("."):
                            temp = temp or name.endswith(".tmp")
                        elif name.endswith(".jsonl"):
                            yield path, entry
            except (OSError, SessionError) as exc:
                problems.append((path, str(exc)))
                continue
            if temp:
                sweep_temp_files(path)

    def _load_persisted(self) -> None:
        self._persisted_loaded = True
        prefix = os.path.join(self._root, "")
        for name, row in list_cache.load(list_cache.cache_file(self._root), self._root).items():
            state = _ListState.from_row(row)
            if state is not None:
                self._list_cache.setdefault(prefix + name, state)

    def _scan(self, path: str, cached: _ListState | None) -> _ListState:
        """``cached`` caught up with the file at ``path``, or a fresh summary of it.

        Raises:
            OSError: the file cannot be read.
            SessionError: it has no complete, valid header line.
        """
        # A FIFO or a device swapped in since the listing saw a file is refused, not read.
        with os.fdopen(open_regular(path), "rb") as f:
            stat = os.fstat(f.fileno())  # of the file actually read, even if renamed over since
            state = None if cached is None else evolve(cached, info=None)
            # Only a file that grew is caught up with. A replaced file (migrated, repaired: a new
            # inode), one no longer than when read (cut short, or rewritten in place to the same
            # size: the mtime moved) or one whose bytes already read changed is read afresh.
            if state is not None and (
                stat.st_ino != state.identity[0]
                or stat.st_size <= state.identity[1]
                or _fingerprint(f.fileno(), state.offset) != state.fingerprint
            ):
                state = None
            if state is None:
                first = f.readline()
                if not first.endswith(b"\n"):
                    raise SessionError("no complete header line")
                try:
                    header = decode_header(loads_line(first))
                except (orjson.JSONDecodeError, CodecError) as exc:
                    raise SessionError(f"bad header: {exc}") from exc
                state = _ListState(
                    identity=(0, 0, 0),
                    offset=len(first),
                    session_id=header.id,
                    timestamp=header.timestamp,
                    cwd=header.cwd,
                    parent_session=header.parent_session,
                )
            f.seek(state.offset)
            data = f.read()
            end = data.rfind(b"\n") + 1
            _scan_lines(state, data, end)
            state.offset += end
            state.fingerprint = _fingerprint(f.fileno(), state.offset)
        state.identity = _identity(stat)
        return state


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _modified(info: SessionInfo) -> datetime:
    return info.modified


_FINGERPRINT_BYTES = 4096


def _fingerprint(fd: int, offset: int) -> str:
    """A hash (hex) of the first and the last (up to) 4 KiB before ``offset``: an in-place rewrite
    that keeps the inode and grows the file changes one of them (its head, or the bytes just
    before the old end when a line's length changed)."""
    n = min(offset, _FINGERPRINT_BYTES)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(os.pread(fd, n, 0))
    digest.update(os.pread(fd, n, offset - n))
    return digest.hexdigest()


def _remove_empty(folders: builtins.list[Path]) -> None:
    """Remove folders a failed create or fork made, innermost first, while they are empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return


def _unlink(path: Path) -> bool:
    """Remove ``path``; False if it was already gone.

    Raises:
        SessionNotFoundError: it is a folder.
        StorageError: the file system refused.
    """
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        raise SessionNotFoundError(str(path), "it is a folder, not a session file") from None
    except OSError as exc:
        raise StorageError.wrap(path, exc, "deleting") from exc
    return True


_MESSAGE_HEAD = b'{"type":"message"'
_INFO_HEAD = b'{"type":"session_info"'


def _scan_lines(state: _ListState, data: bytes, end: int) -> None:
    """Fold the complete lines ``data[:end]`` into ``state`` without parsing most of them.

    When every line starts with ``{"type":"`` (as pi and we write them), counting message lines
    and finding the first user message, the last user/assistant message and the last name take
    byte scans (over the buffer when lines are short, from line start to line start when they
    are long) and a few parses; any other file is parsed line by line.
    """
    if end == 0:
        return
    heads = _walk_heads(data, end) if _long_lines(data, end) else _search_heads(data, end)
    if heads is None:
        for raw in data[:end].splitlines():
            _accumulate(state, raw)
        return
    messages, last_info = heads
    state.message_count += messages
    if last_info >= 0:
        _accumulate(state, _line_at(data, last_info))
    if not state.first_message:
        for start in _heads(data, end, _MESSAGE_HEAD):
            raw = _line_at(data, start)
            if _role(raw) == "user":
                _accumulate(state, raw, count=False)
                break
    for start in _heads_backward(data, end, _MESSAGE_HEAD):
        raw = _line_at(data, start)
        if _role(raw) in ("user", "assistant"):
            _accumulate(state, raw, count=False)
            break


_ANY_HEAD = b'{"type":"'
_LONG_LINE = 512
"""Bytes: from this average line length on, stepping from line start to line start (one
``find`` of the newline each) is quicker than counting heads over the whole buffer."""


def _long_lines(data: bytes, end: int) -> bool:
    """Whether the lines of ``data[:end]`` are long on average, judged by the first 64 KiB."""
    sample = min(end, 65536)
    return data.count(b"\n", 0, sample) * _LONG_LINE <= sample


def _search_heads(data: bytes, end: int) -> tuple[int, int] | None:
    """(message lines, start of the last ``session_info`` line or -1) in ``data[:end]``, by
    byte counts over the buffer; None when a line does not start with ``{"type":"``."""
    if _count_heads(data, end, _ANY_HEAD) != data.count(b"\n", 0, end):
        return None
    return _count_heads(data, end, _MESSAGE_HEAD), next(_heads_backward(data, end, _INFO_HEAD), -1)


def _walk_heads(data: bytes, end: int) -> tuple[int, int] | None:
    """What :func:`_search_heads` gives, found line start by line start."""
    messages, last_info, pos = 0, -1, 0
    while pos < end:
        if data.startswith(_MESSAGE_HEAD, pos):
            messages += 1
        elif data.startswith(_INFO_HEAD, pos):
            last_info = pos
        elif not data.startswith(_ANY_HEAD, pos):
            return None
        pos = data.index(b"\n", pos) + 1
    return messages, last_info


def _count_heads(data: bytes, end: int, head: bytes) -> int:
    """How many lines of ``data[:end]`` start with ``head``."""
    return data.count(b"\n" + head, 0, end) + data.startswith(head)


def _heads(data: bytes, end: int, head: bytes) -> Iterator[int]:
    """Offsets of the lines of ``data[:end]`` starting with ``head``, first to last."""
    if data.startswith(head):
        yield 0
    needle, pos = b"\n" + head, 0
    while (at := data.find(needle, pos, end)) >= 0:
        yield at + 1
        pos = at + 1


def _heads_backward(data: bytes, end: int, head: bytes) -> Iterator[int]:
    """Offsets of the lines of ``data[:end]`` starting with ``head``, last to first."""
    needle, stop = b"\n" + head, end
    while (at := data.rfind(needle, 0, stop)) >= 0:
        yield at + 1
        stop = at
    if data.startswith(head):
        yield 0


def _line_at(data: bytes, start: int) -> bytes:
    return data[start : data.index(b"\n", start)]


def _role(raw: bytes) -> str | None:
    """A message line's role, read without parsing the line (pi and we write it first)."""
    at = raw.find(b'"message":{"role":"')
    if at < 0:
        return None
    at += 19
    return raw[at : raw.find(b'"', at)].decode(errors="replace")


def _accumulate(state: _ListState, raw: bytes, *, count: bool = True) -> None:
    try:
        obj = loads_line(raw)
    except (orjson.JSONDecodeError, CodecError):
        return
    if not isinstance(obj, dict):
        return
    kind = obj.get("type")
    if kind == "session_info":
        # The latest session_info wins, an empty or missing name included: it clears the name.
        name = obj.get("name")
        state.name = name.strip() or None if isinstance(name, str) else None
    if kind != "message" or not isinstance(obj.get("message"), dict):
        return
    message = obj["message"]
    if count:
        state.message_count += 1
    role = message.get("role")
    if role not in ("user", "assistant"):
        return
    ts = message.get("timestamp")
    if isinstance(ts, int | float) and (
        state.last_activity_ms is None or ts > state.last_activity_ms
    ):
        state.last_activity_ms = int(ts)
    if role == "user" and not state.first_message:
        state.first_message = _text_of(message.get("content"))


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def _info(path: Path, state: _ListState, stat: os.stat_result) -> SessionInfo:
    created = parse_iso(state.timestamp) or datetime.fromtimestamp(stat.st_mtime, UTC)
    modified = (
        datetime.fromtimestamp(state.last_activity_ms / 1000, UTC)
        if state.last_activity_ms is not None
        else created
    )
    return SessionInfo(
        id=state.session_id,
        path=path,
        cwd=state.cwd,
        name=state.name,
        parent_session=state.parent_session,
        created=created,
        modified=modified,
        message_count=state.message_count,
        first_message=state.first_message,
    )
