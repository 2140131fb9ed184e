"""Compaction and navigation through the harness, with each pi bug reproduced in a few lines.

pi bugs (reference §9): #4570 chained compactions leave an orphan tool result; #6832 a
hook-supplied compaction with a tool result as the first kept entry; #6879 the threshold only
checked at agent_end; #7020 an overflow after a length stop loses the answer; #9178 navigation
during a compaction; #9348 custom instructions lost in a split turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    AssistantMessage,
    BusyError,
    Cancel,
    CompactionCancelledError,
    CompactionEntry,
    CompactionSettings,
    CompactionSummaryMessage,
    ContextOverflowError,
    ExtractiveSummarizer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    Session,
    SummaryRequest,
    SupplyCompaction,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolRun,
    UserMessage,
    to_llm_messages,
    tool,
)
from harness._validate import request_problems

SMALL = CompactionSettings(reserve_tokens=200, keep_recent_tokens=150)


class RecordingSummarizer:
    """A Summarizer (the public protocol) that records requests; optionally waits to be released."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.requests: list[SummaryRequest] = []
        self.gate = gate
        self.started = asyncio.Event()

    async def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        return f"summary #{len(self.requests)} ({request.kind})"


@tool("read", "reads", {"type": "object", "properties": {"path": {"type": "string"}}})
async def big_read(input: Mapping[str, Any], run: ToolRun) -> str:
    return f"contents of {input.get('path')}: " + "x" * 800


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    return await JsonlSessionRepo(tmp_path).create(str(tmp_path))


def assert_sendable(session: Session) -> None:
    assert request_problems(to_llm_messages(session.build_context().messages)) == []


def reads(n: int, final: str = "done") -> list[FauxReply | str]:
    calls: list[FauxReply | str] = [
        FauxReply(
            text=f"step {i}", tool_calls=[FauxToolCall(name="read", arguments={"path": f"f{i}"})]
        )
        for i in range(n)
    ]
    return [*calls, final]


async def test_manual_compaction_shrinks_the_context_and_survives_reopen(
    session: Session, tmp_path: Path
) -> None:
    h = AgentHarness(
        session=session,
        model=FauxModel(reads(6)),
        tools=[big_read],
        compaction=CompactionSettings(enabled=False, reserve_tokens=200, keep_recent_tokens=300),
        summarizer=ExtractiveSummarizer(),
    )
    await h.prompt("read six files")
    before = len(session.build_context().messages)
    events: list[Any] = []
    h.connect("session_compact", lambda s, event: events.append(event))
    entry = await h.compact()
    assert isinstance(entry, CompactionEntry)
    messages = session.build_context().messages
    assert isinstance(messages[0], CompactionSummaryMessage) and len(messages) < before
    assert [(e.entry_id, e.from_hook) for e in events] == [(entry.id, False)]
    assert_sendable(session)
    reopened = await JsonlSessionRepo(tmp_path).open(session.id)
    assert reopened.build_context() == session.build_context()


async def test_4570_chained_compactions_never_leave_an_orphan_tool_result(session: Session) -> None:
    # u1, a1(call x), C1, r1(x): the result of x landed after the first compaction.
    session.append_message(UserMessage(content="u1"))
    a1 = session.append_message(
        AssistantMessage(content=[ToolCall(id="x", name="read")], stop_reason="toolUse")
    )
    c1 = session.append_compaction("first summary", a1.id, 100)
    session.append_message(ToolResultMessage(tool_call_id="x", tool_name="read", content="r1"))
    session.append_message(UserMessage(content="u2"))
    session.append_message(AssistantMessage(content=[TextContent(text="a2")]))
    # The second compaction keeps from C1: its kept window starts with the orphaned result.
    session.append_compaction("second summary", c1.id, 200)
    messages = session.build_context().messages
    assert not any(isinstance(m, ToolResultMessage) for m in messages)
    assert [getattr(m, "text", None) for m in messages[1:]] == ["u2", "a2"]
    assert_sendable(session)

    # And through the harness: two real compactions with tool results in the kept windows.
    h = AgentHarness(
        session=session,
        model=FauxModel(reads(4) + reads(4)),
        tools=[big_read],
        compaction=CompactionSettings(enabled=False, reserve_tokens=200, keep_recent_tokens=250),
        summarizer=ExtractiveSummarizer(),
    )
    for _ in range(2):
        await h.prompt("more")
        assert await h.compact() is not None
        assert_sendable(session)


async def test_6832_a_hook_supplied_compaction_keeping_from_a_tool_result(session: Session) -> None:
    model = FauxModel([*reads(3), "after"])
    h = AgentHarness(
        session=session,
        model=model,
        tools=[big_read],
        compaction=CompactionSettings(enabled=False, reserve_tokens=200, keep_recent_tokens=100),
        summarizer=RecordingSummarizer(),
    )
    await h.prompt("go")
    result_entry = next(
        e for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    )  # fmt: skip
    h.connect(
        "session_before_compact",
        lambda s, event: SupplyCompaction(
            summary="from the hook", first_kept_entry_id=result_entry.id
        ),
    )
    entry = await h.compact()
    assert entry is not None and entry.from_hook and entry.first_kept_entry_id == result_entry.id
    assert h.summarizer.requests == []  # type: ignore[attr-defined]
    assert_sendable(session)  # the result whose call was summarised away is not sent
    assert (await h.prompt("continue")).text == "after"


