"""``EventEncoder``: our events as JSON objects in pi's RPC event shape (docs/events.md), the one
shape of ``harness run --verbose``, ``harness rpc`` and ``examples/log_events.py``. Also the
two harness additions the chat and the protocol use: ``compact(force=True)`` and
``revoke_approval``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from harness import (
    EVENT_CLASSES,
    AgentHarness,
    ApproveAlways,
    Event,
    EventEncoder,
    ExtractiveSummarizer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MemorySessionRepo,
    SecuritySupervisor,
    bash_tool,
    remembered_approvals,
)


async def _events(harness: AgentHarness, text: str) -> list[dict[str, Any]]:
    encoder = EventEncoder()
    seen: list[dict[str, Any]] = []

    def record(sender: object, event: Event) -> None:
        seen.append(encoder.encode(event, sender))

    for name in EVENT_CLASSES:
        harness.connect(name, record)
    await harness.prompt(text)
    return seen


async def test_a_run_with_a_tool_call_in_pis_shape(tmp_path: Path) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    call = FauxToolCall(name="bash", arguments={"command": "printf 'a\\nb\\n'"}, id="c1")
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(text="Running.", tool_calls=[call]), "Done."], chunk_size=3),
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        cwd=tmp_path,
    )
    seen = await _events(harness, "go")
    for record in seen:  # every record is JSON as it stands (no repr fallback needed)
        assert orjson.loads(orjson.dumps(record)) == record
        assert record["type"] and all("_" not in k for k in record if k != "type")
    by_type = {r["type"]: r for r in seen}
    update = by_type["message_update"]
    assert update["assistantMessageEvent"]["type"] in ("text_delta", "thinking_delta")
    assert update["assistantMessageEvent"]["partial"] == update["message"]
    assert by_type["tool_execution_start"] == {
        "type": "tool_execution_start",
        "toolCallId": "c1",
        "toolName": "bash",
        "args": {"command": "printf 'a\\nb\\n'"},
    }
    end = by_type["tool_execution_end"]
    assert end["isError"] is False and end["result"]["content"][0]["text"] == "a\nb\n"
    assert end["result"]["details"]["exitCode"] == 0
    updates = [r for r in seen if r["type"] == "tool_execution_update"]
    if updates:  # pi's partialResult is the output so far, with the call's args
        assert updates[-1]["args"] == {"command": "printf 'a\\nb\\n'"}
        assert "a" in updates[-1]["partialResult"]["content"][0]["text"]
    turn = next(r for r in seen if r["type"] == "turn_end")
    assert turn["turnIndex"] == 0 and turn["toolResults"][0]["toolCallId"] == "c1"
    assert by_type["agent_end"]["messages"][-1]["content"][-1]["text"] == "Done."
    assert by_type["permission_decision"]["operationKey"].startswith("bash(printf ")


async def test_compaction_events_are_pis_with_the_result(tmp_path: Path) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel(["one", "two"]),
        summarizer=ExtractiveSummarizer(),
        cwd=tmp_path,
    )
    await harness.prompt("first")
    await harness.prompt("second")
    encoder = EventEncoder()
    seen: list[dict[str, Any]] = []
    for name in ("session_before_compact", "session_compact"):
        harness.connect(name, lambda sender, event: seen.append(encoder.encode(event, sender)))
    entry = await harness.compact(force=True)
    assert entry is not None
    start, end = seen
    assert start["type"] == "compaction_start" and start["reason"] == "manual"
    assert end["type"] == "compaction_end" and end["aborted"] is False
    assert end["result"] == {
        "summary": entry.summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "tokensBefore": entry.tokens_before,
        "details": entry.details,
    }


async def test_compact_force_compacts_a_short_session_keeping_the_last_message(
    tmp_path: Path,
) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel(["one", "two"]),
        summarizer=ExtractiveSummarizer(),
        cwd=tmp_path,
    )
    await harness.prompt("first")
    await harness.prompt("second")
    assert await harness.compact() is None  # far below keep_recent_tokens: nothing to do
    entry = await harness.compact(force=True)
    assert entry is not None
    last = session.get_branch()[-2]  # the last message, before the compaction entry
    assert entry.first_kept_entry_id == last.id
    messages = session.build_context().messages
    assert [m.role for m in messages] == ["compactionSummary", "assistant"]


async def test_a_revoked_approval_is_asked_again_here_and_after_a_reopen(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "s")
    session = await repo.create(str(tmp_path))
    asked: list[str] = []

    async def approver(request: Any) -> ApproveAlways:
        asked.append(request.operation_key)
        return ApproveAlways()

    def make(s: Any, replies: list[Any]) -> AgentHarness:
        return AgentHarness(
            session=s,
            model=FauxModel(replies),
            tools=[bash_tool()],
            supervisor=SecuritySupervisor(approver=approver, setting_sources=()),
            cwd=tmp_path,
        )

    call = FauxToolCall(name="bash", arguments={"command": "true"})
    harness = make(
        session, [FauxReply(tool_calls=[call]), "ok", FauxReply(tool_calls=[call]), "ok"]
    )
    await harness.prompt("one")
    assert harness.approvals == {"bash(true)"}
    assert harness.revoke_approval("bash(true)") is True
    assert harness.revoke_approval("bash(true)") is False  # not approved any more
    await harness.prompt("two")
    assert asked == ["bash(true)", "bash(true)"]  # asked again after the revoke
    session.close()
    again = await repo.open(session.id)
    assert remembered_approvals(again) == {"bash(true)"}  # the second approve-always stands
    reopened = make(again, [])
    assert reopened.revoke_approval("bash(true)")
    again.close()
    assert remembered_approvals(await asyncio.to_thread(_reopen, repo, session.id)) == set()


def _reopen(repo: JsonlSessionRepo, session_id: str) -> Any:
    return asyncio.run(repo.open(session_id))


async def test_the_context_events_messages_are_messages_as_in_session_files(
    tmp_path: Path,
) -> None:
    """The context's messages are a lazily built sequence, not a tuple: they were encoded as
    their ``repr``, one string (issue 24 trial)."""
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(tmp_path))
    harness = AgentHarness(
        session=session, model=FauxModel(["Hi.", "Again."]), cwd=tmp_path, resources=None
    )
    await harness.prompt("first")
    session.close()
    reopened = await repo.open(session.id)
    harness = AgentHarness(
        session=reopened, model=FauxModel(["Again."]), cwd=tmp_path, resources=None
    )
    seen = await _events(harness, "second")
    [context] = [r for r in seen if r["type"] == "context"]
    assert [m["role"] for m in context["messages"]] == ["user", "assistant", "user"]
    assert context["messages"][0]["content"] == "first"
