"""``pause_turn`` continued inside AnthropicModel, through the real SDK and the replay server.

The paused stream is the hand-written ``anthropic_streams.pause_turn()`` (web search server tool,
stop_reason ``pause_turn``); the continuation is ``anthropic_streams.text()``. The expected resent
blocks are ``anthropic_streams.pause_blocks()``, written out by hand, independently of the
provider's code. The recorded stream: ``tests/corpus/test_anthropic_pause_turn_recording.py``.
"""

from __future__ import annotations

from typing import Any

import anthropic
import anthropic_streams as streams
from replay_server import JsonReply, ReplayServer, SseReply

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


def _paused() -> SseReply:
    return SseReply(body=streams.pause_turn())


def _text() -> SseReply:
    return SseReply(body=streams.text())


async def test_pause_turn_is_continued_and_merged(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn = streams.pause_blocks()
    started = len(expected_turn)
    searches = len(streams.PAUSE_QUERIES)
    assert started == 2 * searches + 1  # thinking, text, the uses, one result fewer
    replay_server.enqueue(_paused(), _text())
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
    assert [b["type"] for b in sent].count("server_tool_use") == searches
    assert [b["type"] for b in sent].count("web_search_tool_result") == searches - 1
    assert sent[-1]["type"] == "server_tool_use"
    assert sent[0]["type"] == "thinking" and sent[0]["signature"] == streams.PAUSE_SIGNATURE

    # One message for the loop: both parts, the continuation's text last.
    (done,) = [e for e in events if isinstance(e, StreamDone)]
    message = done.message
    assert message.stop_reason == "stop"
    assert "pauseTurn" not in message.extra
    assert len(message.content) == len(expected_turn) + 1
    assert message.content[-1] == TextContent(text=streams.TEXT)
    assert isinstance(message.content[0], ThinkingContent)
    raw_blocks = [b.raw for b in message.content if isinstance(b, UnknownContent)]
    assert raw_blocks == [b for b in expected_turn if b["type"] not in ("thinking", "text")]
    # Usage sums both responses.
    paused_in, paused_out = streams.PAUSE_INPUT_TOKENS, streams.PAUSE_OUTPUT_TOKENS
    text_in, text_out = streams.TEXT_INPUT_TOKENS, streams.TEXT_OUTPUT_TOKENS
    assert (message.usage.input, message.usage.output) == (
        paused_in + text_in,
        paused_out + text_out,
    )
    assert message.usage.total_tokens == paused_in + text_in + paused_out + text_out

    # Deltas keep flowing; the continuation's block index counts on after the started ones.
    deltas = [e for e in events if isinstance(e, StreamDelta)]
    last = deltas[-1]
    assert (last.kind, last.content_index, last.delta) == ("text", started, streams.TEXT_PARTS[-1])
    assert last.partial.content[started] == TextContent(text=streams.TEXT)
    assert len(last.partial.content) == started + 1
    assert [e for e in events if isinstance(e, StreamResponse | StreamStart)] == events[:2]


async def test_pause_turn_continuations_are_capped(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn = streams.pause_blocks()
    replay_server.enqueue(*(_paused() for _ in range(3)))
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
    assert done.message.usage.input == 3 * streams.PAUSE_INPUT_TOKENS
    assert done.message.usage.output == 3 * streams.PAUSE_OUTPUT_TOKENS


async def test_failed_continuation_reports_what_arrived(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn = streams.pause_blocks()
    replay_server.enqueue(_paused(), JsonReply.error(529, "overloaded_error", "Overloaded"))
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
    assert failed.message.usage.input == streams.PAUSE_INPUT_TOKENS


async def test_replacement_payload_ending_with_assistant_prefill_is_extended(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    expected_turn = streams.pause_blocks()
    replay_server.enqueue(_paused(), _text())
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
    assert done.message.content[-1] == TextContent(text=streams.TEXT)


async def test_dangling_server_tool_use_is_dropped_from_history_only(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    # A reply returned at the cap ends with a server_tool_use that never got its result. As the
    # last message (a turn being continued) it goes back whole; with a message after it, the
    # unanswered use is left out and the answered ones stay.
    expected_turn = streams.pause_blocks()
    replay_server.enqueue(_paused(), *(_text(),) * 2)
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
