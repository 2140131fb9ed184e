"""The repository protocol and what ``list`` returns."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from attrs import frozen

from ._session import Session

__all__ = ["ForkPosition", "ForkScope", "SessionInfo", "SessionRepo"]

ForkPosition: TypeAlias = Literal["before", "at"]
ForkScope: TypeAlias = Literal["branch", "tree"]


@frozen(kw_only=True)
class SessionInfo:
    """One session as ``list`` reports it (DESIGN §4).

    ``created`` comes from the header; ``modified`` is the time of the last user or assistant
    message (pi's rule: header timestamps can be rewritten after the fact), else ``created``.
    ``first_message`` is the first user message's text ("" when there is none). Times are
    timezone-aware UTC.
    """

    id: str
    path: Path | None
    cwd: str
    name: str | None
    parent_session: str | None
    created: datetime
    modified: datetime
    message_count: int
    first_message: str


@runtime_checkable
class SessionRepo(Protocol):
    """Creates, opens, lists, deletes and forks sessions.

    Async so that a database-backed repository can await; the JSONL one runs file work in a
    thread. Implementations must pass ``repos.testing``'s conformance cases.
    """

    async def create(
        self,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session: ...

    async def open(self, ref: str | Path) -> Session: ...

    async def list(self, cwd: str | None = None) -> list[SessionInfo]: ...

    async def delete(self, ref: str | Path) -> None: ...

    async def fork(
        self,
        source: str | Path,
        *,
        entry_id: str | None = None,
        position: ForkPosition | None = None,
        scope: ForkScope = "branch",
        cwd: str | None = None,
        session_id: str | None = None,
    ) -> Session: ...
