"""context_size, context_window, should_compact and the settings' validation."""

from __future__ import annotations

import pytest

from harness._compaction import (
    CONTEXT_WINDOWS,
    CompactionSettings,
    ContextSize,
    context_size,
    context_window,
    should_compact,
)
from hooks import (
    AssistantMessage,
    CompactionSummaryMessage,
    Message,
    StopReason,
    ToolResultMessage,
    Usage,
    UserMessage,
)


def user(chars: int, ts: int = 1) -> UserMessage:
    return UserMessage(content="u" * chars, timestamp=ts)


def reply(
    chars: int, total: int | None, stop: StopReason = "stop", ts: int = 1
) -> AssistantMessage:
    usage = Usage() if total is None else Usage(input=total - 10, output=10, total_tokens=total)
    return AssistantMessage(content="a" * chars, usage=usage, stop_reason=stop, timestamp=ts)


def test_without_usage_sums_estimates() -> None:
    messages: list[Message] = [user(40), reply(8, None), user(5)]
    assert context_size(messages) == ContextSize(10 + 2 + 2, 0, 14, None)


def test_uses_last_usage_plus_trailing_estimates() -> None:
    messages: list[Message] = [
        user(40),
        reply(8, 1000),
        user(400),
        reply(4, 5000),
        user(40),
        user(41),
    ]
    size = context_size(messages)
    assert size == ContextSize(5000 + 10 + 11, 5000, 21, 3)


def test_usage_total_falls_back_to_the_sum_of_parts() -> None:
    m = AssistantMessage(content="x", usage=Usage(input=100, output=20, cache_read=300))
    messages: list[Message] = [m, user(4)]
    assert context_size(messages).tokens == 420 + 1


@pytest.mark.parametrize("stop", ["aborted", "error"])
def test_aborted_and_error_usage_is_ignored(stop: StopReason) -> None:
    messages: list[Message] = [user(4), reply(4, 1000), user(8), reply(0, 9999, stop=stop)]
    size = context_size(messages)
    assert size.last_usage_index == 1
    assert size.tokens == 1000 + 2 + 0


def test_zero_usage_is_ignored() -> None:
    messages: list[Message] = [
        user(4),
        reply(4, 700),
        reply(4, 0),
        ToolResultMessage(tool_call_id="c", tool_name="bash", content="r" * 40),
    ]
    size = context_size(messages)
    assert size.last_usage_index == 1
    assert size.trailing_tokens == 1 + 10


def test_usage_from_before_a_compaction_is_stale() -> None:
    # after compaction (summary at t=1000) the kept reply at t=500 reported the old, big
    # context; only the reply at t=2000 counts
    summary = CompactionSummaryMessage(summary="s" * 400, tokens_before=150_000, timestamp=1000)
    kept: list[Message] = [summary, user(40, ts=400), reply(40, 150_000, ts=500), user(40, ts=1500)]
    stale = context_size(kept)
    assert stale.last_usage_index is None
    assert stale.tokens == 100 + 10 + 10 + 10
    fresh = context_size([*kept, reply(4, 3000, ts=2000), user(8, ts=2100)])
    assert fresh == ContextSize(3002, 3000, 2, 4)


def test_context_window_prefix_and_overrides() -> None:
    assert context_window("claude-haiku-4-5-20251001") == 200_000
    assert context_window("claude-sonnet-4-5") == 200_000
    assert context_window("claude-3-7-sonnet-latest") == 200_000
    assert context_window("faux-1") == 200_000
    assert context_window("faux-1", default=32_000) == 32_000
    overrides = {"claude-sonnet-4-5": 1_000_000, "faux": 50_000, "faux-1-big": 90_000}
    assert context_window("claude-sonnet-4-5-20250929", overrides) == 1_000_000
    assert context_window("claude-sonnet-4-20250514", overrides) == 200_000
    assert context_window("faux-1", overrides) == 50_000
    assert context_window("faux-1-big-2", overrides) == 90_000  # longest prefix wins
    assert all(v == 200_000 for k, v in CONTEXT_WINDOWS.items() if k.startswith("claude"))
    # OpenAI's published windows: 1,047,576 tokens for GPT-4.1, 128,000 for GPT-4o.
    assert (CONTEXT_WINDOWS["gpt-4.1"], context_window("gpt-4o-2024-08-06")) == (1_047_576, 128_000)
    assert {"claude-opus-4-5", "claude-opus-4-1", "claude-3-5-haiku"} <= set(CONTEXT_WINDOWS)


def test_should_compact_threshold() -> None:
    s = CompactionSettings(reserve_tokens=16_384)
    assert not should_compact(200_000 - 16_384, 200_000, s)
    assert should_compact(200_000 - 16_383, 200_000, s)
    assert not should_compact(10**9, 200_000, CompactionSettings(enabled=False))


def test_settings_defaults_and_validation() -> None:
    s = CompactionSettings()
    assert (s.enabled, s.reserve_tokens, s.keep_recent_tokens) == (True, 16384, 20000)
    with pytest.raises(ValueError):
        CompactionSettings(reserve_tokens=-1)
    with pytest.raises(ValueError):
        CompactionSettings(keep_recent_tokens=-5)
    with pytest.raises(TypeError):
        CompactionSettings(keep_recent_tokens="20000")  # type: ignore[arg-type]
