"""A hostile or broken server at an Anthropic ``base_url``: the SDK builds its events without
checking types, so every value of a wrong type must end the reply as a ``StreamError`` (never
an exception out of the provider), and counts must never make a cost negative, huge or a
crash (docs/security.md, "Model providers")."""

from __future__ import annotations

from typing import Any

import anthropic_streams as a
import pytest
from replay_server import ReplayServer, SseReply

from harness._providers.anthropic import AnthropicModel
from harness._providers.base import ModelRequest, StreamDone, StreamError
from hooks import UserMessage

MODEL = "claude-sonnet-4-5"  # priced, so a bad count would show in the cost
START = a._start("msg_1", 5, 1)


def _end(stop_reason: Any = "end_turn", usage: Any = None) -> bytes:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason}}
    delta["usage"] = {"output_tokens": 3} if usage is None else usage
    return a.event("message_delta", delta) + a.event("message_stop", {"type": "message_stop"})


def _text(text: Any) -> bytes:
    return (
        a._block_start(0, {"type": "text", "text": ""})
        + a._delta(0, {"type": "text_delta", "text": text})
        + a._stop(0)
    )


def _start_with_usage(usage: Any) -> bytes:
    message = {"id": "m", "type": "message", "role": "assistant", "model": MODEL}
    message |= {"content": [], "stop_reason": None, "usage": usage}
    return a.event("message_start", {"type": "message_start", "message": message})


MALFORMED = {
    "stop reason a list": START + _text("hi") + _end(["x"]),
    "stop reason an object": START + _end({"a": 1}),
    "index a list": START
    + a.event(
        "content_block_start",
        {"type": "content_block_start", "index": [0], "content_block": {"type": "text"}},
    )
    + _end(),
    "delta index an object": START
    + a._block_start(0, {"type": "text", "text": ""})
    + a.event(
        "content_block_delta",
        {"type": "content_block_delta", "index": {"a": 1}, "delta": {"type": "text_delta"}},
    )
    + _end(),
    "text a number": START + _text(42) + _end(),
    "text a list": START + _text(["a"]) + _end(),
    "tool json a number": START
    + a._block_start(0, {"type": "tool_use", "id": "t", "name": "bash", "input": {}})
    + a._delta(0, {"type": "input_json_delta", "partial_json": 5})
    + a._stop(0)
    + _end("tool_use"),
    "signature a number": START
    + a._block_start(0, {"type": "thinking", "thinking": ""})
    + a._delta(0, {"type": "thinking_delta", "thinking": "t"})
    + a._delta(0, {"type": "signature_delta", "signature": 7})
    + a._stop(0)
    + _end(),
}


def _model(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel(MODEL, api_key="k", base_url=server.url)


REQUEST = ModelRequest(system_prompt="", messages=[UserMessage(content="hi")])


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_value_of_the_wrong_type_ends_the_reply_with_an_error(
    body: bytes, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(SseReply(body=body))
    model = _model(replay_server)
    events = [e async for e in model.stream(REQUEST)]  # never raises
    await model.aclose()
    last = events[-1]
    assert isinstance(last, StreamError) and last.error.error_type == "invalid_response"
    assert "malformed event" in last.error.message
    for block in last.message.content:
        assert isinstance(getattr(block, "text", getattr(block, "thinking", "")), str)


COUNTS = {
    "negative input": (_start_with_usage({"input_tokens": -(10**6), "output_tokens": 1}), None),
    "negative output": (START, {"output_tokens": -(10**8)}),
    "huge input": (_start_with_usage({"input_tokens": 10**30, "output_tokens": 1}), None),
    "text for a count": (_start_with_usage({"input_tokens": "many", "output_tokens": 1}), None),
    "float and list": (
        _start_with_usage({"input_tokens": 1.5, "cache_read_input_tokens": [1]}),
        {"output_tokens": None},
    ),
    "usage a number": (_start_with_usage(5), 5),
    "message text": (a.event("message_start", {"type": "message_start", "message": "m"}), None),
}


@pytest.mark.parametrize(("start", "usage"), COUNTS.values(), ids=COUNTS.keys())
async def test_counts_a_server_sends_never_make_a_cost_negative_or_crash(
    start: bytes, usage: Any, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(SseReply(body=start + _text("hi") + _end(usage=usage)))
    model = _model(replay_server)
    events = [e async for e in model.stream(REQUEST)]  # never raises
    await model.aclose()
    last = events[-1]
    assert isinstance(last, StreamDone)
    usage_of = last.message.usage
    for count in (usage_of.input, usage_of.output, usage_of.cache_read, usage_of.cache_write):
        assert type(count) is int and 0 <= count <= 10**12
    assert 0 <= usage_of.cost.total <= 10**12 * 100 / 10**6
