"""Both SQL stores (``repos/_sql.py``): a resume reads each stored line once. The open reads the
session's row and every line in one statement; the first context is built from those lines, so
lines removed from the database behind the session's back (by another connection, after the
open) do not change it; a read after that first context goes to the database again."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hooks import AssistantMessage, TextContent, UserMessage
from repos import SessionGoneError, SqliteSessionRepo


def _sqlite(tmp_path: Path) -> tuple[Any, Callable[[str], None]]:
    db = tmp_path / "s.db"

    def drop_lines(sid: str) -> None:
        conn = sqlite3.connect(db)
        conn.execute("DELETE FROM entries WHERE session_id = ?", (sid,))
        conn.commit()
        conn.close()

    return SqliteSessionRepo(db), drop_lines


def _postgres(url: str) -> tuple[Any, Callable[[str], None]]:
    import psycopg

    from repos.postgres import PostgresSessionRepo

    def drop_lines(sid: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM entries WHERE session_id = %s", (sid,))

    return PostgresSessionRepo(url, max_size=2), drop_lines


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        repo, drop = _sqlite(tmp_path)
    else:
        repo, drop = _postgres(request.getfixturevalue("postgres_url"))
    yield repo, drop
    repo.close()


async def test_the_first_context_is_built_from_the_lines_the_open_read(
    store: tuple[Any, Callable[[str], None]],
) -> None:
    repo, drop_lines = store
    session = await repo.create("/p", session_id="r")
    for n in range(30):
        session.append_message(UserMessage(content=f"question {n}"))
        session.append_message(
            AssistantMessage(content=[TextContent(text=f"answer {n}")], api="t", provider="t")
        )
    expected = session.build_context().messages
    session.close()

    resumed = await repo.open("r")
    drop_lines("r")  # read once: the first context does not read them again
    assert resumed.build_context().messages == expected
    resumed._tree.cache.clear()
    with pytest.raises(SessionGoneError):  # after it, reads go to the database
        list(resumed.get_branch())
    resumed.close()
