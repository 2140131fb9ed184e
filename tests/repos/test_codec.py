"""Lossless JSON for every entry type, unknown types and fields, and pi-shaped lines (generated;
the real files: tests/corpus)."""

from __future__ import annotations

import orjson
import pi_sessions
import pytest

from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    Usage,
    UserMessage,
)
from repos import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    decode_entry,
    encode_entry,
)

BASE = {"id": "a1b2c3d4", "parent_id": "00ff00ff", "timestamp": "2025-12-08T22:41:05.306Z"}

ENTRIES = [
    MessageEntry(**BASE, message=UserMessage(content="hi", timestamp=1)),
    MessageEntry(
        **BASE,
        message=UserMessage(
            content=(TextContent(text="look"), ImageContent(data="AAAA", mime_type="image/png")),
            timestamp=2,
        ),
    ),
    MessageEntry(
        **BASE,
        message=AssistantMessage(
            content=(
                ThinkingContent(thinking="hmm", thinking_signature="sig=="),
                TextContent(text="ok"),
                ToolCall(id="toolu_1", name="read", arguments={"path": "a.txt"}),
            ),
            api="anthropic-messages",
            provider="anthropic",
            model="claude-sonnet-4-5",
            usage=Usage(input=3, output=4, cache_read=5, cache_write=6, total_tokens=18),
            stop_reason="toolUse",
            timestamp=3,
        ),
    ),
    MessageEntry(
        **BASE,
        message=AssistantMessage(stop_reason="error", error_message="boom", timestamp=4),
    ),
    MessageEntry(
        **BASE,
        message=ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="read",
            content=(TextContent(text="data"),),
            details={"lines": 1},
            is_error=False,
            timestamp=5,
        ),
    ),
    MessageEntry(
        **BASE,
        message=BashExecutionMessage(command="ls", output="a\n", exit_code=0, timestamp=6),
    ),
    MessageEntry(
        **BASE,
        message=CustomMessage(custom_type="note", content="x", display=False, details=[1]),
    ),
    ModelChangeEntry(**BASE, provider="anthropic", model_id="claude-opus-4-5"),
    ThinkingLevelChangeEntry(**BASE, thinking_level="high"),
    ActiveToolsChangeEntry(**BASE, active_tool_names=("read", "bash")),
    ActiveToolsChangeEntry(**BASE, active_tool_names=()),
    CompactionEntry(
        **BASE,
        summary="## Goal",
        first_kept_entry_id="0000aaaa",
        tokens_before=1234,
        details={"readFiles": ["a"], "modifiedFiles": []},
        from_hook=True,
    ),
    BranchSummaryEntry(**BASE, from_id="0000bbbb", summary="tried X"),
    CustomEntry(**BASE, custom_type="state", data={"k": [1, 2]}),
    CustomMessageEntry(**BASE, custom_type="inject", content="text", display=True),
    LabelEntry(**BASE, target_id="0000aaaa", label="checkpoint"),
    LabelEntry(**BASE, target_id="0000aaaa", label=None),
    SessionInfoEntry(**BASE, name="refactor"),
    LeafEntry(**BASE, target_id="0000aaaa"),
    LeafEntry(**BASE, target_id=None),
]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: type(e).__name__)
def test_every_entry_type_round_trips_through_json(entry: object) -> None:
    line = orjson.dumps(encode_entry(entry))  # type: ignore[arg-type]
    again = decode_entry(orjson.loads(line))
    assert again == entry
    assert orjson.dumps(encode_entry(again)) == line


def test_keys_on_disk_are_camel_case() -> None:
    obj = encode_entry(ENTRIES[2])
    assert obj["parentId"] == "00ff00ff"
    assert obj["message"]["stopReason"] == "toolUse"
    assert obj["message"]["usage"]["cacheRead"] == 5
    assert obj["message"]["content"][0]["thinkingSignature"] == "sig=="
    assert obj["message"]["content"][2] == {
        "type": "toolCall",
        "id": "toolu_1",
        "name": "read",
        "arguments": {"path": "a.txt"},
    }


def test_unknown_entry_type_is_kept_whole() -> None:
    raw = {"type": "lane", "id": "x1", "parentId": None, "timestamp": "t", "seq": 7, "w": {"a": 1}}
    entry = decode_entry(raw)
    assert isinstance(entry, UnknownEntry)
    assert entry.type == "lane"
    assert encode_entry(entry) == raw


