"""``pause_turn`` continued inside AnthropicModel, on the corpus recording
``anthropic/stream-pause-turn-web-search.sse`` (continued with ``stream-text.sse``).

The same case runs on a hand-written stream in ``tests/e2e/test_anthropic_pause_turn.py``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from replay_server import ReplayServer, SseReply, fixture_bytes

from harness._providers.base import (
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
)
from hooks import StreamOptions, TextContent, ThinkingContent, UnknownContent, UserMessage

if TYPE_CHECKING:
    # Imported where used: the SDK takes seconds to import, and ``tests/test_corpus_skip.py``
    # collects this module (to see it skipped) in runs of its own.
    import anthropic

    from harness._providers.anthropic import AnthropicModel

pytestmark = pytest.mark.corpus

MODEL_ID = "claude-test-model"


PAUSED = "stream-pause-turn-web-search.sse"


PROMPT = "Run the 15 searches"


def _request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("options", StreamOptions(cache_retention="none"))
    return ModelRequest(
        system_prompt="You search.", messages=(UserMessage(content=PROMPT),), **kwargs
    )


async def _collect(
    model: AnthropicModel, request: ModelRequest, payload: dict[str, Any] | None = None
) -> list[StreamEvent]:
    events = [event async for event in model.stream(request, payload=payload)]
    # One reply to the loop: Response, Start, Delta*, then one Done or Error, however many
    # requests were sent.
    assert isinstance(events[0], StreamResponse)
    assert isinstance(events[1], StreamStart)
    assert all(isinstance(e, StreamDelta) for e in events[2:-1])
    assert isinstance(events[-1], StreamDone | StreamError)
    return events


def _payloads(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(b"data:") :]) for line in body.splitlines() if line.startswith(b"data:")
    ]


def _fixture_blocks(name: str) -> tuple[list[dict[str, Any]], int]:
    """The fixture's content blocks as the API means them (deltas folded into their start
    block, empty text blocks left out, as the API wants them back), and how many blocks started.
    """
    blocks: dict[int, dict[str, Any]] = {}
    json_parts: dict[int, list[str]] = {}
    for payload in _payloads(fixture_bytes(name)):
        if payload["type"] == "content_block_start":
            blocks[payload["index"]] = dict(payload["content_block"])
        elif payload["type"] == "content_block_delta":
            block, delta = blocks[payload["index"]], payload["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] += delta["signature"]
            elif delta["type"] == "input_json_delta":
                json_parts.setdefault(payload["index"], []).append(delta["partial_json"])
    for index, parts in json_parts.items():
        blocks[index]["input"] = json.loads("".join(parts))
    kept = [
        blocks[i]
        for i in sorted(blocks)
        if not (blocks[i]["type"] == "text" and not blocks[i]["text"])
    ]
    return kept, len(blocks)


async def test_pause_turn_is_continued_and_merged(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn, started = _fixture_blocks(PAUSED)
    assert started == len(expected_turn) == 25  # thinking, 3 texts, 11 uses, 10 results
    replay_server.enqueue(SseReply.fixture(PAUSED), SseReply.fixture("stream-text.sse"))
    from harness._providers.anthropic import AnthropicModel

    model = AnthropicModel(MODEL_ID, client=anthropic_client)

    events = await _collect(model, _request())

    first, second = (r.body for r in replay_server.requests)
    user_turn = {"role": "user", "content": PROMPT}
    assert first["messages"] == [user_turn]
    # The follow-up is the same request plus the paused content as an assistant turn, server
    # tool blocks exactly as received (incl. the last server_tool_use still waiting for its
    # result) and the thinking block with its signature.
    assert second == {
        **first,
        "messages": [user_turn, {"role": "assistant", "content": expected_turn}],
    }
    sent = second["messages"][-1]["content"]
    assert [b["type"] for b in sent].count("server_tool_use") == 11
    assert [b["type"] for b in sent].count("web_search_tool_result") == 10
    assert sent[-1]["type"] == "server_tool_use"
    assert sent[0]["type"] == "thinking" and sent[0]["signature"].startswith("EuwJCm4I")

    # One message for the loop: both parts, the continuation's text last.
    (done,) = [e for e in events if isinstance(e, StreamDone)]
    message = done.message
    assert message.stop_reason == "stop"
    assert "pauseTurn" not in message.extra
    assert len(message.content) == len(expected_turn) + 1
    assert message.content[-1] == TextContent(text="Hello")
    assert isinstance(message.content[0], ThinkingContent)
    raw_blocks = [b.raw for b in message.content if isinstance(b, UnknownContent)]
    assert raw_blocks == [b for b in expected_turn if b["type"] not in ("thinking", "text")]
    # Usage sums both responses (paused: input 404500, output 943; continuation: 10, 4).
    assert (message.usage.input, message.usage.output) == (404500 + 10, 943 + 4)
    assert message.usage.total_tokens == 404500 + 10 + 943 + 4

    # Deltas keep flowing; the continuation's block index counts on after the 25 started ones.
    deltas = [e for e in events if isinstance(e, StreamDelta)]
    last = deltas[-1]
    assert (last.kind, last.content_index, last.delta) == ("text", started, "Hello")
    assert last.partial.content[started] == TextContent(text="Hello")
    assert len(last.partial.content) == started + 1
    assert [e for e in events if isinstance(e, StreamResponse | StreamStart)] == events[:2]
