"""The agent loop on the faux model with real session files: order, persistence, hooks, tools."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    EVENT_CLASSES,
    AgentHarness,
    AssistantMessage,
    Block,
    BusyError,
    FauxModel,
    FauxReply,
    FauxToolCall,
    InvalidEntryError,
    JsonlSessionRepo,
    MessageEntry,
    ModelRequest,
    PatchInput,
    PatchResult,
    ProviderError,
    Session,
    SyncInLoopError,
    TextContent,
    Tool,
    ToolResult,
    ToolResultMessage,
    ToolRun,
    UserMessage,
    tool,
)


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    repo = JsonlSessionRepo(tmp_path / "sessions")
    workdir = tmp_path / "work"
    workdir.mkdir()
    return await repo.create(str(workdir))


def recording_tool(name: str = "echo", calls: list[Mapping[str, Any]] | None = None) -> Tool:
    seen = calls if calls is not None else []

    @tool(name, f"{name} its input", {"type": "object", "properties": {"x": {"type": "string"}}})
    async def execute(input: Mapping[str, Any], run: ToolRun) -> ToolResult:
        seen.append(dict(input))
        return ToolResult(content=f"{name}:{input.get('x')}", details={"n": len(seen)})

    return execute


def record_events(h: AgentHarness) -> list[str]:
    names: list[str] = []
    loop_events = ("agent_", "turn_", "message_", "tool_execution_")
    for event_name in EVENT_CLASSES:
        if event_name.startswith(loop_events):
            h.connect(event_name, lambda sender, event: names.append(event.name), priority=-100)
    return names


async def test_faux_loop_persists_every_message_and_fires_events_in_order(
    session: Session, tmp_path: Path
) -> None:
    model = FauxModel(
        [
            FauxReply(text="calling", tool_calls=[FauxToolCall(name="echo", arguments={"x": "1"})]),
            "done",
        ]
    )
    h = AgentHarness(session=session, model=model, tools=[recording_tool()])
    names = record_events(h)
    reply = await h.prompt("go")
    assert reply.text == "done" and reply.stop_reason == "stop"
    model.assert_consumed()

    assert names == [
        "agent_start",
        "turn_start",
        "message_start", "message_end",  # the prompt
        "message_start", "message_update", "message_update", "message_end",  # text, tool call
        "tool_execution_start", "tool_execution_end",
        "message_start", "message_end",  # tool result
        "turn_end",
        "turn_start",
        "message_start", "message_update", "message_end",  # reply 2
        "turn_end",
        "agent_end",
    ]  # fmt: skip

    repo = JsonlSessionRepo(tmp_path / "sessions")
    reopened = await repo.open(session.id)
    entries = list(reopened.entries())
    assert all(isinstance(e, MessageEntry) for e in entries)
    roles = [e.message.role for e in entries]  # type: ignore[union-attr]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    assert [e.parent_id for e in entries] == [None, *(e.id for e in entries[:-1])]
    result = entries[2].message  # type: ignore[union-attr]
    assert isinstance(result, ToolResultMessage)
    assert result.text == "echo:1" and result.details == {"n": 1}
    # The second request carried the whole conversation, tool result included.
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "toolResult"]


async def test_first_block_wins_and_later_receivers_are_not_called(session: Session) -> None:
    calls: list[Mapping[str, Any]] = []
    h = AgentHarness(
        session=session,
        model=FauxModel(
            [FauxReply(tool_calls=[FauxToolCall(name="echo", arguments={"x": "a"})]), "ok"]
        ),
        tools=[recording_tool(calls=calls)],
    )
    later: list[str] = []
    h.connect("tool_call", lambda s, event: Block(reason="no echo today"))
    h.connect("tool_call", lambda s, event: later.append(event.tool_call_id))
    await h.prompt("x")
    assert calls == [] and later == []
    result = session.build_context().messages[2]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error and result.text == "no echo today"


async def test_input_patches_chain_and_the_effective_input_is_recorded(
    session: Session, tmp_path: Path
) -> None:
    calls: list[Mapping[str, Any]] = []
    h = AgentHarness(
        session=session,
        model=FauxModel(
            [FauxReply(tool_calls=[FauxToolCall(name="echo", arguments={"x": "a"})]), "ok"]
        ),
        tools=[recording_tool(calls=calls)],
    )
    seen_by_second: list[str] = []

    def first(sender: object, event: Any) -> PatchInput:
        return PatchInput(input={"x": event.input["x"] + "b"})

    def second(sender: object, event: Any) -> PatchInput:
        seen_by_second.append(event.input["x"])
        return PatchInput(input={"x": event.input["x"] + "c"})

    h.connect("tool_call", first)
    h.connect("tool_call", second)
    await h.prompt("x")
    assert seen_by_second == ["ab"]
    assert calls == [{"x": "abc"}]
    reopened = await JsonlSessionRepo(tmp_path / "sessions").open(session.id)
    result = reopened.build_context().messages[2]
    assert isinstance(result, ToolResultMessage)
    assert result.extra["effectiveInput"] == {"x": "abc"}


async def test_tool_result_patches_chain(session: Session) -> None:
    h = AgentHarness(
        session=session,
        model=FauxModel(
            [FauxReply(tool_calls=[FauxToolCall(name="echo", arguments={"x": "a"})]), "ok"]
        ),
        tools=[recording_tool()],
    )

    def redact(sender: object, event: Any) -> PatchResult:
        return PatchResult(content=[TextContent(text=event.content[0].text.upper())])

    def annotate(sender: object, event: Any) -> PatchResult:
        return PatchResult(details={"saw": event.content[0].text}, is_error=True)

    h.connect("tool_result", redact)
    h.connect("tool_result", annotate)
    await h.prompt("x")
    result = session.build_context().messages[2]
    assert isinstance(result, ToolResultMessage)
    assert result.text == "ECHO:A"
    assert result.details == {"saw": "ECHO:A"}
    assert result.is_error


async def test_raising_tool_call_receiver_fails_closed_and_observers_are_isolated(
    session: Session,
) -> None:
    calls: list[Mapping[str, Any]] = []
    h = AgentHarness(
        session=session,
        model=FauxModel(
            [FauxReply(tool_calls=[FauxToolCall(name="echo", arguments={"x": "a"})]), "ok"]
        ),
        tools=[recording_tool(calls=calls)],
    )
    errors: list[tuple[str, str]] = []
    turns: list[int] = []

    def broken_gate(sender: object, event: Any) -> None:
        raise RuntimeError("gate is down")

    def broken_observer(sender: object, event: Any) -> None:
        raise ValueError("observer bug")

    h.connect("tool_call", broken_gate)
    h.connect("turn_start", broken_observer)
    h.connect("turn_start", lambda s, event: turns.append(event.turn_index))
    h.connect(
        "handler_error",
        lambda s, event: errors.append((event.event_name, type(event.error).__name__)),
    )
    reply = await h.prompt("x")
    assert reply.text == "ok"
    assert calls == []  # failed closed
    result = session.build_context().messages[2]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert ("tool_call", "RuntimeError") in errors
    assert errors.count(("turn_start", "ValueError")) == 2
    assert turns == [0, 1]  # the next receiver still ran


async def test_model_mistakes_become_error_results_the_model_sees(session: Session) -> None:
    seen: list[ModelRequest] = []

    def final(request: ModelRequest) -> str:
        seen.append(request)
        return "understood"

    h = AgentHarness(
        session=session,
        model=FauxModel(
            [
                FauxReply(
                    tool_calls=[
                        FauxToolCall(name="nope"),
                        FauxToolCall(name="echo", arguments={"x": 5}),
                    ]
                ),
                final,
            ]
        ),
        tools=[recording_tool()],
    )
    await h.prompt("x")
    results = [m for m in seen[0].messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [True, True]
    assert "unknown tool 'nope'" in results[0].text
    assert results[1].text.startswith("invalid arguments for echo")


async def test_length_stop_never_runs_its_tool_calls(session: Session) -> None:
    calls: list[Mapping[str, Any]] = []
    h = AgentHarness(
        session=session,
        model=FauxModel(
            [
                FauxReply(
                    text="cut",
                    tool_calls=[FauxToolCall(name="echo", arguments={"x": "a"})],
                    stop_reason="length",
                ),
                "ok",
            ]
        ),
        tools=[recording_tool(calls=calls)],
    )
    await h.prompt("x")
    assert calls == []
    result = session.build_context().messages[2]
    assert isinstance(result, ToolResultMessage) and result.is_error


async def test_failed_request_is_persisted_then_raised(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel([FauxReply(text="par", error="overloaded")]))
    ended: list[str] = []
    h.connect("agent_end", lambda s, event: ended.append("agent_end"))
    h.connect("settled", lambda s, event: ended.append("settled"))
    with pytest.raises(ProviderError, match="overloaded") as info:
        await h.prompt("x")
    reply = info.value.reply
    assert reply is not None and reply.stop_reason == "error"
    assert reply.error_message == "overloaded"
    last = list(session.entries())[-1]
    assert isinstance(last, MessageEntry) and last.message == reply
    assert ended == ["agent_end", "settled"] and not h.busy


async def test_raise_on_error_false_returns_the_error_reply_as_pi_does(session: Session) -> None:
    model = FauxModel([FauxReply(text="par", error="overloaded")])
    h = AgentHarness(session=session, model=model, raise_on_error=False)
    reply = await h.prompt("x")
    assert reply.stop_reason == "error" and reply.error_message == "overloaded"
    last = list(session.entries())[-1]
    assert isinstance(last, MessageEntry) and last.message == reply


async def test_exhausted_faux_model_is_an_error_not_a_silent_default(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel([]))
    with pytest.raises(ProviderError, match="no reply left"):
        await h.prompt("x")


async def test_second_prompt_while_busy_raises_busy_error(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel(["a long reply " * 5], delay_s=0.01))
    first = asyncio.create_task(h.prompt("one"))
    await asyncio.sleep(0.02)
    assert h.busy
    with pytest.raises(BusyError) as info:
        await h.prompt("two")
    assert info.value.code == "busy"
    await first
    assert not h.busy
    users = [m for m in session.build_context().messages if isinstance(m, UserMessage)]
    assert [u.text for u in users] == ["one"]


async def test_cancelling_mid_stream_persists_the_partial_reply_as_aborted(
    session: Session, tmp_path: Path
) -> None:
    h = AgentHarness(
        session=session, model=FauxModel(["0123456789" * 10], chunk_size=5, delay_s=0.01)
    )
    started = asyncio.Event()
    h.connect("message_update", lambda s, event: started.set())
    task = asyncio.create_task(h.prompt("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    reopened = await JsonlSessionRepo(tmp_path / "sessions").open(session.id)
    last = list(reopened.entries())[-1]
    assert isinstance(last, MessageEntry) and isinstance(last.message, AssistantMessage)
    assert last.message.stop_reason == "aborted"
    assert 0 < len(last.message.text) < 100
    assert not h.busy


async def test_prompt_sync_refuses_a_running_loop(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel(["x"]))
    with pytest.raises(SyncInLoopError) as info:
        h.prompt_sync("x")
    assert info.value.code == "sync_in_loop"


def test_prompt_sync_runs_outside_a_loop(tmp_path: Path) -> None:
    session = asyncio.run(JsonlSessionRepo(tmp_path).create(str(tmp_path)))
    h = AgentHarness(session=session, model=FauxModel(["sync hello"]))
    assert h.prompt_sync("hi").text == "sync hello"
    assert len(session) == 2


async def test_tools_run_in_parallel_and_results_keep_call_order(session: Session) -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    @tool("slow_a", "waits for b")
    async def slow_a(input: Mapping[str, Any], run: ToolRun) -> str:
        a_started.set()
        await asyncio.wait_for(b_started.wait(), 2)  # deadlocks (times out) if run sequentially
        return "a"

    @tool("slow_b", "waits for a")
    async def slow_b(input: Mapping[str, Any], run: ToolRun) -> str:
        b_started.set()
        await asyncio.wait_for(a_started.wait(), 2)
        return "b"

    h = AgentHarness(
        session=session,
        model=FauxModel(
            [FauxReply(tool_calls=[FauxToolCall(name="slow_a"), FauxToolCall(name="slow_b")]), "ok"]
        ),
        tools=[slow_a, slow_b],
    )
    await h.prompt("x")
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert [(r.text, r.is_error) for r in results] == [("a", False), ("b", False)]


async def test_sequential_harness_runs_one_tool_at_a_time(session: Session) -> None:
    running = 0
    peak = 0

    @tool("step", "one step")
    async def step(input: Mapping[str, Any], run: ToolRun) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "ok"

    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[FauxToolCall(name="step")] * 3), "done"]),
        tools=[step],
        tool_execution="sequential",
    )
    await h.prompt("x")
    assert peak == 1


async def test_tool_context_factory_runs_once_per_turn(session: Session) -> None:
    made: list[int] = []
    seen: list[Any] = []

    def factory() -> dict[str, int]:
        made.append(1)
        return {"turn": len(made)}

    @tool("ctx", "reads context")
    async def ctx(input: Mapping[str, Any], run: ToolRun) -> str:
        seen.append(run.context)
        return "ok"

    h = AgentHarness(
        session=session,
        model=FauxModel(
            [
                FauxReply(tool_calls=[FauxToolCall(name="ctx"), FauxToolCall(name="ctx")]),
                FauxReply(tool_calls=[FauxToolCall(name="ctx")]),
                "done",
            ]
        ),
        tools=[ctx],
        tool_context=factory,
    )
    await h.prompt("x")
    assert seen == [{"turn": 1}, {"turn": 1}, {"turn": 2}]
    assert len(made) == 3  # one per turn, including the last turn without tool calls


def test_duplicate_tool_names_are_refused(tmp_path: Path) -> None:
    session = asyncio.run(JsonlSessionRepo(tmp_path).create(str(tmp_path)))
    with pytest.raises(ValueError, match="echo"):
        AgentHarness(session=session, tools=[recording_tool(), recording_tool()])


async def test_a_tool_batchs_results_are_stored_together_before_their_events(
    session: Session,
) -> None:
    """Issue 24: the results of one batch go to the store in one transaction
    (``Session.append_messages``): when the first result's ``message_start`` fires, every
    result of the batch is already in the session, in call order, each parented on the one
    before."""
    seen: list[int] = []

    def on_start(sender: object, event: Any) -> None:
        if isinstance(event.message, ToolResultMessage):
            stored = [
                e
                for e in (session.get_entry(i) for i in session.path_ids(session.leaf_id))
                if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
            ]
            seen.append(len(stored))

    h = AgentHarness(
        session=session,
        model=FauxModel(
            [FauxReply(tool_calls=[FauxToolCall(name="echo", arguments={"x": "a"})] * 3), "ok"]
        ),
        tools=[recording_tool()],
    )
    h.connect("message_start", on_start)
    await h.prompt("x")
    assert seen == [3, 3, 3]
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert [r.text for r in results] == ["echo:a"] * 3


async def test_an_initial_history_holding_a_message_that_cannot_be_stored_stores_none(
    session: Session,
) -> None:
    """The history is stored in one transaction (``append_messages``): a message that cannot
    be stored (NaN is no JSON) refuses the whole history, not just itself and what follows."""
    bad = ToolResultMessage(tool_call_id="c", tool_name="t", content=[], details=math.nan)
    h = AgentHarness(session=session, model=FauxModel(["ok"]))
    with pytest.raises(InvalidEntryError):
        await h.prompt("x", initial_history=[UserMessage(content="earlier"), bad])
    assert len(session) == 0


async def test_two_tool_calls_with_one_id_both_run_and_both_results_are_recorded(
    tmp_path: Path,
) -> None:
    """Review 13, finding 16: a model server that sent two calls with one id had both run,
    one result recorded, and every later request of the session refused as invalid. A
    repeated id gets `~2`; the run ends normally and the session goes on."""
    from harness import (
        AgentHarness,
        FauxModel,
        FauxReply,
        FauxToolCall,
        MemorySessionRepo,
        SecuritySupervisor,
        ToolCall,
        ToolResultMessage,
        bash_tool,
    )

    session = await MemorySessionRepo().create(str(tmp_path))
    calls = [
        FauxToolCall(name="bash", id="call_X", arguments={"command": "echo one"}),
        FauxToolCall(name="bash", id="call_X", arguments={"command": "echo two"}),
    ]
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "done", "hello again"]),
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        cwd=tmp_path,
        resources=None,
    )
    assert (await harness.prompt("go")).text == "done"
    assert (await harness.prompt("are you there?")).text == "hello again"
    messages = session.build_context().messages
    ids = [b.id for m in messages for b in getattr(m, "content", ()) if isinstance(b, ToolCall)]
    assert ids == ["call_X", "call_X~2"]
    results = {m.tool_call_id: m.text.strip() for m in messages if isinstance(m, ToolResultMessage)}
    assert results == {"call_X": "one", "call_X~2": "two"}
