"""``MemorySessionRepo``: sessions held in memory as encoded lines (tests, scratch work).

Lines are stored encoded, exactly as the JSONL repo would write them, so both repos accept and
refuse the same values and pass the same conformance cases.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import orjson
from attrs import define

from hooks import (
    AssistantMessage,
    SessionCreatedEvent,
    SessionDeletedEvent,
    SessionForkEvent,
    UserMessage,
    notify,
)

from ._codec import decode_entry, decode_header, dumps_line, encode_header
from ._entries import Entry, MessageEntry, SessionHeader, SessionInfoEntry
from ._errors import (
    InvalidSessionIdError,
    SessionExistsError,
    SessionNotFoundError,
)
from ._fork import check_fork_allowed, fork_header, fork_lines
from ._jsonl.paths import absolute_cwd, validate_session_id
from ._repo import ForkPosition, ForkScope, SessionInfo
from ._session import Session, iso_now
from ._tree import Row, Tree

__all__ = ["MemorySessionRepo"]


class _MemoryStore:
    """A session's lines in a list shared with the repo, so a reopen sees every append."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    @property
    def path(self) -> Path | None:
        return None

    def read(self, row: Row) -> Entry:
        return decode_entry(orjson.loads(self._lines[row.line - 1]))

    def raw(self, row: Row) -> bytes | None:
        return self._lines[row.line - 1] if row.line else None

    def append(self, line: bytes) -> None:
        self._lines.append(line)

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> None:
        self._lines[:] = lines

    def set_aside_torn_tail(self) -> int | None:
        """Memory lines are always whole; nothing to set aside."""
        return None

    def sync(self) -> None:
        """Nothing to make durable."""

    def close(self) -> None:
        """Nothing to release."""


@define
class _Record:
    header: SessionHeader
    lines: list[bytes]


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
        session = self._publish(header, [dumps_line(encode_header(header))])
        await notify(self, SessionCreatedEvent(session_id=session.id, path=None))
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
        if self._sessions.pop(sid, None) is not None:
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
    store = _MemoryStore(record.lines)
    tree = Tree(load=store.read)
    for number, line in enumerate(record.lines[1:], start=2):
        entry = decode_entry(orjson.loads(line))
        tree.add(Row(id=entry.id, parent_id=entry.parent_id, type=entry.type, line=number), entry)
    return Session(header=decode_header(orjson.loads(record.lines[0])), tree=tree, store=store)


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
    name = next(
        (
            e.name
            for e in reversed(list(session.entries()))
            if isinstance(e, SessionInfoEntry) and e.name
        ),
        None,
    )
    return SessionInfo(
        id=record.header.id,
        path=None,
        cwd=record.header.cwd,
        name=name,
        parent_session=record.header.parent_session,
        created=created,
        modified=datetime.fromtimestamp(max(active) / 1000, UTC) if active else created,
        message_count=len(messages),
        first_message=getattr(first_user, "text", "") if first_user is not None else "",
    )
