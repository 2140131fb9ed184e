"""AnthropicModel driven through the real ``anthropic`` SDK against the local replay server.

Every stream here is hand-written (``tests/fixtures/anthropic_streams.py``), shaped like the
recordings; the recordings themselves are replayed in ``tests/corpus/``.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import anthropic
import anthropic_streams as streams
import pytest
from replay_server import (
    JsonReply,
    ReplayServer,
    SseReply,
    cut_after_event,
    sse_event,
)

from harness._errors import MissingApiKeyError, ProviderError
from harness._providers.anthropic import THINKING_BUDGETS, AnthropicModel
from harness._providers.base import (
    Model,
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
    ImageContent,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
)

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


def _hand_stream(
    block: dict[str, Any], deltas: list[dict[str, Any]], stop_reason: str, output_tokens: int
) -> bytes:
    """A complete one-block SSE stream shaped like the API's, for cases with no recording."""
    message: dict[str, Any] = {
        "id": "msg_hand",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "m",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    events = [
        sse_event("message_start", {"type": "message_start", "message": message}),
        sse_event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        *(
            sse_event(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}
            )
            for d in deltas
        ),
        sse_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        ),
        sse_event("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(events)


# --- streams ------------------------------------------------------------------------------


async def test_stream_text(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.text()))
    events = await _collect(_model(anthropic_client), _request())

    first = events[0]
    assert isinstance(first, StreamResponse)
    assert first.status == 200
    assert first.headers["content-type"].startswith("text/event-stream")
    assert isinstance(events[1], StreamStart)
    assert events[1].partial.content == ()
    deltas = [e for e in events if isinstance(e, StreamDelta)]
    assert [(d.kind, d.content_index, d.delta) for d in deltas] == [
        ("text", 0, part) for part in streams.TEXT_PARTS
    ]
    assert deltas[0].partial.content == (TextContent(text=streams.TEXT_PARTS[0]),)
    assert deltas[-1].partial.content == (TextContent(text=streams.TEXT),)

    message = _done(events)
    assert message.content == (TextContent(text=streams.TEXT),)
    assert message.stop_reason == "stop"
    assert (message.api, message.provider, message.model) == (
        "anthropic-messages",
        "anthropic",
        MODEL_ID,
    )
    assert message.error_message is None
    # message_start's output count is replaced by message_delta's cumulative one.
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (
        streams.TEXT_INPUT_TOKENS,
        streams.TEXT_OUTPUT_TOKENS,
        0,
        0,
    )
    assert streams.TEXT_OUTPUT_TOKENS != streams.TEXT_START_OUTPUT_TOKENS
    assert usage.total_tokens == streams.TEXT_INPUT_TOKENS + streams.TEXT_OUTPUT_TOKENS
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
    replay_server.enqueue(SseReply(body=streams.tool_use_empty_input()))
    events = await _collect(_model(anthropic_client), _request())

    message = _done(events)
    assert message.stop_reason == "toolUse"
    assert message.content == (
        ToolCall(id=streams.EMPTY_TOOL_ID, name=streams.EMPTY_TOOL_NAME, arguments={}),
    )
    assert message.usage.input == streams.EMPTY_TOOL_INPUT_TOKENS
    assert message.usage.output == streams.EMPTY_TOOL_OUTPUT_TOKENS
    # The only input_json_delta is "": no toolcall delta is reported for it.
    assert not [e for e in events if isinstance(e, StreamDelta)]


