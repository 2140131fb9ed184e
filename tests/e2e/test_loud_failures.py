"""A request that fails for good raises ProviderError from prompt(), after the error turn is
persisted as pi persists it; ``raise_on_error=False`` keeps pi's quiet behaviour."""

from __future__ import annotations

from pathlib import Path

import anthropic
import orjson
import pytest
from replay_server import JsonReply, ReplayServer

from harness import (
    AgentHarness,
    AnthropicModel,
    AssistantMessage,
    JsonlSessionRepo,
    MessageEntry,
    ProviderError,
    StreamOptions,
)


async def _harness(tmp_path: Path, client: anthropic.AsyncAnthropic, **kw: object) -> AgentHarness:
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))
    return AgentHarness(
        session=session,
        model=AnthropicModel("claude-haiku-4-5", client=client),
        stream_options=StreamOptions(max_retries=2, cache_retention="none"),
        retry_base_delay_s=0.01,
        **kw,  # type: ignore[arg-type]
    )


def _assistant_lines(path: Path) -> list[dict[str, object]]:
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]
    return [
        line["message"]
        for line in lines
        if line["type"] == "message" and line["message"]["role"] == "assistant"
    ]


@pytest.mark.parametrize(
    ("status", "error_type", "message"),
    [
        (401, "authentication_error", "invalid x-api-key"),
        (403, "permission_error", "your key may not use this model"),
        (404, "not_found_error", "model: claude-haiku-4-5"),
        (400, "invalid_request_error", "messages: field required"),
    ],
)
async def test_a_non_retryable_status_is_persisted_then_raised(
    tmp_path: Path,
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    status: int,
    error_type: str,
    message: str,
) -> None:
    replay_server.enqueue(JsonReply.error(status, error_type, message))
    h = await _harness(tmp_path, anthropic_client)
    retries: list[object] = []
    h.connect("retry", lambda s, event: retries.append(event))
    with pytest.raises(ProviderError) as info:
        await h.prompt("hello")
    error = info.value
    assert error.status == status and error.error_type == error_type
    assert message in str(error) and not error.retryable
    assert retries == [] and len(replay_server.requests) == 1
    # Persisted before raising, in pi's shape: an assistant entry with stopReason "error".
    (persisted,) = _assistant_lines(h.session.path)
    assert persisted["stopReason"] == "error"
    assert message in str(persisted["errorMessage"])
    assert isinstance(error.reply, AssistantMessage)
    assert error.reply.error_message == persisted["errorMessage"]
    assert not h.busy


async def test_exhausted_retries_raise_the_last_failure(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(
        *(JsonReply.error(529, "overloaded_error", f"busy {i}") for i in range(3))
    )
    h = await _harness(tmp_path, anthropic_client)
    with pytest.raises(ProviderError, match="busy 2") as info:
        await h.prompt("hello")
    assert info.value.retryable and info.value.status == 529
    assert len(replay_server.requests) == 3
    assert [m["errorMessage"] for m in _assistant_lines(h.session.path)] == [
        info.value.reply.error_message if info.value.reply else None
    ]


async def test_raise_on_error_false_returns_the_persisted_error_reply(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(JsonReply.error(401, "authentication_error", "invalid x-api-key"))
    h = await _harness(tmp_path, anthropic_client, raise_on_error=False)
    reply = await h.prompt("hello")
    assert reply.stop_reason == "error" and "invalid x-api-key" in (reply.error_message or "")
    entries = [e for e in h.session.entries() if isinstance(e, MessageEntry)]
    assert entries[-1].message == reply


async def test_the_session_continues_after_a_raised_error(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(JsonReply.error(404, "not_found_error", "model: nope"))
    h = await _harness(tmp_path, anthropic_client)
    with pytest.raises(ProviderError):
        await h.prompt("first")
    replay_server.enqueue(JsonReply.error(400, "invalid_request_error", "still bad"))
    with pytest.raises(ProviderError, match="still bad"):
        await h.prompt("second")
    # The first error reply is not sent back to the model: errors are dropped from context.
    sent = replay_server.requests[-1].body
    assert isinstance(sent, dict)
    roles = [m["role"] for m in sent["messages"]]
    assert roles.count("assistant") == 0