def test_unknown_fields_blocks_and_roles_are_written_back() -> None:
    raw = {
        "type": "message",
        "id": "x1",
        "parentId": None,
        "timestamp": "t",
        "futureField": {"nested": True},
        "message": {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c", "name": "n", "arguments": {}, "partialJson": "{"},
                {"type": "server_tool_use", "id": "s", "input": {"q": 1}},
            ],
            "api": "a",
            "provider": "p",
            "model": "m",
            "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {}},
            "stopReason": "stop",
            "timestamp": 9,
            "responseId": "r",
        },
    }
    entry = decode_entry(raw)
    assert isinstance(entry, MessageEntry)
    assert isinstance(entry.message, AssistantMessage)
    assert isinstance(entry.message.content[1], UnknownContent)
    out = encode_entry(entry)
    assert out["futureField"] == {"nested": True}
    assert out["message"]["responseId"] == "r"
    assert out["message"]["content"][0]["partialJson"] == "{"
    assert out["message"]["content"][1] == raw["message"]["content"][1]  # type: ignore[index]

    unknown_role = decode_entry({**raw, "message": {"role": "developer", "content": "x"}})
    assert isinstance(unknown_role, MessageEntry)
    assert isinstance(unknown_role.message, UnknownMessage)
    assert encode_entry(unknown_role)["message"] == {"role": "developer", "content": "x"}


def test_optional_field_present_as_null_stays_null() -> None:
    raw = {
        "type": "branch_summary",
        "id": "x1",
        "parentId": "p",
        "timestamp": "t",
        "fromId": "f",
        "summary": "s",
        "details": None,
    }
    assert encode_entry(decode_entry(raw)) == raw


@pytest.mark.parametrize("kind", sorted(pi_sessions.KINDS))
def test_every_generated_pi_line_round_trips(kind: str) -> None:
    record = pi_sessions.generate(kind)
    lines = record.data.splitlines()[1:]
    assert len(lines) == len(record.entries) > 50
    for index, line in enumerate(lines, start=1):
        obj = orjson.loads(line)
        entry = decode_entry(obj, entry_id="e", parent_id=None, line_id=lambda i: f"line{i}")
        out = encode_entry(entry)
        assert out.pop("id") == "e" and out.pop("parentId") is None
        obj.pop("id", None), obj.pop("parentId", None)
        if obj["type"] == "compaction" and "firstKeptEntryIndex" in obj:
            assert out["firstKeptEntryId"] == f"line{obj.pop('firstKeptEntryIndex')}"
            obj["firstKeptEntryId"] = out["firstKeptEntryId"]
        if obj["type"] == "message" and obj["message"]["role"] == "hookMessage":
            # v2's hookMessage is written back as v3's custom role, nothing else changes.
            assert out["message"]["role"] == "custom"
            obj["message"]["role"] = "custom"
        assert out == obj, f"{kind} line {index} changed"


def test_decoded_values_are_read_only_in_their_unusual_shapes_too() -> None:
    """The shapes pi tolerates (a tool result's string content, an image block in a reply, a
    usage that is not an object) keep what they hold read-only, and still write back as read."""
    base = {"type": "message", "id": "x1", "parentId": None, "timestamp": "t"}
    result_raw = {
        **base,
        "message": {"role": "toolResult", "toolCallId": "c", "toolName": "n", "content": "out"},
    }
    result = decode_entry(result_raw)
    assert isinstance(result, MessageEntry) and isinstance(result.message, ToolResultMessage)
    assert result.message.content == (TextContent(text="out"),)
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png", "tags": ["a"]}
    reply_raw = {
        **base,
        "message": {"role": "assistant", "content": [image], "usage": [1, 2], "timestamp": 3},
    }
    reply = decode_entry(reply_raw)
    assert isinstance(reply, MessageEntry) and isinstance(reply.message, AssistantMessage)
    block = reply.message.content[0]
    assert isinstance(block, UnknownContent)
    for container, mutate in [
        (result.message.extra, lambda c: c.__setitem__("content", "changed")),
        (block.raw, lambda c: c.__setitem__("data", "changed")),
        (block.raw["tags"], lambda c: c.append("b")),
        (reply.message.usage.extra, lambda c: c.__setitem__("usage", None)),
        (reply.message.usage.extra["usage"], lambda c: c.append(3)),
    ]:
        with pytest.raises(TypeError, match="read-only"):
            mutate(container)
    assert encode_entry(result)["message"]["content"] == "out"
    assert encode_entry(reply)["message"]["content"] == [image]