async def test_stream_thinking_tool_use_round_trips_signature(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.thinking_tool_use()), SseReply(body=streams.text()))
    model = _model(anthropic_client)
    prompt = UserMessage(content="Which version of harness is installed?")
    tool = ToolSpec(
        name=streams.THINKING_TOOL_NAME,
        description="Return a package's version.",
        parameters={"properties": {"package": {"type": "string"}}},
    )

    events = await _collect(model, _request(prompt, tools=[tool], thinking_level="low"))
    message = _done(events)
    call = ToolCall(
        id=streams.THINKING_TOOL_ID,
        name=streams.THINKING_TOOL_NAME,
        arguments=streams.THINKING_TOOL_INPUT,
    )
    assert message.stop_reason == "toolUse"
    assert message.content == (
        ThinkingContent(thinking=streams.THINKING, thinking_signature=streams.SIGNATURE),
        call,
    )
    assert message.usage.output == streams.THINKING_OUTPUT_TOKENS
    thinking_deltas = [e for e in events if isinstance(e, StreamDelta) and e.kind == "thinking"]
    assert "".join(d.delta for d in thinking_deltas) == streams.THINKING
    assert {d.content_index for d in thinking_deltas} == {0}
    tool_deltas = [e for e in events if isinstance(e, StreamDelta) and e.kind == "toolcall"]
    assert "".join(d.delta for d in tool_deltas) == "".join(streams.THINKING_TOOL_JSON_PARTS)
    assert {d.content_index for d in tool_deltas} == {1}

    first = replay_server.requests[0].body
    assert first["thinking"] == {"type": "enabled", "budget_tokens": THINKING_BUDGETS["low"]}
    assert first["max_tokens"] == 8192  # already above the 4096 budget
    assert first["tools"] == [
        {
            "name": streams.THINKING_TOOL_NAME,
            "description": "Return a package's version.",
            "input_schema": {"type": "object", "properties": {"package": {"type": "string"}}},
        }
    ]

    result = ToolResultMessage(
        tool_call_id=streams.THINKING_TOOL_ID,
        tool_name=streams.THINKING_TOOL_NAME,
        content=(TextContent(text="1.2.3"),),
    )
    follow_up = _request(prompt, message, result, tools=[tool], thinking_level="low")
    _done(await _collect(model, follow_up))

    sent = replay_server.requests[1].body
    assert sent["messages"] == [
        {"role": "user", "content": "Which version of harness is installed?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": streams.THINKING, "signature": streams.SIGNATURE},
                {
                    "type": "tool_use",
                    "id": streams.THINKING_TOOL_ID,
                    "name": streams.THINKING_TOOL_NAME,
                    "input": streams.THINKING_TOOL_INPUT,
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": streams.THINKING_TOOL_ID,
                    "is_error": False,
                    "content": [{"type": "text", "text": "1.2.3"}],
                }
            ],
        },
    ]


async def test_stream_max_tokens_drops_truncated_tool_call(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.max_tokens_truncated()))
    events = await _collect(_model(anthropic_client), _request())

    message = _done(events)
    assert message.stop_reason == "length"
    assert message.content == (TextContent(text=streams.TRUNCATED_TEXT),)
    assert message.tool_calls == ()
    # from message_start; message_delta has no input count
    assert message.usage.input == streams.TRUNCATED_INPUT_TOKENS
    assert message.usage.output == streams.TRUNCATED_OUTPUT_TOKENS
    # While streaming, the half call was visible, with its raw JSON in the deltas.
    tool_deltas = [e for e in events if isinstance(e, StreamDelta) and e.kind == "toolcall"]
    assert {d.content_index for d in tool_deltas} == {1}
    assert "".join(d.delta for d in tool_deltas) == "".join(streams.TRUNCATED_JSON_PARTS)
    assert isinstance(tool_deltas[-1].partial.content[1], ToolCall)


async def test_stream_refusal(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.refusal()))
    message = _done(await _collect(_model(anthropic_client), _request()))

    assert message.stop_reason == "refusal"
    assert message.content == ()  # the empty text block is not kept
    assert message.extra["stopDetails"] == streams.REFUSAL_DETAILS
    assert (message.usage.input, message.usage.output) == (streams.REFUSAL_INPUT_TOKENS, 0)


