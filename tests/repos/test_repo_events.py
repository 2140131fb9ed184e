"""Repository events (sender: the repo): created, deleted, before_fork (cancel), fork."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hooks import Cancel, UserMessage, connect
from repos import ForkCancelledError, JsonlSessionRepo, MemorySessionRepo


@pytest.fixture(params=["jsonl", "memory"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return JsonlSessionRepo(tmp_path / "root") if request.param == "jsonl" else MemorySessionRepo()


def record(repo: Any, *names: str) -> tuple[list[Any], list[Any]]:
    seen: list[Any] = []
    disconnects = [connect(n, lambda s, event: seen.append((s, event)), sender=repo) for n in names]
    return seen, disconnects


async def test_create_delete_and_fork_are_announced_by_the_repo(repo: Any) -> None:
    seen, disconnects = record(
        repo, "session_created", "session_deleted", "session_before_fork", "session_fork"
    )
    session = await repo.create("/w")
    first = session.append_message(UserMessage(content="hi"))
    fork = await repo.fork(session.id, entry_id=first.id, position="at")
    await repo.delete(fork.id)
    await repo.delete(fork.id)  # already gone: no second event
    for d in disconnects:
        d()
    assert all(sender is repo for sender, _ in seen)
    events = [e for _, e in seen]
    assert [e.name for e in events] == [
        "session_created",
        "session_before_fork",
        "session_fork",
        "session_deleted",
    ]
    assert events[0].session_id == session.id
    assert (events[1].source_id, events[1].entry_id, events[1].position, events[1].scope) == (
        session.id,
        first.id,
        "at",
        "branch",
    )
    assert (events[2].source_id, events[2].session_id) == (session.id, fork.id)
    assert events[3].session_id == fork.id
    if isinstance(repo, JsonlSessionRepo):
        assert events[0].path == str(session.path) and events[2].path == str(fork.path)


async def test_a_hook_can_cancel_a_fork_and_nothing_is_written(repo: Any) -> None:
    session = await repo.create("/w")
    session.append_message(UserMessage(content="hi"))
    disconnect = connect(
        "session_before_fork", lambda s, event: Cancel(reason="read-only"), sender=repo
    )
    try:
        with pytest.raises(ForkCancelledError) as info:
            await repo.fork(session.id)
    finally:
        disconnect()
    assert info.value.code == "fork_cancelled" and info.value.reason == "read-only"
    assert [i.id for i in await repo.list()] == [session.id]
