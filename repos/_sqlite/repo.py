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

import builtins
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson

from .._entries import SessionHeader
from .._errors import (
    SessionExistsError,
    SessionGoneError,
    SessionNotFoundError,
    SessionWriteError,
    StorageError,
)
from .._index import RawLine
from .._listing import line_facts, summarize
from .._session import FsyncPolicy
from .._sql import (
    INSERT_ENTRY,
    INSERT_SESSION,
    OPEN,
    SELECT_AFTER,
    SELECT_ALL,
    CatchUp,
    ForkRows,
    SqlRepo,
    SqlStore,
    add_facts,
    as_line,
    entry_id_of,
    import_rows,
    last_seq,
    opened,
    session_args,
    summary_args,
)
from .schema import SQLITE, connect, ensure_schema

__all__ = ["SqliteSessionRepo"]

_BATCH = 500  # rows per ``IN (...)`` when reading many lines


class _SqliteStore(SqlStore):
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
        super().__init__()
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
    def where(self) -> str:
        return f"{self._db}#{self._sid}"

    def _fetch(self, seqs: Sequence[int]) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        with self._lock:
            for start in range(0, len(seqs), _BATCH):
                chunk = seqs[start : start + _BATCH]
                marks = ",".join("?" * len(chunk))
                for seq, line in self._conn.execute(
                    f"SELECT seq, line FROM entries WHERE session_id = ? AND seq IN ({marks})",
                    (self._sid, *chunk),
                ):
                    out[seq] = as_line(line)
        return out

    # --- the append transaction --------------------------------------------------------------

    def begin_append(self) -> CatchUp:
        self._lock.acquire()
        try:
            self._check_open()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(self._db, f"cannot start an append: {exc}") from exc
            try:
                return CatchUp(lines=self._new_lines())
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
        update = add_facts(SQLITE, self._sid, line_facts(raw))
        try:
            if earlier is not None:
                self._conn.execute("SAVEPOINT line")
            self._conn.execute(INSERT_ENTRY, (self._sid, seq, entry_id_of(raw), raw))
            if update is not None:
                self._conn.execute(*update)
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
        self.forget()
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
            INSERT_ENTRY,
            [(self._sid, n, entry_id_of(raw), raw) for n, raw in enumerate(body, start=2)],
        )
        conn.execute(*summary_args(SQLITE, self._sid, summarize(body), lines[0][:-1].decode()))
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
            self.forget()
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
            RawLine(seq, 0, as_line(line))
            for seq, line in self._conn.execute(SELECT_AFTER, (self._sid, self._seen))
        ]
        if new:
            self._seen = new[-1].number
        return new


class SqliteSessionRepo(SqlRepo):
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

    _dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        fsync: FsyncPolicy = "turn",
        strict: bool = False,
        timeout: float = 60.0,
    ) -> None:
        self._path = Path(path)
        self._fsync = fsync
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

    # --- internals ---------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return str(self._path)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The repository's connection inside one write transaction (committed on success)."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

    def _rows(self, sql: str, args: Sequence[object]) -> builtins.list[tuple[object, ...]]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _store(self, sid: str, incarnation: str, seen: int) -> _SqliteStore:
        return _SqliteStore(
            self._path, sid, incarnation, seen, fsync=self._fsync, timeout=self._timeout
        )

    def _load(self, sid: str) -> tuple[_SqliteStore, str, builtins.list[tuple[int, bytes]]]:
        # The connection that read the session becomes its store's.
        conn = connect(self._path, fsync=self._fsync, timeout=self._timeout)
        try:
            text, incarnation, rows = opened(sid, conn.execute(OPEN, (sid, sid)))
        except BaseException:
            conn.close()
            raise
        store = _SqliteStore(
            self._path,
            sid,
            incarnation,
            last_seq(rows),
            fsync=self._fsync,
            timeout=self._timeout,
            conn=conn,
        )
        return store, text, rows

    def _insert_new(self, header: SessionHeader, text: str, incarnation: str) -> None:
        with self._transaction() as conn:
            self._insert_session(conn, header, text, incarnation)

    def _insert_session(
        self, conn: sqlite3.Connection, header: SessionHeader, text: str, incarnation: str
    ) -> None:
        try:
            conn.execute(INSERT_SESSION, session_args(header, text, incarnation))
        except sqlite3.IntegrityError:
            raise SessionExistsError(header.id) from None

    def _write_fork(
        self, src_id: str, header: SessionHeader, text: str, incarnation: str, plan: ForkRows
    ) -> builtins.list[tuple[int, bytes]]:
        with self._transaction() as conn:
            self._insert_session(conn, header, text, incarnation)
            if plan.copied:
                done = conn.execute(
                    "INSERT INTO entries (session_id, seq, id, line)"
                    " SELECT ?, json_extract(j.value, '$[0]'), e.id, e.line"
                    " FROM json_each(?) AS j CROSS JOIN entries AS e"
                    " ON e.session_id = ? AND e.seq = json_extract(j.value, '$[1]')",
                    (header.id, orjson.dumps(plan.copied).decode(), src_id),
                ).rowcount
                if done != len(plan.copied):
                    raise SessionNotFoundError(src_id, "deleted while it was forked")
            conn.executemany(
                INSERT_ENTRY, [(header.id, n, entry_id_of(raw), raw) for n, raw in plan.sent]
            )
            conn.execute(*summary_args(SQLITE, header.id, plan.summary))
            return [(seq, as_line(line)) for seq, line in conn.execute(SELECT_ALL, (header.id,))]

    def _delete(self, sid: str) -> bool:
        with self._transaction() as conn:
            conn.execute("DELETE FROM entries WHERE session_id = ?", (sid,))
            return conn.execute("DELETE FROM sessions WHERE id = ?", (sid,)).rowcount > 0

    def _ids(self) -> builtins.list[str]:
        with self._lock:
            rows = self._conn.execute("SELECT id FROM sessions ORDER BY created, id").fetchall()
        return [r[0] for r in rows]

    def _export(self, sid: str) -> builtins.list[bytes]:
        with self._lock:
            text, _, rows = opened(sid, self._conn.execute(OPEN, (sid, sid)))
        return [text.encode() + b"\n", *(line + b"\n" for _, line in rows)]

    def _import_lines(self, header: SessionHeader, text: str, body: Sequence[bytes]) -> int:
        with self._transaction() as conn:
            found = conn.execute(
                "SELECT header FROM sessions WHERE id = ?", (header.id,)
            ).fetchone()
            have: builtins.list[bytes] = []
            if found is None:
                self._insert_session(conn, header, text, uuid.uuid4().hex)
            else:
                have = [as_line(r[1]) for r in conn.execute(SELECT_ALL, (header.id,))]
                if str(found[0]) != text or body[: len(have)] != have:
                    raise SessionExistsError(header.id)
            conn.executemany(INSERT_ENTRY, import_rows(header.id, have, body))
            if len(body) > len(have):
                conn.execute(*summary_args(SQLITE, header.id, summarize(body)))
        return len(body) - len(have) + (found is None)  # the header line, when new
