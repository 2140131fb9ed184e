"""A model server that keeps a reply open without content (review 3, finding 18): SSE
keep-alive comments from an OpenAI-compatible ``--base-url``, Anthropic ``ping`` events, empty
chunks. The SDKs' timeout is per read, so each of these held a run for ever; the idle-content
deadline (``stream_idle_timeout_s``) ends the reply as a retryable ``stream_stalled`` error and
keeps what arrived (docs/security.md, "Model providers")."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic_streams as a
import openai_streams as streams
import pytest
from replay_server import ReplayServer, SseReply

from harness import AgentHarness, MemorySessionRepo
from harness._providers.anthropic import AnthropicModel
from harness._providers.base import ModelRequest, StreamError
from harness._providers.openai import OpenAIModel
from hooks import UserMessage

pytest.importorskip("openai")

KEEP_ALIVE = b": keep-alive\n\n"
PING = a.event("ping", {"type": "ping"})
IDLE_S = 1.0
REQUEST = ModelRequest(system_prompt="", messages=[UserMessage(content="hi")])

STALLS = {
    "chat-keep-alive": (
        "chat",
        streams.chunk({"role": "assistant", "content": ""}) + streams.chunk({"content": "part"}),
        KEEP_ALIVE,
    ),
    "chat-empty-chunks": (
        "chat",
        streams.chunk({"role": "assistant", "content": ""}) + streams.chunk({"content": "part"}),
        streams.chunk({}),
    ),
    "responses-keep-alive": (
        "responses",
        streams.event("response.created", response={"id": "r", "status": "in_progress"})
        + streams.event(
            "response.output_item.added",
            output_index=0,
            item={"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        )
        + streams.event(
            "response.output_text.delta",
            output_index=0,
            item_id="msg_1",
            content_index=0,
            delta="part",
        ),
        KEEP_ALIVE,
    ),
    "anthropic-ping": (
        "anthropic",
        a._start("msg_1", 5, 1)
        + a._block_start(0, {"type": "text", "text": ""})
        + a._delta(0, {"type": "text_delta", "text": "part"}),
        PING,
    ),
    "anthropic-empty-deltas": (
        "anthropic",
        a._start("msg_1", 5, 1)
        + a._block_start(0, {"type": "text", "text": ""})
        + a._delta(0, {"type": "text_delta", "text": "part"}),
        a._delta(0, {"type": "text_delta", "text": ""}),
    ),
}


def _model(provider: str, server: ReplayServer, idle: float | None = IDLE_S) -> Any:
    if provider == "anthropic":
        return AnthropicModel(
            "claude-sonnet-4-5", api_key="k", base_url=server.url, stream_idle_timeout_s=idle
        )
    return OpenAIModel(
        "m", api=provider, api_key="k", base_url=server.url + "/v1", stream_idle_timeout_s=idle
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(("provider", "body", "repeat"), STALLS.values(), ids=STALLS.keys())
async def test_keep_alives_without_content_end_the_reply_as_stalled(
    provider: str, body: bytes, repeat: bytes, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(SseReply(body=body, repeat=repeat, repeat_every_s=0.2))
    model = _model(provider, replay_server)
    last = None
    async with asyncio.timeout(120):  # a guard against hanging the suite, not a speed check
        async for event in model.stream(REQUEST):
            last = event
    await model.aclose()
    assert isinstance(last, StreamError), last
    assert last.error.error_type == "stream_stalled"
    assert last.error.retryable
    assert "stream_idle_timeout_s" in last.error.message
    # What arrived before the stall is kept, as for any failed reply.
    assert [getattr(b, "text", None) for b in last.message.content] == ["part"]
    assert last.message.stop_reason == "error"


async def test_a_stalled_reply_is_retried_and_the_next_one_counts(
    replay_server: ReplayServer,
) -> None:
    """Through a real harness: the loop retries ``stream_stalled`` as it does a timeout."""
    stalled = SseReply(
        body=streams.chunk({"role": "assistant", "content": ""}),
        repeat=KEEP_ALIVE,
        repeat_every_s=0.2,
    )
    replay_server.enqueue(stalled, SseReply(body=streams.chat_text("all fine")))
    session = await MemorySessionRepo().create("/tmp")
    harness = AgentHarness(
        session=session,
        model=_model("chat", replay_server),
        retry_base_delay_s=0.0,
        resources=None,
    )
    async with asyncio.timeout(120):
        reply = await harness.prompt("hi")
    assert reply.stop_reason == "stop"
    assert "".join(getattr(b, "text", "") for b in reply.content) == "all fine"
    assert len(replay_server.requests) == 2


def test_the_idle_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="stream_idle_timeout_s"):
        OpenAIModel("m", api_key="k", stream_idle_timeout_s=0)
    with pytest.raises(ValueError, match="stream_idle_timeout_s"):
        AnthropicModel("claude-x", api_key="k", stream_idle_timeout_s=-1)
