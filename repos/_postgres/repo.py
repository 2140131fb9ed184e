"""``PostgresSessionRepo``: every session of a team in one PostgreSQL database.

The design of ``SqliteSessionRepo`` (``repos/_sqlite/repo.py``), on a server: the same tables
(``schema.py``), ``entries`` holding exactly the JSON lines of the file format with a
per-session sequence equal to the line number in the file, ``sessions`` holding the header
line verbatim and the columns ``list`` reports, kept current inside each append's transaction.

Several writers, one session, on any number of machines (DESIGN §3): an append is one
transaction that first locks the session's row (``SELECT ... FOR UPDATE``: appenders to one
session queue there, appenders to different sessions never wait for each other), reads the
lines others committed since this session last looked (catch-up by sequence), then inserts the
new line at the next sequence. ``UNIQUE(session_id, seq)`` and ``UNIQUE(session_id, id)`` make a
lost or duplicated entry impossible even if that logic were wrong. Two writers continuing the
same leaf make two branches.

Synchronous driver, on purpose: a ``Session``'s reads and appends are synchronous (the store
protocol, ``repos/_session.py``; a local append takes microseconds and is called from sync
code, tools and hooks alike), so the store uses psycopg's sync ``Connection``; an async
connection would need an event loop inside every append. The repository's lifecycle methods
are async (the ``SessionRepo`` protocol) and run that same sync code in a worker thread
(``asyncio.to_thread``), as ``SqliteSessionRepo`` does, so one code path and one connection
pool (``psycopg_pool.ConnectionPool``, owned by the repo) serve both.

Connections are borrowed from the pool per operation, not pinned to a ``Session``: an append
holds one from ``begin_append`` to ``end_append`` (its transaction), a read for one query. So
a process may keep hundreds of sessions open on a pool of ten connections, and a connection the
server dropped is replaced by the pool instead of breaking the session that held it. An append
or a read whose connection is lost is retried once on a new one (``_PostgresStore``: the retry
detects a line whose commit did reach the server); each append's commit notifies watchers
(``NOTIFY``, ``watch.py``).
"""

from __future__ import annotations

import builtins
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo as pg_conninfo
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from .._entries import SessionHeader
from .._errors import (
    SessionExistsError,
    SessionGoneError,
    SessionNotFoundError,
    SessionWriteError,
    StorageError,
)
from .._index import RawLine
from .._listing import Summary, line_facts, summarize
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
    entry_id_of,
    import_rows,
    last_seq,
    opened,
    session_args,
    summary_args,
)
from .schema import POSTGRES, ensure_schema
from .watch import SessionWatch

__all__ = ["PostgresSessionRepo"]

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")


# The channel of ``NOTIFY``: the payload is "<session id> <seq>", sent when the transaction
# commits (session ids hold no space: ``validate_session_id``).
CHANNEL = "harness_entries"

# psycopg takes a statement as bytes (or a literal): the shared statements, spelt once here.
_INSERT = POSTGRES.sql(INSERT_ENTRY).encode()
_OPEN = POSTGRES.sql(OPEN).encode()
_SELECT_AFTER = POSTGRES.sql(SELECT_AFTER).encode()
_SELECT_ALL = POSTGRES.sql(SELECT_ALL).encode()
_INSERT_SESSION = POSTGRES.sql(
    INSERT_SESSION + " ON CONFLICT (id) DO NOTHING RETURNING id"
).encode()

# An append's line and its notification in one statement (one round trip).
_APPEND = (
    f"WITH added AS ({POSTGRES.sql(INSERT_ENTRY)} RETURNING seq)"
    f" SELECT pg_notify('{CHANNEL}', %s::text || ' ' || seq::text) FROM added"
).encode()


def _display(conninfo: str) -> str:
    """The server and database, without credentials, for error messages."""
    try:
        params = pg_conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "postgresql://?"
    host = params.get("host") or "localhost"
    port = params.get("port") or 5432
    return f"postgresql://{host}:{port}/{params.get('dbname') or ''}"