async def test_stream_pause_turn_keeps_server_tool_blocks(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    # No continuation allowed: the paused reply is returned as it stands (the cap case).
    # Continuations themselves: test_anthropic_pause_turn.py.
    blocks = streams.pause_blocks()
    replay_server.enqueue(SseReply(body=streams.pause_turn()), SseReply(body=streams.text()))
    model = _model(anthropic_client, max_pause_continuations=0)
    prompt = UserMessage(content="Run the searches")

    message = _done(await _collect(model, _request(prompt)))
    assert message.stop_reason == "stop"
    assert message.extra["pauseTurn"] is True
    unknown = [b for b in message.content if isinstance(b, UnknownContent)]
    searches = len(streams.PAUSE_QUERIES)
    assert [b.type for b in unknown].count("server_tool_use") == searches
    assert [b.type for b in unknown].count("web_search_tool_result") == searches - 1
    # Every block of the stream is kept, in order (none is empty or half).
    assert len(message.content) == len(blocks) == 2 * searches + 1
    # server_tool_use gets its streamed input; result blocks are the API's dicts, unchanged.
    assert [b.raw for b in unknown] == blocks[2:]
    assert unknown[0].raw["input"] == {"query": streams.PAUSE_QUERIES[0]}
    assert message.content[0] == ThinkingContent(
        thinking=streams.PAUSE_THINKING, thinking_signature=streams.PAUSE_SIGNATURE
    )
    assert message.content[1] == TextContent(text=streams.PAUSE_INTRO)
    assert message.usage.input == streams.PAUSE_INPUT_TOKENS

    assert len(replay_server.requests) == 1

    # Continuing the paused turn (it is the last message) sends every block back unchanged,
    # the dangling last server_tool_use included.
    follow_up = _request(prompt, message)
    _done(await _collect(model, follow_up))
    sent_blocks = replay_server.requests[1].body["messages"][1]["content"]
    assert sent_blocks == blocks
    assert sent_blocks[-1]["type"] == "server_tool_use"


# --- hand-cut streams and HTTP errors ---------------------------------------------------------


@pytest.mark.parametrize(
    ("error_type", "retryable"),
    [("overloaded_error", True), ("api_error", True), ("invalid_request_error", False)],
)
async def test_sse_error_event_mid_stream(
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    error_type: str,
    retryable: bool,
) -> None:
    head = cut_after_event(streams.text(), "content_block_delta")
    replay_server.enqueue(SseReply(body=head, append=streams.error_event(error_type, "scripted")))
    events = await _collect(_model(anthropic_client), _request())

    assert isinstance(events[0], StreamResponse) and events[0].status == 200
    failed = _error(events)
    assert isinstance(failed.error, ProviderError)
    assert failed.error.code == "provider_error"
    assert failed.error.retryable is retryable
    assert failed.error.error_type == error_type
    assert failed.error.status is None  # mid-stream: the HTTP status was 200
    # What arrived is kept, marked as an error.
    assert failed.message.content == (TextContent(text=streams.TEXT_PARTS[0]),)
    assert failed.message.stop_reason == "error"
    assert failed.message.error_message == failed.error.message
    assert failed.message.usage.input == streams.TEXT_INPUT_TOKENS


async def test_overloaded_mid_stream(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.overloaded_mid_stream()))
    failed = _error(await _collect(_model(anthropic_client), _request()))

    assert failed.error.error_type == "overloaded_error"
    assert failed.error.retryable is True
    assert failed.error.status is None
    assert failed.message.content == (TextContent(text=streams.TEXT_PARTS[0]),)


async def test_stream_without_message_stop(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=cut_after_event(streams.text(), "message_delta")))
    failed = _error(await _collect(_model(anthropic_client), _request()))

    assert failed.error.error_type == "incomplete_stream"
    assert failed.error.retryable is True
    assert failed.message.stop_reason == "error"
    assert failed.message.content == (TextContent(text=streams.TEXT),)


