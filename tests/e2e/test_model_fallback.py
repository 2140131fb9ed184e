"""``fallback_model``: the primary (Anthropic, overloaded past its retries) hands the turn to the
fallback (OpenAI), both through their real SDKs against the replay server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import anthropic_streams
import openai_streams
import pytest
from replay_server import JsonReply, ReplayServer, SseReply

from harness import (
    AgentHarness,
    AnthropicModel,
    AssistantMessage,
    JsonlSessionRepo,
    MessageEntry,
    ModelFallbackEvent,
    ProviderError,
    StreamOptions,
    open_session,
)

pytest.importorskip("openai")


async def _harness(tmp_path: Path, anthropic_client: Any, openai_client: Any) -> AgentHarness:
    from harness import OpenAIModel

    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    return AgentHarness(
        session=session,
        model=AnthropicModel("claude-sonnet-4-5", client=anthropic_client),
        fallback_model=OpenAIModel("gpt-4.1", client=openai_client),
        stream_options=StreamOptions(max_retries=2, cache_retention="none"),
        retry_base_delay_s=0.01,
        resources=None,
        cwd=tmp_path,
    )


def _overloaded() -> JsonReply:
    return JsonReply.error(529, "overloaded_error", "Overloaded")


async def test_primary_overloaded_past_retries_falls_back(
    tmp_path: Path,
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    openai_client: Any,
) -> None:
    replay_server.enqueue(
        _overloaded(), _overloaded(), _overloaded(), SseReply(body=openai_streams.responses_text())
    )
    h = await _harness(tmp_path, anthropic_client, openai_client)
    events: list[Any] = []
    h.connect("model_fallback", lambda s, event: events.append(event))
    retries: list[Any] = []
    h.connect("retry", lambda s, event: retries.append(event))
    reply = await h.prompt("hello")
    assert reply.text == openai_streams.TEXT
    assert [r.path for r in replay_server.requests] == [
        "/v1/messages",
        "/v1/messages",
        "/v1/messages",
        "/v1/responses",
    ]
    assert len(retries) == 2  # the primary's own retries came first
    assert events == [
        ModelFallbackEvent(
            provider="anthropic",
            model_id="claude-sonnet-4-5",
            fallback_provider="openai",
            fallback_model_id="gpt-4.1",
            error_message=events[0].error_message,
            error_type="overloaded_error",
        )
    ]
    assert "Overloaded" in events[0].error_message
    # The entry names the model that answered; the failed attempts left none.
    assert h.session.path is not None
    stored = [
        e.message
        for e in open_session(h.session.path).entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]
    assert [(m.provider, m.model, m.stop_reason) for m in stored] == [("openai", "gpt-4.1", "stop")]
    # The harness keeps its primary: the next turn tries it first.
    assert h.model.provider == "anthropic"
    replay_server.enqueue(SseReply(body=anthropic_streams.text()))
    assert (await h.prompt("again")).provider == "anthropic"


async def test_no_fallback_for_an_error_that_is_not_transient(
    tmp_path: Path,
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    openai_client: Any,
) -> None:
    replay_server.enqueue(JsonReply.error(401, "authentication_error", "invalid x-api-key"))
    h = await _harness(tmp_path, anthropic_client, openai_client)
    events: list[Any] = []
    h.connect("model_fallback", lambda s, event: events.append(event))
    with pytest.raises(ProviderError) as info:
        await h.prompt("hello")
    assert info.value.status == 401 and events == []
    assert len(replay_server.requests) == 1


async def test_the_fallback_failing_too_raises_its_error_once(
    tmp_path: Path,
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    openai_client: Any,
) -> None:
    server_error = openai_streams.error_reply(500, "down", kind="server_error")
    replay_server.enqueue(*[_overloaded()] * 3, *[server_error] * 3)
    h = await _harness(tmp_path, anthropic_client, openai_client)
    with pytest.raises(ProviderError) as info:
        await h.prompt("hello")
    assert info.value.status == 500  # the fallback's failure; no second fallback
    assert info.value.reply is not None and info.value.reply.provider == "openai"
    assert len(replay_server.requests) == 6
