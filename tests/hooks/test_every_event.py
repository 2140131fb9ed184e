"""Every event of the bus: observers reach their receivers through notify, hooks are refused."""

from __future__ import annotations

from typing import get_args

import pytest

from hooks import (
    EVENT_CLASSES,
    AbortEvent,
    AfterProviderResponseEvent,
    AgentEndEvent,
    AgentStartEvent,
    AssistantMessage,
    BeforeAgentStartEvent,
    BeforeProviderPayloadEvent,
    BeforeProviderRequestEvent,
    ContextEvent,
    Event,
    HandlerErrorEvent,
    HookEvent,
    LimitReachedEvent,
    McpServerErrorEvent,
    McpServerStartEvent,
    McpServerStopEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ModelFallbackEvent,
    ModelUpdateEvent,
    NotificationEvent,
    PermissionDecisionEvent,
    PermissionRequestEvent,
    QueueUpdateEvent,
    ResourcesUpdateEvent,
    RetryEvent,
    SavePointEvent,
    SessionBeforeCompactEvent,
    SessionBeforeForkEvent,
    SessionBeforeRewindEvent,
    SessionBeforeTreeEvent,
    SessionCompactEvent,
    SessionCreatedEvent,
    SessionDeletedEvent,
    SessionEndEvent,
    SessionForkEvent,
    SessionRewindEvent,
    SessionStartEvent,
    SessionTreeEvent,
    SettledEvent,
    StopEvent,
    StreamOptions,
    SubagentStopEvent,
    SystemMessageEvent,
    TextContent,
    ThinkingLevelUpdateEvent,
    ToolCallEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultEvent,
    ToolResultMessage,
    ToolsUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessage,
    UserPromptSubmitEvent,
    connect,
    notify,
)

REPLY = AssistantMessage(content=[TextContent(text="hi")])
RESULT = ToolResultMessage(tool_call_id="t1", tool_name="ls")

