"""One session file: reading it into an index, and appending to it.

Reading never writes (DESIGN §3). The index keeps, per entry, its id, parent, type and byte span;
bodies are decoded when first asked for. The id/parent/type of a line written by pi or by us is
read from the line's first bytes without parsing the body; any other line is parsed whole.
"""

from __future__ import annotations

import gc
import logging
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson
from attrs import frozen

from .._codec import CodecError, decode_entry, decode_header, v1_entry_id
from .._entries import Entry, SessionHeader
from .._errors import (
    CorruptSessionError,
    SessionClosedError,
    SessionNotFoundError,
    SessionWriteError,
    StorageError,
)
from .._session import Diagnostic, FsyncPolicy, Session
from .._tree import EAGER_TYPES, Row, Tree
from .atomic import fsync_dir, publish_atomically

__all__ = ["JsonlStore", "load_file", "open_session"]

log = logging.getLogger("repos")

# pi and we write `{"type":…,"id":…,"parentId":…` first; ids never hold quotes or backslashes.
_HEAD = re.compile(
    rb'\{"type":"([A-Za-z0-9_]+)","id":"([^"\\]{1,128})",'
    rb'"parentId":(?:null|"([^"\\]{1,128})")'
)
_V1_HEAD = re.compile(rb'\{"type":"([A-Za-z0-9_]+)"')


