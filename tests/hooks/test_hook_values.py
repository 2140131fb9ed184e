"""Events and results: names, tuples, immutability, and the UNSET sentinel."""

from __future__ import annotations

import attrs
import pytest

from hooks import (
    EVENT_CLASSES,
    UNSET,
    AbortEvent,
    AgentEndEvent,
    AssistantMessage,
    BeforeAgentStartEvent,
    ContextEvent,
    PatchResult,
    QueueUpdateEvent,
    TextContent,
    ToolResultEvent,
    ToolResultMessage,
    ToolsUpdateEvent,
    TurnEndEvent,
    UserMessage,
    signal_for,
)


def test_every_event_class_names_its_own_signal() -> None:
    for name, cls in EVENT_CLASSES.items():
        assert cls.name == name
        assert signal_for(cls).name == name
        assert signal_for(name).__doc__  # each signal carries a doc


def test_sequences_become_tuples() -> None:
    reply = AssistantMessage(content=[TextContent(text="hi")])
    end = AgentEndEvent(messages=[UserMessage(content="hello"), reply])
    turn = TurnEndEvent(
        turn_index=0,
        message=reply,
        tool_results=[ToolResultMessage(tool_call_id="t1", tool_name="ls")],
    )
    result = ToolResultEvent(
        tool_call_id="t1",
        tool_name="ls",
        input={},
        content=[TextContent(text="a")],
        details=None,
        is_error=False,
        turn_index=0,
    )

    assert type(end.messages) is tuple
    assert type(turn.tool_results) is tuple
    assert type(result.content) is tuple


def test_sequences_of_the_newer_events_become_tuples() -> None:
    hi = UserMessage(content="hi")
    queue = QueueUpdateEvent(steer=["a"], follow_up=iter(["b"]), next_turn=[])
    tools = ToolsUpdateEvent(
        tool_names=["bash"],
        previous_tool_names=[],
        active_tool_names=["bash"],
        previous_active_tool_names=[],
        source="set",
    )
    values = [
        BeforeAgentStartEvent(prompt=[hi], system_prompt="").prompt,
        ContextEvent(messages=[hi], turn_index=0).messages,
        queue.steer,
        queue.follow_up,
        queue.next_turn,
        tools.tool_names,
        tools.previous_tool_names,
        tools.active_tool_names,
        tools.previous_active_tool_names,
        AbortEvent(cleared_steer=["x"], cleared_follow_up=[]).cleared_steer,
    ]

    assert all(type(v) is tuple for v in values)
    assert queue.follow_up == ("b",)


def test_a_lone_string_is_not_taken_for_a_list_of_strings() -> None:
    with pytest.raises(TypeError):
        AbortEvent(cleared_steer="stop", cleared_follow_up=())


def test_events_are_frozen_and_keyword_only() -> None:
    end = AgentEndEvent(messages=())
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        end.messages = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        AgentEndEvent(())  # type: ignore[call-arg]


def test_patch_result_fields_default_to_unset_and_none_is_a_value() -> None:
    empty = PatchResult()
    patch = PatchResult(content=[TextContent(text="x")], details=None)

    assert (empty.content, empty.details, empty.is_error, empty.terminate) == (UNSET,) * 4
    assert patch.content == (TextContent(text="x"),)
    assert patch.details is None
    assert repr(UNSET) == "UNSET"
