"""``MemorySessionRepo``: sessions held in memory as encoded lines (tests, scratch work).

Lines are stored encoded, exactly as the JSONL repo would write them, so both repos accept and
refuse the same values and pass the same conformance cases.
"""

from __future__ import annotations

import builtins
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import orjson
from attrs import define, field, frozen

from hooks import AssistantMessage, UserMessage

# hooks' session events and its bus are imported where an event is sent: opening, reading
# and listing sessions need neither (a fast start, issue 24 point 6).
from ._codec import CodecError, decode_entry, decode_header, loads_line
from ._entries import Entry, MessageEntry, SessionHeader
from ._errors import (
    CorruptSessionError,
    InvalidSessionIdError,
    SessionExistsError,
    SessionGoneError,
    SessionNotFoundError,
)
from ._fork import check_fork_allowed, fork_header, fork_lines
from ._index import RawLine
from ._jsonl.paths import absolute_cwd, validate_session_id
from ._repo import ForkPosition, ForkScope, SessionInfo
from ._session import Session, header_line, iso_now
from ._tree import Row, Tree

__all__ = ["MemorySessionRepo"]


@frozen
class _CatchUp:
    lines: list[RawLine]
    torn_offset: int | None = None


@define
class _Record:
    """One session's lines, shared by every ``Session`` opened on it, and their lock."""

    header: SessionHeader
    lines: list[bytes]
    lock: threading.RLock = field(factory=threading.RLock)
    deleted: bool = False


class _MemoryStore:
    """A session's lines in a list shared with the repo, so a reopen sees every append and two
    sessions on one record catch up with each other as two processes on one file do."""

    def __init__(self, record: _Record, seen: int) -> None:
        self._record = record
        self._seen = seen

    @property
    def path(self) -> Path | None:
        return None

    def read(self, row: Row) -> Entry:
        raw = self._record.lines[row.line - 1]
        try:
            return decode_entry(loads_line(raw))
        except (orjson.JSONDecodeError, CodecError) as exc:
            where = f"<memory session {self._record.header.id}>"
            raise CorruptSessionError(where, row.line, 0, str(exc)) from exc

    def raw(self, row: Row) -> bytes | None:
        return self._record.lines[row.line - 1] if row.line else None

    def begin_append(self) -> _CatchUp:
        self._record.lock.acquire()
        try:
            return _CatchUp(lines=self._new_lines())
        except BaseException:
            self._record.lock.release()
            raise

    def write(self, line: bytes) -> RawLine:
        lines = self._record.lines
        lines.append(line)
        self._seen = len(lines)
        return RawLine(len(lines), 0, line[:-1])

    def end_append(self) -> None:
        self._record.lock.release()

    def poll(self) -> list[RawLine]:
        with self._record.lock:
            return self._new_lines()

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> list[RawLine]:
        self._record.lines[:] = lines
        self._seen = len(lines)
        return []  # under the record's lock: nobody appended meanwhile

    def sync(self) -> None:
        """Nothing to make durable."""

    def close(self) -> None:
        """Nothing to release."""

    def _new_lines(self) -> list[RawLine]:
        if self._record.deleted:
            raise SessionGoneError(f"<memory session {self._record.header.id}>", "deleted")
        lines = self._record.lines
        new = [RawLine(n, 0, lines[n - 1][:-1]) for n in range(self._seen + 1, len(lines) + 1)]
        self._seen = len(lines)
        return new


class MemorySessionRepo:
    """A :class:`~repos.SessionRepo` in memory. ``open`` returns a fresh ``Session`` over the
    stored lines, so a reopen behaves as with files (labels, leaf moves and names restored)."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Record] = {}

    async def create(
        self,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        """Create an empty session. Raises like ``JsonlSessionRepo.create``."""
        sid = validate_session_id(session_id) if session_id is not None else str(uuid.uuid4())
        header = SessionHeader(
            id=sid,
            timestamp=iso_now(),
            cwd=absolute_cwd(cwd),
            parent_session=parent_session,
            metadata=metadata,
        )
        session = self._publish(header, [header_line(header)])
        from hooks import SessionCreatedEvent, notify

        await notify(
            self,
            SessionCreatedEvent(
                session_id=session.id, path=None, parent_session=header.parent_session
            ),
        )
        return session

    async def open(self, ref: str | Path) -> Session:
        """Open by id. Raises ``SessionNotFoundError`` / ``InvalidSessionIdError``."""
        record = self._sessions.get(self._check(ref))
        if record is None:
            raise SessionNotFoundError(str(ref))
        return _load(record)

    async def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        """Every session (with exactly ``cwd``, if given), newest activity first."""
        infos = [_info(r) for r in self._sessions.values() if cwd is None or r.header.cwd == cwd]
        infos.sort(key=lambda i: i.modified, reverse=True)
        return infos

    async def delete(self, ref: str | Path) -> None:
        """Delete a session; a missing one is not an error."""
        sid = self._check(ref)
        record = self._sessions.pop(sid, None)
        if record is not None:
            record.deleted = True
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
        """Fork like ``JsonlSessionRepo.fork``; ``parent_session`` is the source's id."""
        if session_id is not None:
            validate_session_id(session_id)  # before anything is read
        src = await self.open(source)
        await check_fork_allowed(self, src, entry_id=entry_id, position=position, scope=scope)
        header = fork_header(src, session_id=session_id, cwd=cwd, parent_session=src.id)
        lines = fork_lines(src, header, entry_id=entry_id, position=position, scope=scope)
        fork = self._publish(header, lines)
        from hooks import SessionForkEvent, notify

        await notify(self, SessionForkEvent(source_id=src.id, session_id=fork.id, path=None))
        return fork

    def _check(self, ref: str | Path) -> str:
        if isinstance(ref, Path):
            raise InvalidSessionIdError(str(ref), "a memory repo has no paths; pass the id")
        return validate_session_id(ref)

    def _publish(self, header: SessionHeader, lines: builtins.list[bytes]) -> Session:
        if header.id in self._sessions:
            raise SessionExistsError(header.id)
        record = self._sessions[header.id] = _Record(header=header, lines=lines)
        return _load(record)


def _load(record: _Record) -> Session:
    with record.lock:
        count = len(record.lines)
        store = _MemoryStore(record, count)
        header = decode_header(orjson.loads(record.lines[0]))
        session = Session(header=header, tree=Tree(load=store.read), store=store)
        session.index_lines(RawLine(n, 0, record.lines[n - 1][:-1]) for n in range(2, count + 1))
    return session


def _info(record: _Record) -> SessionInfo:
    session = _load(record)
    created = datetime.fromisoformat(record.header.timestamp.replace("Z", "+00:00"))
    messages = [e for e in session.entries() if isinstance(e, MessageEntry)]
    active = [
        e.message.timestamp
        for e in messages
        if isinstance(e.message, UserMessage | AssistantMessage)
    ]
    first_user = next((e.message for e in messages if e.message.role == "user"), None)
    name = session.name  # the latest session_info wins, an empty one clears it
    return SessionInfo(
        id=record.header.id,
        path=None,
        cwd=record.header.cwd,
        name=name,
        parent_session=record.header.parent_session,
        created=created,
        modified=datetime.fromtimestamp(active[-1] / 1000, UTC) if active else created,
        message_count=len(messages),
        first_message=getattr(first_user, "text", "") if first_user is not None else "",
    )