async def test_a_hook_can_cancel_a_compaction(session: Session) -> None:
    h = AgentHarness(
        session=session, model=FauxModel(reads(3)), tools=[big_read], compaction=SMALL,
        summarizer=ExtractiveSummarizer(),
    )  # fmt: skip
    await h.prompt("go")
    h.connect("session_before_compact", lambda s, event: Cancel(reason="no"))
    count = len(session)
    with pytest.raises(CompactionCancelledError) as info:
        await h.compact()
    assert info.value.code == "compaction_cancelled" and len(session) == count


async def test_6879_the_threshold_is_checked_between_turns_of_one_run(session: Session) -> None:
    model = FauxModel(reads(8))
    compactions: list[int] = []
    h = AgentHarness(
        session=session,
        model=model,
        tools=[big_read],
        compaction=CompactionSettings(reserve_tokens=300, keep_recent_tokens=300),
        context_window=1500,
        summarizer=ExtractiveSummarizer(),
    )
    turns: list[int] = []
    h.connect("turn_start", lambda s, event: turns.append(event.turn_index))
    h.connect("session_compact", lambda s, event: compactions.append(turns[-1]))
    reply = await h.prompt("read eight files")
    assert reply.text == "done"
    assert compactions and compactions[0] < turns[-1]  # compacted mid-run, not at the end
    assert sum(isinstance(e, CompactionEntry) for e in session.entries()) == len(compactions)
    assert_sendable(session)


async def test_7020_an_overflow_after_a_length_stop_compacts_and_retries_once(
    session: Session,
) -> None:
    model = FauxModel(
        [
            *reads(4)[:-1],
            FauxReply(
                text="I will read more",
                tool_calls=[FauxToolCall(name="read", arguments={"path": "cut"})],
                stop_reason="length",
            ),
            FauxReply(error="prompt is too long", error_type="context_overflow"),
            "the answer",
        ]
    )
    h = AgentHarness(
        session=session,
        model=model,
        tools=[big_read],
        compaction=CompactionSettings(enabled=False, reserve_tokens=200, keep_recent_tokens=200),
        summarizer=ExtractiveSummarizer(),
    )
    reply = await h.prompt("go")
    assert reply.text == "the answer"  # not lost
    assert sum(isinstance(e, CompactionEntry) for e in session.entries()) == 1
    failed = [
        e for e in session.entries()
        if isinstance(e, MessageEntry) and getattr(e.message, "stop_reason", "") == "error"
    ]  # fmt: skip
    assert failed == []  # the overflow reply was not persisted as a turn
    model.assert_consumed()


async def test_a_context_that_cannot_fit_raises_context_overflow_error(session: Session) -> None:
    overflow = FauxReply(error="prompt is too long", error_type="context_overflow")
    h = AgentHarness(
        session=session,
        model=FauxModel([*reads(3)[:-1], overflow, overflow]),
        tools=[big_read],
        compaction=CompactionSettings(enabled=False, reserve_tokens=200, keep_recent_tokens=100),
        summarizer=ExtractiveSummarizer(),
        context_window=1000,
    )
    with pytest.raises(ContextOverflowError) as info:
        await h.prompt("go")
    err = info.value
    assert err.code == "context_overflow" and err.window == 1000
    assert err.largest and err.largest[0][1] >= err.largest[-1][1]
    assert not h.busy


async def test_9178_navigation_during_a_compaction_is_refused(session: Session) -> None:
    gate = asyncio.Event()
    summarizer = RecordingSummarizer(gate)
    h = AgentHarness(
        session=session,
        model=FauxModel(reads(3)),
        tools=[big_read],
        compaction=SMALL,
        summarizer=summarizer,
    )
    await h.prompt("go")
    leaf = session.leaf_id
    first = session.entry_ids()[0]
    compaction = asyncio.create_task(h.compact())
    await summarizer.started.wait()
    with pytest.raises(BusyError):
        await h.navigate_tree(first)
    with pytest.raises(BusyError):
        await h.prompt("meanwhile")
    gate.set()
    entry = await compaction
    assert entry is not None and entry.parent_id == leaf  # committed where it started


async def test_9348_custom_instructions_reach_the_split_turn_summary(session: Session) -> None:
    summarizer = RecordingSummarizer()
    h = AgentHarness(
        session=session,
        model=FauxModel(["ok", *reads(6)]),
        tools=[big_read],
        compaction=CompactionSettings(enabled=False, reserve_tokens=200, keep_recent_tokens=400),
        summarizer=summarizer,
    )
    await h.prompt("an earlier question")
    await h.prompt("one request with many tool exchanges")
    await h.compact("TRIPWIRE")
    kinds = [r.kind for r in summarizer.requests]
    assert "turn_prefix" in kinds
    assert all(r.custom_instructions == "TRIPWIRE" for r in summarizer.requests)
