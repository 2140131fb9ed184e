"""``PostgresSessionRepo.watch``: see new entries as they are committed, without polling.

Every append's transaction sends ``NOTIFY harness_entries, '<session id> <seq>'`` (and an
import, with the last line's sequence); PostgreSQL delivers it to every listening connection
when the transaction commits, and never for one rolled back. A watch holds one connection of
its own (not the pool's) that ``LISTEN``s on that channel, waits on its socket and hands out
batches: for each watched session, the highest sequence committed. The watcher then catches up
by sequence (``session.refresh()``), which reads exactly the lines it has not seen, so a
notification that arrives twice or out of order changes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import psycopg

from .._errors import StorageError

__all__ = ["Changes", "SessionWatch"]

AsyncConn = psycopg.AsyncConnection[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Changes:
    """One batch of a :class:`SessionWatch`.

    Attributes:
        seqs: watched session id -> the highest sequence (its line number in the JSONL file,
            header = 1) committed to it since the previous batch, as notified.
        missed: the watch lost its connection and made a new one: commits in between were not
            notified, so catch up on every watched session (``seqs`` is empty then).
    """

    seqs: Mapping[str, int] = field(default_factory=dict)
    missed: bool = False


class SessionWatch:
    """The batches of new entries in some sessions (or all): ``async for changes in watch``,
    or ``await watch.next()``. Made by :meth:`PostgresSessionRepo.watch`, which opens
    and closes it.

    Enter the watch *before* reading the sessions it watches (open or the last ``refresh()``):
    a commit between that read and ``LISTEN`` would otherwise go unnoticed.
    """

    def __init__(self, conninfo: str, where: str, session_ids: frozenset[str], timeout: float):
        self._conninfo = conninfo
        self._where = where
        self._ids = session_ids
        self._timeout = timeout
        self._conn: AsyncConn | None = None

    async def open(self) -> None:
        """Connect and ``LISTEN``, waiting up to the repository's ``timeout`` for the server.

        Raises:
            StorageError: no connection within ``timeout`` (naming the server).
        """
        deadline = time.monotonic() + self._timeout
        delay = 0.05
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                await conn.execute("LISTEN harness_entries")
            except psycopg.OperationalError as exc:
                # The server may be restarting: wait for it like the pool does.
                if time.monotonic() + delay > deadline:
                    raise StorageError(self._where, f"cannot watch: {exc}") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            self._conn = conn
            return

    async def close(self) -> None:
        """Stop listening and close the connection (harmless twice)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def next(self) -> Changes:
        """Wait for commits to the watched sessions (bound the wait with ``asyncio.timeout``).

        Returns:
            The batch: every notification for a watched session that has arrived, at least
            one; ``Changes(missed=True)`` when the connection was lost and a new one made.

        Raises:
            StorageError: the watch is closed, or the connection was lost and no new one could
                be made within the repository's ``timeout``.
        """
        conn = self._conn
        if conn is None:
            raise StorageError(self._where, "the watch is closed")
        seqs: dict[str, int] = {}
        try:
            while not seqs:
                await self._take(conn, seqs, wait=None)
            await self._take(conn, seqs, wait=0)  # and whatever else has arrived already
        except psycopg.OperationalError:
            await self.close()
            await self.open()
            return Changes(missed=True)
        return Changes(seqs=seqs)

    async def _take(self, conn: AsyncConn, seqs: dict[str, int], *, wait: float | None) -> None:
        """Wait up to ``wait`` seconds (None: as long as it takes) for a notification; fold
        into ``seqs`` those received."""
        async with aclosing(conn.notifies(timeout=wait, stop_after=1)) as received:
            async for note in received:
                sid, _, seq = note.payload.rpartition(" ")
                if (not self._ids or sid in self._ids) and seq.isdigit():
                    seqs[sid] = max(seqs.get(sid, 0), int(seq))

    def __aiter__(self) -> SessionWatch:
        return self

    async def __anext__(self) -> Changes:
        return await self.next()
