"""``PostgresSessionRepo.watch``: a watcher is woken by the commits of another process
(``LISTEN/NOTIFY``) and catches up by sequence, with no polling loop."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from hooks import UserMessage
from repos import InvalidSessionIdError, MessageEntry

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).parents[1] / "faults" / "_pg_worker.py"


async def test_a_watcher_is_woken_by_another_process_appending(
    postgres_url: str, tmp_path: Path
) -> None:
    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    session = await repo.create("/work")
    watcher = await repo.open(session.id)
    go = tmp_path / "go"
    go.touch()
    seen: list[int] = []
    async with repo.watch(session.id) as changes:
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            "append",
            postgres_url,
            session.id,
            "5",
            "other",
            str(go),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(120):  # a bound on a hang, not a timing assertion
            async for batch in changes:
                assert not batch.missed and set(batch.seqs) == {session.id}
                seen.append(batch.seqs[session.id])
                watcher.refresh()
                # The newest line of the fifth append is line 6 (the header is line 1); a
                # refresh after an earlier batch may already hold all five.
                if batch.seqs[session.id] == 6:
                    break
        out, err = await worker.communicate()
    assert worker.returncode == 0, err.decode()
    written = json.loads(out.decode().strip().splitlines()[-1])["ids"]
    assert [e.id for e in watcher.entries()] == written
    contents = [e.message.content for e in watcher.entries() if isinstance(e, MessageEntry)]
    assert contents == [f"other-{i}" for i in range(5)]
    # Batches report the sequence of the newest line, increasing.
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    for s in (session, watcher):
        s.close()
    repo.close()


async def test_a_watch_reports_only_its_sessions_and_all_without_ids(postgres_url: str) -> None:
    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    a, b = await repo.create("/work"), await repo.create("/work")
    async with repo.watch(a.id) as only_a, repo.watch() as every:
        b.append_message(UserMessage(content="to b"))
        a.append_message(UserMessage(content="to a"))
        a.append_message(UserMessage(content="to a again"))
        async with asyncio.timeout(60):
            got_a = await only_a.next()
            got_all: dict[str, int] = {}
            while got_all != {a.id: 3, b.id: 2}:
                got_all.update((await every.next()).seqs)
        # The batch for a holds no b; its seq is a's newest line (or the one before it, when
        # the second notification had not arrived yet; then the next batch has it).
        assert set(got_a.seqs) == {a.id} and got_a.seqs[a.id] in (2, 3)
    for s in (a, b):
        s.close()
    repo.close()


async def test_an_import_notifies_watchers(postgres_url: str) -> None:
    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    source = await repo.create("/work")
    source.append_message(UserMessage(content="hello"))
    lines = await repo.export_lines(source.id)
    await repo.delete(source.id)
    async with repo.watch(source.id) as changes:
        assert await repo.import_lines(lines) == 2
        async with asyncio.timeout(60):
            batch = await changes.next()
    assert dict(batch.seqs) == {source.id: 2}
    source.close()
    repo.close()


async def test_watch_refuses_a_bad_id_and_a_closed_watch(postgres_url: str) -> None:
    from repos import StorageError
    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    with pytest.raises(InvalidSessionIdError):
        async with repo.watch("../x"):
            pass
    async with repo.watch() as changes:
        pass
    with pytest.raises(StorageError, match="the watch is closed"):
        await changes.next()
    repo.close()
