"""One session file: reading it into an index, and appending to it.

Reading never writes (DESIGN §3). The index keeps, per entry, its id, parent, type and byte span;
bodies are decoded when first asked for. The id/parent/type of a line written by pi or by us is
read from the line's first bytes without parsing the body; any other line is parsed whole.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

import orjson
from attrs import frozen

from .._codec import (
    CodecError,
    Slot,
    _builder,
    decode_entry,
    decode_header,
    loads_line,
    stored_slot,
)
from .._entries import Entry, SessionHeader
from .._errors import (
    CorruptSessionError,
    SessionClosedError,
    SessionError,
    SessionGoneError,
    SessionNotFoundError,
    SessionWriteError,
    StorageError,
)
from .._files import open_regular
from .._gc import LARGE_ENTRIES, LARGE_FILE, bulk
from .._index import Indexer, RawLine
from .._session import Diagnostic, FsyncPolicy, Session
from .._tree import EAGER_TYPES, Row, Tree
from .atomic import fsync_dir, publish_atomically

__all__ = [
    "CatchUp",
    "JsonlStore",
    "index_copied",
    "live_session",
    "load_file",
    "open_session",
    "register_live",
]

log = logging.getLogger("repos")


@frozen
class CatchUp:
    """What :meth:`JsonlStore.begin_append` found under the lock: complete lines other writers
    appended since this session last looked, and the offset of a torn tail it set aside."""

    lines: Sequence[RawLine]
    torn_offset: int | None = None


_NOTHING_NEW = CatchUp(lines=())


class JsonlStore:
    """One session file: appends whole lines under an advisory lock and reads indexed lines.

    Every append is a transaction (:meth:`begin_append`, :meth:`write`, :meth:`end_append`):
    take ``flock(LOCK_EX)`` on the file, check the name still leads to the file this session
    indexed (device and inode; else :class:`SessionGoneError`), read what other processes
    appended since (catch-up), set a torn tail aside, write one line with one ``write`` on an
    ``O_APPEND`` descriptor, release. Callers serialise transactions between threads.

    Args:
        identity: (st_dev, st_ino) of the file that was indexed.
        end: bytes of complete lines indexed so far; lines: how many (the header included).
        read_fd: a descriptor of that file to read it through (else opened when needed).
        write_fd: an ``O_RDWR | O_APPEND`` descriptor of it to append through (may be
            ``read_fd``; else opened at the first append).
    """

    def __init__(
        self,
        path: Path,
        *,
        identity: tuple[int, int] | None,
        end: int,
        lines: int,
        v1_line_ids: dict[int, str] | None = None,
        read_fd: int | None = None,
        write_fd: int | None = None,
    ) -> None:
        self._path = path
        self._name = os.fspath(path)
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._identity = identity
        self._end = end
        self._lines = lines
        self._v1_line_ids = v1_line_ids
        self._closed = False
        self._locked = False
        # The session over this store and whether it is strict (register_live).
        self._owner: tuple[weakref.ref[Session], bool] | None = None
        self.backup: Path | None = None
        """Where the last :meth:`rewrite` kept the original."""

    @property
    def path(self) -> Path:
        return self._path

    def set_extent(self, end: int, lines: int) -> None:
        """What the initial read indexed: bytes of complete lines, and how many (header too)."""
        self._end, self._lines = end, lines

    def set_v1_line_ids(self, ids: dict[int, str] | None) -> None:
        """The v1 line-index-to-id map the indexer fills (to resolve ``firstKeptEntryIndex``)."""
        self._v1_line_ids = ids

    def read(self, row: Row) -> Entry:
        if self._closed:
            raise SessionClosedError()
        if row.span is None:
            raise CorruptSessionError(self._path, row.line, 0, "entry has no stored line")
        offset, length = row.span
        raw = os.pread(self._reader(), length, offset)
        try:
            obj = loads_line(raw)
            line_ids = self._v1_line_ids
            entry = decode_entry(
                obj,
                entry_id=row.id if row.derived_ids else None,
                parent_id=row.parent_id if row.derived_ids else None,
                line_id=line_ids.get if line_ids is not None else None,
            )
        except (orjson.JSONDecodeError, CodecError) as exc:
            raise CorruptSessionError(self._path, row.line, offset, str(exc)) from exc
        _check_head(self._path, row, offset, obj)
        return entry

    def raw(self, row: Row) -> bytes | None:
        if row.span is None or row.derived_ids:
            return None
        offset, length = row.span
        return os.pread(self._reader(), length, offset) + b"\n"

    def read_many(self, rows: Sequence[Row]) -> list[Entry | CorruptSessionError]:
        """:meth:`read` of many rows (neighbouring lines read together); a row that cannot be
        decoded gets its error in its place instead of raising."""
        return cast(list[Entry | CorruptSessionError], self._read_many(rows, slots=False))

    def read_bodies(self, rows: Sequence[Row]) -> list[Entry | Slot | CorruptSessionError]:
        """:meth:`read_many`, but a message entry's body that is certain to decode comes as a
        :class:`Slot` of its JSON, not decoded (a context reads most of them as JSON)."""
        return self._read_many(rows, slots=True)

    def _read_many(
        self, rows: Sequence[Row], *, slots: bool
    ) -> list[Entry | Slot | CorruptSessionError]:
        out: list[Entry | Slot | CorruptSessionError | None] = [None] * len(rows)
        path, loads = self._path, loads_line
        for first, end, start, block in self._blocks(rows):
            view = memoryview(block)  # lines parsed in place, not copied out of the block
            for k in range(first, end):
                row = rows[k]
                offset, length = row.span  # type: ignore[misc]
                try:
                    obj = loads(view[offset - start : offset - start + length])
                    slot = stored_slot(obj) if slots and row.type == "message" else None
                    entry = decode_entry(obj) if slot is None else slot
                    _check_head(path, row, offset, obj)
                    out[k] = entry
                except (orjson.JSONDecodeError, CodecError) as exc:
                    out[k] = CorruptSessionError(path, row.line, offset, str(exc))
                except CorruptSessionError as exc:
                    out[k] = exc
        for k, row in enumerate(rows):
            if out[k] is None:  # not stored as read: v1 lines, re-attached orphans
                try:
                    out[k] = self.read(row)
                except CorruptSessionError as exc:
                    out[k] = exc
        return cast(list[Entry | Slot | CorruptSessionError], out)

    def raw_many(self, rows: Sequence[Row]) -> list[bytes | None]:
        """:meth:`raw` of many rows, reading neighbouring lines with one ``pread`` (a fork of a
        long path would otherwise cost a system call per line)."""
        out: list[bytes | None] = [None] * len(rows)
        for first, end, start, block in self._blocks(rows):
            for k in range(first, end):
                offset, length = rows[k].span  # type: ignore[misc]
                # Each stored line is followed by its newline in the file: read with the line.
                out[k] = block[offset - start : offset - start + length + 1]
        return out

    def _blocks(self, rows: Sequence[Row]) -> Iterator[tuple[int, int, int, bytes]]:
        """Neighbouring stored lines of ``rows`` read together: (first index, end index, file
        offset of the block, the block, each line's newline included). Rows whose line cannot
        be copied as stored (no span, derived ids) are left out."""
        fd = self._reader()
        i = 0
        while i < len(rows):
            row = rows[i]
            if row.span is None or row.derived_ids:
                i += 1
                continue
            start = row.span[0]
            end = start + row.span[1]
            j = i + 1
            while j < len(rows):
                span = rows[j].span
                if (
                    span is None
                    or rows[j].derived_ids
                    or not end <= span[0] <= end + _GAP
                    or span[0] + span[1] - start > _BATCH
                ):
                    break
                end = span[0] + span[1]
                j += 1
            yield i, j, start, os.pread(fd, end + 1 - start, start)
            i = j

    def copy_rows(self, rows: Sequence[Row], fd: int, encode: Callable[[Row], bytes]) -> list[int]:
        """Write the stored lines of ``rows`` (newline-terminated) to the file open as ``fd``:
        each run of lines that lie one after another here is copied inside the kernel
        (``copy_file_range``, else read and written in blocks); a row that cannot be copied as
        stored (derived ids) is written as ``encode`` gives it. Returns each line's length
        without its newline.

        Raises:
            SessionGoneError: this file is shorter than its index.
            StorageError: reading or writing failed.
        """
        src = self._reader()
        lengths: list[int] = []
        i, n = 0, len(rows)
        try:
            while i < n:
                row = rows[i]
                if row.span is None or row.derived_ids:
                    line = encode(row)
                    _write_all(fd, line)
                    lengths.append(len(line) - 1)
                    i += 1
                    continue
                start, length = row.span
                end = start + length + 1  # the line's newline is copied with it
                lengths.append(length)
                i += 1
                while i < n:
                    nxt = rows[i]
                    span = nxt.span
                    if span is None or nxt.derived_ids or span[0] != end:
                        break
                    end = span[0] + span[1] + 1
                    lengths.append(span[1])
                    i += 1
                self._copy_range(src, fd, start, end - start)
        except OSError as exc:
            if isinstance(exc, SessionError):
                raise
            raise StorageError.wrap(self._path, exc, "copying lines") from exc
        return lengths

    def _copy_range(self, src: int, dst: int, offset: int, count: int) -> None:
        while count:
            try:
                done = os.copy_file_range(src, dst, count, offset)
            except OSError as exc:
                if exc.errno not in _NO_COPY_RANGE:
                    raise
                data = os.pread(src, min(count, _CHUNK), offset)
                _write_all(dst, data)
                done = len(data)
            if done == 0:
                raise SessionGoneError(self._path, "truncated")
            offset += done
            count -= done

    # --- the append transaction --------------------------------------------------------------

    def begin_append(self) -> CatchUp:
        """Take the lock, check the file, catch up, set a torn tail aside.

        Raises:
            SessionGoneError: the file was deleted, replaced or cut shorter.
            CorruptSessionError: the file holds no complete line (not even a header).
            StorageError: the file system refused.
        """
        fd = self._write_fd
        if fd is None or self._closed:
            fd = self._writer()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "locking for append") from exc
        self._locked = True
        try:
            # One system call: the name is looked up to see it still leads to the descriptor's
            # file (checked when it was opened), and then its size is that file's: it tells
            # whether others appended. Lines are read only when it moved.
            try:
                named = os.stat(self._name)
            except FileNotFoundError:
                raise SessionGoneError(self._path, "deleted") from None
            except OSError as exc:
                raise StorageError.wrap(self._path, exc, "stat") from exc
            if (named.st_dev, named.st_ino) != self._identity:
                raise SessionGoneError(self._path, "replaced")
            size = named.st_size
            if size == self._end:
                return _NOTHING_NEW
            return self._catch_up(fd, set_aside=True, size=size)
        except BaseException:
            self.end_append()
            raise

    def write(self, line: bytes) -> RawLine:
        """Write ``line`` (newline-terminated) with one ``write``, inside a transaction.

        Raises:
            SessionWriteError: the write failed or was short (disk full, file size limit); the
                partial bytes are removed (the lock is held, so no other line is cut).
        """
        fd = self._write_fd
        if fd is None or self._closed:
            fd = self._writer()
        try:
            written = os.write(fd, line)
        except OSError as exc:
            self._take_back(fd)
            raise SessionWriteError(self._path, 0, len(line), exc.errno) from exc
        end = self._end
        if written != len(line):
            self._take_back(fd)
            raise SessionWriteError(self._path, written, len(line))
        self._end = end + written
        number = self._lines = self._lines + 1
        return _raw_line(number, end, line[:-1])

    def end_append(self) -> None:
        """Release the lock (harmless when not held)."""
        if self._locked:
            self._locked = False
            if self._write_fd is not None:
                try:
                    fcntl.flock(self._write_fd, fcntl.LOCK_UN)
                except OSError:
                    log.warning("%s: could not release the append lock", self._path)

    def poll(self) -> Sequence[RawLine]:
        """Complete lines other writers appended since this session last looked, read under a
        shared lock (no half-written line of ours can be seen). A torn tail is left alone.

        Raises:
            SessionGoneError: the file was deleted, replaced or cut shorter.
        """
        fd = self._reader()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "locking for refresh") from exc
        try:
            size = self._check_identity(fd)
            return self._catch_up(fd, set_aside=False, size=size).lines
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> Sequence[RawLine]:
        """Replace the file by ``lines`` (migration), keeping the original as a backup (under
        a free name: ``<file><suffix>``, else ``<file><suffix>.1``, ...); called inside a
        transaction, which then goes on holding the lock of the new file.

        Returns:
            The complete lines other processes appended to the new file before the lock was
            taken again, for the session to index.
        """
        try:
            backup = self._path.with_name(self._path.name + backup_suffix)
            n = 0
            while True:
                try:
                    os.link(self._path, backup)
                    break
                except FileExistsError:
                    n += 1
                    backup = self._path.with_name(f"{self._path.name}{backup_suffix}.{n}")
            self.backup = backup
            publish_atomically(self._path, lines, exclusive=False)
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "rewriting (migration)") from exc
        self._drop_fds()  # closing the old descriptor released the old file's lock
        self._locked = False
        self._identity = None
        self._end, self._lines = sum(len(x) for x in lines), len(lines)
        self._v1_line_ids = None
        fd = self._writer()
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._locked = True
        # Other writers may have appended to the new file between publish and lock.
        size = self._check_identity(fd)
        return self._catch_up(fd, set_aside=True, size=size).lines

    def sync(self) -> None:
        if self._write_fd is not None:
            try:
                os.fsync(self._write_fd)
            except OSError as exc:
                raise StorageError.wrap(self._path, exc, "fsync") from exc

    def close(self) -> None:
        self._closed = True
        self._drop_fds()

    def __repr__(self) -> str:
        return f"JsonlStore({str(self._path)!r})"

    # --- internals ---------------------------------------------------------------------------

    def _catch_up(self, fd: int, *, set_aside: bool, size: int) -> CatchUp:
        if size < self._end:
            raise SessionGoneError(self._path, "truncated")
        if size == self._end:
            return CatchUp(lines=[])
        try:
            data = os.pread(fd, size - self._end, self._end)
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "reading new lines") from exc
        complete = data.rfind(b"\n") + 1
        lines: list[RawLine] = []
        pos, number = 0, self._lines
        while pos < complete:
            nl = data.index(b"\n", pos)
            number += 1
            lines.append(RawLine(number, self._end + pos, data[pos:nl]))
            pos = nl + 1
        self._end += complete
        self._lines = number
        torn: int | None = None
        if complete < len(data) and set_aside:
            torn = self._set_aside(fd, data[complete:])
        return CatchUp(lines=lines, torn_offset=torn)

    def _set_aside(self, fd: int, fragment: bytes) -> int:
        # Under the exclusive lock: every writer of ours finishes its line before releasing,
        # so a fragment here is a dead writer's (or a foreign, lockless one's).
        if self._end == 0:
            raise CorruptSessionError(
                self._path, 1, 0, "the file holds no complete line; not appending to it"
            )
        torn = self._path.with_name(self._path.name + ".torn")
        try:
            # The name lies beside a file of unknown provenance (`--session ./s.jsonl` from a
            # download): never through a link, never into a file that is not this user's own
            # plain file (a hard link to ~/.bashrc), never blocking on a FIFO.
            out = os.open(
                torn,
                os.O_WRONLY
                | os.O_APPEND
                | os.O_CREAT
                | os.O_NOFOLLOW
                | os.O_NONBLOCK
                | os.O_CLOEXEC,
                0o600,
            )
            try:
                info = os.fstat(out)
                if (
                    not stat.S_ISREG(info.st_mode)
                    or info.st_nlink != 1
                    or info.st_uid != os.geteuid()
                ):
                    raise StorageError(
                        self._path,
                        f"{torn.name} is not a plain file of this user's (a link, a FIFO, "
                        "another user's file): the torn tail is not set aside there",
                    )
                os.write(out, fragment + b"\n")
                os.fsync(out)
            finally:
                os.close(out)
            os.ftruncate(fd, self._end)
            os.fsync(fd)
        except StorageError:
            raise
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "setting a torn tail aside") from exc
        return self._end

    def _take_back(self, fd: int) -> None:
        # The lock is held: whatever follows our last known end is this write's fragment.
        try:
            if os.fstat(fd).st_size > self._end:
                os.ftruncate(fd, self._end)
        except OSError:
            log.warning("%s: could not remove a partial line; the next append sets it aside", self)

    def _check_identity(self, fd: int) -> int:
        """Raise unless the name still leads to the indexed file; returns the file's size."""
        try:
            opened = os.fstat(fd)
            named = os.stat(self._path)
        except FileNotFoundError:
            raise SessionGoneError(self._path, "deleted") from None
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "stat") from exc
        mine = (opened.st_dev, opened.st_ino)
        if self._identity is None:
            self._identity = mine
        if mine != self._identity or (named.st_dev, named.st_ino) != self._identity:
            raise SessionGoneError(self._path, "replaced")
        return opened.st_size

    def _reader(self) -> int:
        if self._closed:
            raise SessionClosedError()
        if self._read_fd is None:
            try:
                fd = open_regular(self._path)
            except FileNotFoundError:
                raise SessionGoneError(self._path, "deleted") from None
            except SessionNotFoundError:  # a FIFO or a device has the name now
                raise SessionGoneError(self._path, "replaced") from None
            except OSError as exc:
                raise StorageError.wrap(self._path, exc, "opening for reading") from exc
            info = os.fstat(fd)
            if self._identity is not None and (info.st_dev, info.st_ino) != self._identity:
                # Another file has the name now: its bytes are not at our offsets.
                os.close(fd)
                raise SessionGoneError(self._path, "replaced")
            self._read_fd = fd
        return self._read_fd

    def _writer(self) -> int:
        if self._closed:
            raise SessionClosedError()
        if self._write_fd is None:
            try:
                # Readable too: catch-up and setting a torn tail aside read through it.
                fd = open_regular(self._path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                raise SessionGoneError(self._path, "deleted") from None
            except SessionNotFoundError:  # a FIFO or a device has the name now
                raise SessionGoneError(self._path, "replaced") from None
            except OSError as exc:
                raise StorageError.wrap(self._path, exc, "opening for append") from exc
            info = os.fstat(fd)
            if self._identity is None:
                self._identity = (info.st_dev, info.st_ino)
            elif (info.st_dev, info.st_ino) != self._identity:
                # Another file has the name now: appending there would continue someone else's.
                os.close(fd)
                raise SessionGoneError(self._path, "replaced")
            self._write_fd = fd
        return self._write_fd

    def _drop_fds(self) -> None:
        for fd in {self._read_fd, self._write_fd}:
            if fd is not None:
                os.close(fd)
        self._read_fd = self._write_fd = None


# The stores of this process's open file sessions: a fork given a path forks from one of them
# when its index is the file's as it is now, instead of reading the whole file again.
_LIVE: weakref.WeakSet[JsonlStore] = weakref.WeakSet()


def register_live(session: Session, store: JsonlStore, *, strict: bool) -> Session:
    """Record ``session`` (over ``store``, opened ``strict`` or not) for :func:`live_session`;
    returns it. Held weakly: a dropped session is forgotten."""
    store._owner = (weakref.ref(session), strict)
    _LIVE.add(store)
    return session


def live_session(path: Path, *, strict: bool) -> Session | None:
    """An open session of this process whose index is what :func:`open_session` of ``path``
    would build now (``strict`` or not), or None: it indexed the very file the name leads to,
    every byte of it (nobody appended since, no torn tail), and met nothing to report (no
    diagnostic: a fresh read would apply the same rules to the same bytes). A strict read
    also decodes every body, so only a strict session stands in for one."""
    try:
        named = os.stat(path)
    except OSError:
        return None
    identity = (named.st_dev, named.st_ino)
    for store in list(_LIVE):
        owner = store._owner
        if (
            owner is None
            or store._closed
            or store._identity != identity
            or store._end != named.st_size
            or (strict and not owner[1])
        ):
            continue
        session = owner[0]()
        if session is not None and not session.closed and not session.diagnostics:
            return session
    return None


def open_session(path: Path, *, strict: bool = False, fsync: FsyncPolicy = "turn") -> Session:
    """Read a session file into a :class:`Session` without writing to it.

    Args:
        strict: raise on the first problem instead of skipping it: a malformed line, a body
            that cannot be decoded (every body is decoded at open), a duplicate id, a missing
            parent, a leaf move or label to a missing entry, a blank line, a torn tail.

    Raises:
        SessionNotFoundError: no such file, or not a regular file (a folder, a FIFO or a
            device is refused without blocking or reading).
        CorruptSessionError: no valid header on line 1 (or a header ``version`` other than 1,
            2 or 3); in strict mode, any problem above.
        StorageError: the file cannot be read (no permission, ...).
    """
    # Absolute now: appends look the name up again, and the process may chdir meanwhile.
    path = Path(os.path.abspath(path))
    return load_file(path, path, strict=strict, fsync=fsync)


def load_file(source: Path, path: Path, *, strict: bool, fsync: FsyncPolicy) -> Session:
    """:func:`open_session` reading ``source``, for a session whose file is ``path``: a fork is
    read from its temp file, then hard-linked to ``path`` (the same inode) once it passed."""
    try:
        # Bodies are read later by byte span through this descriptor: the file that was indexed
        # keeps being read, even if that name is deleted or replaced meanwhile. A FIFO or a
        # device is refused before anything is read (it would block, or read for ever).
        fd = open_regular(source)
    except (FileNotFoundError, NotADirectoryError):
        raise SessionNotFoundError(str(source)) from None
    except OSError as exc:
        raise StorageError.wrap(source, exc, "reading") from exc
    try:
        return _load(path, fd, strict=strict, fsync=fsync)
    except BaseException:
        os.close(fd)
        raise


def _check_head(path: Path, row: Row, offset: int, obj: object) -> None:
    """A line's body must say what its head said: the tree was built from the head (its first
    bytes), and a later duplicate key in the body would otherwise win when decoded."""
    if row.derived_ids or not isinstance(obj, dict):
        return
    if (
        obj.get("id") != row.id
        or obj.get("parentId") != row.parent_id
        or obj.get("type") != row.type
    ):
        raise CorruptSessionError(
            path, row.line, offset, "the line's body disagrees with its head (type, id, parentId)"
        )


# RawLine built without its keyword __init__: one per append.
_raw_line = _builder(RawLine, "number", "offset", "raw")

# Indexing reads the file in chunks and keeps no copy of it: memory at open is the index, not
# the file (a 200 MB session must not cost 200 MB more to open).
_CHUNK = 8 << 20
# raw_many: lines this close are read together, up to this much per read.
_GAP = 1 << 20
_BATCH = 16 << 20


# copy_file_range refused (another file system, an old kernel, ...): read and write instead.
_NO_COPY_RANGE = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP})


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, path: Path) -> bytes:
    try:
        return os.read(fd, _CHUNK)
    except OSError as exc:
        raise StorageError.wrap(path, exc, "reading") from exc


