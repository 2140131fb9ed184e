"""Context building: compaction, branch summaries, custom messages, tool-pair normalisation."""

from __future__ import annotations

from collections.abc import Callable

from pi_sessions import PiSession

from hooks import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from repos import NO_RESULT_TEXT, MemorySessionRepo, normalize_messages, open_session


def call(cid: str, *, stop: str = "toolUse", text: str = "") -> AssistantMessage:
    content = [TextContent(text=text)] if text else []
    return AssistantMessage(content=[*content, ToolCall(id=cid, name="read")], stop_reason=stop)  # type: ignore[arg-type]


def result(cid: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=cid, tool_name="read", content=[TextContent(text="r")])


def assert_valid(messages: tuple[Message, ...]) -> None:
    """Every result right after its call's message, every call answered, nothing empty."""
    pending: list[str] = []
    for m in messages:
        if isinstance(m, ToolResultMessage):
            assert pending and pending[0] == m.tool_call_id, f"misplaced result {m.tool_call_id}"
            pending.pop(0)
            continue
        assert not pending, f"calls without results: {pending}"
        if isinstance(m, AssistantMessage):
            assert m.content, "empty assistant message"
            assert all(b.text.strip() for b in m.content if isinstance(b, TextContent)), (
                "empty text block"
            )
            pending = [c.id for c in m.tool_calls]
    assert not pending


def test_orphan_result_is_dropped_and_missing_result_synthesised() -> None:
    out = normalize_messages([UserMessage(content="u"), result("gone"), call("c1")])
    assert [type(m).__name__ for m in out] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    synthetic = out[2]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.is_error and synthetic.tool_call_id == "c1"
    assert synthetic.content == (TextContent(text=NO_RESULT_TEXT),)
    assert_valid(out)


def test_results_are_hoisted_after_their_call_in_call_order() -> None:
    two = AssistantMessage(
        content=[ToolCall(id="a", name="read"), ToolCall(id="b", name="read")],
        stop_reason="toolUse",
    )
    note = CustomMessage(custom_type="n", content="between")
    out = normalize_messages([two, note, result("b"), result("a")])
    assert [getattr(m, "tool_call_id", None) for m in out] == [None, "a", "b", None]
    assert out[3] == note
    assert_valid(out)


def test_length_stop_keeps_text_but_not_the_unanswered_half_call() -> None:
    out = normalize_messages(
        [UserMessage(content="u"), call("half", stop="length", text="partial")]
    )
    assistant = out[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls == ()
    assert assistant.text == "partial"
    assert len(out) == 2


def test_empty_text_blocks_and_empty_assistant_messages_are_not_sent() -> None:
    empty = AssistantMessage(content=[TextContent(text="  ")], stop_reason="aborted")
    no_content = AssistantMessage(content=[], stop_reason="aborted")
    mixed = AssistantMessage(content=[TextContent(text=""), TextContent(text="kept")])
    blank_thinking = AssistantMessage(content=[ThinkingContent(thinking=""), TextContent(text="t")])
    out = normalize_messages([UserMessage(content="u"), empty, no_content, mixed, blank_thinking])
    assert len(out) == 3
    assert out[1] == AssistantMessage(content=[TextContent(text="kept")], timestamp=mixed.timestamp)
    assert out[2].content == (TextContent(text="t"),)  # type: ignore[union-attr]


def test_pi_context_after_second_compaction(pi_file: Callable[..., PiSession]) -> None:
    record = pi_file("before-compaction")
    assert record.path is not None
    lines = record.lines
    second_line = record.compaction_lines[1]
    second = lines[second_line]
    assert second["firstKeptEntryIndex"] == record.first_kept_lines[1] > record.compaction_lines[0]
    kept_user = lines[second["firstKeptEntryIndex"]]
    assert kept_user["message"]["role"] == "user"

    with open_session(record.path) as session:
        context = session.build_context()
    first = context.messages[0]
    assert isinstance(first, CompactionSummaryMessage)
    assert first.summary == second["summary"]
    assert first.tokens_before == second["tokensBefore"]
    assert sum(isinstance(m, CompactionSummaryMessage) for m in context.messages) == 1
    assert isinstance(context.messages[1], UserMessage)
    assert context.messages[1].timestamp == kept_user["message"]["timestamp"]
    assert_valid(context.messages)
    # Every call that never got a result in the kept window was answered by a synthetic error.
    kept_calls = {
        b["id"]
        for o in lines[second["firstKeptEntryIndex"] :]
        if o["type"] == "message" and o["message"]["role"] == "assistant"
        for b in o["message"]["content"]
        if b["type"] == "toolCall"
    }
    dangling = set(record.dangling_call_ids) & kept_calls
    assert dangling
    synthetic = [
        m
        for m in context.messages
        if isinstance(m, ToolResultMessage) and m.tool_call_id in dangling
    ]
    assert {m.tool_call_id for m in synthetic} == dangling and all(m.is_error for m in synthetic)
    # Everything after the second compaction is in the context, in order.
    after_msgs = [o["message"] for o in lines[second_line + 1 :] if o["type"] == "message"]
    last = context.messages[-1]
    assert last.timestamp == after_msgs[-1]["timestamp"]  # type: ignore[union-attr]
    user_ts = [m["timestamp"] for m in after_msgs if m["role"] == "user"]
    assert [m.timestamp for m in context.messages if isinstance(m, UserMessage)][
        -len(user_ts) :
    ] == (user_ts)


def test_large_session_context_is_valid_to_send(pi_file: Callable[..., PiSession]) -> None:
    record = pi_file("large-session")
    assert record.path is not None and record.empty_assistant_lines
    with open_session(record.path) as session:
        context = session.build_context()
    assert_valid(context.messages)
    assert context.thinking_level == record.final_thinking_level
    assert context.model is not None
    assert (context.model.provider, context.model.model_id) == record.final_model


async def test_branch_summary_custom_message_and_state_enter_context() -> None:
    repo = MemorySessionRepo()
    s = await repo.create("/w")
    root = s.append_message(UserMessage(content="start"))
    s.append_message(AssistantMessage(content=[TextContent(text="a")], provider="p", model="m1"))
    s.move_to(root.id)
    s.append_branch_summary(root.id, "explored X")
    s.append_custom_message("inject", "remember Y")
    s.append_custom("state", {"x": 1})
    s.append_thinking_level_change("high")
    s.append_model_change("anthropic", "claude-opus-4-5")
    s.append_active_tools_change(["read"])
    ctx = s.build_context()
    kinds = [type(m) for m in ctx.messages]
    assert kinds == [UserMessage, BranchSummaryMessage, CustomMessage]
    assert ctx.thinking_level == "high"
    assert ctx.model is not None and ctx.model.model_id == "claude-opus-4-5"
    assert ctx.active_tool_names == ("read",)


def test_empty_user_messages_and_blank_user_blocks_are_not_sent() -> None:
    out = normalize_messages(
        [
            UserMessage(content="  "),
            UserMessage(content=[TextContent(text="")]),
            UserMessage(content=[TextContent(text=" "), TextContent(text="kept")]),
        ]
    )
    assert len(out) == 1
    assert isinstance(out[0], UserMessage) and out[0].content == (TextContent(text="kept"),)
