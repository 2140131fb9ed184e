"""``Session.append_messages`` (issue 24, point 2): several messages in one store transaction
store exactly what as many ``append_message`` calls store, refuse a batch holding a message
that cannot be stored before writing anything, and keep (and index) the lines written before
a write that fails."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hooks import AssistantMessage, TextContent, ToolResultMessage, UserMessage
from repos import (
    InvalidEntryError,
    JsonlSessionRepo,
    MemorySessionRepo,
    SqliteSessionRepo,
    open_session,
)

Repo = Any  # each store's repository: the same calls, no common base class


@pytest.fixture(
    params=["jsonl", "memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Repo]:
    if request.param == "jsonl":
        yield JsonlSessionRepo(tmp_path / "root")
    elif request.param == "sqlite":
        yield SqliteSessionRepo(tmp_path / "sessions.db")
    elif request.param == "postgres":
        from repos.postgres import PostgresSessionRepo

        pg = PostgresSessionRepo(request.getfixturevalue("postgres_url"), max_size=4)
        yield pg
        pg.close()
    else:
        yield MemorySessionRepo()


def _results(n: int) -> list[ToolResultMessage]:
    return [
        ToolResultMessage(
            tool_call_id=f"call-{i}",
            tool_name="read",
            content=[TextContent(text=f"result {i}")],
            details={"i": i},
        )
        for i in range(n)
    ]


async def test_a_batch_stores_what_appends_one_by_one_store(repo: Repo) -> None:
    with await repo.create("/w") as s:
        s.append_message(UserMessage(content="go"))
        asked = s.append_message(AssistantMessage(content=[TextContent(text="calling")]))
        results = _results(3)
        entries = s.append_messages(results)
        assert [e.message for e in entries] == results
        assert [e.parent_id for e in entries] == [asked.id, entries[0].id, entries[1].id]
        assert len({e.id for e in entries}) == 3
        assert s.leaf_id == entries[-1].id
        after = s.append_message(UserMessage(content="next"))
        assert after.parent_id == entries[-1].id
        sid = s.id
    with await repo.open(sid) as again:
        assert [again.get_entry(e.id) for e in entries] == entries
        assert again.leaf_id == after.id
        on_path = [again.get_entry(i) for i in again.path_ids(again.leaf_id)]
        assert on_path[2:5] == entries


async def test_a_batch_holding_a_message_that_cannot_be_stored_writes_nothing(
    repo: Repo,
) -> None:
    with await repo.create("/w") as s:
        first = s.append_message(UserMessage(content="go"))
        bad = ToolResultMessage(tool_call_id="c", tool_name="t", content=[], details=math.nan)
        with pytest.raises(InvalidEntryError):
            s.append_messages([*_results(2), bad])
        assert len(s) == 1 and s.leaf_id == first.id
        sid = s.id
    with await repo.open(sid) as again:
        assert again.entry_ids() == [first.id]


async def test_an_empty_batch_stores_nothing(repo: Repo) -> None:
    with await repo.create("/w") as s:
        first = s.append_message(UserMessage(content="go"))
        assert s.append_messages([]) == []
        assert s.entry_ids() == [first.id]


_FAIL_MID_BATCH = """
import json, resource, signal, sys
from pathlib import Path
from hooks import TextContent, ToolResultMessage
from repos import SessionWriteError, open_session
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
small = [ToolResultMessage(tool_call_id=f"c{i}", tool_name="t", content=[TextContent(text="ok")])
         for i in range(2)]
big = ToolResultMessage(tool_call_id="big", tool_name="t", content=[TextContent(text="x" * 5000)])
with open_session(path) as s:
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 2000, hard))
    try:
        s.append_messages([*small, big])
        code = None
    except SessionWriteError as exc:
        code = exc.code
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print(json.dumps({"code": code, "ids": s.entry_ids(), "leaf": s.leaf_id}))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
async def test_a_write_failing_mid_batch_keeps_and_indexes_the_lines_before_it(
    tmp_path: Path,
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        first = s.append_message(UserMessage(content="go")).id
        path = s.path
    assert path is not None
    done = subprocess.run(
        [sys.executable, "-c", _FAIL_MID_BATCH, str(path)],
        capture_output=True,
        check=True,
        timeout=60,
    )
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["code"] == "write_failed"
    assert len(out["ids"]) == 3 and out["ids"][0] == first  # the two small results stayed
    assert out["leaf"] == out["ids"][-1]
    with open_session(path, strict=True) as again:
        assert again.entry_ids() == out["ids"]
        assert not Path(f"{path}.torn").exists()