async def test_unterminated_last_event_is_not_a_message_stop(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    # The body ends "data: {...message_stop...}" with no blank line; an SSE client drops that
    # event, so the stream has no message_stop and must not count as done.
    replay_server.enqueue(SseReply(body=streams.refusal(terminate_last_event=False)))
    failed = _error(await _collect(_model(anthropic_client), _request()))

    assert failed.error.error_type == "incomplete_stream"
    assert failed.message.stop_reason == "error"


async def test_connection_dropped_mid_stream(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    body = streams.max_tokens_truncated()
    # Cut inside the tool call (after its second JSON delta): the half call must not survive
    # into the error message either.
    head = cut_after_event(
        body, "content_block_delta", occurrence=len(streams.TRUNCATED_TEXT_PARTS) + 2
    )
    replay_server.enqueue(SseReply(body=head, ending="abrupt"))
    failed = _error(await _collect(_model(anthropic_client), _request()))

    assert failed.error.error_type == "connection_error"
    assert failed.error.retryable is True
    assert failed.message.stop_reason == "error"
    assert failed.message.tool_calls == ()
    assert failed.message.text == streams.TRUNCATED_TEXT


async def test_invalid_tool_json_outside_max_tokens_is_an_error(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    tool = {"type": "tool_use", "id": "toolu_1", "name": "rm", "input": {}}
    broken = {"type": "input_json_delta", "partial_json": '{"path": "/'}
    body = _hand_stream(tool, [broken], "tool_use", output_tokens=9)
    replay_server.enqueue(SseReply(body=body))
    failed = _error(await _collect(_model(anthropic_client), _request()))

    assert failed.error.error_type == "invalid_tool_input"
    assert failed.message.tool_calls == ()
    assert failed.message.usage.output == 9


async def test_http_400_is_not_retryable(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(JsonReply(status=400, body=streams.error_body(400)))
    events = await _collect(_model(anthropic_client), _request())

    assert isinstance(events[0], StreamResponse)
    assert events[0].status == 400
    failed = _error(events)
    assert failed.error.retryable is False
    assert failed.error.status == 400
    assert failed.error.error_type == "invalid_request_error"
    assert failed.message.stop_reason == "error"
    assert failed.message.content == ()
    assert isinstance(failed.error.__cause__, anthropic.BadRequestError)  # as `raise ... from`
    assert len(replay_server.requests) == 1


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (529, "overloaded_error", True),
        (500, "api_error", True),
        (429, "rate_limit_error", True),
        (401, "authentication_error", False),
        (403, "permission_error", False),
        (404, "not_found_error", False),
    ],
)
async def test_http_errors(
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    status: int,
    error_type: str,
    retryable: bool,
) -> None:
    replay_server.enqueue(
        JsonReply(status=status, body=streams.error_body(status), headers={"retry-after": "7"})
    )
    events = await _collect(_model(anthropic_client), _request())

    assert isinstance(events[0], StreamResponse)
    assert events[0].status == status
    assert events[0].headers["retry-after"] == "7"  # for the caller's retry policy
    failed = _error(events)
    assert failed.error.retryable is retryable
    assert failed.error.status == status
    assert failed.error.error_type == error_type
    assert streams.ERROR_MESSAGES[status] in failed.error.message


async def test_x_should_retry_header_overrides_status(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(
        JsonReply.error(500, "api_error", headers={"x-should-retry": "false"}),
    )
    failed = _error(await _collect(_model(anthropic_client), _request()))
    assert failed.error.retryable is False


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = anthropic.AsyncAnthropic(
        api_key="test", base_url=f"http://127.0.0.1:{port}", max_retries=0
    )
    try:
        events = await _collect(_model(client), _request())
    finally:
        await client.close()
    assert not any(isinstance(e, StreamResponse) for e in events)
    failed = _error(events)
    assert failed.error.error_type == "connection_error"
    assert failed.error.retryable is True
    assert failed.error.status is None


async def test_missing_api_key_fails_at_construction(
    replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(MissingApiKeyError, match="ANTHROPIC_API_KEY") as info:
        AnthropicModel(MODEL_ID, base_url=replay_server.url, max_retries=0)
    assert info.value.code == "missing_api_key" and info.value.variable == "ANTHROPIC_API_KEY"
    assert replay_server.requests == []


async def test_an_empty_api_key_variable_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(MissingApiKeyError):
        AnthropicModel(MODEL_ID)


async def test_a_key_from_the_environment_or_an_argument_is_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    await AnthropicModel(MODEL_ID, api_key="sk-test").aclose()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    model = AnthropicModel(MODEL_ID)
    assert model.id == MODEL_ID
    await model.aclose()


async def test_cancellation_propagates(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    body = streams.text()
    replay_server.enqueue(
        SseReply(body=body, hold_after=len(cut_after_event(body, "content_block_delta")))
    )
    seen: list[StreamEvent] = []
    got_delta = asyncio.Event()

    async def consume() -> None:
        async for event in _model(anthropic_client).stream(_request()):
            seen.append(event)
            if isinstance(event, StreamDelta):
                got_delta.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_delta.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert not any(isinstance(e, StreamDone | StreamError) for e in seen)


# --- request conversion -----------------------------------------------------------------------


async def test_request_conversion(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.text()))
    assistant = AssistantMessage(
        api="anthropic-messages",
        content=(
            TextContent(text=""),
            TextContent(text="Reading both."),
            TextContent(text="  \n"),
            ToolCall(id="toolu_a", name="read", arguments={"path": "a.txt"}),
            ToolCall(id="call_b|fc_1", name="read", arguments={"path": "b.txt"}),
        ),
        stop_reason="toolUse",
    )
    messages = (
        UserMessage(content="   "),  # whitespace only: not sent at all
        UserMessage(
            content=(
                TextContent(text=""),
                TextContent(text="Read a and b"),
                ImageContent(data="aGk=", mime_type="image/png"),
            )
        ),
        AssistantMessage(api="anthropic-messages", content=(TextContent(text=""),)),
        assistant,
        ToolResultMessage(
            tool_call_id="toolu_a", tool_name="read", content=(TextContent(text="A"),)
        ),
        ToolResultMessage(
            tool_call_id="call_b|fc_1",
            tool_name="read",
            content=(TextContent(text=""),),
            is_error=True,
        ),
        UserMessage(content="thanks"),
        AssistantMessage(
            api="openai-responses",
            content=(
                ThinkingContent(thinking="foreign reasoning", thinking_signature="not-ours"),
                UnknownContent(raw={"type": "reasoning", "id": "rs_1"}),
                TextContent(text="Done."),
            ),
        ),
        UserMessage(content="bye"),
    )
    request = _request(*messages, max_tokens=1000, thinking_level="medium")
    _done(await _collect(_model(anthropic_client), request))

    body = replay_server.requests[0].body
    assert body["system"] == [{"type": "text", "text": "You are terse."}]
    # budget_tokens must stay below max_tokens, so max_tokens grows by the budget.
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 10240}
    assert body["max_tokens"] == 11240
    assert "tools" not in body
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Read a and b"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a.txt"}},
                {
                    "type": "tool_use",
                    "id": "call_b_fc_1",
                    "name": "read",
                    "input": {"path": "b.txt"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "is_error": False,
                    "content": [{"type": "text", "text": "A"}],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_b_fc_1",
                    "is_error": True,
                    "content": [{"type": "text", "text": "(no error message)"}],
                },
            ],
        },
        {"role": "user", "content": "thanks"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "foreign reasoning"},
                {"type": "text", "text": "Done."},
            ],
        },
        {"role": "user", "content": "bye"},
    ]


