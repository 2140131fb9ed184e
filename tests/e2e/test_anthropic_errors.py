"""How AnthropicModel classifies failures (retryable, error_type, status, retry_after_s), with
the real SDK against the replay server. The provider never retries by itself.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from typing import Any

import anthropic
import anthropic_streams as streams
import pytest
from replay_server import (
    DropReply,
    JsonReply,
    ReplayServer,
    SseReply,
    cut_after_event,
    sse_event,
)

from harness._errors import ProviderError
from harness._providers.anthropic import AnthropicModel
from harness._providers.base import (
    ModelRequest,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
)
from hooks import StreamOptions, TextContent, UserMessage

MODEL_ID = "claude-test-model"


def _request(**options: Any) -> ModelRequest:
    return ModelRequest(
        system_prompt="You are terse.",
        messages=(UserMessage(content="Say just hello"),),
        options=StreamOptions(cache_retention="none", **options),
    )


async def _fail(
    model: AnthropicModel, request: ModelRequest
) -> tuple[list[StreamEvent], StreamError]:
    # A guard, so a timeout that is not applied fails the test instead of hanging it.
    async with asyncio.timeout(15):
        events = [event async for event in model.stream(request)]
    failed = events[-1]
    assert isinstance(failed, StreamError), failed
    assert isinstance(failed.error, ProviderError)
    assert failed.message.stop_reason == "error"
    assert failed.message.error_message == failed.error.message
    assert len([e for e in events if isinstance(e, StreamStart)]) == 1
    return events, failed


# --- HTTP errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type", "headers", "retryable", "retry_after_s"),
    [
        (429, "rate_limit_error", {"retry-after": "7"}, True, 7.0),
        (429, "rate_limit_error", {"retry-after": "1.5"}, True, 1.5),
        # retry-after-ms is the more precise one and wins.
        (429, "rate_limit_error", {"retry-after-ms": "2500", "retry-after": "3"}, True, 2.5),
        (429, "rate_limit_error", {}, True, None),
        (429, "rate_limit_error", {"retry-after": "soon"}, True, None),
        (500, "api_error", {}, True, None),
        (529, "overloaded_error", {"retry-after": "0"}, True, 0.0),
        (400, "invalid_request_error", {}, False, None),
        (401, "authentication_error", {}, False, None),
        (403, "permission_error", {}, False, None),
        (404, "not_found_error", {}, False, None),
        (413, "request_too_large", {}, False, None),
    ],
)
async def test_http_error_classification(
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    status: int,
    error_type: str,
    headers: dict[str, str],
    retryable: bool,
    retry_after_s: float | None,
) -> None:
    replay_server.enqueue(JsonReply.error(status, error_type, "scripted", headers=headers))
    events, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())

    assert isinstance(events[0], StreamResponse) and events[0].status == status
    error = failed.error
    assert (error.status, error.error_type, error.retryable) == (status, error_type, retryable)
    assert error.retry_after_s == retry_after_s
    assert "scripted" in error.message
    assert failed.message.content == ()
    assert len(replay_server.requests) == 1  # no retry here


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (502, "api_error", True),
        (529, "overloaded_error", True),
        (400, "invalid_request_error", False),
    ],
)
async def test_error_body_without_a_type_gets_one_from_the_status(
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    status: int,
    error_type: str,
    retryable: bool,
) -> None:
    # A proxy in front of the API may answer with a page that is not an Anthropic error body.
    replay_server.enqueue(JsonReply(status=status, body=b"<html>Bad gateway</html>"))
    _, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())
    assert (failed.error.error_type, failed.error.retryable) == (error_type, retryable)
    assert failed.error.status == status


async def test_retry_after_as_http_date(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    replay_server.enqueue(JsonReply.error(429, "rate_limit_error", headers={"retry-after": when}))
    _, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())
    assert failed.error.retry_after_s is not None
    assert 25 <= failed.error.retry_after_s <= 31


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000, decrease "
        "input length or `max_tokens` and try again",
        "The request exceeds the model's context window.",
    ],
)
async def test_context_overflow(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic, message: str
) -> None:
    # Even when the server says a retry may help, the same prompt overflows again.
    headers = {"x-should-retry": "true", "retry-after": "1"}
    replay_server.enqueue(JsonReply.error(400, "invalid_request_error", message, headers=headers))
    _, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())

    assert failed.error.error_type == "context_overflow"
    assert failed.error.retryable is False
    assert failed.error.status == 400
    assert failed.error.retry_after_s is None
    assert message in failed.error.message


async def test_other_400_is_not_context_overflow(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(JsonReply(status=400, body=streams.error_body(400)))
    _, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())
    assert failed.error.error_type == "invalid_request_error"
    assert failed.error.retryable is False


async def test_context_overflow_in_an_sse_error_event(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    head = cut_after_event(streams.text(), "message_start")
    payload = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 3 > 2"},
    }
    replay_server.enqueue(SseReply(body=head, append=sse_event("error", payload)))
    _, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())
    assert failed.error.error_type == "context_overflow"
    assert failed.error.retryable is False
    assert failed.error.status is None


# --- transport failures -----------------------------------------------------------------------


async def test_connection_dropped_mid_stream(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    body = streams.text()
    head = cut_after_event(body, "content_block_delta")
    # Cut a few bytes into the next event, then the socket closes without the final chunk.
    replay_server.enqueue(SseReply(body=body, cut_after=len(head) + 10, ending="abrupt"))
    events, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())

    assert isinstance(events[0], StreamResponse) and events[0].status == 200
    assert failed.error.error_type == "connection_error"
    assert failed.error.retryable is True
    assert failed.error.status is None
    assert failed.message.content == (TextContent(text=streams.TEXT_PARTS[0]),)


@pytest.mark.parametrize("data", [b"", b"HTTP/1.1 200 OK\r\ncontent-type: text/event"])
async def test_connection_dropped_before_a_response(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic, data: bytes
) -> None:
    replay_server.enqueue(DropReply(data=data))
    events, failed = await _fail(AnthropicModel(MODEL_ID, client=anthropic_client), _request())

    assert not any(isinstance(e, StreamResponse) for e in events)
    assert failed.error.error_type == "connection_error"
    assert failed.error.retryable is True
    assert failed.error.status is None


async def test_timeout_before_a_response(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(DropReply(hold=True))
    started = time.monotonic()
    _, failed = await _fail(
        AnthropicModel(MODEL_ID, client=anthropic_client), _request(timeout_s=0.3)
    )
    assert time.monotonic() - started < 5  # the option, not the SDK's 10-minute default
    assert failed.error.error_type == "timeout"
    assert failed.error.retryable is True


async def test_timeout_mid_stream(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    body = streams.text()
    held = SseReply(body=body, hold_after=len(cut_after_event(body, "content_block_delta")))
    replay_server.enqueue(held)
    started = time.monotonic()
    events, failed = await _fail(
        AnthropicModel(MODEL_ID, client=anthropic_client), _request(timeout_s=0.3)
    )
    assert time.monotonic() - started < 5
    assert isinstance(events[0], StreamResponse) and events[0].status == 200
    assert failed.error.error_type == "timeout"
    assert failed.error.retryable is True
    assert failed.message.content == (TextContent(text=streams.TEXT_PARTS[0]),)


# --- no retries inside the provider -----------------------------------------------------------


async def test_default_model_does_not_retry(replay_server: ReplayServer) -> None:
    # Built without a client: the SDK's own retries are off by default (the harness retries).
    replay_server.enqueue(
        JsonReply.error(529, "overloaded_error", headers={"retry-after-ms": "1"}),
        SseReply(body=streams.text()),
    )
    model = AnthropicModel(MODEL_ID, api_key="test", base_url=replay_server.url)
    try:
        _, failed = await _fail(model, _request())
    finally:
        await model.aclose()
    assert failed.error.error_type == "overloaded_error"
    assert failed.error.retry_after_s == 0.001
    assert len(replay_server.requests) == 1
    assert replay_server.pending == 1  # the success an SDK retry would have taken


async def test_sdk_retries_can_be_opted_in(replay_server: ReplayServer) -> None:
    replay_server.enqueue(
        JsonReply.error(529, "overloaded_error", headers={"retry-after-ms": "1"}),
        SseReply(body=streams.text()),
    )
    model = AnthropicModel(MODEL_ID, api_key="test", base_url=replay_server.url, max_retries=1)
    try:
        events = [event async for event in model.stream(_request())]
    finally:
        await model.aclose()
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.text == streams.TEXT
    assert len(replay_server.requests) == 2
