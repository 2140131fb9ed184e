"""Steering, follow-up, next-turn queues, abort (mid-stream and mid-tool), terminate."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    AssistantMessage,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HarnessStateError,
    JsonlSessionRepo,
    MessageEntry,
    ModelRequest,
    PatchResult,
    SecuritySupervisor,
    Session,
    ToolResultMessage,
    ToolRun,
    UserMessage,
    bash_tool,
    normalize_messages,
    tool,
)


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return await JsonlSessionRepo(tmp_path / "sessions").create(str(workdir))


def gate_tool(started: asyncio.Event, release: asyncio.Event) -> Any:
    @tool("gate", "waits until released")
    async def gate(input: Mapping[str, Any], run: ToolRun) -> str:
        started.set()
        await release.wait()
        return "released"

    return gate


def user_texts(messages: tuple[Any, ...]) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage)]


async def test_steering_is_delivered_after_the_current_tool_batch(session: Session) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    model = FauxModel([FauxReply(tool_calls=[FauxToolCall(name="gate")]), "steered reply"])
    h = AgentHarness(session=session, model=model, tools=[gate_tool(started, release)])
    run = asyncio.create_task(h.prompt("start"))
    await started.wait()
    await h.steer("actually, do X")
    assert h.queued[0] == ("actually, do X",)
    release.set()
    reply = await run
    assert reply.text == "steered reply"
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "toolResult", "user"]
    assert user_texts(second) == ["start", "actually, do X"]
    assert h.queued[0] == ()


async def test_follow_up_waits_until_the_agent_would_stop(session: Session) -> None:
    model = FauxModel(["first answer", "second answer"], delay_s=0.01)
    h = AgentHarness(session=session, model=model)
    run = asyncio.create_task(h.prompt("q1"))
    await asyncio.sleep(0.005)
    await h.follow_up("and q2?")
    reply = await run
    assert reply.text == "second answer"
    assert user_texts(model.requests[1].messages) == ["q1", "and q2?"]
    texts = [getattr(m, "text", "") for m in session.build_context().messages]
    assert texts == ["q1", "first answer", "and q2?", "second answer"]


@pytest.mark.parametrize(("mode", "requests"), [("one_at_a_time", 4), ("all", 3)])
async def test_queue_modes(session: Session, mode: str, requests: int) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    replies: list[FauxReply | str] = [
        FauxReply(tool_calls=[FauxToolCall(name="gate")]),
        "a",
        "b",
        "c",
    ]
    model = FauxModel(replies[:requests])
    h = AgentHarness(
        session=session,
        model=model,
        tools=[gate_tool(started, release)],
        follow_up_mode=mode,  # type: ignore[arg-type]
    )
    run = asyncio.create_task(h.prompt("go"))
    await started.wait()
    await h.follow_up("f1")
    await h.follow_up("f2")
    release.set()
    await run
    # Follow-ups wait for a reply without tool calls (request 1), then go one or all at a time.
    assert len(model.requests) == requests
    assert user_texts(model.requests[1].messages) == ["go"]
    if mode == "all":
        assert user_texts(model.requests[2].messages) == ["go", "f1", "f2"]
    else:
        assert user_texts(model.requests[2].messages) == ["go", "f1"]
        assert user_texts(model.requests[3].messages) == ["go", "f1", "f2"]


async def test_next_turn_goes_before_the_next_prompt(session: Session) -> None:
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, model=model)
    await h.next_turn("context first")
    assert h.queued[2] == ("context first",)
    await h.prompt("then the question")
    assert user_texts(model.requests[0].messages) == ["context first", "then the question"]
    assert h.queued[2] == ()


async def test_steer_and_follow_up_need_a_running_prompt(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel([]))
    with pytest.raises(HarnessStateError) as info:
        await h.steer("x")
    assert info.value.code == "invalid_state"
    with pytest.raises(HarnessStateError):
        await h.follow_up("x")


async def test_abort_mid_stream_persists_the_partial_reply_and_clears_queues(
    session: Session, tmp_path: Path
) -> None:
    model = FauxModel(["0123456789" * 20], chunk_size=5, delay_s=0.01)
    h = AgentHarness(session=session, model=model)
    streaming = asyncio.Event()
    h.connect("message_update", lambda s, event: streaming.set())
    aborts: list[Any] = []
    h.connect("abort", lambda s, event: aborts.append(event))
    ended: list[int] = []
    h.connect("agent_end", lambda s, event: ended.append(len(event.messages)))
    run = asyncio.create_task(h.prompt("talk"))
    await streaming.wait()
    await h.follow_up("queued")
    result = await h.abort()
    reply = await run  # prompt() absorbs its own abort and returns the partial reply
    assert reply.stop_reason == "aborted" and 0 < len(reply.text) < 200
    assert result.cleared_follow_up == ("queued",)
    assert [a.cleared_follow_up for a in aborts] == [("queued",)]
    assert ended == [2]
    assert not h.busy
    reopened = await JsonlSessionRepo(tmp_path / "sessions").open(session.id)
    last = list(reopened.entries())[-1]
    assert isinstance(last, MessageEntry) and last.message == reply
    # The harness works again after an abort.
    model.add("fresh")
    assert (await h.prompt("again")).text == "fresh"


async def test_abort_mid_tool_kills_the_tool_and_keeps_the_session_valid(
    session: Session, tmp_path: Path
) -> None:
    marker = tmp_path / "work" / "finished"
    model = FauxModel(
        [
            FauxReply(
                tool_calls=[
                    FauxToolCall(name="bash", arguments={"command": f"sleep 1; touch {marker}"})
                ]
            )
        ]
    )
    supervisor = SecuritySupervisor(mode="bypass", setting_sources=())  # bash needs approval
    h = AgentHarness(session=session, model=model, tools=[bash_tool()], supervisor=supervisor)
    running = asyncio.Event()
    h.connect("tool_execution_start", lambda s, event: running.set())
    run = asyncio.create_task(h.prompt("work"))
    await running.wait()
    await asyncio.sleep(0.2)
    await h.abort()
    reply = await run
    assert reply.tool_calls  # the reply that asked for the tool
    await asyncio.sleep(1.2)  # past the moment the command would have touched it
    assert not marker.exists()  # the command was killed
    messages = session.build_context().messages
    result = messages[-1]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert "aborted" in result.text.lower()
    assert normalize_messages(messages) == messages  # already a valid request


async def test_a_caller_timeout_is_not_swallowed(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel(["x" * 200], chunk_size=1, delay_s=0.01))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await h.prompt("slow")
    last = list(session.entries())[-1]
    assert isinstance(last, MessageEntry) and isinstance(last.message, AssistantMessage)
    assert last.message.stop_reason == "aborted"
    assert not h.busy


async def test_terminate_ends_the_run_only_when_every_result_asks(session: Session) -> None:
    @tool("t", "a tool")
    async def t(input: Mapping[str, Any], run: ToolRun) -> str:
        return "ok"

    def finish_all(request: ModelRequest) -> str:
        raise AssertionError("no request after a terminating batch")

    model = FauxModel(
        [FauxReply(tool_calls=[FauxToolCall(name="t"), FauxToolCall(name="t")]), finish_all]
    )
    h = AgentHarness(session=session, model=model, tools=[t])
    h.connect("tool_result", lambda s, event: PatchResult(terminate=True))
    reply = await h.prompt("x")
    assert reply.tool_calls and len(model.requests) == 1

    model2 = FauxModel(
        [
            FauxReply(tool_calls=[FauxToolCall(name="t", id="a"), FauxToolCall(name="t", id="b")]),
            "went on",
        ]
    )
    h2 = AgentHarness(session=session, model=model2, tools=[t])
    h2.connect(
        "tool_result",
        lambda s, event: PatchResult(terminate=True) if event.tool_call_id == "a" else None,
    )
    assert (await h2.prompt("y")).text == "went on"


async def test_wait_for_idle_and_shutdown(session: Session) -> None:
    model = FauxModel(["x" * 400], chunk_size=4, delay_s=0.005)
    h = AgentHarness(session=session, model=model)
    seen: list[str] = []
    h.connect("turn_start", lambda s, event: seen.append("turn"))
    run = asyncio.create_task(h.prompt("go"))
    await asyncio.sleep(0.02)
    assert h.busy
    await h.shutdown()  # aborts the run, then disconnects this harness's receivers
    assert not h.busy
    await h.wait_for_idle()  # returns at once when idle
    reply = await run
    assert reply.stop_reason == "aborted"
    model.add("again")
    await h.prompt("after shutdown")
    assert seen == ["turn"]  # the receiver was disconnected by shutdown()

    waiting = FauxModel(["y" * 200], chunk_size=4, delay_s=0.005)
    h2 = AgentHarness(session=session, model=waiting)
    task = asyncio.create_task(h2.prompt("go"))
    await asyncio.sleep(0.01)
    await h2.wait_for_idle()
    assert task.done() and not h2.busy
