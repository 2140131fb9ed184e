"""Edge cases found by a review of the loop, abort, queues and compaction (each once failed)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    AssistantMessage,
    Cancel,
    CompactionEntry,
    CompactionSettings,
    ContextOverflowError,
    ExtractiveSummarizer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HarnessStateError,
    InvalidRequestError,
    JsonlSessionRepo,
    MessageEntry,
    ModelChangeEntry,
    ReplaceMessages,
    Session,
    StreamOptions,
    SummarizationError,
    SummaryRequest,
    ToolResultMessage,
    ToolRun,
    to_llm_messages,
    tool,
)
from harness._validate import request_problems


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    return await JsonlSessionRepo(tmp_path).create(str(tmp_path))


@tool("quiet", "returns nothing")
async def quiet(input: Mapping[str, Any], run: ToolRun) -> str:
    return ""


@tool("big", "a big result")
async def big(input: Mapping[str, Any], run: ToolRun) -> str:
    return "y" * 1200


def calls(name: str, n: int) -> list[FauxReply | str]:
    return [FauxReply(tool_calls=[FauxToolCall(name=name)]) for _ in range(n)]


def sendable(session: Session) -> bool:
    return request_problems(to_llm_messages(session.build_context().messages)) == []


async def test_an_empty_tool_result_never_blocks_the_session(session: Session) -> None:
    model = FauxModel([*calls("quiet", 1), "after", "next"])
    h = AgentHarness(session=session, model=model, tools=[quiet])
    assert (await h.prompt("go")).text == "after"
    assert (await h.prompt("again")).text == "next"
    result = next(m for m in model.requests[1].messages if isinstance(m, ToolResultMessage))
    assert result.text == "(no output)"


async def test_a_context_hook_returning_nothing_is_refused(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel(["never"]))
    h.connect("context", lambda s, event: ReplaceMessages(messages=()))
    with pytest.raises(InvalidRequestError) as info:
        await h.prompt("x")
    assert info.value.problems == ["no messages to send"]
    assert not h.busy


async def test_abort_from_a_receiver_stops_the_run(session: Session) -> None:
    model = FauxModel([*calls("quiet", 5), "end"])
    h = AgentHarness(session=session, model=model, tools=[quiet])

    async def stop(sender: object, event: Any) -> None:
        await h.abort()

    h.connect("turn_end", stop)
    aborts: list[Any] = []
    h.connect("abort", lambda s, event: aborts.append(event))
    reply = await h.prompt("go")
    assert len(model.requests) == 1 and reply.tool_calls
    assert len(aborts) == 1 and not h.busy


async def test_abort_from_a_sequential_tool_and_twice_at_once(session: Session) -> None:
    h: AgentHarness

    @tool("stopper", "aborts the run")
    async def stopper(input: Mapping[str, Any], run: ToolRun) -> str:
        await asyncio.gather(h.abort(), h.abort())
        await asyncio.sleep(1)  # the cancellation lands here
        return "unreachable"

    model = FauxModel([*calls("stopper", 1), "never"])
    h = AgentHarness(session=session, model=model, tools=[stopper], tool_execution="sequential")
    ends: list[str | None] = []
    h.connect("message_end", lambda s, event: ends.append(event.entry_id))
    await h.prompt("go")  # returns: no CancelledError escapes
    result = list(session.entries())[-1]
    assert isinstance(result, MessageEntry) and isinstance(result.message, ToolResultMessage)
    assert result.message.is_error and "aborted" in result.message.text.lower()
    assert ends[-1] == result.id  # the aborted result was announced
    assert len(model.requests) == 1


async def test_abort_during_before_agent_start_returns_an_aborted_reply(session: Session) -> None:
    release = asyncio.Event()

    async def slow(sender: object, event: Any) -> None:
        await release.wait()

    h = AgentHarness(session=session, model=FauxModel(["never"]))
    h.connect("before_agent_start", slow)
    run = asyncio.create_task(h.prompt("x"))
    await asyncio.sleep(0.01)
    await h.abort()
    reply = await run
    assert reply.stop_reason == "aborted" and len(session) == 0 and not h.busy


async def test_abort_during_a_retry_backoff_is_recorded(session: Session) -> None:
    model = FauxModel([FauxReply(text="part", error="overloaded", retryable=True), "never"])
    h = AgentHarness(
        session=session,
        model=model,
        stream_options=StreamOptions(max_retries=3),
        retry_base_delay_s=5,
    )
    waiting = asyncio.Event()
    h.connect("retry", lambda s, event: waiting.set())
    run = asyncio.create_task(h.prompt("x"))
    await waiting.wait()
    await h.abort()
    reply = await run
    assert reply.stop_reason == "aborted" and reply.text == "part"
    last = list(session.entries())[-1]
    assert isinstance(last, MessageEntry) and last.message == reply


async def test_abort_between_announced_results_keeps_every_finished_result(
    session: Session,
) -> None:
    model = FauxModel(
        [
            FauxReply(
                tool_calls=[FauxToolCall(name="quiet", id="a"), FauxToolCall(name="quiet", id="b")]
            )
        ]
    )
    h = AgentHarness(session=session, model=model, tools=[quiet])

    async def slow_end(sender: object, event: Any) -> None:
        if isinstance(event.message, ToolResultMessage) and event.message.tool_call_id == "a":
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(h.abort()))
            await asyncio.sleep(0.5)

    h.connect("message_end", slow_end)
    await h.prompt("x")
    results = [
        e.message
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]
    assert [(r.tool_call_id, r.is_error) for r in results] == [("a", False), ("b", False)]


async def test_queues_refuse_what_cannot_be_delivered_and_settled_is_idle(
    session: Session,
) -> None:
    h = AgentHarness(session=session, model=FauxModel(["one"]))
    refused: list[str] = []
    idle: list[bool] = []

    async def late(sender: object, event: Any) -> None:
        try:
            await h.steer("too late")
        except HarnessStateError as exc:
            refused.append(exc.code)

    h.connect("agent_end", late)
    h.connect("settled", lambda s, event: idle.append(h.busy))
    await h.prompt("x")
    assert refused == ["invalid_state"]
    assert idle == [False]
    assert h.queued == ((), (), ())


async def test_settings_changed_during_a_compaction_are_written_when_it_ends(
    session: Session,
) -> None:
    gate = asyncio.Event()

    class Slow:
        async def summarize(self, request: SummaryRequest) -> str:
            await gate.wait()
            return "s"

    h = AgentHarness(
        session=session,
        model=FauxModel([*calls("big", 4), "done"]),
        tools=[big],
        compaction=CompactionSettings(enabled=False, reserve_tokens=100, keep_recent_tokens=200),
        summarizer=Slow(),
    )
    await h.prompt("go")
    compacting = asyncio.create_task(h.compact())
    await asyncio.sleep(0.01)
    await h.set_model(FauxModel([], model_id="other"))
    gate.set()
    await compacting
    assert isinstance(list(session.entries())[-1], ModelChangeEntry)


async def test_a_cancelled_automatic_compaction_lets_the_run_go_on(session: Session) -> None:
    h = AgentHarness(
        session=session,
        model=FauxModel([*calls("big", 4), "done"]),
        tools=[big],
        compaction=CompactionSettings(reserve_tokens=300, keep_recent_tokens=300),
        context_window=1500,
        summarizer=ExtractiveSummarizer(),
    )
    triggers: list[str] = []

    def veto(sender: object, event: Any) -> Cancel:
        triggers.append(event.trigger)
        return Cancel(reason="not now")

    h.connect("session_before_compact", veto)
    assert (await h.prompt("go")).text == "done"
    assert triggers and set(triggers) == {"threshold"}
    assert not any(isinstance(e, CompactionEntry) for e in session.entries())


async def test_a_cancelled_overflow_compaction_raises_context_overflow(session: Session) -> None:
    overflow = FauxReply(error="too long", error_type="context_overflow")
    h = AgentHarness(
        session=session,
        model=FauxModel([*calls("big", 3), overflow]),
        tools=[big],
        compaction=CompactionSettings(enabled=False, reserve_tokens=100, keep_recent_tokens=200),
        summarizer=ExtractiveSummarizer(),
    )
    h.connect("session_before_compact", lambda s, event: Cancel(reason="no"))
    with pytest.raises(ContextOverflowError):
        await h.prompt("go")


async def test_a_failed_summary_skips_the_automatic_compaction(session: Session) -> None:
    class Failing:
        async def summarize(self, request: SummaryRequest) -> str:
            raise SummarizationError(kind=request.kind, reason="overloaded")

    h = AgentHarness(
        session=session,
        model=FauxModel([*calls("big", 4), "done"]),
        tools=[big],
        compaction=CompactionSettings(reserve_tokens=300, keep_recent_tokens=300),
        context_window=1500,
        summarizer=Failing(),
    )
    assert (await h.prompt("go")).text == "done"
    assert sendable(session)
    assert isinstance(list(session.entries())[-1].message, AssistantMessage)  # type: ignore[union-attr]


async def test_settled_fires_even_when_prompt_raises(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel(["never"]))
    h.connect("context", lambda s, event: ReplaceMessages(messages=()))
    settled: list[int] = []
    h.connect("settled", lambda s, event: settled.append(event.next_turn_count))
    with pytest.raises(InvalidRequestError):
        await h.prompt("x")
    assert settled == [0]


async def test_an_aborted_tool_gets_its_end_events_and_the_turn_ends(session: Session) -> None:
    started = asyncio.Event()

    @tool("hang", "never finishes")
    async def hang(input: Mapping[str, Any], run: ToolRun) -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    h = AgentHarness(session=session, model=FauxModel([*calls("hang", 1)]), tools=[hang])
    names: list[str] = []
    for name in ("tool_execution_start", "tool_execution_end", "message_end", "turn_end"):
        h.connect(name, lambda s, event: names.append(event.name))
    run = asyncio.create_task(h.prompt("x"))
    await started.wait()
    await h.abort()
    await run
    assert names[-3:] == ["tool_execution_end", "message_end", "turn_end"]
    assert names.count("tool_execution_start") == names.count("tool_execution_end") == 1
