"""The retry policy on the faux model: retryable failures are retried with backoff and never
persisted; others are persisted at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    AssistantMessage,
    FauxModel,
    FauxReply,
    JsonlSessionRepo,
    MessageEntry,
    ProviderError,
    StreamOptions,
)


async def make(tmp_path: Path, replies: list[Any], retries: int = 3) -> tuple[AgentHarness, Any]:
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    model = FauxModel(replies)
    h = AgentHarness(
        session=session,
        model=model,
        stream_options=StreamOptions(max_retries=retries),
        retry_base_delay_s=0.01,
    )
    return h, model


def assistant_messages(h: AgentHarness) -> list[AssistantMessage]:
    return [
        e.message
        for e in h.session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]


async def test_retryable_failures_are_retried_and_never_persisted(tmp_path: Path) -> None:
    h, model = await make(
        tmp_path,
        [
            FauxReply(text="partial", error="overloaded", retryable=True),
            FauxReply(error="overloaded", retryable=True),
            "finally",
        ],
    )
    retries: list[Any] = []
    ends: list[str | None] = []
    h.connect("retry", lambda s, event: retries.append(event))
    h.connect("message_end", lambda s, event: ends.append(event.entry_id))
    reply = await h.prompt("x")
    assert reply.text == "finally"
    assert [m.text for m in assistant_messages(h)] == ["finally"]
    assert [(r.attempt, r.max_attempts, r.error_message) for r in retries] == [
        (1, 4, "overloaded"),
        (2, 4, "overloaded"),
    ]
    assert retries[1].delay_s == 2 * retries[0].delay_s  # exponential backoff
    assert ends.count(None) == 2  # the dropped attempts end without an entry
    assert len(model.requests) == 3


async def test_a_non_retryable_failure_is_persisted_at_once(tmp_path: Path) -> None:
    h, _ = await make(tmp_path, [FauxReply(error="bad request", retryable=False)])
    retries: list[Any] = []
    h.connect("retry", lambda s, event: retries.append(event))
    with pytest.raises(ProviderError) as info:
        await h.prompt("x")
    reply = info.value.reply
    assert reply is not None and reply.stop_reason == "error" and retries == []
    assert not info.value.retryable
    assert assistant_messages(h) == [reply]


async def test_exhausted_retries_persist_the_last_failure(tmp_path: Path) -> None:
    failing = [FauxReply(error=f"overloaded {i}", retryable=True) for i in range(3)]
    h, model = await make(tmp_path, failing, retries=2)
    with pytest.raises(ProviderError, match="overloaded 2") as info:
        await h.prompt("x")
    reply = info.value.reply
    assert reply is not None and reply.stop_reason == "error"
    assert reply.error_message == "overloaded 2"
    assert assistant_messages(h) == [reply]
    assert len(model.requests) == 3
