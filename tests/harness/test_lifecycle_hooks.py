"""Claude Code's hook points as Python hooks: user_prompt_submit, stop/subagent_stop,
session_start/session_end, notification, end_run, and Allow/Ask at tool_call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness import (
    AddContext,
    AgentEndEvent,
    AgentHarness,
    Allow,
    Approve,
    Ask,
    Block,
    CompactionSettings,
    Continue,
    CustomMessage,
    Deny,
    ExtractiveSummarizer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HandlerErrorEvent,
    HarnessStateError,
    JsonlSessionRepo,
    MemorySessionRepo,
    NotificationEvent,
    PatchInput,
    PermissionRequest,
    PromptBlockedError,
    SecuritySupervisor,
    Session,
    SessionEndEvent,
    SessionStartEvent,
    StopEvent,
    ToolResultMessage,
    UserMessage,
    bash_tool,
)


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    return await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))


def texts(model: FauxModel, request: int) -> list[str]:
    return [str(getattr(m, "text", "")) for m in model.requests[request].messages]


# --- user_prompt_submit ---------------------------------------------------------------------


async def test_a_blocked_prompt_raises_and_writes_nothing(session: Session) -> None:
    model = FauxModel(["never"])
    h = AgentHarness(session=session, model=model, resources=None)
    seen: list[str] = []

    @h.on("user_prompt_submit")
    def no_secrets(sender: object, event: Any) -> Block | None:
        seen.append(event.message.text)
        return (
            Block(reason="the prompt holds a password") if "hunter2" in event.message.text else None
        )

    assert session.path is not None
    before = session.path.read_bytes()
    with pytest.raises(PromptBlockedError) as raised:
        await h.prompt("my password is hunter2", initial_history=[UserMessage(content="old")])

    assert raised.value.code == "prompt_blocked"
    assert raised.value.reason == "the prompt holds a password"
    assert session.path.read_bytes() == before  # not even initial_history
    assert list(session.entries()) == []
    assert model.requests == [] and not h.busy
    assert seen == ["my password is hunter2"]
    await h.prompt("hello")  # the harness goes on
    assert texts(model, 0) == ["hello"]


async def test_a_raising_prompt_hook_refuses_the_prompt(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel(["never"]), resources=None)
    errors: list[HandlerErrorEvent] = []
    h.on("handler_error")(lambda s, event: errors.append(event))

    @h.on("user_prompt_submit")
    def broken(sender: object, event: Any) -> None:
        raise RuntimeError("filter unavailable")

    with pytest.raises(PromptBlockedError, match="filter unavailable"):
        await h.prompt("hi")
    assert list(session.entries()) == []
    assert [e.event_name for e in errors] == ["user_prompt_submit"]


async def test_prompt_context_goes_after_the_prompt_and_is_persisted(session: Session) -> None:
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, model=model, resources=None)
    h.on("user_prompt_submit")(lambda s, event: AddContext(text="the branch is main"))
    h.on("user_prompt_submit")(lambda s, event: AddContext(text="tests: pytest -q"))
    await h.prompt("fix it")

    assert texts(model, 0) == ["fix it", "the branch is main", "tests: pytest -q"]
    kept = [m for m in session.build_context().messages if isinstance(m, CustomMessage)]
    assert [(m.custom_type, m.display) for m in kept] == [("hook_context", False)] * 2


# --- stop and subagent_stop -----------------------------------------------------------------


async def test_a_stop_hook_continues_the_run_as_often_as_it_says(session: Session) -> None:
    model = FauxModel(["first", "second", "third"])
    h = AgentHarness(session=session, model=model, resources=None)
    seen: list[tuple[int, bool, str]] = []
    ends: list[AgentEndEvent] = []
    h.on("agent_end")(lambda s, event: ends.append(event))

    @h.on(StopEvent)
    def until_three(sender: object, event: StopEvent) -> Continue | None:
        seen.append((event.continues, event.stop_hook_active, event.message.text))
        return Continue(reason="keep going") if event.continues < 2 else None

    reply = await h.prompt("work")

    assert reply.text == "third" and len(model.requests) == 3
    assert seen == [(0, False, "first"), (1, True, "second"), (2, True, "third")]
    assert texts(model, 2) == ["work", "first", "keep going", "second", "keep going"]
    assert ends[0].end_reason is None


async def test_a_stop_hook_that_never_lets_go_stops_at_the_limit(session: Session) -> None:
    model = FauxModel(["a", "b", "c"])
    h = AgentHarness(session=session, model=model, resources=None, max_stop_continues=2)
    ends: list[AgentEndEvent] = []
    h.on("agent_end")(lambda s, event: ends.append(event))
    h.on("stop")(lambda s, event: Continue(reason="the tests still fail"))

    reply = await h.prompt("work")

    assert reply.text == "c" and model.remaining == 0  # two continues: three requests
    assert ends[0].end_reason is not None
    assert "max_stop_continues=2" in ends[0].end_reason
    assert "the tests still fail" in ends[0].end_reason
    # The limit is per run: the next prompt may be continued again.
    model.add("d", "e")
    h2 = AgentHarness(session=session, model=model, resources=None, max_stop_continues=1)
    h2.on("stop")(lambda s, event: Continue(reason="more") if event.continues == 0 else None)
    await h2.prompt("again")
    assert model.remaining == 0


async def test_a_nested_run_sends_subagent_stop_not_stop(session: Session) -> None:
    h = AgentHarness(session=session, model=FauxModel(["x", "y"]), resources=None, depth=1)
    names: list[str] = []
    h.on("stop")(lambda s, event: names.append(event.name))
    h.on("subagent_stop")(
        lambda s, event: (
            names.append(f"{event.name}:{event.depth}")
            or (Continue(reason="once more") if event.continues == 0 else None)
        )
    )
    await h.prompt("go")
    assert names == ["subagent_stop:1", "subagent_stop:1"]


# --- end_run ----------------------------------------------------------------------------------


async def test_end_run_ends_after_the_tool_batch_without_another_request(
    session: Session, tmp_path: Path
) -> None:
    call = FauxToolCall(name="bash", arguments={"command": "echo hi"})
    model = FauxModel([FauxReply(tool_calls=[call]), "never sent"])
    h = AgentHarness(
        session=session,
        model=model,
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        cwd=tmp_path,
        resources=None,
    )
    ends: list[AgentEndEvent] = []
    h.on("agent_end")(lambda s, event: ends.append(event))
    h.on("tool_result")(lambda s, event: s.end_run("enough for today"))

    await h.prompt("go")

    assert len(model.requests) == 1 and model.remaining == 1
    assert ends[0].end_reason == "enough for today"
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert results[0].text.strip() == "hi"


async def test_end_run_needs_a_running_prompt() -> None:
    h = AgentHarness(session=await MemorySessionRepo().create(), resources=None)
    with pytest.raises(HarnessStateError) as raised:
        h.end_run("no")
    assert raised.value.code == "invalid_state"


# --- session_start and session_end ------------------------------------------------------------


async def test_session_start_says_where_it_starts_and_adds_context(session: Session) -> None:
    model = FauxModel(["one", "two"])
    h = AgentHarness(session=session, model=model, resources=None)
    starts: list[str] = []

    @h.on(SessionStartEvent)
    def remember(sender: object, event: SessionStartEvent) -> AddContext:
        starts.append(event.source)
        return AddContext(text="Project notes: use uv.")

    await h.prompt("hi")
    await h.prompt("again")  # once per harness

    assert starts == ["startup"]
    assert texts(model, 0) == ["Project notes: use uv.", "hi"]  # reaches the first request
    assert texts(model, 1)[:3] == ["Project notes: use uv.", "hi", "one"]

    resumed = AgentHarness(session=session, model=FauxModel(["three"]), resources=None)
    resumed.on("session_start")(lambda s, event: starts.append(event.source))
    await resumed.prompt("back")
    assert session.path is not None
    fork = await JsonlSessionRepo(session.path.parent.parent).fork(session.path)
    forked = AgentHarness(session=fork, model=FauxModel(["four"]), resources=None)
    forked.on("session_start")(lambda s, event: starts.append(event.source))
    await forked.prompt("elsewhere")
    assert starts == ["startup", "resume", "fork"]


async def test_a_compaction_starts_the_session_again_with_its_context(session: Session) -> None:
    model = FauxModel([f"answer {i} " * 200 for i in range(3)])
    h = AgentHarness(
        session=session,
        model=model,
        resources=None,
        compaction=CompactionSettings(keep_recent_tokens=100),
        summarizer=ExtractiveSummarizer(),
    )
    starts: list[str] = []
    h.on("session_start")(
        lambda s, event: starts.append(event.source) or AddContext(text=event.source)
    )
    await h.prompt("first")
    await h.prompt("second")
    assert await h.compact() is not None
    await h.prompt("third")

    assert starts == ["startup", "compact"]
    assert texts(model, 2)[-2:] == ["compact", "third"]


async def test_session_end_follows_session_start_once(session: Session) -> None:
    ends: list[str] = []
    idle = AgentHarness(session=session, resources=None)
    idle.on(SessionEndEvent)(lambda s, event: ends.append(event.reason))
    await idle.shutdown()  # never started: no end
    h = AgentHarness(session=session, model=FauxModel(["ok"]), resources=None)
    h.on(SessionEndEvent)(lambda s, event: ends.append(event.reason))
    await h.prompt("hi")
    await h.shutdown(reason="prompt_input_exit")
    await h.shutdown()
    assert ends == ["prompt_input_exit"]


# --- notification -----------------------------------------------------------------------------


async def test_a_pending_approval_sends_a_notification(session: Session, tmp_path: Path) -> None:
    answered = asyncio.Event()

    async def person(request: PermissionRequest) -> Approve:
        await answered.wait()  # a person at a terminal, woken by the notification below
        return Approve()

    call = FauxToolCall(name="bash", arguments={"command": "echo hi"})
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[call]), "done"]),
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(approver=person, setting_sources=()),
        cwd=tmp_path,
        resources=None,
        notification_delay_s=0,
    )
    seen: list[NotificationEvent] = []

    @h.on(NotificationEvent)
    def desktop(sender: object, event: NotificationEvent) -> None:
        seen.append(event)
        answered.set()

    async with asyncio.timeout(10):
        await h.prompt("go")
    assert [(e.notification_type, e.session_id) for e in seen] == [
        ("permission_prompt", session.id)
    ]
    assert "bash" in seen[0].message


async def test_an_immediate_decision_sends_no_notification(
    session: Session, tmp_path: Path
) -> None:
    call = FauxToolCall(name="bash", arguments={"command": "echo hi"})
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[call]), "done"]),
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        cwd=tmp_path,
        resources=None,
        notification_delay_s=0,
    )
    seen: list[object] = []
    h.on("notification")(lambda s, event: seen.append(event))
    await h.prompt("go")
    assert seen == []


# --- Allow and Ask at tool_call, and where a patched call goes -------------------------------


async def run_one_bash(
    tmp_path: Path, command: str, hook: Any, **supervisor: Any
) -> tuple[ToolResultMessage, list[PermissionRequest]]:
    asked: list[PermissionRequest] = []

    async def approver(request: PermissionRequest) -> Deny:
        asked.append(request)
        return Deny(reason="asked, and said no")

    session = await MemorySessionRepo().create(str(tmp_path))
    call = FauxToolCall(name="bash", arguments={"command": command})
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[call]), "done"]),
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(approver=approver, setting_sources=(), **supervisor),
        cwd=tmp_path,
        resources=None,
    )
    h.on("tool_call")(hook)
    await h.prompt("go")
    [result] = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    return result, asked


async def test_allow_approves_what_no_deny_or_ask_rule_stops(tmp_path: Path) -> None:
    allowed, asked = await run_one_bash(tmp_path, "echo ok", lambda s, event: Allow(reason="safe"))
    assert not allowed.is_error and allowed.text.strip() == "ok" and asked == []

    denied, asked = await run_one_bash(
        tmp_path, "echo ok", lambda s, event: Allow(), rules={"deny": ["Bash(echo:*)"]}
    )
    assert denied.is_error and "denied by the rule" in denied.text and asked == []

    _, asked = await run_one_bash(
        tmp_path, "echo ok", lambda s, event: Allow(), rules={"ask": ["Bash(echo:*)"]}
    )
    assert [r.hook_decision for r in asked] == ["allow"]

    planned, asked = await run_one_bash(tmp_path, "echo ok", lambda s, event: Allow(), mode="plan")
    assert planned.is_error and "plan mode" in planned.text


async def test_ask_asks_whatever_the_mode_and_allow_rules_say(tmp_path: Path) -> None:
    result, asked = await run_one_bash(
        tmp_path,
        "echo ok",
        lambda s, event: Ask(reason="a human should look"),
        mode="bypass",
        rules={"allow": ["Bash(echo:*)"]},
    )
    assert result.is_error and result.text == "asked, and said no"
    assert [(r.hook_decision, r.hook_reason) for r in asked] == [("ask", "a human should look")]


async def test_a_patched_call_runs_when_the_hook_also_allows_it(tmp_path: Path) -> None:
    def quieter(sender: object, event: Any) -> PatchInput:
        return PatchInput(input={"command": event.input["command"] + " --quiet"})

    # Patched only: the default supervisor still has the last word, and nobody approves bash.
    result, asked = await run_one_bash(tmp_path, "echo run", quieter)
    assert result.is_error and [r.input["command"] for r in asked] == ["echo run --quiet"]

    def quieter_and_allowed(sender: object, event: Any) -> Allow:
        return Allow(input={"command": event.input["command"] + " --quiet"})

    result, asked = await run_one_bash(tmp_path, "echo run", quieter_and_allowed)
    assert not result.is_error and result.text.strip() == "run --quiet" and asked == []
    assert result.extra["effectiveInput"] == {"command": "echo run --quiet"}
