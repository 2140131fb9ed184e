"""``pause_turn`` continued inside AnthropicModel, through the real SDK and the replay server.

The paused stream is the recorded ``stream-pause-turn-web-search.sse`` (web search server tool,
stop_reason ``pause_turn``); the continuation is ``stream-text.sse``. The expected resent blocks
are rebuilt here from the fixture's raw SSE payloads, independently of the provider's code.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
from replay_server import JsonReply, ReplayServer, SseReply, fixture_bytes

from harness._providers.anthropic import AnthropicModel
from harness._providers.base import (
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
)
from hooks import (
    AssistantMessage,
    StreamOptions,
    TextContent,
    ThinkingContent,
    UnknownContent,
    UserMessage,
)

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


async def test_pause_turn_continuations_are_capped(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn, _ = _fixture_blocks(PAUSED)
    replay_server.enqueue(*(SseReply.fixture(PAUSED) for _ in range(3)))
    model = AnthropicModel(MODEL_ID, client=anthropic_client, max_pause_continuations=2)

    events = await _collect(model, _request())

    requests = [r.body for r in replay_server.requests]
    assert len(requests) == 3  # the first request and 2 continuations, then it stops
    assert len(requests[1]["messages"]) == len(requests[2]["messages"]) == 2
    # Each continuation resends everything so far in one assistant turn.
    assert requests[1]["messages"][1]["content"] == expected_turn
    assert requests[2]["messages"][1]["content"] == expected_turn * 2
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.stop_reason == "stop"
    assert done.message.extra["pauseTurn"] is True
    assert len(done.message.content) == 3 * len(expected_turn)
    assert done.message.usage.input == 3 * 404500
    assert done.message.usage.output == 3 * 943


async def test_failed_continuation_reports_what_arrived(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn, _ = _fixture_blocks(PAUSED)
    replay_server.enqueue(
        SseReply.fixture(PAUSED), JsonReply.error(529, "overloaded_error", "Overloaded")
    )
    model = AnthropicModel(MODEL_ID, client=anthropic_client)

    events = await _collect(model, _request())

    assert len(replay_server.requests) == 2
    responses = [e for e in events if isinstance(e, StreamResponse)]
    assert [r.status for r in responses] == [200]  # the first response only
    failed = events[-1]
    assert isinstance(failed, StreamError)
    assert failed.error.status == 529
    assert failed.error.error_type == "overloaded_error"
    assert failed.error.retryable is True
    assert failed.message.stop_reason == "error"
    assert len(failed.message.content) == len(expected_turn)
    assert failed.message.usage.input == 404500


async def test_replacement_payload_ending_with_assistant_prefill_is_extended(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn, _ = _fixture_blocks(PAUSED)
    replay_server.enqueue(SseReply.fixture(PAUSED), SseReply.fixture("stream-text.sse"))
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    request = _request()
    payload = model.build_payload(request)
    payload["messages"].append({"role": "assistant", "content": "Sure."})

    events = await _collect(model, request, payload)

    first, second = (r.body for r in replay_server.requests)
    assert first == {**payload, "stream": True}
    assert "stream" not in payload  # the caller's payload is never changed
    user_turn = {"role": "user", "content": PROMPT}
    # The API continues the prefill; the continuation extends that assistant turn.
    prefill_and_paused = [{"type": "text", "text": "Sure."}, *expected_turn]
    assert second["messages"] == [user_turn, {"role": "assistant", "content": prefill_and_paused}]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.content[-1] == TextContent(text="Hello")


async def test_dangling_server_tool_use_is_dropped_from_history_only(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    # A reply returned at the cap ends with a server_tool_use that never got its result. As the
    # last message (a turn being continued) it goes back whole; with a message after it, the
    # unanswered use is left out and the answered ones stay.
    expected_turn, _ = _fixture_blocks(PAUSED)
    replay_server.enqueue(SseReply.fixture(PAUSED), *(SseReply.fixture("stream-text.sse"),) * 2)
    model = AnthropicModel(MODEL_ID, client=anthropic_client, max_pause_continuations=0)
    paused = _done(await _collect(model, _request()))
    assert paused.extra["pauseTurn"] is True

    prompt = UserMessage(content=PROMPT)
    last = ModelRequest(
        system_prompt="You search.",
        messages=(prompt, paused),
        options=StreamOptions(cache_retention="none"),
    )
    await _collect(model, last)
    assert replay_server.requests[1].body["messages"][-1]["content"] == expected_turn

    more = UserMessage(content="go on")
    history = ModelRequest(
        system_prompt="You search.",
        messages=(prompt, paused, more),
        options=StreamOptions(cache_retention="none"),
    )
    await _collect(model, history)
    sent = replay_server.requests[2].body["messages"]
    assert sent[1]["content"] == expected_turn[:-1]
    assert expected_turn[-1]["type"] == "server_tool_use"
    assert sent[2] == {"role": "user", "content": "go on"}


def _done(events: list[StreamEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, StreamDone), last
    return last.message