def _load(path: Path, fd: int, *, strict: bool, fsync: FsyncPolicy) -> Session:
    diagnostics: list[Diagnostic] = []
    buf = _read(fd, path)
    while b"\n" not in buf:
        more = _read(fd, path)
        if not more:
            raise CorruptSessionError(
                path, 1, 0, "no session header (empty file or torn first line)"
            )
        buf += more
    first_end = buf.index(b"\n")
    header = _header(path, fd, buf[:first_end])
    info = os.fstat(fd)
    store = JsonlStore(path, identity=(info.st_dev, info.st_ino), end=0, lines=0, read_fd=fd)
    tree = Tree(load=store.read, load_many=store.read_many, load_bodies=store.read_bodies)
    indexer = Indexer(path, tree, diagnostics, v1=header.version < 2, strict=strict)
    store.set_v1_line_ids(indexer.v1_ids)
    base, number = first_end + 1, 2
    buf = buf[first_end + 1 :]
    with bulk(info.st_size >= LARGE_FILE):
        while True:
            consumed, number = indexer.feed_chunk(buf, base, number)
            base += consumed
            more = _read(fd, path)
            if not more:
                buf = buf[consumed:]
                break
            buf = buf[consumed:] + more
        indexer.finish()
        if buf:
            reason = f"unterminated last line ({len(buf)} bytes) ignored"
            if strict:
                raise CorruptSessionError(path, number, base, reason)
            diagnostics.append(
                Diagnostic(code="torn_tail", message=reason, line=number, offset=base)
            )
        store.set_extent(base, number - 1)
        if strict:
            for entry_id in tree.order:
                tree.get(entry_id)  # every body, so a damaged one raises now
    session = Session(
        header=header,
        tree=tree,
        store=store,
        diagnostics=diagnostics,
        fsync=fsync,
        indexer=indexer,
        strict=strict,
    )
    return register_live(session, store, strict=strict)


