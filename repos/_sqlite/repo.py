"""``SqliteSessionRepo``: every session of a team's machine in one SQLite database (WAL).

Two tables (``schema.py``): ``sessions``, one row per session holding its header line verbatim
and the columns ``list`` reports (kept current inside each append's transaction), and
``entries``, one row per line, holding exactly the JSON line of the file format (so a session
moves between stores byte for byte) with a per-session sequence number equal to its line number
in the file (the header is line 1).

Several writers, one session (DESIGN §3, as with files): an append is one ``BEGIN IMMEDIATE``
transaction that reads the lines others committed since this session last looked (catch-up by
sequence), then inserts the new line at the next sequence; ``UNIQUE(session_id, seq)`` and
``UNIQUE(session_id, id)`` make a lost or duplicated entry impossible even if that logic were
wrong. Two writers continuing the same leaf make two branches.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import orjson
from attrs import frozen

from hooks import SessionCreatedEvent, SessionDeletedEvent, SessionForkEvent, notify

from .._codec import CodecError, decode_entry, decode_header, dumps_line, encode_header, loads_line
from .._entries import Entry, SessionHeader
from .._errors import (
    CorruptSessionError,
    InvalidSessionIdError,
    SessionExistsError,
    SessionGoneError,
    SessionNotFoundError,
    SessionWriteError,
    StorageError,
)
from .._fork import check_fork_allowed, fork_header, fork_plan
from .._index import Diagnostic, Indexer, RawLine
from .._jsonl.paths import absolute_cwd, validate_session_id
from .._listing import Summary, line_facts, ms_of_iso, summarize
from .._repo import ForkPosition, ForkScope, SessionInfo
from .._session import FsyncPolicy, Session, header_line, iso_now
from .._tree import Row, Tree
from .schema import connect, ensure_schema

__all__ = ["SqliteSessionRepo"]

_log = logging.getLogger("repos")

_HEAD_ID = re.compile(rb'\{"type":"[A-Za-z0-9_]+","id":"([^"\\\r\n]{1,128})"')
_BATCH = 500  # rows per ``IN (...)`` when reading many lines


def entry_id_of(raw: bytes) -> str | None:
    """The ``id`` of a stored line, or None (a v1 line, a damaged line, a blank line)."""
    m = _HEAD_ID.match(raw)
    if m is not None:
        return m.group(1).decode()
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    value = obj.get("id") if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


@frozen
class _CatchUp:
    lines: list[RawLine]
    torn_offset: int | None = None


class _SqliteStore:
    """One ``Session``'s view of its rows: its own connection, so its append transaction is
    its own; ``seen`` is the last sequence it has indexed."""

    def __init__(
        self,
        db: Path,
        session_id: str,
        incarnation: str,
        seen: int,
        *,
        fsync: FsyncPolicy,
        timeout: float,
        conn: sqlite3.Connection | None = None,
    ) -> None:
        self._db = db
        self._sid = session_id
        self._incarnation = incarnation
        self._seen = seen
        self._pending: int | None = None
        self._fsync = fsync
        self._conn = conn if conn is not None else connect(db, fsync=fsync, timeout=timeout)
        self._lock = threading.RLock()
        self._closed = False

    @property
    def path(self) -> Path | None:
        return None

    @property
    def where(self) -> str:
        return f"{self._db}#{self._sid}"

    # --- reads -------------------------------------------------------------------------------

    def read(self, row: Row) -> Entry:
        with self._lock:
            found = self._conn.execute(
                "SELECT line FROM entries WHERE session_id = ? AND seq = ?", (self._sid, row.line)
            ).fetchone()
        if found is None:
            raise SessionGoneError(self.where, "deleted")
        return self._decode(row, _line(found[0]))

    def read_many(self, rows: list[Row]) -> list[Entry | CorruptSessionError]:
        lines = self._lines([r.line for r in rows])
        out: list[Entry | CorruptSessionError] = []
        for row in rows:
            raw = lines.get(row.line)
            if raw is None:
                raise SessionGoneError(self.where, "deleted")
            try:
                out.append(self._decode(row, raw))
            except CorruptSessionError as exc:
                out.append(exc)
        return out

    def raw(self, row: Row) -> bytes | None:
        if not row.line:
            return None
        with self._lock:
            found = self._conn.execute(
                "SELECT line FROM entries WHERE session_id = ? AND seq = ?", (self._sid, row.line)
            ).fetchone()
        return _line(found[0]) + b"\n" if found is not None else None

    def raw_many(self, rows: Sequence[Row]) -> list[bytes | None]:
        lines = self._lines([r.line for r in rows if r.line])
        return [lines[r.line] + b"\n" if r.line in lines else None for r in rows]

    def _lines(self, seqs: Sequence[int]) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        with self._lock:
            for start in range(0, len(seqs), _BATCH):
                chunk = seqs[start : start + _BATCH]
                marks = ",".join("?" * len(chunk))
                for seq, line in self._conn.execute(
                    f"SELECT seq, line FROM entries WHERE session_id = ? AND seq IN ({marks})",
                    (self._sid, *chunk),
                ):
                    out[seq] = _line(line)
        return out

    def _decode(self, row: Row, raw: bytes) -> Entry:
        try:
            return decode_entry(loads_line(raw))
        except (orjson.JSONDecodeError, CodecError) as exc:
            raise CorruptSessionError(self.where, row.line, 0, str(exc)) from exc

    # --- the append transaction --------------------------------------------------------------

    def begin_append(self) -> _CatchUp:
        self._lock.acquire()
        try:
            self._check_open()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(self._db, f"cannot start an append: {exc}") from exc
            try:
                return _CatchUp(lines=self._new_lines())
            except BaseException:
                self._conn.rollback()
                raise
        except BaseException:
            self._lock.release()
            raise

    def write(self, line: bytes) -> RawLine:
        raw = line[:-1]
        # A later line of one transaction (Session.append_messages) follows the one before
        # and, if it fails, is taken back alone: the lines before it stay in the transaction.
        earlier = self._pending
        seq = (self._seen if earlier is None else earlier) + 1
        facts = line_facts(raw)
        try:
            if earlier is not None:
                self._conn.execute("SAVEPOINT line")
            self._conn.execute(
                "INSERT INTO entries (session_id, seq, id, line) VALUES (?, ?, ?, ?)",
                (self._sid, seq, entry_id_of(raw), raw),
            )
            if facts.message or facts.name_set:
                self._conn.execute(
                    "UPDATE sessions SET"
                    " message_count = message_count + ?,"
                    " first_message = CASE WHEN first_message = '' AND ? IS NOT NULL"
                    "   THEN ? ELSE first_message END,"
                    " last_activity = COALESCE(?, last_activity),"
                    " modified = COALESCE(?, modified),"
                    " name = CASE WHEN ? THEN ? ELSE name END"
                    " WHERE id = ?",
                    (
                        int(facts.message),
                        facts.first_text,
                        facts.first_text,
                        facts.activity_ms,
                        facts.activity_ms,
                        int(facts.name_set),
                        facts.name,
                        self._sid,
                    ),
                )
            if earlier is not None:
                self._conn.execute("RELEASE line")
        except sqlite3.Error as exc:
            if earlier is None:
                self._conn.rollback()
            else:
                self._conn.execute("ROLLBACK TO line")
                self._conn.execute("RELEASE line")
            raise SessionWriteError(self.where, 0, len(line)) from exc
        self._pending = seq
        return RawLine(seq, 0, raw)

    def end_append(self) -> None:
        try:
            if self._conn.in_transaction:
                try:
                    self._conn.commit()
                except sqlite3.Error as exc:
                    self._conn.rollback()
                    self._pending = None
                    raise SessionWriteError(self.where, 0, 0) from exc
            if self._pending is not None:
                self._seen, self._pending = self._pending, None
        finally:
            self._lock.release()

    def poll(self) -> list[RawLine]:
        with self._lock:
            self._check_open()
            self._conn.execute("BEGIN")
            try:
                return self._new_lines()
            finally:
                self._conn.rollback()

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> list[RawLine]:
        """Replace the header and every line (a v1/v2 session migrated before an append, under
        the append's transaction). The old lines are kept in ``session_backups``. Nobody else
        can append inside the transaction, so there is nothing to catch up: returns []."""
        conn = self._conn
        conn.execute(
            "INSERT OR REPLACE INTO session_backups (session_id, suffix, header, lines)"
            " SELECT id, ?, header, (SELECT json_group_array(CAST(line AS TEXT)) FROM"
            "  (SELECT line FROM entries WHERE session_id = ? ORDER BY seq))"
            " FROM sessions WHERE id = ?",
            (backup_suffix, self._sid, self._sid),
        )
        conn.execute("DELETE FROM entries WHERE session_id = ?", (self._sid,))
        body = [line[:-1] for line in lines[1:]]
        conn.executemany(
            "INSERT INTO entries (session_id, seq, id, line) VALUES (?, ?, ?, ?)",
            [(self._sid, n, entry_id_of(raw), raw) for n, raw in enumerate(body, start=2)],
        )
        set_summary(conn, self._sid, summarize(body), header=lines[0][:-1].decode())
        self._seen = len(lines)
        return []

    def sync(self) -> None:
        """Make every committed append durable (a WAL checkpoint syncs the log).

        Under ``fsync="always"`` each commit already synced the log (``synchronous=FULL``), so
        there is nothing to do: a checkpoint per append would only add writes and syncs."""
        with self._lock:
            if not self._closed and self._fsync != "always":
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(self._db, "the session's connection is closed")

    def _new_lines(self) -> list[RawLine]:
        """Lines others committed after ``seen`` (inside a transaction), checking the session
        is still the one this store opened."""
        found = self._conn.execute(
            "SELECT incarnation FROM sessions WHERE id = ?", (self._sid,)
        ).fetchone()
        if found is None:
            raise SessionGoneError(self.where, "deleted")
        if found[0] != self._incarnation:
            raise SessionGoneError(self.where, "replaced")
        new = [
            RawLine(seq, 0, _line(line))
            for seq, line in self._conn.execute(
                "SELECT seq, line FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq",
                (self._sid, self._seen),
            )
        ]
        if new:
            self._seen = new[-1].number
        return new


def set_summary(
    conn: sqlite3.Connection, session_id: str, summary: Summary, *, header: str | None = None
) -> None:
    """Write a whole summary into the session's row (after an import, a fork, a migration)."""
    conn.execute(
        "UPDATE sessions SET message_count = ?, first_message = ?, name = ?,"
        " last_activity = ?, modified = COALESCE(?, created), header = COALESCE(?, header)"
        " WHERE id = ?",
        (
            summary.message_count,
            summary.first_message,
            summary.name,
            summary.last_activity_ms,
            summary.last_activity_ms,
            header,
            session_id,
        ),
    )


def _line(value: object) -> bytes:
    """A stored line as bytes. The file is untrusted: text is taken as UTF-8, and any other
    type (an integer, which ``bytes()`` would make that many zero bytes) as a line no reader
    accepts, so it is reported as damaged instead of crashing or filling memory."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return b"\x00 not a line"


# The datetimes Python can hold, in Unix milliseconds (years 1 to 9999).
_MIN_MS = -62_135_596_800_000
_MAX_MS = 253_402_300_799_999


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


class SqliteSessionRepo:
    """A :class:`~repos.SessionRepo` in one SQLite database file (created if missing).

    Sessions have no paths (``path`` is None; refer to them by id). Every process and thread
    may open the same database: appends to one session from many of them interleave safely,
    each ``Session`` catching up on the others' lines by sequence at its next append or
    :meth:`~repos.Session.refresh`.

    Args:
        path: the database file.
        fsync: ``always`` commits each append with ``synchronous=FULL``; ``turn`` and
            ``never`` use ``synchronous=NORMAL`` (WAL: a commit survives a process crash,
            and ``Session.sync``/a save point checkpoints it for a power loss).
        strict: as ``JsonlSessionRepo``: raise on the first damaged line instead of skipping.
        timeout: seconds a writer waits for another's transaction before failing.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        fsync: FsyncPolicy = "turn",
        strict: bool = False,
        timeout: float = 60.0,
    ) -> None:
        self._path = Path(path)
        self._fsync: FsyncPolicy = fsync
        self._strict = strict
        self._timeout = timeout
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = connect(self._path, fsync=fsync, timeout=timeout)
            ensure_schema(self._conn)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(self._path, f"cannot open the database: {exc}") from exc
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def __repr__(self) -> str:
        return f"SqliteSessionRepo({str(self._path)!r})"

    def close(self) -> None:
        """Close the repository's own connection (sessions keep theirs until closed)."""
        with self._lock:
            self._conn.close()

    # --- lifecycle ---------------------------------------------------------------------------

    async def create(
        self,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        """Create an empty session. Raises like ``JsonlSessionRepo.create``; a taken id is
        refused by the database itself (``SessionExistsError``), across processes too."""
        sid = validate_session_id(session_id) if session_id is not None else str(uuid.uuid4())
        header = SessionHeader(
            id=sid,
            timestamp=iso_now(),
            cwd=absolute_cwd(cwd),
            parent_session=parent_session,
            metadata=metadata,
        )
        line = header_line(header)
        session = await asyncio.to_thread(self._publish, header, line, [], None)
        await notify(
            self,
            SessionCreatedEvent(
                session_id=session.id, path=None, parent_session=header.parent_session
            ),
        )
        return session

    async def open(self, ref: str | Path) -> Session:
        """Open by id. Raises ``SessionNotFoundError`` / ``InvalidSessionIdError``;
        ``CorruptSessionError`` in strict mode for a damaged line."""
        return await asyncio.to_thread(self._open, self._check(ref))

    async def list(
        self,
        cwd: str | None = None,
        *,
        name: str | None = None,
        updated_since: datetime | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[SessionInfo]:
        """Sessions newest activity first, from the ``sessions`` table's indexed columns.

        Args:
            cwd: only sessions whose header has exactly this cwd.
            name: only sessions whose name contains this text (case-insensitive).
            updated_since: only sessions whose last activity is at or after this time.
            limit, offset: one page of the result.
        """
        return await asyncio.to_thread(self._list, cwd, name, updated_since, limit, offset)

    async def delete(self, ref: str | Path) -> None:
        """Delete a session and its lines in one transaction; a missing one is not an error.
        Sessions open on it refuse further appends (``SessionGoneError``)."""
        sid = self._check(ref)
        if await asyncio.to_thread(self._delete, sid):
            await notify(self, SessionDeletedEvent(session_id=sid, path=None))

    async def fork(
        self,
        source: str | Path,
        *,
        entry_id: str | None = None,
        position: ForkPosition | None = None,
        scope: ForkScope = "branch",
        cwd: str | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Fork like ``JsonlSessionRepo.fork`` (``parent_session`` is the source's id). The
        copied lines are copied inside the database (``INSERT ... SELECT``), never through
        Python; only the few lines a branch fork adds (labels, name, leaf) are sent."""
        if session_id is not None:
            validate_session_id(session_id)  # before anything is read
        src = await self.open(source)
        with src:
            await check_fork_allowed(self, src, entry_id=entry_id, position=position, scope=scope)
            header = fork_header(src, session_id=session_id, cwd=cwd, parent_session=src.id)
            ids, extra = fork_plan(src, entry_id=entry_id, position=position, scope=scope)
            fork = await asyncio.to_thread(self._fork, src, header, ids, extra)
        await notify(self, SessionForkEvent(source_id=src.id, session_id=fork.id, path=None))
        return fork

    # --- moving sessions in and out (``harness sessions copy``) ------------------------------

    async def ids(self) -> builtins.list[str]:
        """Every session id, oldest first."""
        with self._lock:
            rows = self._conn.execute("SELECT id FROM sessions ORDER BY created, id").fetchall()
        return [r[0] for r in rows]

    async def export_lines(self, session_id: str) -> builtins.list[bytes]:
        """The session as the lines of its JSONL file (newline-terminated, header first)."""
        return await asyncio.to_thread(self._export, self._check(session_id))

    async def import_lines(self, lines: Sequence[bytes]) -> int:
        """Store a session given as the lines of its JSONL file (header first), verbatim.

        If the session exists and its lines are a prefix of ``lines``, only the rest is added
        (a resumed or repeated copy). Returns how many lines were added, the header included
        for a new session (0: already there).

        Raises:
            CorruptSessionError: line 1 is not a session header.
            SessionExistsError: a session with this id holds different lines.
        """
        return await asyncio.to_thread(self._import, lines)

    # --- internals ---------------------------------------------------------------------------

    def _check(self, ref: str | Path) -> str:
        if isinstance(ref, Path):
            raise InvalidSessionIdError(str(ref), "a database repo has no paths; pass the id")
        return validate_session_id(ref)

    def _store(self, sid: str, incarnation: str, seen: int) -> _SqliteStore:
        return _SqliteStore(
            self._path, sid, incarnation, seen, fsync=self._fsync, timeout=self._timeout
        )

    def _open(self, sid: str) -> Session:
        conn = connect(self._path, fsync=self._fsync, timeout=self._timeout)
        try:
            conn.execute("BEGIN")  # one snapshot: the header and the lines agree
            found = conn.execute(
                "SELECT header, incarnation FROM sessions WHERE id = ?", (sid,)
            ).fetchone()
            if found is None:
                raise SessionNotFoundError(sid)
            rows = conn.execute(
                "SELECT seq, line FROM entries WHERE session_id = ? ORDER BY seq", (sid,)
            ).fetchall()
            conn.rollback()
        except BaseException:
            conn.close()
            raise
        header_line, incarnation = str(found[0]), str(found[1])
        seen = rows[-1][0] if rows else 1
        store = _SqliteStore(
            self._path,
            sid,
            incarnation,
            seen,
            fsync=self._fsync,
            timeout=self._timeout,
            conn=conn,
        )
        try:
            return self._session(store, header_line, rows)
        except BaseException:
            store.close()
            raise

    def _session(
        self, store: _SqliteStore, header_line: str, rows: Sequence[tuple[int, bytes]]
    ) -> Session:
        where = store.where
        try:
            header = decode_header(orjson.loads(header_line))
        except (orjson.JSONDecodeError, CodecError) as exc:
            raise CorruptSessionError(where, 1, 0, f"no valid session header: {exc}") from exc
        tree = Tree(load=store.read, load_many=store.read_many)
        diagnostics: list[Diagnostic] = []
        indexer = Indexer(where, tree, diagnostics, v1=header.version < 2, strict=self._strict)
        if rows and all(seq == n for n, (seq, _) in enumerate(rows, start=2)):
            # Consecutive sequences: index the lines as one buffer, as a file is indexed.
            indexer.feed_chunk(b"".join(_line(line) + b"\n" for _, line in rows), 0, 2)
            indexer.finish()
        else:
            indexer.feed(RawLine(seq, 0, _line(line)) for seq, line in rows)
        if self._strict:
            for entry_id in tree.order:
                tree.get(entry_id)
        return Session(
            header=header,
            tree=tree,
            store=store,
            diagnostics=diagnostics,
            fsync=self._fsync,
            indexer=indexer,
            strict=self._strict,
        )

    def _publish(
        self,
        header: SessionHeader,
        header_line: bytes,
        body: Sequence[bytes],
        summary: Summary | None,
    ) -> Session:
        """Insert a new session (header line and verbatim body lines, newline-terminated)."""
        incarnation = uuid.uuid4().hex
        text = header_line[:-1].decode()
        raws = [line[:-1] for line in body]
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._insert_session(conn, header, text, incarnation)
                conn.executemany(
                    "INSERT INTO entries (session_id, seq, id, line) VALUES (?, ?, ?, ?)",
                    [(header.id, n, entry_id_of(raw), raw) for n, raw in enumerate(raws, 2)],
                )
                if raws:
                    set_summary(conn, header.id, summary or summarize(raws))
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        rows = [(n, raw) for n, raw in enumerate(raws, 2)]
        store = self._store(header.id, incarnation, len(raws) + 1)
        return self._session(store, text, rows)

    def _insert_session(
        self, conn: sqlite3.Connection, header: SessionHeader, text: str, incarnation: str
    ) -> None:
        created = ms_of_iso(header.timestamp)
        try:
            conn.execute(
                "INSERT INTO sessions (id, cwd, name, parent, created, modified, message_count,"
                " first_message, header, incarnation) VALUES (?, ?, NULL, ?, ?, ?, 0, '', ?, ?)",
                (header.id, header.cwd, header.parent_session, created, created, text, incarnation),
            )
        except sqlite3.IntegrityError:
            raise SessionExistsError(header.id) from None

    def _fork(
        self, src: Session, header: SessionHeader, ids: Sequence[str], extra: Sequence[bytes]
    ) -> Session:
        rows = [src._tree.rows[i] for i in ids]
        header_line = dumps_line(encode_header(header))
        text = header_line[:-1].decode()
        incarnation = uuid.uuid4().hex
        copied: list[tuple[int, int]] = []  # (new seq, source seq): copied in the database
        sent: list[tuple[int, bytes]] = []  # (new seq, line): lines that must be re-encoded
        for n, row in enumerate(rows, start=2):
            if row.derived_ids or not row.line:
                sent.append((n, src.raw_line(row.id)[:-1]))
            else:
                copied.append((n, row.line))
        after = len(rows) + 2
        sent.extend((n, line[:-1]) for n, line in enumerate(extra, start=after))
        summary = _fork_summary(src, ids, extra)
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._insert_session(conn, header, text, incarnation)
                if copied:
                    done = conn.execute(
                        "INSERT INTO entries (session_id, seq, id, line)"
                        " SELECT ?, json_extract(j.value, '$[0]'), e.id, e.line"
                        " FROM json_each(?) AS j CROSS JOIN entries AS e"
                        " ON e.session_id = ? AND e.seq = json_extract(j.value, '$[1]')",
                        (header.id, orjson.dumps(copied).decode(), src.id),
                    ).rowcount
                    if done != len(copied):
                        raise SessionNotFoundError(src.id, "deleted while it was forked")
                conn.executemany(
                    "INSERT INTO entries (session_id, seq, id, line) VALUES (?, ?, ?, ?)",
                    [(header.id, n, entry_id_of(raw), raw) for n, raw in sent],
                )
                set_summary(conn, header.id, summary)
                lines = conn.execute(
                    "SELECT seq, line FROM entries WHERE session_id = ? ORDER BY seq",
                    (header.id,),
                ).fetchall()
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        store = self._store(header.id, incarnation, after - 1 + len(extra))
        return self._session(store, text, lines)

    def _list(
        self,
        cwd: str | None,
        name: str | None,
        since: datetime | None,
        limit: int | None,
        offset: int,
    ) -> builtins.list[SessionInfo]:
        where: builtins.list[str] = []
        args: builtins.list[object] = []
        if cwd is not None:
            where.append("cwd = ?")
            args.append(cwd)
        if name is not None:
            where.append("instr(lower(name), lower(?)) > 0")
            args.append(name)
        if since is not None:
            where.append("modified >= ?")
            args.append(round(since.timestamp() * 1000))
        sql = (
            "SELECT id, cwd, name, parent, created, modified, message_count, first_message"
            " FROM sessions"
        )
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY modified DESC, id LIMIT ? OFFSET ?"
        args.extend([-1 if limit is None else limit, offset])
        with self._lock:
            found = self._conn.execute(sql, args).fetchall()
        infos = [self._info(row) for row in found]
        return [info for info in infos if info is not None]

    def _info(self, row: tuple[object, ...]) -> SessionInfo | None:
        """A ``sessions`` row as a :class:`SessionInfo`, or None (logged) when a column holds
        what this harness never writes there: the file is untrusted, and one bad row must not
        stop the listing of the others."""
        sid, row_cwd, row_name, parent, created, modified, count, first = row
        texts = (sid, row_cwd, first)
        if (
            all(isinstance(v, str) for v in texts)
            and all(v is None or isinstance(v, str) for v in (row_name, parent))
            and all(isinstance(v, int) and _MIN_MS <= v <= _MAX_MS for v in (created, modified))
            and isinstance(count, int)
            and count >= 0
        ):
            return SessionInfo(
                id=cast(str, sid),
                path=None,
                cwd=cast(str, row_cwd),
                name=cast("str | None", row_name),
                parent_session=cast("str | None", parent),
                created=_utc(cast(int, created)),
                modified=_utc(cast(int, modified)),
                message_count=count,
                first_message=cast(str, first),
            )
        _log.warning(
            "%s: session row %r left out of the list: a column holds a value of the wrong "
            "type or range (this harness never writes one)",
            self._path,
            sid if isinstance(sid, str) else repr(sid),
        )
        return None

    def _delete(self, sid: str) -> bool:
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM entries WHERE session_id = ?", (sid,))
                gone = conn.execute("DELETE FROM sessions WHERE id = ?", (sid,)).rowcount
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        return gone > 0

    def _export(self, sid: str) -> builtins.list[bytes]:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                found = conn.execute("SELECT header FROM sessions WHERE id = ?", (sid,)).fetchone()
                if found is None:
                    raise SessionNotFoundError(sid)
                rows = conn.execute(
                    "SELECT line FROM entries WHERE session_id = ? ORDER BY seq", (sid,)
                ).fetchall()
            finally:
                conn.rollback()
        return [str(found[0]).encode() + b"\n", *(_line(r[0]) + b"\n" for r in rows)]

    def _import(self, lines: Sequence[bytes]) -> int:
        if not lines:
            raise CorruptSessionError("<import>", 1, 0, "no session header")
        header_line = lines[0]
        try:
            header = decode_header(orjson.loads(header_line))
        except (orjson.JSONDecodeError, CodecError) as exc:
            raise CorruptSessionError("<import>", 1, 0, f"no valid session header: {exc}") from exc
        validate_session_id(header.id)
        text = header_line.rstrip(b"\n").decode()
        body = [line[:-1] if line.endswith(b"\n") else line for line in lines[1:]]
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                found = conn.execute(
                    "SELECT header FROM sessions WHERE id = ?", (header.id,)
                ).fetchone()
                have: builtins.list[bytes] = []
                if found is None:
                    self._insert_session(conn, header, text, uuid.uuid4().hex)
                else:
                    have = [
                        _line(r[0])
                        for r in conn.execute(
                            "SELECT line FROM entries WHERE session_id = ? ORDER BY seq",
                            (header.id,),
                        )
                    ]
                    if str(found[0]) != text or body[: len(have)] != have:
                        raise SessionExistsError(header.id)
                new = body[len(have) :]
                taken = {i for i in (entry_id_of(raw) for raw in have) if i is not None}
                rows: builtins.list[tuple[str, int, str | None, bytes]] = []
                for n, raw in enumerate(new, start=len(have) + 2):
                    entry_id = entry_id_of(raw)
                    if entry_id in taken:
                        entry_id = None  # a duplicate id, kept verbatim but not indexed
                    elif entry_id is not None:
                        taken.add(entry_id)
                    rows.append((header.id, n, entry_id, raw))
                conn.executemany(
                    "INSERT INTO entries (session_id, seq, id, line) VALUES (?, ?, ?, ?)", rows
                )
                if new:
                    set_summary(conn, header.id, summarize(body))
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        return len(new) + (found is None)  # the header line, when the session is new


def _fork_summary(src: Session, ids: Sequence[str], extra: Iterable[bytes]) -> Summary:
    """The ``list`` columns of a fork, from the source's index and a few of its lines."""
    summary = Summary()
    messages = [i for i in ids if src.entry_type(i) == "message"]
    summary.message_count = len(messages)
    for entry_id in messages:
        facts = line_facts(src.raw_line(entry_id)[:-1])
        if facts.first_text is not None:
            summary.first_message = facts.first_text
            break
    for entry_id in reversed(messages):
        facts = line_facts(src.raw_line(entry_id)[:-1])
        if facts.activity_ms is not None:
            summary.last_activity_ms = facts.activity_ms
            break
    names = [i for i in ids if src.entry_type(i) == "session_info"]
    if names:
        summary.add(line_facts(src.raw_line(names[-1])[:-1]))
    for line in extra:
        facts = line_facts(line[:-1])
        if facts.name_set:
            summary.add(facts)
    return summary
