"""Each hook's result takes effect in the loop; every event fires, in the documented order."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    EVENT_CLASSES,
    AgentHarness,
    AgentStartPatch,
    CustomMessage,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    ReplaceMessages,
    ReplacePayload,
    Session,
    StreamOptionsPatch,
    ToolRun,
    UserMessage,
    tool,
)


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    return await JsonlSessionRepo(tmp_path).create(str(tmp_path))


@tool("echo", "echoes", {"type": "object", "properties": {"x": {"type": "string"}}})
async def echo(input: Mapping[str, Any], run: ToolRun) -> str:
    return f"echo {input.get('x')}"


async def test_before_agent_start_collects_messages_and_chains_the_system_prompt(
    session: Session,
) -> None:
    model = FauxModel(["ok", "ok2"])
    h = AgentHarness(session=session, model=model, system_prompt="base")

    def first(sender: object, event: Any) -> AgentStartPatch:
        return AgentStartPatch(
            messages=(CustomMessage(custom_type="memo", content="from first"),),
            system_prompt=event.system_prompt + " +first",
        )

    seen_by_second: list[str] = []

    def second(sender: object, event: Any) -> AgentStartPatch:
        seen_by_second.append(event.system_prompt)
        return AgentStartPatch(messages=(UserMessage(content="from second"),))

    h.connect("before_agent_start", first)
    h.connect("before_agent_start", second)
    await h.prompt("hi")
    request = model.requests[0]
    assert seen_by_second == ["base +first"]  # the system prompt chains
    assert request.system_prompt == "base +first"
    assert [getattr(m, "text", None) for m in request.messages] == [
        "hi",
        "from first",
        "from second",
    ]
    persisted = [e.message for e in session.entries() if isinstance(e, MessageEntry)]
    assert [m.role for m in persisted] == ["user", "custom", "user", "assistant"]
    h.connect("before_agent_start", lambda s, event: None)
    await h.prompt("again")
    assert model.requests[1].system_prompt == "base +first"  # the hook runs on every prompt


async def test_context_replaces_what_is_sent_without_touching_the_session(session: Session) -> None:
    model = FauxModel(["one", "two"])
    h = AgentHarness(session=session, model=model)
    await h.prompt("first question")

    def only_last(sender: object, event: Any) -> ReplaceMessages:
        return ReplaceMessages(messages=event.messages[-1:])

    h.connect("context", only_last)
    await h.prompt("second question")
    assert [m.text for m in model.requests[1].messages] == ["second question"]  # type: ignore[union-attr]
    assert len(session.build_context().messages) == 4


async def test_before_provider_request_patches_stream_options(session: Session) -> None:
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, model=model)
    h.connect(
        "before_provider_request",
        lambda s, event: StreamOptionsPatch(headers={"x-trace": "1"}, timeout_s=5.0),
    )
    h.connect(
        "before_provider_request",
        lambda s, event: StreamOptionsPatch(
            headers={"x-more": event.options.headers.get("x-trace", "missing")}
        ),
    )
    await h.prompt("x")
    options = model.requests[0].options
    assert options.timeout_s == 5.0
    assert dict(options.headers) == {"x-trace": "1", "x-more": "1"}


async def test_before_provider_payload_replaces_the_body(session: Session) -> None:
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, model=model)
    seen: list[Mapping[str, Any]] = []

    def rewrite(sender: object, event: Any) -> ReplacePayload:
        seen.append(event.payload)
        return ReplacePayload(payload={**event.payload, "system": "rewritten"})

    h.connect("before_provider_payload", rewrite)
    await h.prompt("x")
    assert seen[0]["system"] == h.system_prompt
    assert model.payloads[0]["system"] == "rewritten"


async def test_every_event_of_one_prompt_fires_in_the_documented_order(session: Session) -> None:
    model = FauxModel(
        [
            FauxReply(text="calling", tool_calls=[FauxToolCall(name="echo", arguments={"x": "1"})]),
            "done",
        ]
    )
    h = AgentHarness(session=session, model=model, tools=[echo])
    names: list[str] = []
    for name in EVENT_CLASSES:
        h.connect(name, lambda s, event: names.append(event.name))
    await h.prompt("go")
    request = [
        "context",
        "before_provider_request",
        "before_provider_payload",
        "after_provider_response",
    ]
    assert names == [
        "session_start", "user_prompt_submit",  # the harness's first prompt; every prompt
        "before_agent_start",
        "agent_start",
        "turn_start",
        "message_start", "message_end",
        *request,
        "message_start", "message_update", "message_update", "message_end",
        "tool_execution_start", "tool_call", "permission_request", "permission_decision",
        "tool_result", "tool_execution_end",
        "message_start", "message_end",
        "turn_end", "save_point",
        "turn_start",
        *request,
        "message_start", "message_update", "message_end",
        "turn_end", "save_point",
        "stop",  # the model ended the run
        "agent_end", "settled",
    ]  # fmt: skip


async def test_observer_payloads(session: Session) -> None:
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, model=model)
    seen: dict[str, Any] = {}
    for name in ("after_provider_response", "save_point", "settled", "queue_update"):
        h.connect(name, lambda s, event: seen.setdefault(event.name, event))
    await h.next_turn("later")
    await h.prompt("x")
    assert seen["after_provider_response"].status == 200
    assert seen["save_point"].had_pending_writes is False
    assert seen["settled"].next_turn_count == 0
    assert seen["queue_update"].next_turn == ("later",)


async def test_tool_execution_update_carries_the_tools_progress(session: Session) -> None:
    @tool("progress", "reports progress")
    async def progress(input: Mapping[str, Any], run: ToolRun) -> str:
        for step in (1, 2):
            await run.update({"step": step})
        return "done"

    model = FauxModel([FauxReply(tool_calls=[FauxToolCall(name="progress", id="p1")]), "ok"])
    h = AgentHarness(session=session, model=model, tools=[progress])
    updates: list[tuple[str, str, Any]] = []
    h.connect(
        "tool_execution_update",
        lambda s, event: updates.append((event.tool_call_id, event.tool_name, event.partial)),
    )
    await h.prompt("x")
    assert updates == [("p1", "progress", {"step": 1}), ("p1", "progress", {"step": 2})]