@contextmanager
def _gc_paused() -> Iterator[None]:
    # A large parse creates millions of objects; the cyclic GC would double the time (bench/).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class JsonlStore:
    """Appends whole lines to one file and reads indexed lines back.

    The write descriptor is opened ``O_APPEND`` on the first append; each line is one ``write``.
    """

    def __init__(
        self,
        path: Path,
        *,
        v1_line_ids: dict[int, str] | None = None,
        read_fd: int | None = None,
    ) -> None:
        self._path = path
        self._read_fd = read_fd
        self._write_fd: int | None = None
        self._v1_line_ids = v1_line_ids
        self._closed = False

    @property
    def path(self) -> Path:
        return self._path

    def read(self, row: Row) -> Entry:
        if self._closed:
            raise SessionClosedError()
        if row.span is None:
            raise CorruptSessionError(self._path, row.line, 0, "entry has no stored line")
        if self._read_fd is None:
            self._read_fd = os.open(self._path, os.O_RDONLY)
        offset, length = row.span
        raw = os.pread(self._read_fd, length, offset)
        try:
            obj = orjson.loads(raw)
            line_ids = self._v1_line_ids
            return decode_entry(
                obj,
                entry_id=row.id if row.derived_ids else None,
                parent_id=row.parent_id if row.derived_ids else None,
                line_id=line_ids.get if line_ids is not None else None,
            )
        except (orjson.JSONDecodeError, CodecError) as exc:
            raise CorruptSessionError(self._path, row.line, offset, str(exc)) from exc

    def raw(self, row: Row) -> bytes | None:
        if row.span is None or row.derived_ids:
            return None
        if self._read_fd is None:
            self._read_fd = os.open(self._path, os.O_RDONLY)
        offset, length = row.span
        return os.pread(self._read_fd, length, offset) + b"\n"

    def append(self, line: bytes) -> None:
        """Write ``line`` with one ``write``; on failure remove what reached the file and raise.

        Raises:
            SessionWriteError: the write failed or was short (disk full, file size limit). The
                partial bytes are truncated away when the file still ends exactly where this
                write left it; otherwise the next append sets them aside as a torn tail.
            SessionNotFoundError: the file is gone.
        """
        fd = self._writer()
        try:
            size = os.fstat(fd).st_size
            written = os.write(fd, line)
        except OSError as exc:
            raise SessionWriteError(self._path, 0, len(line), exc.errno) from exc
        if written != len(line):
            self._take_back(fd, size, written)
            raise SessionWriteError(self._path, written, len(line))

    def _take_back(self, fd: int, size: int, written: int) -> None:
        # Best effort: only when nobody appended after our fragment, so no other line is cut.
        try:
            if os.fstat(fd).st_size == size + written:
                os.ftruncate(fd, size)
        except OSError:
            log.warning("%s: could not remove a partial line; the next append sets it aside", self)

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> None:
        self._require_file()
        backup = self._path.with_name(self._path.name + backup_suffix)
        try:
            if not backup.exists():
                os.link(self._path, backup)
            publish_atomically(self._path, lines, exclusive=False)
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "rewriting (migration)") from exc
        self._drop_fds()
        self._v1_line_ids = None

    def set_aside_torn_tail(self) -> int | None:
        """If the file, as it is now, does not end with a newline, move the bytes after its
        last newline to ``<file>.torn`` (0600, each fragment followed by a newline) and truncate
        the file there. Returns the fragment's offset, or None when the file ends whole.

        Lines appended by other sessions since this one was opened are never moved: only what
        follows the current last newline is.

        Raises:
            CorruptSessionError: the file holds no complete line (not even a header).
            StorageError: the file system refused.
        """
        fd = self._writer()
        try:
            size = os.fstat(fd).st_size
            if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
                return None
            start = _after_last_newline(fd, size)
            if start == 0:
                raise CorruptSessionError(
                    self._path, 1, 0, "the file holds no complete line; not appending to it"
                )
            fragment = os.pread(fd, size - start, start)
            torn = self._path.with_name(self._path.name + ".torn")
            out = os.open(torn, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(out, fragment + b"\n")
                os.fsync(out)
            finally:
                os.close(out)
            os.ftruncate(fd, start)
            os.fsync(fd)
        except OSError as exc:
            raise StorageError.wrap(self._path, exc, "setting a torn tail aside") from exc
        return start

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

    def _writer(self) -> int:
        if self._closed:
            raise SessionClosedError()
        if self._write_fd is None:
            self._require_file()
            try:
                # Readable too: setting a torn tail aside reads the fragment through it.
                self._write_fd = os.open(self._path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                raise SessionNotFoundError(str(self._path)) from None
            except OSError as exc:
                raise StorageError.wrap(self._path, exc, "opening for append") from exc
        return self._write_fd

    def _require_file(self) -> None:
        # Never recreate a session file deleted under us (pi #8939). Deletion or replacement
        # after the write descriptor is open needs the inode check (not done yet).
        if not self._path.exists():
            raise SessionNotFoundError(str(self._path))

    def _drop_fds(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            if fd is not None:
                os.close(fd)
        self._read_fd = self._write_fd = None


def _after_last_newline(fd: int, size: int, chunk: int = 1 << 16) -> int:
    """Offset just after the last newline among the first ``size`` bytes (0 if none)."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        nl = os.pread(fd, end - start, start).rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        end = start
    return 0


@frozen
class _Line:
    number: int  # 1-based
    offset: int
    raw: bytes


def _lines(data: bytes, end: int) -> Iterator[_Line]:
    pos, number = 0, 1
    while pos < end:
        nl = data.index(b"\n", pos)
        yield _Line(number, pos, data[pos:nl])
        pos, number = nl + 1, number + 1


def open_session(path: Path, *, strict: bool = False, fsync: FsyncPolicy = "turn") -> Session:
    """Read a session file into a :class:`Session` without writing to it.

    Args:
        strict: raise on the first malformed line instead of skipping it.

    Raises:
        SessionNotFoundError: no such file.
        CorruptSessionError: no valid header on line 1 (or a header ``version`` other than 1,
            2 or 3); in strict mode, any malformed line, a duplicate id, a missing parent or a
            leaf move to a missing entry.
        StorageError: the file cannot be read (no permission, ...).
    """
    return load_file(path, path, strict=strict, fsync=fsync)


def load_file(source: Path, path: Path, *, strict: bool, fsync: FsyncPolicy) -> Session:
    """:func:`open_session` reading ``source``, for a session whose file is ``path``: a fork is
    read from its temp file, then hard-linked to ``path`` (the same inode) once it passed."""
    try:
        with open(source, "rb") as f:
            data = f.read()
            # Bodies are read later by byte span: keep reading the file that was indexed, even
            # if that name is deleted or replaced meanwhile.
            read_fd = os.dup(f.fileno())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SessionNotFoundError(str(source)) from None
    except OSError as exc:
        raise StorageError.wrap(source, exc, "reading") from exc
    try:
        return _load(path, data, read_fd, strict=strict, fsync=fsync)
    except BaseException:
        os.close(read_fd)
        raise


def _load(path: Path, data: bytes, read_fd: int, *, strict: bool, fsync: FsyncPolicy) -> Session:
    diagnostics: list[Diagnostic] = []
    end = data.rfind(b"\n") + 1
    if end < len(data):
        diagnostics.append(
            Diagnostic(
                code="torn_tail",
                message=f"unterminated last line ({len(data) - end} bytes) ignored",
                line=data.count(b"\n", 0, end) + 1,
                offset=end,
            )
        )
    lines = _lines(data, end)
    first = next(lines, None)
    if first is None:
        raise CorruptSessionError(path, 1, 0, "no session header (empty file or torn first line)")
    try:
        header = decode_header(orjson.loads(first.raw))
    except (orjson.JSONDecodeError, CodecError) as exc:
        raise CorruptSessionError(path, 1, 0, f"bad header: {exc}") from exc

    v1_ids: dict[int, str] | None = {} if header.version < 2 else None
    store = JsonlStore(path, v1_line_ids=v1_ids, read_fd=read_fd)
    tree = Tree(load=store.read)
    with _gc_paused():
        _index(path, header, lines, tree, v1_ids, strict, diagnostics)
    return Session(
        header=header,
        tree=tree,
        store=store,
        diagnostics=diagnostics,
        fsync=fsync,
    )


def _index(
    path: Path,
    header: SessionHeader,
    lines: Iterator[_Line],
    tree: Tree,
    v1_ids: dict[int, str] | None,
    strict: bool,
    diagnostics: list[Diagnostic],
) -> None:
    taken: set[str] = set()
    previous: str | None = None

    def bad(line: _Line, code: str, reason: str) -> None:
        if strict:
            raise CorruptSessionError(path, line.number, line.offset, reason)
        diagnostics.append(
            Diagnostic(code=code, message=reason, line=line.number, offset=line.offset)
        )

    for line in lines:
        if not line.raw.strip():
            diagnostics.append(
                Diagnostic(
                    code="blank_line",
                    message="blank line skipped",
                    line=line.number,
                    offset=line.offset,
                )
            )
            continue
        span = (line.offset, len(line.raw))
        derived = False
        if v1_ids is not None:
            m1 = _V1_HEAD.match(line.raw)
            kind = m1.group(1).decode() if m1 else _parsed_type(line.raw)
            if kind is None:
                bad(line, "corrupt_line", "not a JSON object with a string 'type'")
                continue
            entry_id = v1_entry_id(line.number - 1, line.raw, taken)
            parent_id, derived = previous, True
            v1_ids[line.number - 1] = entry_id
        else:
            m = _HEAD.match(line.raw)
            if m is not None:
                kind, entry_id = m.group(1).decode(), m.group(2).decode()
                parent_id = m.group(3).decode() if m.group(3) is not None else None
            else:
                head = _parsed_head(line.raw)
                if head is None:
                    bad(line, "corrupt_line", "not a JSON object with string 'type' and 'id'")
                    continue
                kind, entry_id, parent_id = head
            if entry_id in tree:
                bad(line, "duplicate_id", f"id {entry_id!r} already used by an earlier line")
                continue
            if parent_id is not None and parent_id not in tree:
                bad(
                    line,
                    "orphan_reattached",
                    f"parent {parent_id!r} not found; attached to the previous entry {previous!r}",
                )
                parent_id, derived = previous, True
        row = Row(
            id=entry_id,
            parent_id=parent_id,
            type=kind,
            line=line.number,
            span=span,
            derived_ids=derived,
        )
        if kind in EAGER_TYPES:
            try:
                entry = tree.load(row)
            except CorruptSessionError as exc:
                bad(line, "corrupt_line", exc.reason)
                continue
            tree.add(row, entry)
        else:
            tree.add(row)
        previous = entry_id
        if kind == "leaf" and tree.leaf_id is not None and tree.leaf_id not in tree:
            # Its target was on a skipped line: keep the leaf where it was before the move, so
            # no append is parented on an id the file does not hold.
            missing, tree.leaf_id = tree.leaf_id, parent_id
            bad(line, "leaf_target_missing", f"leaf target {missing!r} not found; move ignored")


def _parsed_type(raw: bytes) -> str | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else None


def _parsed_head(raw: bytes) -> tuple[str, str, str | None] | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    kind, entry_id, parent_id = obj.get("type"), obj.get("id"), obj.get("parentId")
    if not isinstance(kind, str) or not isinstance(entry_id, str):
        return None
    if parent_id is not None and not isinstance(parent_id, str):
        return None
    return kind, entry_id, parent_id


def create_file(path: Path, header_line: bytes) -> None:
    """Atomically create a new session file holding only its header line.

    Raises:
        FileExistsError: a file already has this name.
    """
    publish_atomically(path, [header_line], exclusive=True)
    fsync_dir(path.parent)
