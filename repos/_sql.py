"""What ``SqliteSessionRepo`` and ``PostgresSessionRepo`` share: one schema design, the SQL they
both run, the planning of forks and imports, the reads of a session's store and the repository's
async lifecycle.

The stores differ in how they reach the database (SQLite: one connection per session and one for
the repository, a process lock; PostgreSQL: a pool, a row lock, a retry on a lost connection,
``NOTIFY``), and those parts stay in their own modules (``_sqlite/repo.py``,
``_postgres/repo.py``). What differs in the SQL text itself is the :class:`Dialect` seam: the
parameter mark, the substring function, the byte-wise id order, and how a "no limit" and a
``TEXT`` value are spelt. Statements here are written once with ``?`` marks and given to a
dialect's :meth:`Dialect.sql`.

Resume reads a session in one statement (:data:`OPEN`: the header row and every line, in
sequence order); the lines it read serve the store's first batch of reads (the first context's
messages) from memory, so each body is read from the database once and decoded once. Not a
recursive walk from the leaf up the parent ids: a ``Session`` indexes every line (its entries,
branches, labels, name and leaf), so the open reads them all anyway, and a walk of the active
path would read its lines a second time.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import orjson
from attrs import frozen

# hooks' session events and its bus are imported where an event is sent: opening, reading
# and listing sessions need neither (a fast start, issue 24 point 6).
from ._codec import CodecError, decode_entry, decode_header, dumps_line, encode_header, loads_line
from ._entries import Entry, SessionHeader
from ._errors import (
    CorruptSessionError,
    InvalidSessionIdError,
    SessionGoneError,
    SessionNotFoundError,
)
from ._fork import check_fork_allowed, fork_header, fork_plan
from ._index import Diagnostic, Indexer, RawLine
from ._jsonl.paths import absolute_cwd, validate_session_id
from ._listing import LineFacts, Summary, line_facts, ms_of_iso
from ._repo import ForkPosition, ForkScope, SessionInfo
from ._session import FsyncPolicy, Session, header_line, iso_now
from ._tree import Row, Tree

__all__ = [
    "INSERT_ENTRY",
    "INSERT_SESSION",
    "OPEN",
    "SELECT_AFTER",
    "SELECT_ALL",
    "CatchUp",
    "Dialect",
    "ForkRows",
    "SqlRepo",
    "SqlStore",
    "add_facts",
    "as_line",
    "entry_id_of",
    "import_rows",
    "last_seq",
    "opened",
    "session_args",
    "summary_args",
]

_log = logging.getLogger("repos")


# --- the dialect seam ----------------------------------------------------------------------------


def _same(value: str | None) -> str | None:
    return value


@frozen
class Dialect:
    """How one database spells what the shared SQL needs.

    Attributes:
        mark: the parameter mark (``?``, ``%s``).
        contains: ``f(haystack, needle)`` giving the 1-based position of ``needle``, 0 if none.
        id_order: an ``ORDER BY`` term sorting ids byte-wise.
        no_limit: the ``LIMIT`` value meaning no limit.
        text: a ``str`` as its ``TEXT`` columns can hold it (PostgreSQL's hold no NUL).
    """

    mark: str
    contains: str
    id_order: str
    no_limit: int | None
    int64: str
    blob: str
    backup_lines: str
    text: Callable[[str | None], str | None] = _same

    def sql(self, query: str) -> str:
        """``query`` (written with ``?`` marks, and no ``?`` or ``%`` of its own) in this
        dialect."""
        return query if self.mark == "?" else query.replace("?", self.mark)

    def schema(self) -> str:
        """The tables (``;``-separated statements), with this dialect's column types."""
        return _TABLES.format(int64=self.int64, blob=self.blob, backup_lines=self.backup_lines)


# Both stores' tables (split at each ";" to run: none in a comment). A SQLite database is used
# only if its schema is exactly this text (up to comments and white space:
# ``_sqlite/schema.py``), so a change here is a change of schema version.
_TABLES = """
CREATE TABLE IF NOT EXISTS sessions (
    id            TEXT PRIMARY KEY,
    cwd           TEXT NOT NULL,
    name          TEXT,
    parent        TEXT,
    created       {int64} NOT NULL,          -- header timestamp, Unix ms
    modified      {int64} NOT NULL,          -- last user/assistant message, else created
    last_activity {int64},                   -- that message's time, NULL when none
    message_count INTEGER NOT NULL DEFAULT 0,
    first_message TEXT NOT NULL DEFAULT '',
    header        TEXT NOT NULL,             -- line 1 of the file, verbatim (JSON)
    incarnation   TEXT NOT NULL              -- changes when an id is deleted and reused
);
CREATE INDEX IF NOT EXISTS sessions_cwd ON sessions (cwd, modified);
CREATE INDEX IF NOT EXISTS sessions_modified ON sessions (modified);
CREATE TABLE IF NOT EXISTS entries (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,             -- the line number in the file (header = 1)
    id         TEXT,                         -- NULL for lines without an id of their own
    line       {blob} NOT NULL,              -- the JSON line, verbatim, without its newline
    UNIQUE (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE TABLE IF NOT EXISTS session_backups (
    session_id TEXT NOT NULL,
    suffix     TEXT NOT NULL,                -- ".v1.bak": the lines before a migration
    header     TEXT NOT NULL,
    lines      {backup_lines} NOT NULL,      -- the old lines: in SQLite a JSON array of them,
                                             -- in PostgreSQL newline-terminated
    PRIMARY KEY (session_id, suffix)
)"""


# --- stored lines --------------------------------------------------------------------------------

_HEAD_ID = re.compile(rb'\{"type":"[A-Za-z0-9_]+","id":"([^"\\\r\n]{1,128})"')


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


def as_line(value: object) -> bytes:
    """A stored line as bytes. A SQLite file is untrusted: text is taken as UTF-8, and any other
    type (an integer, which ``bytes()`` would make that many zero bytes) as a line no reader
    accepts, so it is reported as damaged instead of crashing or filling memory."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, memoryview):
        return value.tobytes()
    return b"\x00 not a line"


@frozen
class CatchUp:
    """What ``begin_append`` found: the lines others committed since the store last looked."""

    lines: list[RawLine]
    torn_offset: int | None = None


# The datetimes Python can hold, in Unix milliseconds (years 1 to 9999).
_MIN_MS = -62_135_596_800_000
_MAX_MS = 253_402_300_799_999


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


# --- SQL both stores run (``?`` marks: see Dialect.sql) ------------------------------------------

INSERT_ENTRY = "INSERT INTO entries (session_id, seq, id, line) VALUES (?, ?, ?, ?)"
SELECT_AFTER = "SELECT seq, line FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq"
SELECT_ALL = "SELECT seq, line FROM entries WHERE session_id = ? ORDER BY seq"
INSERT_SESSION = (
    "INSERT INTO sessions (id, cwd, name, parent, created, modified, message_count,"
    " first_message, header, incarnation) VALUES (?, ?, NULL, ?, ?, ?, 0, '', ?, ?)"
)

OPEN = (
    "SELECT seq, 1, line, NULL, NULL FROM entries WHERE session_id = ?"
    " UNION ALL SELECT 1, 0, NULL, header, incarnation FROM sessions WHERE id = ?"
    " ORDER BY 1, 2"
)
"""A session in one statement, so in one snapshot: ``(seq, kind, line, header, incarnation)``
rows, the session's own row of kind 0 (its header and incarnation), its lines of kind 1 in
sequence order. Args: the session id, twice."""

_ADD_FACTS = (
    "UPDATE sessions SET"
    " message_count = message_count + ?,"
    " first_message = CASE WHEN first_message = '' AND CAST(? AS TEXT) IS NOT NULL"
    "   THEN ? ELSE first_message END,"
    " last_activity = COALESCE(?, last_activity),"
    " modified = COALESCE(?, modified),"
    " name = CASE WHEN ? THEN ? ELSE name END"
    " WHERE id = ?"
)

_SET_SUMMARY = (
    "UPDATE sessions SET message_count = ?, first_message = ?, name = ?,"
    " last_activity = ?, modified = COALESCE(?, created), header = COALESCE(?, header)"
    " WHERE id = ?"
)


def _header_text(header: SessionHeader) -> str:
    """The header line of a new session (as the ``sessions.header`` column holds it)."""
    return dumps_line(encode_header(header))[:-1].decode()


def session_args(
    header: SessionHeader, text: str, incarnation: str
) -> tuple[str, str, str | None, int, int, str, str]:
    """The arguments of :data:`INSERT_SESSION` for a new session."""
    created = ms_of_iso(header.timestamp)
    return (header.id, header.cwd, header.parent_session, created, created, text, incarnation)


def add_facts(
    dialect: Dialect, session_id: str, facts: LineFacts
) -> tuple[str, tuple[object, ...]] | None:
    """The update of the session's ``list`` columns an appended line makes, or None."""
    if not (facts.message or facts.name_set):
        return None
    first = dialect.text(facts.first_text)
    return dialect.sql(_ADD_FACTS), (
        int(facts.message),
        first,
        first,
        facts.activity_ms,
        facts.activity_ms,
        facts.name_set,
        dialect.text(facts.name),
        session_id,
    )


def summary_args(
    dialect: Dialect, session_id: str, summary: Summary, header: str | None = None
) -> tuple[str, tuple[object, ...]]:
    """Write a whole summary into the session's row (after an import, a fork, a migration)."""
    return dialect.sql(_SET_SUMMARY), (
        summary.message_count,
        dialect.text(summary.first_message) or "",
        dialect.text(summary.name),
        summary.last_activity_ms,
        summary.last_activity_ms,
        header,
        session_id,
    )


def _list_query(
    dialect: Dialect,
    cwd: str | None,
    name: str | None,
    since: datetime | None,
    limit: int | None,
    offset: int,
) -> tuple[str, builtins.list[object]]:
    """The ``list`` query: rows of ``(id, cwd, name, parent, created, modified, message_count,
    first_message)``, newest first."""
    where: builtins.list[str] = []
    args: builtins.list[object] = []
    if cwd is not None:
        where.append("cwd = ?")
        args.append(cwd)
    if name is not None:
        where.append(f"{dialect.contains}(lower(name), lower(?)) > 0")
        args.append(dialect.text(name))
    if since is not None:
        where.append("modified >= ?")
        args.append(round(since.timestamp() * 1000))
    sql = (
        "SELECT id, cwd, name, parent, created, modified, message_count, first_message"
        " FROM sessions"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY modified DESC, {dialect.id_order} LIMIT ? OFFSET ?"
    args.extend([dialect.no_limit if limit is None else limit, offset])
    return dialect.sql(sql), args


def _info(row: Sequence[object], where: object) -> SessionInfo | None:
    """A ``sessions`` row as a :class:`SessionInfo`, or None (logged) when a column holds what
    this harness never writes there: a SQLite file is untrusted, and one bad row must not stop
    the listing of the others."""
    sid, row_cwd, row_name, parent, created, modified, count, first = row
    if (
        isinstance(sid, str)
        and isinstance(row_cwd, str)
        and isinstance(first, str)
        and (row_name is None or isinstance(row_name, str))
        and (parent is None or isinstance(parent, str))
        and isinstance(created, int)
        and _MIN_MS <= created <= _MAX_MS
        and isinstance(modified, int)
        and _MIN_MS <= modified <= _MAX_MS
        and isinstance(count, int)
        and count >= 0
    ):
        return SessionInfo(
            id=sid,
            path=None,
            cwd=row_cwd,
            name=row_name,
            parent_session=parent,
            created=_utc(created),
            modified=_utc(modified),
            message_count=count,
            first_message=first,
        )
    _log.warning(
        "%s: session row %r left out of the list: a column holds a value of the wrong "
        "type or range (this harness never writes one)",
        where,
        sid if isinstance(sid, str) else repr(sid),
    )
    return None


def opened(
    session_id: str, rows: Iterable[Sequence[object]]
) -> tuple[str, str, builtins.list[tuple[int, bytes]]]:
    """The header line, incarnation and ``(seq, line)`` rows of the :data:`OPEN` query's rows.

    Raises:
        SessionNotFoundError: no session row.
    """
    found: tuple[str, str] | None = None
    lines: builtins.list[tuple[int, bytes]] = []
    add = lines.append
    for seq, kind, line, header, incarnation in rows:
        if kind:
            add((seq, line if type(line) is bytes else as_line(line)))  # type: ignore[arg-type]
        else:
            found = (str(header), str(incarnation))
    if found is None:
        raise SessionNotFoundError(session_id)
    return found[0], found[1], lines


def last_seq(rows: Sequence[tuple[int, bytes]]) -> int:
    """The last sequence of a session's ``(seq, line)`` rows (1, the header's, when none)."""
    return rows[-1][0] if rows else 1


@frozen
class ForkRows:
    """A fork's new lines: ``copied`` ``(new seq, source seq)`` pairs the database copies itself;
    ``sent``, ``(new seq, line)`` the lines that must be sent (re-encoded rows, the lines a
    branch fork adds); ``seen``, the fork's last sequence."""

    copied: builtins.list[tuple[int, int]]
    sent: builtins.list[tuple[int, bytes]]
    summary: Summary
    seen: int


def _plan_fork(src: Session, ids: Sequence[str], extra: Sequence[bytes]) -> ForkRows:
    """Which of a fork's lines are copied inside the database and which are sent."""
    copied: builtins.list[tuple[int, int]] = []
    sent: builtins.list[tuple[int, bytes]] = []
    rows = src._tree.rows
    for n, entry_id in enumerate(ids, start=2):
        row = rows[entry_id]
        if row.derived_ids or not row.line:
            sent.append((n, src.raw_line(row.id)[:-1]))
        else:
            copied.append((n, row.line))
    after = len(ids) + 2
    sent.extend((n, line[:-1]) for n, line in enumerate(extra, start=after))
    return ForkRows(copied, sent, _fork_summary(src, ids, extra), after - 1 + len(extra))


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


def _parse_import(lines: Sequence[bytes]) -> tuple[SessionHeader, str, builtins.list[bytes]]:
    """An imported session's header, header line (text, no newline) and body lines (no
    newlines).

    Raises:
        CorruptSessionError: line 1 is not a session header.
        InvalidSessionIdError: its id is not a valid session id.
    """
    if not lines:
        raise CorruptSessionError("<import>", 1, 0, "no session header")
    first = lines[0]
    try:
        header = decode_header(orjson.loads(first))
    except (orjson.JSONDecodeError, CodecError) as exc:
        raise CorruptSessionError("<import>", 1, 0, f"no valid session header: {exc}") from exc
    validate_session_id(header.id)
    body = [line[:-1] if line.endswith(b"\n") else line for line in lines[1:]]
    return header, first.rstrip(b"\n").decode(), body


def import_rows(
    session_id: str, have: Sequence[bytes], body: Sequence[bytes]
) -> builtins.list[tuple[str, int, str | None, bytes]]:
    """The :data:`INSERT_ENTRY` rows of an import's lines past the ``have`` already stored; a
    line repeating an earlier id is kept verbatim but not indexed (its id column NULL)."""
    taken = {i for i in (entry_id_of(raw) for raw in have) if i is not None}
    rows: builtins.list[tuple[str, int, str | None, bytes]] = []
    for n, raw in enumerate(body[len(have) :], start=len(have) + 2):
        entry_id = entry_id_of(raw)
        if entry_id in taken:
            entry_id = None
        elif entry_id is not None:
            taken.add(entry_id)
        rows.append((session_id, n, entry_id, raw))
    return rows


# --- a session's store: the reads ----------------------------------------------------------------


class SqlStore(ABC):
    """The reads of one ``Session``'s rows; a store fetches lines by sequence (:meth:`_fetch`).

    The lines the session was opened (or created, or forked) with are kept until its first
    batch read (:meth:`read_many`: the first context's messages) and serve it and any single
    read before it, so a resume reads each body from the database once; after it, the
    session's tree caches the decoded entries and reads go to the database.
    """

    _sid: str

    def __init__(self) -> None:
        self._warm: dict[int, bytes] | None = None

    @property
    def path(self) -> Path | None:
        return None

    @property
    @abstractmethod
    def where(self) -> str:
        """The session's place, for errors."""

    @abstractmethod
    def _fetch(self, seqs: Sequence[int]) -> dict[int, bytes]:
        """The stored lines (no newline) of these sequences; missing ones are left out."""

    # The writes (``SessionStore``), each store's own.

    @abstractmethod
    def begin_append(self) -> CatchUp: ...

    @abstractmethod
    def write(self, line: bytes) -> RawLine: ...

    @abstractmethod
    def end_append(self) -> None: ...

    @abstractmethod
    def poll(self) -> list[RawLine]: ...

    @abstractmethod
    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> list[RawLine]: ...

    @abstractmethod
    def sync(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def keep(self, lines: dict[int, bytes]) -> None:
        """Serve reads from ``lines`` (``seq -> line``) until the first batch read."""
        self._warm = lines

    def forget(self) -> None:
        """Drop the kept lines (the stored lines changed, or the store closed)."""
        self._warm = None

    def _lines(self, seqs: Sequence[int]) -> dict[int, bytes]:
        warm = self._warm
        if warm is None:
            return self._fetch(seqs) if seqs else {}
        out = {s: warm[s] for s in seqs if s in warm}
        if len(out) < len(seqs):
            out.update(self._fetch([s for s in seqs if s not in out]))
        return out

    def read(self, row: Row) -> Entry:
        lines = self._lines([row.line])
        if row.line not in lines:
            raise SessionGoneError(self.where, "deleted")
        return self._decode(row, lines[row.line])

    def read_many(self, rows: list[Row]) -> list[Entry | CorruptSessionError]:
        lines = self._lines([r.line for r in rows])
        self._warm = None
        out: list[Entry | CorruptSessionError] = []
        add, decode = out.append, self._decode
        for row in rows:
            raw = lines.get(row.line)
            if raw is None:
                raise SessionGoneError(self.where, "deleted")
            try:
                add(decode(row, raw))
            except CorruptSessionError as exc:
                add(exc)
        return out

    def raw(self, row: Row) -> bytes | None:
        if not row.line:
            return None
        lines = self._lines([row.line])
        return lines[row.line] + b"\n" if row.line in lines else None

    def raw_many(self, rows: Sequence[Row]) -> list[bytes | None]:
        lines = self._lines([r.line for r in rows if r.line])
        return [lines[r.line] + b"\n" if r.line in lines else None for r in rows]

    def _decode(self, row: Row, raw: bytes) -> Entry:
        try:
            return decode_entry(loads_line(raw))
        except (orjson.JSONDecodeError, CodecError) as exc:
            raise CorruptSessionError(self.where, row.line, 0, str(exc)) from exc


# --- the repository --------------------------------------------------------------------------


class SqlRepo(ABC):
    """The async lifecycle of a SQL repository; the subclass does the (synchronous) database
    work, run in a worker thread."""

    _fsync: FsyncPolicy
    _strict: bool

    @property
    @abstractmethod
    def _where(self) -> str:
        """The database, for logs."""

    # --- the database work, each store's own (synchronous) ---

    @abstractmethod
    def _store(self, sid: str, incarnation: str, seen: int) -> SqlStore:
        """A store for a session just written (created or forked)."""

    @abstractmethod
    def _load(self, sid: str) -> tuple[SqlStore, str, builtins.list[tuple[int, bytes]]]:
        """A store for session ``sid``, its header line and its ``(seq, line)`` rows, read by
        the :data:`OPEN` statement. Raises ``SessionNotFoundError``."""

    @abstractmethod
    def _insert_new(self, header: SessionHeader, text: str, incarnation: str) -> None:
        """Insert a new session's row (header line ``text``) in a transaction of its own.
        Raises ``SessionExistsError``."""

    @abstractmethod
    def _write_fork(
        self, src_id: str, header: SessionHeader, text: str, incarnation: str, plan: ForkRows
    ) -> builtins.list[tuple[int, bytes]]:
        """Insert the fork's row and lines in one transaction; returns its ``(seq, line)``
        rows. Raises ``SessionNotFoundError`` (the source was deleted meanwhile)."""

    @abstractmethod
    def _rows(self, sql: str, args: Sequence[object]) -> builtins.list[tuple[object, ...]]:
        """The rows of one read-only query."""

    @abstractmethod
    def _delete(self, sid: str) -> bool: ...

    @abstractmethod
    def _ids(self) -> builtins.list[str]: ...

    @abstractmethod
    def _export(self, sid: str) -> builtins.list[bytes]: ...

    @abstractmethod
    def _import_lines(self, header: SessionHeader, text: str, body: Sequence[bytes]) -> int:
        """:meth:`import_lines` of a parsed session (:func:`_parse_import`)."""

    _dialect: Dialect

    # --- lifecycle ---

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
        session = await asyncio.to_thread(self._publish, header, header_line(header))
        from hooks import SessionCreatedEvent, notify

        await notify(
            self,
            SessionCreatedEvent(
                session_id=session.id, path=None, parent_session=header.parent_session
            ),
        )
        return session

    async def open(self, ref: str | Path) -> Session:
        """Open by id (one query: the header and every line). Raises
        ``SessionNotFoundError`` / ``InvalidSessionIdError``; ``CorruptSessionError`` in strict
        mode for a damaged line."""
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
        sql, args = _list_query(self._dialect, cwd, name, updated_since, limit, offset)
        found = await asyncio.to_thread(self._rows, sql, args)
        infos = [_info(row, self._where) for row in found]
        return [info for info in infos if info is not None]

    async def delete(self, ref: str | Path) -> None:
        """Delete a session and its lines in one transaction; a missing one is not an error.
        Sessions open on it refuse further appends (``SessionGoneError``)."""
        sid = self._check(ref)
        if await asyncio.to_thread(self._delete, sid):
            from hooks import SessionDeletedEvent, notify

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
        from hooks import SessionForkEvent, notify

        await notify(self, SessionForkEvent(source_id=src.id, session_id=fork.id, path=None))
        return fork

    # --- moving sessions in and out (``harness sessions copy``) ---

    async def ids(self) -> builtins.list[str]:
        """Every session id, oldest first."""
        return await asyncio.to_thread(self._ids)

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

    # --- shared internals ---

    def _open(self, sid: str) -> Session:
        store, text, rows = self._load(sid)
        try:
            return self._session(store, text, rows)
        except BaseException:
            store.close()
            raise

    def _publish(self, header: SessionHeader, header_line: bytes) -> Session:
        """Insert a new, empty session."""
        incarnation = uuid.uuid4().hex
        text = header_line[:-1].decode()
        self._insert_new(header, text, incarnation)
        return self._session(self._store(header.id, incarnation, 1), text, [])

    def _fork(
        self, src: Session, header: SessionHeader, ids: Sequence[str], extra: Sequence[bytes]
    ) -> Session:
        plan = _plan_fork(src, ids, extra)
        text = _header_text(header)
        incarnation = uuid.uuid4().hex
        lines = self._write_fork(src.id, header, text, incarnation, plan)
        return self._session(self._store(header.id, incarnation, plan.seen), text, lines)

    def _import(self, lines: Sequence[bytes]) -> int:
        return self._import_lines(*_parse_import(lines))

    def _check(self, ref: str | Path) -> str:
        if isinstance(ref, Path):
            raise InvalidSessionIdError(str(ref), "a database repo has no paths; pass the id")
        return validate_session_id(ref)

    def _session(
        self, store: SqlStore, header_line: str, rows: Sequence[tuple[int, bytes]]
    ) -> Session:
        """A ``Session`` on ``store`` indexing ``rows`` (``(seq, line)``, sequence order),
        which the store keeps for its first reads."""
        try:
            header = decode_header(orjson.loads(header_line))
        except (orjson.JSONDecodeError, CodecError) as exc:
            raise CorruptSessionError(store.where, 1, 0, f"no valid session header: {exc}") from exc
        tree = Tree(load=store.read, load_many=store.read_many)
        diagnostics: list[Diagnostic] = []
        indexer = Indexer(
            store.where, tree, diagnostics, v1=header.version < 2, strict=self._strict
        )
        if rows and all(seq == n for n, (seq, _) in enumerate(rows, start=2)):
            # Consecutive sequences: index the lines as one buffer, as a file is indexed.
            lines = [line for _, line in rows]
            lines.append(b"")  # the last newline, in the same buffer
            indexer.feed_chunk(b"\n".join(lines), 0, 2)
            indexer.finish()
        else:
            indexer.feed(RawLine(seq, 0, line) for seq, line in rows)
        store.keep(dict(rows))
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
