"""Replay of the recorded Anthropic streams of the corpus (``anthropic/`` in
``$HARNESS_TEST_CORPUS`` or ``../shared/fixtures``) through AnthropicModel and the real SDK.

The same cases run on hand-written streams in ``tests/e2e/test_anthropic_provider.py`` and
``test_anthropic_pause_turn.py``; these prove the recordings themselves still decode.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from replay_server import JsonReply, ReplayServer, SseReply, cut_after_event, fixture_bytes

from harness._providers.base import (
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
    ToolSpec,
)
from hooks import (
    AssistantMessage,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
)

if TYPE_CHECKING:
    # Imported where used: the SDK takes seconds to import, and ``tests/test_corpus_skip.py``
    # collects this module (to see it skipped) in runs of its own.
    import anthropic

    from harness._providers.anthropic import AnthropicModel

pytestmark = pytest.mark.corpus

MODEL_ID = "claude-test-model"


NO_CACHE = StreamOptions(cache_retention="none")


def _request(*messages: Any, **kwargs: Any) -> ModelRequest:
    """A request; prompt caching off unless ``options`` say otherwise (simpler bodies)."""
    if not messages:
        messages = (UserMessage(content="Say just hello"),)
    kwargs.setdefault("system_prompt", "You are terse.")
    kwargs.setdefault("options", NO_CACHE)
    return ModelRequest(messages=messages, **kwargs)


def _model(client: anthropic.AsyncAnthropic, **kwargs: Any) -> AnthropicModel:
    from harness._providers.anthropic import AnthropicModel

    return AnthropicModel(MODEL_ID, client=client, **kwargs)


async def _collect(model: AnthropicModel, request: ModelRequest) -> list[StreamEvent]:
    events = [event async for event in model.stream(request)]
    # The Model protocol: Response?, Start, Delta*, then exactly one Done or Error, last.
    terminal = [e for e in events if isinstance(e, StreamDone | StreamError)]
    assert len(terminal) == 1
    assert events[-1] is terminal[0]
    starts = [i for i, e in enumerate(events) if isinstance(e, StreamStart)]
    assert len(starts) == 1
    assert all(isinstance(e, StreamDelta) for e in events[starts[0] + 1 : -1])
    return events


def _done(events: list[StreamEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, StreamDone), last
    return last.message


def _error(events: list[StreamEvent]) -> StreamError:
    last = events[-1]
    assert isinstance(last, StreamError), last
    return last


def _sse_payloads(body: bytes) -> list[dict[str, Any]]:
    """The parsed ``data:`` payloads of an SSE body, in order."""
    return [
        json.loads(line[len(b"data:") :]) for line in body.splitlines() if line.startswith(b"data:")
    ]


async def test_stream_text(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply.fixture("stream-text.sse"))
    events = await _collect(_model(anthropic_client), _request())

    first = events[0]
    assert isinstance(first, StreamResponse)
    assert first.status == 200
    assert first.headers["content-type"].startswith("text/event-stream")
    assert isinstance(events[1], StreamStart)
    assert events[1].partial.content == ()
    deltas = [e for e in events if isinstance(e, StreamDelta)]
    assert [(d.kind, d.content_index, d.delta) for d in deltas] == [("text", 0, "Hello")]
    assert deltas[0].partial.content == (TextContent(text="Hello"),)

    message = _done(events)
    assert message.content == (TextContent(text="Hello"),)
    assert message.stop_reason == "stop"
    assert (message.api, message.provider, message.model) == (
        "anthropic-messages",
        "anthropic",
        MODEL_ID,
    )
    assert message.error_message is None
    # message_start said output 2; message_delta's cumulative 4 replaces it.
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (10, 4, 0, 0)
    assert usage.total_tokens == 14
    assert usage.cost.total == 0.0
    assert message.extra == {}

    (sent,) = replay_server.requests
    assert sent.path == "/v1/messages"
    assert sent.body == {
        "model": MODEL_ID,
        "max_tokens": 8192,
        "stream": True,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [{"role": "user", "content": "Say just hello"}],
    }


async def test_stream_tool_use_with_empty_input(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply.fixture("stream-tool-use.sse"))
    events = await _collect(_model(anthropic_client), _request())

    message = _done(events)
    assert message.stop_reason == "toolUse"
    assert message.content == (
        ToolCall(id="toolu_01CzN6riCPqw4pVSuTd9Dwn7", name="pelican_name_generator", arguments={}),
    )
    assert message.usage.input == 543
    assert message.usage.output == 40
    # The only input_json_delta is "": no toolcall delta is reported for it.
    assert not [e for e in events if isinstance(e, StreamDelta)]


async def test_stream_thinking_tool_use_round_trips_signature(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    body = fixture_bytes("stream-thinking-tool-use.sse")
    signature = next(
        p["delta"]["signature"]
        for p in _sse_payloads(body)
        if p.get("delta", {}).get("type") == "signature_delta"
    )
    replay_server.enqueue(SseReply(body=body), SseReply.fixture("stream-text.sse"))
    model = _model(anthropic_client)
    prompt = UserMessage(content="Use fixed_version, then joke about it")
    tool = ToolSpec(
        name="fixed_version", description="Return the version.", parameters={"properties": {}}
    )

    events = await _collect(model, _request(prompt, tools=[tool], thinking_level="low"))
    message = _done(events)
    thinking_text = (
        "The user wants me to:\n1. Use the fixed_version tool\n2. Tell them the version\n"
        "3. Make a short joke about it\n\nLet me first call the fixed_version tool to see what "
        "version it returns."
    )
    assert message.stop_reason == "toolUse"
    assert message.content == (
        ThinkingContent(thinking=thinking_text, thinking_signature=signature),
        ToolCall(id="toolu_01825dXWLSoJwCst1qTsiWdb", name="fixed_version", arguments={}),
    )
    assert message.usage.output == 92
    thinking_deltas = [e for e in events if isinstance(e, StreamDelta) and e.kind == "thinking"]
    assert "".join(d.delta for d in thinking_deltas) == thinking_text
    assert {d.content_index for d in thinking_deltas} == {0}

    from harness._providers.anthropic import THINKING_BUDGETS

    first = replay_server.requests[0].body
    assert first["thinking"] == {"type": "enabled", "budget_tokens": THINKING_BUDGETS["low"]}
    assert first["max_tokens"] == 8192  # already above the 4096 budget
    assert first["tools"] == [
        {
            "name": "fixed_version",
            "description": "Return the version.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]

    result = ToolResultMessage(
        tool_call_id="toolu_01825dXWLSoJwCst1qTsiWdb",
        tool_name="fixed_version",
        content=(TextContent(text="1.2.3"),),
    )
    follow_up = _request(prompt, message, result, tools=[tool], thinking_level="low")
    _done(await _collect(model, follow_up))

    sent = replay_server.requests[1].body
    assert sent["messages"] == [
        {"role": "user", "content": "Use fixed_version, then joke about it"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": thinking_text, "signature": signature},
                {
                    "type": "tool_use",
                    "id": "toolu_01825dXWLSoJwCst1qTsiWdb",
                    "name": "fixed_version",
                    "input": {},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01825dXWLSoJwCst1qTsiWdb",
                    "is_error": False,
                    "content": [{"type": "text", "text": "1.2.3"}],
                }
            ],
        },
    ]


async def test_stream_max_tokens_drops_truncated_tool_call(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply.fixture("stream-max-tokens-truncated-tool-json.sse"))
    events = await _collect(_model(anthropic_client), _request())

    message = _done(events)
    assert message.stop_reason == "length"
    assert message.content == (
        TextContent(
            text="I'll create a comprehensive tax guide for someone with multiple W2s and save "
            "it in a file called taxes.txt. Let me do that for you now."
        ),
    )
    assert message.tool_calls == ()
    assert message.usage.input == 450  # from message_start; message_delta has no input count
    assert message.usage.output == 124
    # While streaming, the half call was visible, with its raw JSON in the deltas.
    tool_deltas = [e for e in events if isinstance(e, StreamDelta) and e.kind == "toolcall"]
    assert {d.content_index for d in tool_deltas} == {1}
    assert "".join(d.delta for d in tool_deltas).startswith('{"filename": "taxes.txt"')
    assert isinstance(tool_deltas[-1].partial.content[1], ToolCall)


async def test_stream_refusal(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply.fixture("stream-refusal.sse"))
    message = _done(await _collect(_model(anthropic_client), _request()))

    assert message.stop_reason == "refusal"
    assert message.content == ()  # the empty text block is not kept
    assert message.extra["stopDetails"] == {
        "type": "refusal",
        "category": "cyber",
        "explanation": "This request was refused due to policy.",
    }
    assert (message.usage.input, message.usage.output) == (20, 0)


async def test_stream_pause_turn_keeps_server_tool_blocks(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    # No continuation allowed: the paused reply is returned as it stands (the cap case).
    # Continuations themselves: test_anthropic_pause_turn.py.
    body = fixture_bytes("stream-pause-turn-web-search.sse")
    started = [
        p["content_block"] for p in _sse_payloads(body) if p["type"] == "content_block_start"
    ]
    replay_server.enqueue(SseReply(body=body), SseReply.fixture("stream-text.sse"))
    model = _model(anthropic_client, max_pause_continuations=0)
    prompt = UserMessage(content="Run the 15 searches")

    message = _done(await _collect(model, _request(prompt)))
    assert message.stop_reason == "stop"
    assert message.extra["pauseTurn"] is True
    unknown = [b for b in message.content if isinstance(b, UnknownContent)]
    assert [b.type for b in unknown].count("server_tool_use") == 11
    assert [b.type for b in unknown].count("web_search_tool_result") == 10
    # Every block of the stream is kept, in order (none is empty or half).
    assert len(message.content) == len(started)
    # server_tool_use gets its streamed input; result blocks are the API's dicts, unchanged.
    first_use = unknown[0].raw
    assert first_use["id"] == "srvtoolu_01FGPZ2P6yPXWdiD1Cxjpix3"
    assert first_use["input"] == {"query": "San Francisco weather today"}
    first_result = next(b.raw for b in unknown if b.type == "web_search_tool_result")
    assert first_result == next(b for b in started if b["type"] == "web_search_tool_result")
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking_signature and thinking.thinking_signature.startswith("EuwJCm4I")
    assert message.usage.input == 404500

    assert len(replay_server.requests) == 1

    # Continuing the paused turn (it is the last message) sends every block back unchanged,
    # the dangling last server_tool_use included.
    follow_up = _request(prompt, message)
    _done(await _collect(model, follow_up))
    sent_blocks = replay_server.requests[1].body["messages"][1]["content"]
    assert sent_blocks[0]["type"] == "thinking"
    assert sent_blocks[2] == first_use
    assert first_result in sent_blocks
    assert len(sent_blocks) == len(message.content)


async def test_unterminated_last_event_is_not_a_message_stop(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    # The file's bytes as stored end "data: {...message_stop...}" with no blank line; an SSE
    # client drops that event, so the stream has no message_stop and must not count as done.
    replay_server.enqueue(SseReply.fixture("stream-refusal.sse", terminate_last_event=False))
    failed = _error(await _collect(_model(anthropic_client), _request()))

    assert failed.error.error_type == "incomplete_stream"
    assert failed.message.stop_reason == "error"


async def test_connection_dropped_mid_stream(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    body = fixture_bytes("stream-max-tokens-truncated-tool-json.sse")
    # Cut inside the tool call: the half call must not survive into the error message either.
    head = cut_after_event(body, "content_block_delta", occurrence=7)
    replay_server.enqueue(SseReply(body=head, ending="abrupt"))
    failed = _error(await _collect(_model(anthropic_client), _request()))

    assert failed.error.error_type == "connection_error"
    assert failed.error.retryable is True
    assert failed.message.stop_reason == "error"
    assert failed.message.tool_calls == ()
    assert failed.message.text.startswith("I'll create a comprehensive tax guide")


async def test_http_400_is_not_retryable(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(JsonReply.fixture("error-400-invalid-request.json", 400))
    events = await _collect(_model(anthropic_client), _request())

    assert isinstance(events[0], StreamResponse)
    assert events[0].status == 400
    failed = _error(events)
    assert failed.error.retryable is False
    assert failed.error.status == 400
    assert failed.error.error_type == "invalid_request_error"
    assert failed.message.stop_reason == "error"
    assert failed.message.content == ()
    import anthropic

    assert isinstance(failed.error.__cause__, anthropic.BadRequestError)  # as `raise ... from`
    assert len(replay_server.requests) == 1