async def test_redacted_thinking_round_trip(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
    body = _hand_stream(redacted, [], "end_turn", output_tokens=2)
    replay_server.enqueue(SseReply(body=body), SseReply(body=streams.text()))
    model = _model(anthropic_client)
    message = _done(await _collect(model, _request()))
    (block,) = message.content
    assert isinstance(block, ThinkingContent)
    assert block.redacted is True
    assert block.thinking_signature == "EmwKAhgBEgy3va3pzix"

    _done(await _collect(model, _request(UserMessage(content="hi"), message)))
    assert replay_server.requests[1].body["messages"][1]["content"] == [redacted]


async def test_prompt_caching_marks_system_and_last_user_block(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.text()))
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    # StreamOptions() defaults to cache_retention="short".
    _done(await _collect(model, _request(UserMessage(content="first"), options=StreamOptions())))

    body = replay_server.requests[0].body
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": ephemeral}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "first", "cache_control": ephemeral}]}
    ]


async def test_empty_system_prompt_is_not_sent(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.text()))
    _done(await _collect(_model(anthropic_client), _request(system_prompt="")))
    assert "system" not in replay_server.requests[0].body


async def test_model_protocol(anthropic_client: anthropic.AsyncAnthropic) -> None:
    model = AnthropicModel("claude-sonnet-4-5", client=anthropic_client)
    as_protocol: Model = model  # mypy checks the structure; isinstance only the names
    assert isinstance(as_protocol, Model)
    assert (model.provider, model.api, model.id) == (
        "anthropic",
        "anthropic-messages",
        "claude-sonnet-4-5",
    )


async def test_abandoned_stream_closes_cleanly(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(SseReply(body=streams.pause_turn()))
    stream = _model(anthropic_client).stream(_request())
    kinds: list[type[StreamEvent]] = []
    async for event in stream:
        kinds.append(type(event))
        if isinstance(event, StreamDelta):
            break
    await stream.aclose()
    assert kinds == [StreamResponse, StreamStart, StreamDelta]
    # The client is still usable: the abandoned response released its connection.
    replay_server.enqueue(SseReply(body=streams.text()))
    assert _done(await _collect(_model(anthropic_client), _request())).text == streams.TEXT