@contextmanager
def _snapshot(conn: Conn) -> Iterator[None]:
    """One consistent read-only snapshot for several queries (``conn`` is in autocommit)."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        yield
    finally:
        _rollback(conn)


def _rollback(conn: Conn) -> None:
    # A broken connection refuses: the pool discards it when it is given back.
    with suppress(psycopg.Error):
        conn.execute("ROLLBACK")


class _PostgresStore(SqlStore):
    """One ``Session``'s view of its rows; ``seen`` is the last sequence it has indexed.

    Reconnect and retry: an append whose connection is lost (the server restarted, the backend
    was terminated, the network dropped: ``psycopg.OperationalError``) is tried once more on a
    fresh connection, after the pool has discarded its dead ones (``ConnectionPool.check``) and
    waited for the server (up to the repository's ``timeout``). Before inserting again, the
    retry looks at every line committed after ``seen`` under the session's row lock: its own
    line already there, byte for byte, means the first commit did reach the server (nothing is
    inserted twice); its entry id there with another line is refused (``StorageError``). Lines
    others committed meanwhile are handed to the session at its next append or refresh.
    """

    def __init__(self, repo: PostgresSessionRepo, session_id: str, incarnation: str, seen: int):
        super().__init__()
        self._repo = repo
        self._sid = session_id
        self._incarnation = incarnation
        self._seen = seen
        self._backlog: list[RawLine] = []  # others' lines a retried append stepped over
        self._conn: Conn | None = None  # held from begin_append to end_append
        self._rewrote = False  # this append's transaction migrated the session
        self._lock = threading.RLock()
        self._closed = False

    @property
    def where(self) -> str:
        return f"{self._repo.where}#{self._sid}"

    def _fetch(self, seqs: Sequence[int]) -> dict[int, bytes]:
        query = b"SELECT seq, line FROM entries WHERE session_id = %s AND seq = ANY(%s)"
        args = (self._sid, list(seqs))
        with self._lock:
            conn = self._conn
            if conn is not None:  # inside this session's append: its own transaction
                found = conn.execute(query, args, binary=True).fetchall()
            else:
                found = self._repo._read(lambda c: c.execute(query, args, binary=True).fetchall())
        return dict(found)

    # --- the append transaction --------------------------------------------------------------

    def begin_append(self) -> CatchUp:
        self._lock.acquire()
        try:
            self._check_open()
            try:
                lines = self._begin()
            except psycopg.OperationalError as first:
                self._repo._recheck()
                try:
                    lines = self._begin()
                except (psycopg.Error, StorageError) as exc:
                    raise self._repo._failed_twice("cannot start an append", first, exc) from exc
            except psycopg.Error as exc:
                raise StorageError(self.where, f"cannot start an append: {exc}") from exc
            return CatchUp(lines=lines)
        except BaseException:
            self._lock.release()
            raise

    def _begin(self) -> list[RawLine]:
        """Borrow a connection, open the append's transaction, lock the row, catch up."""
        conn = self._repo._getconn()
        try:
            conn.execute("BEGIN")
            lines = self._new_lines(conn, lock=True)
        except BaseException:
            _rollback(conn)
            self._repo._putconn(conn)
            raise
        self._conn, self._rewrote = conn, False
        return lines

    def write(self, line: bytes) -> RawLine:
        """Insert the line at the next sequence and commit (the append's one write); retried
        once on a new connection when the connection is lost (see the class docstring).

        Raises:
            StorageError: the retry failed too (naming the server; the line may or may not
                be stored: a later catch-up shows it if it is), or the entry's id was found
                holding another line.
            SessionWriteError: the server refused the line (a constraint, bad data).
        """
        conn = self._conn
        assert conn is not None, "write outside begin_append/end_append"
        raw = line[:-1]
        try:
            seq = self._seen + 1
            self._store_line(conn, seq, raw)
        except psycopg.OperationalError as first:
            self._drop()
            if self._rewrote:  # the migration is gone with the transaction: not retried
                raise StorageError(
                    self.where, f"connection lost while migrating the session; reopen it: {first}"
                ) from first
            self._repo._recheck()
            try:
                self._conn = self._repo._getconn()
            except StorageError as exc:
                raise self._repo._failed_twice("append", first, exc) from exc
            try:
                seq = self._write_again(self._conn, raw)
            except psycopg.Error as exc:
                self._drop()
                raise self._repo._failed_twice("append", first, exc) from exc
            except BaseException:
                self._drop()
                raise
        except psycopg.Error as exc:
            self._drop()
            raise SessionWriteError(self.where, 0, len(line)) from exc
        self._seen = seq
        return RawLine(seq, 0, raw)

    def _store_line(self, conn: Conn, seq: int, raw: bytes) -> None:
        """Insert, update the ``list`` columns, notify watchers, commit."""
        update = add_facts(POSTGRES, self._sid, line_facts(raw))
        conn.execute(_APPEND, (self._sid, seq, entry_id_of(raw), raw, self._sid))
        if update is not None:
            conn.execute(update[0].encode(), update[1])
        conn.execute("COMMIT")

    def _write_again(self, conn: Conn, raw: bytes) -> int:
        """The retry of ``write`` on a new connection; returns the line's sequence."""
        conn.execute("BEGIN")
        self._check_same(conn, lock=True)  # waits for the lost transaction's end, if pending
        rows = conn.execute(_SELECT_AFTER, (self._sid, self._seen), binary=True).fetchall()
        entry_id = entry_id_of(raw)
        others: list[RawLine] = []
        for seq, stored in rows:
            if stored == raw:  # the lost commit had reached the server
                conn.execute("ROLLBACK")
                self._backlog.extend(others)
                return int(seq)
            if entry_id is not None and entry_id_of(stored) == entry_id:
                conn.execute("ROLLBACK")
                raise StorageError(
                    self.where,
                    f"entry {entry_id!r} holds another line (line {seq}) than the one this"
                    " append sent before its connection was lost; nothing was written",
                )
            others.append(RawLine(seq, 0, stored))
        seq = others[-1].number + 1 if others else self._seen + 1
        self._store_line(conn, seq, raw)
        self._backlog.extend(others)
        return seq

    def _drop(self) -> None:
        """Give back the append's connection, its transaction rolled back."""
        conn, self._conn = self._conn, None
        if conn is not None:
            _rollback(conn)
            self._repo._putconn(conn)

    def end_append(self) -> None:
        conn, self._conn = self._conn, None
        try:
            if conn is not None and conn.info.transaction_status != TransactionStatus.IDLE:
                # No line was written (the entry was refused before ``write``): keep only a
                # migration done under this transaction, which the session now relies on.
                try:
                    conn.execute("COMMIT" if self._rewrote else "ROLLBACK")
                except psycopg.Error as exc:
                    _rollback(conn)
                    raise SessionWriteError(self.where, 0, 0) from exc
        finally:
            if conn is not None:
                self._repo._putconn(conn)
            self._lock.release()

    def poll(self) -> list[RawLine]:
        with self._lock:
            self._check_open()

            def catch_up(conn: Conn) -> list[RawLine]:
                with _snapshot(conn):
                    return self._new_lines(conn, lock=False)

            return self._repo._read(catch_up)

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> list[RawLine]:
        """Replace the header and every line (a v1/v2 session migrated before an append, under
        the append's transaction). The old lines are kept in ``session_backups``. The
        session's row is locked, so nobody else appends meanwhile: returns []."""
        conn = self._conn
        assert conn is not None, "rewrite outside begin_append/end_append"
        self._rewrote = True
        self.forget()
        conn.execute(
            "INSERT INTO session_backups (session_id, suffix, header, lines)"
            " SELECT id, %s, header, COALESCE((SELECT string_agg(line || '\\x0a'::bytea,"
            "  ''::bytea ORDER BY seq) FROM entries WHERE session_id = %s), ''::bytea)"
            " FROM sessions WHERE id = %s"
            " ON CONFLICT (session_id, suffix) DO UPDATE"
            " SET header = EXCLUDED.header, lines = EXCLUDED.lines",
            (backup_suffix, self._sid, self._sid),
        )
        conn.execute("DELETE FROM entries WHERE session_id = %s", (self._sid,))
        body = [line[:-1] for line in lines[1:]]
        with conn.cursor() as cur:
            cur.executemany(
                _INSERT, [(self._sid, n, entry_id_of(raw), raw) for n, raw in enumerate(body, 2)]
            )
        _set_summary(conn, self._sid, summarize(body), lines[0][:-1].decode())
        self._seen = len(lines)
        return []

    def sync(self) -> None:
        """Nothing to do: a committed transaction is as durable as the server makes it
        (``synchronous_commit``)."""

    def close(self) -> None:
        with self._lock:
            self.forget()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(self.where, "the session is closed")

    def _check_same(self, conn: Conn, *, lock: bool) -> None:
        """Check the session is still the one this store opened; with ``lock``, lock its row
        until the transaction ends (every appender to this session waits there)."""
        found = conn.execute(
            "SELECT incarnation FROM sessions WHERE id = %s" + (" FOR UPDATE" if lock else ""),
            (self._sid,),
        ).fetchone()
        if found is None:
            raise SessionGoneError(self.where, "deleted")
        if found[0] != self._incarnation:
            raise SessionGoneError(self.where, "replaced")

    def _new_lines(self, conn: Conn, *, lock: bool) -> list[RawLine]:
        """Lines others committed after ``seen`` (first those a retried append stepped over),
        after :meth:`_check_same`."""
        self._check_same(conn, lock=lock)
        new = [
            RawLine(seq, 0, line)
            for seq, line in conn.execute(_SELECT_AFTER, (self._sid, self._seen), binary=True)
        ]
        if new:
            self._seen = new[-1].number
        new[:0], self._backlog = self._backlog, []
        return new


def _set_summary(conn: Conn, session_id: str, summary: Summary, header: str | None = None) -> None:
    """Write a whole summary into the session's row (after an import, a fork, a migration)."""
    sql, args = summary_args(POSTGRES, session_id, summary, header)
    conn.execute(sql.encode(), args)


class PostgresSessionRepo(SqlRepo):
    """A :class:`~repos.SessionRepo` in one PostgreSQL database (tables created if missing).

    Sessions have no paths (``path`` is None; refer to them by id). Every process on every
    machine may use the same database: appends to one session from many of them interleave
    safely, each ``Session`` catching up on the others' lines by sequence at its next append or
    :meth:`~repos.Session.refresh`. Close the sessions before the repository: they borrow the
    repository's connections.

    Args:
        conninfo: a libpq connection string or ``postgresql://`` URL.
        fsync: ``never`` commits with ``synchronous_commit = off`` (a server crash may lose
            the last commits, never corrupt them); ``turn`` and ``always`` use the server's
            setting (``on`` by default: each append is durable when it returns).
        strict: as ``JsonlSessionRepo``: raise on the first damaged line instead of skipping.
        timeout: seconds to wait for a connection from the pool (for the server at start, and
            for it to come back when a lost connection's retry needs a new one).
        min_size, max_size: the connection pool's bounds.
    """

    _dialect = POSTGRES

    def __init__(
        self,
        conninfo: str,
        *,
        fsync: FsyncPolicy = "turn",
        strict: bool = False,
        timeout: float = 60.0,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self._conninfo = conninfo
        self.where = _display(conninfo)
        self._fsync: FsyncPolicy = fsync
        self._strict = strict
        self._timeout = timeout
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=timeout,
            open=False,
            name=f"harness {self.where}",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            try:
                with self._connection() as conn:
                    ensure_schema(conn)
            except psycopg.OperationalError:
                # The server restarted between the pool's connect and this use: the schema's
                # transaction rolled back, so it is tried once more on a live connection.
                self._recheck()
                with self._connection() as conn:
                    ensure_schema(conn)
        except BaseException as exc:
            self._pool.close()
            if isinstance(exc, (psycopg.Error, PoolTimeout, StorageError)):
                raise StorageError(self.where, f"cannot open the database: {exc}") from exc
            raise

    def _configure(self, conn: Conn) -> None:
        if self._fsync == "never":
            conn.execute("SET synchronous_commit = off")

    @property
    def path(self) -> None:
        """None: a database has no path (see :attr:`where`)."""
        return None

    def __repr__(self) -> str:
        return f"PostgresSessionRepo({self.where!r})"

    def close(self) -> None:
        """Close the connection pool (close the sessions first)."""
        self._pool.close()

    # --- connections -------------------------------------------------------------------------

    def _getconn(self) -> Conn:
        try:
            return self._pool.getconn()
        except (PoolTimeout, psycopg.Error) as exc:
            raise StorageError(self.where, f"no database connection: {exc}") from exc

    def _putconn(self, conn: Conn) -> None:
        self._pool.putconn(conn)

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        """A pooled connection (autocommit) for a few statements."""
        conn = self._getconn()
        try:
            yield conn
        finally:
            self._putconn(conn)

    @contextmanager
    def _transaction(self) -> Iterator[Conn]:
        """A pooled connection inside one read-write transaction (committed on success).

        Raises:
            StorageError: the connection was lost (naming the server; the transaction may
                have committed when it was lost at the ``COMMIT``).
        """
        with self._connection() as conn:
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                except BaseException:
                    _rollback(conn)
                    raise
                conn.execute("COMMIT")
            except psycopg.OperationalError as exc:
                raise StorageError(self.where, f"connection lost: {exc}") from exc

    def _recheck(self) -> None:
        """After a lost connection: the pool tests its idle connections, replacing those the
        server no longer serves, so the retry waits for a live one (up to ``timeout``)."""
        self._pool.check()

    def _failed_twice(
        self, doing: str, first: BaseException, second: BaseException
    ) -> StorageError:
        return StorageError(
            self.where,
            f"{doing} failed after one retry on a new connection (first: {first}; then: {second})",
        )

    def _read(self, read: Callable[[Conn], T]) -> T:
        """``read(conn)`` on a pooled connection; run once more on a new connection when the
        first was lost (a read is safe to repeat).

        Raises:
            StorageError: the retry failed too, or the server refused the read.
        """
        try:
            with self._connection() as conn:
                return read(conn)
        except psycopg.OperationalError as first:
            self._recheck()
            try:
                with self._connection() as conn:
                    return read(conn)
            except (psycopg.Error, StorageError) as exc:
                raise self._failed_twice("a read", first, exc) from exc
        except psycopg.Error as exc:
            raise StorageError(self.where, f"a read failed: {exc}") from exc

    def _idempotent(self, write: Callable[[], T]) -> T:
        """``write()`` (a whole transaction that may be repeated: ``delete``, ``import``), once
        more after a lost connection."""
        try:
            return write()
        except StorageError as first:
            if not isinstance(first.__cause__, psycopg.OperationalError):
                raise
            self._recheck()
            try:
                return write()
            except StorageError as exc:
                raise self._failed_twice("a write", first.__cause__, exc) from exc

    # --- watching ----------------------------------------------------------------------------

    @asynccontextmanager
    async def watch(self, *session_ids: str) -> AsyncIterator[SessionWatch]:
        """See new entries as they are committed, by any process on any machine, without
        polling (PostgreSQL ``LISTEN/NOTIFY``; the other stores have no equivalent)::

            async with repo.watch(session.id) as changes:
                session.refresh()                  # what was committed before LISTEN
                async for batch in changes:        # woken by the commits' notifications
                    session.refresh()              # catch up by sequence

        Args:
            session_ids: the sessions to watch; none watches every session.

        Yields:
            A :class:`SessionWatch` on a connection of its own (not the pool's), closed on
            exit; its batches are :class:`Changes` (session id -> highest sequence committed).

        Raises:
            InvalidSessionIdError: an id is not a valid session id.
            StorageError: no connection within ``timeout`` (naming the server).
        """
        ids = frozenset(self._check(sid) for sid in session_ids)
        watch = SessionWatch(self._conninfo, self.where, ids, self._timeout)
        await watch.open()
        try:
            yield watch
        finally:
            await watch.close()

    # --- internals ---------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return self.where

    def _rows(self, sql: str, args: Sequence[object]) -> builtins.list[tuple[object, ...]]:
        query = sql.encode()
        return self._read(lambda conn: conn.execute(query, args).fetchall())

    def _store(self, sid: str, incarnation: str, seen: int) -> _PostgresStore:
        return _PostgresStore(self, sid, incarnation, seen)

    def _load(self, sid: str) -> tuple[_PostgresStore, str, builtins.list[tuple[int, bytes]]]:
        text, incarnation, rows = self._read(lambda conn: self._read_session(conn, sid))
        return _PostgresStore(self, sid, incarnation, last_seq(rows)), text, rows

    @staticmethod
    def _read_session(conn: Conn, sid: str) -> tuple[str, str, builtins.list[tuple[int, bytes]]]:
        # One statement: one snapshot, one round trip; binary, so lines come as they are
        # stored (text would send each byte as two hex digits).
        return opened(sid, conn.execute(_OPEN, (sid, sid), binary=True))

    def _insert_new(self, header: SessionHeader, text: str, incarnation: str) -> None:
        with self._transaction() as conn:
            self._insert_session(conn, header, text, incarnation)

    def _insert_session(
        self, conn: Conn, header: SessionHeader, text: str, incarnation: str
    ) -> None:
        found = conn.execute(_INSERT_SESSION, session_args(header, text, incarnation)).fetchone()
        if found is None:
            raise SessionExistsError(header.id)

    def _write_fork(
        self, src_id: str, header: SessionHeader, text: str, incarnation: str, plan: ForkRows
    ) -> builtins.list[tuple[int, bytes]]:
        with self._transaction() as conn:
            self._insert_session(conn, header, text, incarnation)
            if plan.copied:
                new_seqs, src_seqs = (list(c) for c in zip(*plan.copied, strict=True))
                done = conn.execute(
                    "INSERT INTO entries (session_id, seq, id, line)"
                    " SELECT %s, m.new_seq, e.id, e.line"
                    " FROM unnest(%s::integer[], %s::integer[]) AS m(new_seq, src_seq)"
                    " JOIN entries AS e ON e.session_id = %s AND e.seq = m.src_seq",
                    (header.id, new_seqs, src_seqs, src_id),
                ).rowcount
                if done != len(plan.copied):
                    raise SessionNotFoundError(src_id, "deleted while it was forked")
            if plan.sent:
                with conn.cursor() as cur:
                    cur.executemany(
                        _INSERT, [(header.id, n, entry_id_of(raw), raw) for n, raw in plan.sent]
                    )
            _set_summary(conn, header.id, plan.summary)
            return conn.execute(_SELECT_ALL, (header.id,), binary=True).fetchall()

    def _delete(self, sid: str) -> bool:
        return self._idempotent(lambda: self._delete_once(sid))

    def _delete_once(self, sid: str) -> bool:
        with self._transaction() as conn:
            # The row first: an append in flight holds its lock, so the delete waits for it.
            gone = conn.execute("DELETE FROM sessions WHERE id = %s", (sid,)).rowcount
            conn.execute("DELETE FROM entries WHERE session_id = %s", (sid,))
        return gone > 0

    def _ids(self) -> builtins.list[str]:
        query = 'SELECT id FROM sessions ORDER BY created, id COLLATE "C"'
        return self._read(lambda conn: [str(r[0]) for r in conn.execute(query)])

    def _export(self, sid: str) -> builtins.list[bytes]:
        text, _, rows = self._read(lambda conn: self._read_session(conn, sid))
        return [text.encode() + b"\n", *(line + b"\n" for _, line in rows)]

    def _import_lines(self, header: SessionHeader, text: str, body: Sequence[bytes]) -> int:
        return self._idempotent(lambda: self._import_once(header, text, body))

    def _import_once(self, header: SessionHeader, text: str, body: Sequence[bytes]) -> int:
        with self._transaction() as conn:
            found = conn.execute(
                "SELECT header FROM sessions WHERE id = %s FOR UPDATE", (header.id,)
            ).fetchone()
            have: builtins.list[bytes] = []
            if found is None:
                self._insert_session(conn, header, text, uuid.uuid4().hex)
            else:
                have = [r[1] for r in conn.execute(_SELECT_ALL, (header.id,), binary=True)]
                if str(found[0]) != text or body[: len(have)] != have:
                    raise SessionExistsError(header.id)
            rows = import_rows(header.id, have, body)
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(_INSERT, rows)
                _set_summary(conn, header.id, summarize(body))
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{header.id} {len(body) + 1}"))
        return len(rows) + (found is None)  # the header line, when the session is new