SAMPLES: tuple[Event, ...] = (
    BeforeAgentStartEvent(prompt=[UserMessage(content="hi")], system_prompt="sys"),
    AgentStartEvent(),
    TurnStartEvent(turn_index=0),
    MessageStartEvent(message=REPLY),
    MessageEndEvent(message=REPLY, entry_id="e1"),
    ContextEvent(messages=[UserMessage(content="hi")], turn_index=0),
    BeforeProviderRequestEvent(
        provider="faux", model_id="m", session_id="s1", options=StreamOptions()
    ),
    BeforeProviderPayloadEvent(provider="faux", model_id="m", payload={"model": "m"}),
    AfterProviderResponseEvent(status=200, headers={"request-id": "r1"}),
    MessageUpdateEvent(message=REPLY, kind="text", content_index=0, delta="hi"),
    ToolExecutionStartEvent(tool_call_id="t1", tool_name="ls", input={}),
    ToolCallEvent(tool_call_id="t1", tool_name="ls", input={}, turn_index=0),
    PermissionRequestEvent(
        tool_call_id="t1",
        tool_name="ls",
        input={},
        operation_key="ls(.)",
        cwd="/work",
        leaves_cwd=False,
        session_id="s1",
        depth=0,
    ),
    PermissionDecisionEvent(
        tool_call_id="t1", tool_name="ls", operation_key="ls(.)", decision="approve", reason=None
    ),
    ToolExecutionUpdateEvent(tool_call_id="t1", tool_name="ls", partial={"lines": 1}),
    ToolResultEvent(
        tool_call_id="t1",
        tool_name="ls",
        input={},
        content=[],
        details=None,
        is_error=False,
        turn_index=0,
    ),
    ToolExecutionEndEvent(tool_call_id="t1", tool_name="ls", result=RESULT, is_error=False),
    TurnEndEvent(turn_index=0, message=REPLY, tool_results=[RESULT]),
    SavePointEvent(had_pending_writes=True),
    QueueUpdateEvent(steer=["a"], follow_up=[], next_turn=["b"]),
    AgentEndEvent(messages=[REPLY]),
    SettledEvent(next_turn_count=1),
    SessionBeforeCompactEvent(
        session_id="s1",
        leaf_id="e9",
        first_kept_entry_id="e5",
        tokens_before=1000,
        custom_instructions=None,
    ),
    SessionCompactEvent(session_id="s1", entry_id="e10", from_hook=False),
    SessionBeforeTreeEvent(
        session_id="s1",
        target_id="e3",
        old_leaf_id="e9",
        summarize=True,
        custom_instructions=None,
        label=None,
    ),
    SessionTreeEvent(
        session_id="s1",
        old_leaf_id="e9",
        new_leaf_id="e3",
        summary_entry_id=None,
        from_hook=False,
    ),
    SessionBeforeForkEvent(source_id="s1", entry_id="e3", position=None, scope="branch"),
    SessionForkEvent(source_id="s1", session_id="s2", path=None),
    SessionBeforeRewindEvent(session_id="s1", target_id="e3", paths=["a.txt"], conversation=False),
    SessionRewindEvent(
        session_id="s1",
        target_id="e3",
        entry_id="e11",
        restored=["a.txt"],
        removed=[],
        skipped=[],
    ),
    SessionCreatedEvent(session_id="s2", path="/tmp/s2.jsonl"),
    SessionDeletedEvent(session_id="s2", path=None),
    ModelUpdateEvent(
        provider="anthropic",
        model_id="claude",
        previous_provider=None,
        previous_model_id=None,
        source="set",
    ),
    ThinkingLevelUpdateEvent(level="high", previous_level="off", source="restore"),
    ToolsUpdateEvent(
        tool_names=["bash", "read"],
        previous_tool_names=["read"],
        active_tool_names=["bash"],
        previous_active_tool_names=[],
        source="set",
    ),
    ResourcesUpdateEvent(source="refresh", skills=["review"], added=["review"]),
    McpServerStartEvent(server="docs", transport="stdio", tool_names=["mcp__docs__search"]),
    McpServerErrorEvent(server="docs", phase="call", error="timed out", restarts_left=2),
    McpServerStopEvent(server="docs", reason="shutdown"),
    AbortEvent(cleared_steer=["stop"], cleared_follow_up=[]),
    RetryEvent(
        attempt=2, max_attempts=3, delay_s=1.5, error_message="overloaded", error_type="provider"
    ),
    ModelFallbackEvent(
        provider="anthropic",
        model_id="claude-sonnet-4-5",
        fallback_provider="openai",
        fallback_model_id="gpt-4.1",
        error_message="overloaded",
        error_type="overloaded_error",
    ),
    LimitReachedEvent(stop_reason="max_turns", limit=3, used=3, session_id="s1", depth=0),
    HandlerErrorEvent(event_name="turn_start", receiver="m.f", error=RuntimeError("x")),
    SessionStartEvent(session_id="s1", source="startup"),
    UserPromptSubmitEvent(session_id="s1", message=UserMessage(content="hi")),
    StopEvent(session_id="s1", message=REPLY, stop_hook_active=False, continues=0),
    SubagentStopEvent(
        session_id="s2",
        message=REPLY,
        stop_hook_active=True,
        continues=1,
        depth=1,
        parent_session_id="s1",
        agent_type="reviewer",
    ),
    SessionEndEvent(session_id="s1", reason="other"),
    NotificationEvent(session_id="s1", message="waiting", notification_type="idle_prompt"),
    SystemMessageEvent(message="formatted", hook="command hook 'fmt'", event_name="tool_result"),
)
HOOKS = tuple(e for e in SAMPLES if isinstance(e, get_args(HookEvent)))
OBSERVERS = tuple(e for e in SAMPLES if not isinstance(e, get_args(HookEvent)))


def test_there_is_one_sample_per_event_class_in_signal_order() -> None:
    assert [type(e) for e in SAMPLES] == list(EVENT_CLASSES.values())


@pytest.mark.parametrize("event", OBSERVERS, ids=lambda e: e.name)
async def test_each_observer_event_reaches_its_receivers(event: Event) -> None:
    sender = object()
    seen: list[tuple[object, object]] = []
    disconnect = connect(event.name, lambda s, event: seen.append((s, event)), sender=sender)
    try:
        await notify(sender, event)  # type: ignore[arg-type]
        await notify(object(), event)  # type: ignore[arg-type]
    finally:
        disconnect()

    assert seen == [(sender, event)]


@pytest.mark.parametrize("event", HOOKS, ids=lambda e: e.name)
async def test_notify_refuses_each_hook_event(event: Event) -> None:
    called: list[object] = []
    disconnect = connect(event.name, lambda sender, event: called.append(event))
    try:
        with pytest.raises(TypeError, match="emit_"):
            await notify(object(), event)  # type: ignore[arg-type]
    finally:
        disconnect()

    assert called == []
