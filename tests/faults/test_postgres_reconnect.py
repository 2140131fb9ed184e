"""``PostgresSessionRepo`` when the server goes away mid-run: restarted (cleanly or crashed)
while worker processes append, a backend terminated in the middle of an append's transaction
(a real lock wait or a real trigger holds it there), a commit whose reply never arrived.
Reconnect, one retry, nothing lost, nothing duplicated, a clear error otherwise."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from postgres_server import PostgresServer, unavailable

from hooks import UserMessage
from repos import MessageEntry, StorageError

pytestmark = [pytest.mark.faults, pytest.mark.postgres]

WORKER = Path(__file__).with_name("_pg_worker.py")


@pytest.fixture
def own_server(request: pytest.FixtureRequest) -> Iterator[PostgresServer]:
    """A server of this test's own (it is stopped, or configured, in ways the shared one must
    not be); ``@pytest.mark.parametrize("own_server", [{...}], indirect=True)`` passes extra
    settings."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    settings: dict[str, str] = {"synchronous_commit": "on", **getattr(request, "param", {})}
    with PostgresServer(settings) as server:
        yield server


def _stored(url: str, session_id: str) -> list[dict[str, Any]]:
    """Every stored line of the session: gapless sequence, unique ids."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq, line FROM entries WHERE session_id = %s ORDER BY seq", (session_id,)
        ).fetchall()
    assert [seq for seq, _ in rows] == list(range(2, len(rows) + 2)), "sequence has gaps"
    entries: list[dict[str, Any]] = [orjson.loads(line) for _, line in rows]
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), "duplicate ids"
    return entries


def _backend(url: str, condition: str, *, not_pid: int | None = None) -> int:
    """The pid of this database's backend matching ``condition`` (SQL on pg_stat_activity),
    waited for: the append under test has reached the point the test holds it at."""
    import psycopg

    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                f" AND pid <> pg_backend_pid() AND pid IS DISTINCT FROM %s AND {condition}",
                (not_pid,),
            ).fetchone()
            if found is not None:
                return int(found[0])
            time.sleep(0.02)
    raise AssertionError(f"no backend with {condition} within 60 s")


def _terminate(url: str, pid: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
    assert found is not None and found[0] is True


class _InThread:
    """``call()`` run in a thread; ``result()`` joins and returns (or raises) its outcome."""

    def __init__(self, call: Callable[[], object]) -> None:
        self._call = call
        self._outcome: list[object] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(self._call())
        except BaseException as exc:
            self._error.append(exc)

    def result(self) -> object:
        self._thread.join(timeout=120)
        assert not self._thread.is_alive(), "the append never returned"
        if self._error:
            raise self._error[0]
        return self._outcome[0]


_WAITING_INSERT = "wait_event_type = 'Lock' AND query LIKE 'WITH added AS (INSERT%%'"


# --- (a) the server restarted while worker processes append ----------------------------------


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_server_restarted_while_workers_append(
    own_server: PostgresServer, tmp_path: Path, mode: str
) -> None:
    """``fast`` disconnects every client; ``immediate`` is a server crash with recovery. Each
    worker's append in flight is retried once: every worker finishes, and the session holds
    each of their entries exactly once."""
    import psycopg

    from repos.postgres import PostgresSessionRepo

    url = own_server.new_database()
    writers, each = 6, 400
    repo = PostgresSessionRepo(url)
    asyncio.run(repo.create("/work", session_id="shared")).close()
    repo.close()
    go = tmp_path / "go"
    # fsync "turn": "never" (synchronous_commit = off) may lose acknowledged commits in a crash
    args = [sys.executable, str(WORKER), "append", url, "shared", str(each)]
    procs = [
        subprocess.Popen(
            [*args, f"w{i}", str(go), "turn"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    go.touch()
    count = "SELECT count(*) FROM entries WHERE session_id = 'shared'"
    with psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + 300
        while (conn.execute(count).fetchone() or (0,))[0] < 100:
            assert time.monotonic() < deadline, "the workers did not start appending"
            time.sleep(0.01)
    own_server.halt(mode)
    time.sleep(0.5)  # down for a while: the retries wait for the server
    own_server.resume()
    with psycopg.connect(url, autocommit=True) as conn:
        after_restart = (conn.execute(count).fetchone() or (0,))[0]
    # The workers were cut off mid-run (they had appends left when the server came back).
    assert after_restart < writers * each
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    written = [i for r in results for i in r["ids"]]
    assert len(written) == writers * each == len(set(written))
    entries = _stored(url, "shared")
    assert len(entries) == writers * each, "entries lost or duplicated"
    assert {e["id"] for e in entries} == set(written)
    # Each worker's tree (its own lines, what it caught up on, what a retry stepped over)
    # holds its own entries; the last to finish refreshed onto all of them.
    assert all(r["entries"] >= each for r in results)
    assert max(r["entries"] for r in results) == writers * each
    # Each worker's own chain is intact across the restart.
    repo = PostgresSessionRepo(url)
    fresh = asyncio.run(repo.open("shared"))
    by_tag: dict[str, list[MessageEntry]] = {}
    for entry in fresh.entries():
        assert isinstance(entry, MessageEntry) and isinstance(entry.message.content, str)
        by_tag.setdefault(entry.message.content.rsplit("-", 1)[0], []).append(entry)
    for tag, chain in by_tag.items():
        assert [e.message.content for e in chain] == [f"{tag}-{i}" for i in range(each)]
        assert all(b.parent_id == a.id for a, b in itertools.pairwise(chain))
    [info] = asyncio.run(repo.list("/work"))
    assert info.message_count == writers * each
    fresh.close()
    repo.close()


async def test_server_down_longer_than_the_timeout_raises_naming_the_server(
    own_server: PostgresServer,
) -> None:
    """The retry waits ``timeout`` seconds for the server, then the append raises a
    ``StorageError`` naming the server without its password; the session is unchanged."""
    from repos.postgres import PostgresSessionRepo

    url = own_server.new_database().replace("test@", "test:hunter2@")  # trust: any password
    repo = PostgresSessionRepo(url, timeout=2)
    session = await repo.create("/work")
    session.append_message(UserMessage(content="before"))
    own_server.halt("fast")
    with pytest.raises(StorageError) as caught:
        session.append_message(UserMessage(content="while down"))
    message = str(caught.value)
    assert f"postgresql://127.0.0.1:{own_server.port}/" in message
    assert "hunter2" not in message
    assert "retry" in message
    assert len(session) == 1
    session.close()
    repo.close()
    own_server.resume()
    repo = PostgresSessionRepo(url)
    again = await repo.open(session.id)
    after = again.append_message(UserMessage(content="after"))
    assert [e["message"]["content"] for e in _stored(url, session.id)] == ["before", "after"]
    assert [e.id for e in again.get_branch()][-1] == after.id
    again.close()
    repo.close()


# --- (b) a connection dropped in the middle of an append's transaction ----------------------


async def test_backend_terminated_between_catch_up_and_insert_is_retried(
    postgres_url: str,
) -> None:
    """A lock on ``entries`` holds the append between its catch-up and its insert; the backend
    is terminated there. The retry, on a new connection, waits at the same lock; once it is
    released the append completes, stored once."""
    import psycopg

    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    session = await repo.create("/work")
    first = session.append_message(UserMessage(content="first"))
    with psycopg.connect(postgres_url) as locker:
        locker.execute("LOCK TABLE entries IN SHARE MODE")
        append = _InThread(lambda: session.append_message(UserMessage(content="second")))
        pid = _backend(postgres_url, _WAITING_INSERT)
        _terminate(postgres_url, pid)
        _backend(postgres_url, _WAITING_INSERT, not_pid=pid)  # the retry, waiting there too
    second = append.result()
    assert isinstance(second, MessageEntry) and second.parent_id == first.id
    stored = _stored(postgres_url, session.id)
    assert [e["id"] for e in stored] == [first.id, second.id]
    assert [e.id for e in session.get_branch()] == [first.id, second.id]
    third = session.append_message(UserMessage(content="third"))
    fresh = await repo.open(session.id)
    assert [e.id for e in fresh.get_branch()] == [first.id, second.id, third.id]
    for s in (session, fresh):
        s.close()
    repo.close()


async def test_backend_terminated_twice_raises_and_the_session_stays_consistent(
    postgres_url: str,
) -> None:
    """The retry's backend is terminated too: the append raises a ``StorageError`` naming the
    server (not the password); nothing was stored, and the next append works."""
    import psycopg

    from repos.postgres import PostgresSessionRepo

    url = postgres_url.replace("test@", "test:hunter2@")  # trust accepts any password
    repo = PostgresSessionRepo(url)
    session = await repo.create("/work")
    first = session.append_message(UserMessage(content="first"))
    with psycopg.connect(url) as locker:
        locker.execute("LOCK TABLE entries IN SHARE MODE")
        append = _InThread(lambda: session.append_message(UserMessage(content="lost")))
        pid = _backend(url, _WAITING_INSERT)
        _terminate(url, pid)
        _terminate(url, _backend(url, _WAITING_INSERT, not_pid=pid))
        with pytest.raises(StorageError) as caught:
            append.result()
    message = str(caught.value)
    assert repo.where in message and "hunter2" not in message
    assert "after one retry" in message
    assert [e["id"] for e in _stored(url, session.id)] == [first.id]
    assert len(session) == 1 and session.leaf_id == first.id
    second = session.append_message(UserMessage(content="second"))
    assert second.parent_id == first.id
    assert [e["message"]["content"] for e in _stored(url, session.id)] == ["first", "second"]
    session.close()
    repo.close()


def _standby_names(server: PostgresServer, value: str) -> None:
    """Set ``synchronous_standby_names`` and wait until new backends have it (the server's
    reload is asynchronous; running backends take it before their next command)."""
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with psycopg.connect(server.url()) as conn:
            if (conn.execute("SHOW synchronous_standby_names").fetchone() or ("?",))[0] == value:
                return
        time.sleep(0.05)
    raise AssertionError(f"synchronous_standby_names = {value!r} not applied within 60 s")


async def test_commit_that_reached_the_server_is_not_inserted_twice(
    own_server: PostgresServer,
) -> None:
    """The reply to ``COMMIT`` never arrives: the server waits for a synchronous standby that
    does not exist, and the backend is terminated in that wait, after the commit is recorded
    locally (PostgreSQL keeps it). The retry finds its own line stored and writes nothing."""
    from repos.postgres import PostgresSessionRepo

    url = own_server.new_database()
    repo = PostgresSessionRepo(url, fsync="always")  # fsync "never" would not wait
    session = await repo.create("/work")
    _standby_names(own_server, "nobody")  # from now on every commit waits for it
    append = _InThread(lambda: session.append_message(UserMessage(content="once")))
    _terminate(url, _backend(url, "wait_event = 'SyncRep'"))
    entry = append.result()
    assert isinstance(entry, MessageEntry)
    assert [e["id"] for e in _stored(url, session.id)] == [entry.id]
    assert session.leaf_id == entry.id and len(session) == 1
    _standby_names(own_server, "")
    again = await repo.open(session.id)
    second = again.append_message(UserMessage(content="twice"))
    assert second.parent_id == entry.id
    assert [e["message"]["content"] for e in _stored(url, session.id)] == ["once", "twice"]
    for s in (session, again):
        s.close()
    repo.close()


async def test_retry_finding_its_id_with_another_line_refuses(postgres_url: str) -> None:
    """A trigger holds the append's insert (real PL/pgSQL, waiting on an advisory lock the test
    holds) and shows the entry's id; meanwhile another writer stores a different line under
    that id, and the backend is terminated. The retry finds the id taken by another line and
    refuses: nothing of this append is stored, the other line is kept."""
    import psycopg

    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    session = await repo.create("/work")
    first = session.append_message(UserMessage(content="first"))
    with psycopg.connect(postgres_url, autocommit=True) as other:
        other.execute(
            "CREATE FUNCTION hold_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " PERFORM set_config('application_name', 'inserting ' || NEW.id, false);"
            " PERFORM pg_advisory_lock(4242); PERFORM pg_advisory_unlock(4242);"
            " RETURN NEW; END $$"
        )
        other.execute(
            "CREATE TRIGGER hold BEFORE INSERT ON entries FOR EACH ROW EXECUTE FUNCTION"
            " hold_insert()"
        )
        other.execute("SELECT pg_advisory_lock(4242)")
        append = _InThread(lambda: session.append_message(UserMessage(content="mine")))
        pid = _backend(postgres_url, "application_name LIKE 'inserting %%'")
        found = other.execute(
            "SELECT application_name FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        assert found is not None
        taken = str(found[0]).removeprefix("inserting ")
        theirs = orjson.dumps(
            {
                "type": "custom",
                "customType": "theirs",
                "id": taken,
                "parentId": first.id,
                "timestamp": "2026-01-01T00:00:00.000Z",
            }
        )
        other.execute(
            "INSERT INTO entries (session_id, seq, id, line) VALUES (%s, 3, %s, %s)",
            (session.id, taken, theirs),
        )
        _terminate(postgres_url, pid)
        with pytest.raises(StorageError) as caught:
            append.result()
        other.execute("SELECT pg_advisory_unlock(4242)")
        other.execute("DROP TRIGGER hold ON entries")
    assert taken in str(caught.value) and "another line" in str(caught.value)
    stored = _stored(postgres_url, session.id)
    assert [e["id"] for e in stored] == [first.id, taken]
    assert stored[1]["customType"] == "theirs"
    assert taken not in session
    # Still consistent: the next append catches up on their line and continues this leaf.
    after = session.append_message(UserMessage(content="after"))
    assert taken in session and after.parent_id == first.id
    assert [e["id"] for e in _stored(postgres_url, session.id)] == [first.id, taken, after.id]
    session.close()
    repo.close()


# --- a watch across a restart ----------------------------------------------------------------


async def test_watch_reconnects_after_a_restart_and_says_it_missed(
    own_server: PostgresServer,
) -> None:
    """The watch's own connection dies with the server: its next batch says ``missed`` (the
    watcher catches up by refreshing), then notifications flow on the new connection."""
    from repos.postgres import PostgresSessionRepo

    url = own_server.new_database()
    repo = PostgresSessionRepo(url)
    session = await repo.create("/work")
    watcher = await repo.open(session.id)
    async with repo.watch(session.id) as changes:
        own_server.halt("fast")
        own_server.resume()
        async with asyncio.timeout(60):
            batch = await changes.next()
        assert batch.missed and dict(batch.seqs) == {}
        entry = session.append_message(UserMessage(content="after the restart"))
        async with asyncio.timeout(60):
            batch = await changes.next()
        assert dict(batch.seqs) == {session.id: 2} and not batch.missed
    assert watcher.refresh() == 1 and entry.id in watcher
    for s in (session, watcher):
        s.close()
    repo.close()