def index_copied(
    source: Path,
    path: Path,
    header: SessionHeader,
    header_length: int,
    copied: Sequence[tuple[Row, int]],
    extra: Sequence[bytes],
    *,
    fsync: FsyncPolicy,
) -> Session:
    """A session over ``source`` (a fork's temp file, just written: its header line of
    ``header_length`` bytes, the ``copied`` lines of another session's rows with their written
    lengths, then the ``extra`` lines) for the session file ``path``, indexed from what is known
    instead of reading the file again: the copied lines keep their rows' id, parent and type
    (a valid chain, as the source indexed them), at their new offsets. Labels, names and leaf
    moves among them, the last copied line and the extra lines are read back and go through
    the indexer, which applies its rules to them."""
    try:
        fd = os.open(source, os.O_RDONLY)
    except OSError as exc:
        raise StorageError.wrap(source, exc, "reading") from exc
    try:
        info = os.fstat(fd)
        store = JsonlStore(path, identity=(info.st_dev, info.st_ino), end=0, lines=0, read_fd=fd)
        tree = Tree(load=store.read, load_many=store.read_many, load_bodies=store.read_bodies)
        diagnostics: list[Diagnostic] = []
        indexer = Indexer(path, tree, diagnostics, v1=False, strict=False)
        rows, order = tree.rows, tree.order
        offset, number = header_length, 2
        last = len(copied) - 1
        with bulk(len(copied) >= LARGE_ENTRIES):
            for k, (row, length) in enumerate(copied):
                if k == last or row.type in EAGER_TYPES:
                    indexer.feed([RawLine(number, offset, os.pread(fd, length, offset))])
                else:
                    rows[row.id] = Row(row.id, row.parent_id, row.type, number, (offset, length))
                    order.append(row.id)
                offset += length + 1
                number += 1
            fed = []
            for line in extra:
                fed.append(RawLine(number, offset, line[:-1]))
                offset += len(line)
                number += 1
            indexer.feed(fed)
        store.set_extent(offset, number - 1)
        session = Session(
            header=header,
            tree=tree,
            store=store,
            diagnostics=diagnostics,
            fsync=fsync,
            indexer=indexer,
        )
        return register_live(session, store, strict=False)
    except BaseException:
        os.close(fd)
        raise


def _header(path: Path, fd: int, raw: bytes) -> SessionHeader:
    try:
        return decode_header(loads_line(raw))
    except (orjson.JSONDecodeError, CodecError) as exc:
        reason = f"bad header: {exc}"
    # Say where a header is, when one is further down (a file whose first lines were lost or
    # that had lines glued in front of it).
    offset, line, tail = 0, 1, b""
    while chunk := os.pread(fd, _CHUNK, offset):
        data = tail + chunk
        at = data.find(b'{"type":"session"', 1 if offset == 0 else 0)
        if at >= 0:
            start = offset - len(tail)
            where = start + at
            line += data.count(b"\n", 0, at)
            reason += f"; a session header is on line {line} (byte {where}), not line 1"
            break
        line += chunk.count(b"\n")
        tail = chunk[-20:]
        line -= tail.count(b"\n")
        offset += len(chunk)
    raise CorruptSessionError(path, 1, 0, reason)


def create_file(path: Path, header_line: bytes) -> None:
    """Atomically create a new session file holding only its header line.

    Raises:
        FileExistsError: a file already has this name.
    """
    publish_atomically(path, [header_line], exclusive=True)
    fsync_dir(path.parent)
