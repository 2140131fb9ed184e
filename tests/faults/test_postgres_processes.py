"""``PostgresSessionRepo`` with real processes and threads against a real server: many writers
on one session, none of their entries lost or duplicated, diverging work kept as branches
(DESIGN §3)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from itertools import pairwise
from pathlib import Path

import orjson
import pytest

from hooks import UserMessage
from repos import MessageEntry

pytestmark = [pytest.mark.faults, pytest.mark.postgres]

WORKER = Path(__file__).with_name("_pg_worker.py")


def _run(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines(url: str, session_id: str) -> list[dict[str, object]]:
    """Every stored line of the session, checked: whole JSON, unique ids, parents present."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq, line FROM entries WHERE session_id = %s ORDER BY seq", (session_id,)
        ).fetchall()
    assert [seq for seq, _ in rows] == list(range(2, len(rows) + 2)), "sequence has gaps"
    entries = [orjson.loads(line) for _, line in rows]
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), "duplicate ids"
    known = set(ids)
    assert all(e["parentId"] is None or e["parentId"] in known for e in entries)
    return entries


@pytest.mark.parametrize(
    ("writers", "each"), [(8, 200), pytest.param(8, 2000, marks=pytest.mark.stress)]
)
async def test_eight_processes_append_to_one_session(
    postgres_url: str, tmp_path: Path, writers: int, each: int
) -> None:
    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    session = await repo.create("/work", session_id="shared")
    session.close()
    go = tmp_path / "go"
    procs = [
        _run("append", postgres_url, "shared", str(each), f"w{i}", str(go)) for i in range(writers)
    ]
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    written = [i for r in results for i in r["ids"]]
    assert len(written) == writers * each and len(set(written)) == len(written)
    entries = _lines(postgres_url, "shared")
    assert len(entries) == writers * each, "entries lost or duplicated"
    assert {e["id"] for e in entries} == set(written)
    assert all(r["entries"] >= each for r in results)
    assert max(r["entries"] for r in results) == writers * each
    fresh = await repo.open("shared")
    assert len(fresh) == writers * each
    # Each worker's own messages form a chain in its order (catch-up kept its own leaf).
    by_tag: dict[str, list[MessageEntry]] = {}
    for entry in fresh.entries():
        assert isinstance(entry, MessageEntry)
        content = entry.message.content
        assert isinstance(content, str)
        by_tag.setdefault(content.rsplit("-", 1)[0], []).append(entry)
    assert sorted(by_tag) == sorted(f"w{i}" for i in range(writers))
    for tag, chain in by_tag.items():
        assert [e.message.content for e in chain] == [f"{tag}-{i}" for i in range(each)]
        assert all(b.parent_id == a.id for a, b in pairwise(chain))
    [info] = await repo.list("/work")
    assert info.message_count == writers * each
    fresh.close()
    repo.close()


async def test_two_workers_continuing_one_leaf_make_two_branches(postgres_url: str) -> None:
    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url)
    created = await repo.create("/work")
    root = created.append_message(UserMessage(content="root"))
    a, b = await repo.open(created.id), await repo.open(created.id)
    first = a.append_message(UserMessage(content="from a"))
    second = b.append_message(UserMessage(content="from b"))
    assert first.parent_id == root.id and second.parent_id == root.id
    fresh = await repo.open(created.id)
    assert {e.id for e in fresh.get_children(root.id)} == {first.id, second.id}
    for s in (created, a, b, fresh):
        s.close()
    repo.close()


async def test_threads_sharing_one_session_lose_nothing(postgres_url: str) -> None:
    """Five threads, four ``Session`` objects, a pool of three connections."""
    from repos.postgres import PostgresSessionRepo

    repo = PostgresSessionRepo(postgres_url, max_size=3)
    session = await repo.create("/work")
    others = [await repo.open(session.id) for _ in range(3)]
    errors: list[BaseException] = []

    def work(target: object, tag: str) -> None:
        try:
            for i in range(300):
                target.append_custom(tag, i)  # type: ignore[attr-defined]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(s, f"t{n}"))
        for n, s in enumerate([session, session, *others])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(_lines(postgres_url, session.id)) == 5 * 300
    for s in (session, *others):
        s.close()
    repo.close()
