"""The harness's retry policy with the real anthropic SDK against the replay server."""

from __future__ import annotations

from pathlib import Path
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
)

from harness import (
    AgentHarness,
    AnthropicModel,
    AssistantMessage,
    ContextOverflowError,
    JsonlSessionRepo,
    MessageEntry,
    StreamOptions,
)


async def run_with(
    tmp_path: Path,
    client: anthropic.AsyncAnthropic,
    retries: int = 3,
    raise_on_error: bool = True,
) -> tuple[AgentHarness, AssistantMessage, list[Any]]:
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    h = AgentHarness(
        session=session,
        model=AnthropicModel("claude-haiku-4-5", client=client),
        stream_options=StreamOptions(max_retries=retries, cache_retention="none"),
        retry_base_delay_s=0.01,
        raise_on_error=raise_on_error,
    )
    retries_seen: list[Any] = []
    h.connect("retry", lambda s, event: retries_seen.append(event))
    reply = await h.prompt("Say just hello")
    return h, reply, retries_seen


def persisted_replies(h: AgentHarness) -> list[AssistantMessage]:
    return [
        e.message
        for e in h.session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]


async def test_overloaded_mid_stream_is_retried_and_the_partial_is_not_persisted(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(
        SseReply(body=streams.overloaded_mid_stream()),
        SseReply(body=streams.text()),
    )
    h, reply, retries = await run_with(tmp_path, anthropic_client)
    assert reply.text == streams.TEXT and reply.stop_reason == "stop"
    assert [(r.attempt, r.error_type) for r in retries] == [(1, "overloaded_error")]
    assert persisted_replies(h) == [reply]  # the cut-off attempt left no entry
    assert len(replay_server.requests) == 2


async def test_429_waits_for_retry_after(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(
        JsonReply.error(429, "rate_limit_error", "slow down", headers={"retry-after": "0.05"}),
        SseReply(body=streams.text()),
    )
    _, reply, retries = await run_with(tmp_path, anthropic_client)
    assert reply.text == streams.TEXT
    assert [(r.error_type, r.delay_s) for r in retries] == [("rate_limit_error", 0.05)]


async def test_500_and_a_dropped_connection_are_retried_with_backoff(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    body = streams.text()
    head = cut_after_event(body, "content_block_delta")
    replay_server.enqueue(
        JsonReply.error(500, "api_error", "boom"),
        SseReply(body=body, cut_after=len(head) + 10, ending="abrupt"),
        DropReply(),
        SseReply(body=streams.text()),
    )
    h, reply, retries = await run_with(tmp_path, anthropic_client)
    assert reply.text == streams.TEXT
    assert [r.error_type for r in retries] == ["api_error", "connection_error", "connection_error"]
    assert [r.delay_s for r in retries] == [0.01, 0.02, 0.04]
    assert persisted_replies(h) == [reply]


async def test_context_overflow_is_not_retried_but_compacted_or_raised(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(
        JsonReply.error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000")
    )
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    h = AgentHarness(
        session=session,
        model=AnthropicModel("claude-haiku-4-5", client=anthropic_client),
        stream_options=StreamOptions(max_retries=3, cache_retention="none"),
    )
    retries: list[Any] = []
    h.connect("retry", lambda s, event: retries.append(event))
    # A one-message session has nothing to compact, so the overflow cannot be fixed.
    with pytest.raises(ContextOverflowError):
        await h.prompt("Say just hello")
    assert retries == []
    assert persisted_replies(h) == []
    assert len(replay_server.requests) == 1


async def test_retries_stop_after_max_retries(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(*(JsonReply.error(529, "overloaded_error", "busy") for _ in range(3)))
    h, reply, retries = await run_with(tmp_path, anthropic_client, retries=2, raise_on_error=False)
    assert [r.attempt for r in retries] == [1, 2]
    assert reply.stop_reason == "error"
    assert persisted_replies(h) == [reply]
