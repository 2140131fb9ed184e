"""Context size and the compaction threshold: pure arithmetic on messages (reference §4.1-4.2).

Units: every count is tokens. Estimates use pi's 4 characters per token
(:func:`harness._tokens.estimate_tokens`); real counts come from the provider's ``usage``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from attrs import frozen

from hooks import AssistantMessage, CompactionSummaryMessage, LazyMessages, Message

from .._providers.registry import ModelRegistry
from .._tokens import estimate_tokens
from .settings import CompactionSettings

__all__ = ["CONTEXT_WINDOWS", "ContextSize", "context_size", "context_window", "should_compact"]

CONTEXT_WINDOWS: Mapping[str, int] = MappingProxyType(
    {m.id: m.context_window for m in ModelRegistry.builtin() if m.context_window is not None}
)
"""Context windows of the registry's models by id, in tokens (input + output), from the
package's data file (docs/providers.md).

:func:`context_window` also matches dated ids (``claude-haiku-4-5-20251001``) and aliases
(``claude-3-7-sonnet-latest``). The 1M-token beta window of some Sonnet models is opt-in per
request, so it is not the default; pass it through ``overrides`` when the provider enables it.
"""


def context_window(
    model_id: str, overrides: Mapping[str, int] | None = None, default: int = 200_000
) -> int:
    """The context window of ``model_id``, in tokens.

    pi reads ``model.contextWindow`` from its model registry; so do we. ``overrides`` are
    consulted first (an exact id wins, else the longest key that is a prefix of ``model_id``),
    then the package's registry (dated ids and aliases), then :data:`CONTEXT_WINDOWS` by
    longest prefix.

    Args:
        model_id: the model id as stored in sessions (``claude-sonnet-4-5-20250929``).
        overrides: id (or id prefix) to window, e.g. from settings.
        default: returned when nothing matches (pi's fallback is 128000 for branch summaries;
            every current Claude model has 200000).
    """
    found = _lookup(overrides or {}, model_id)
    if found is not None:
        return found
    info = ModelRegistry.builtin().find(model_id)
    if info is not None and info.context_window is not None:
        return info.context_window
    found = _lookup(CONTEXT_WINDOWS, model_id)
    return found if found is not None else default


def _lookup(table: Mapping[str, int], model_id: str) -> int | None:
    if model_id in table:
        return table[model_id]
    matches = [key for key in table if model_id.startswith(key)]
    return table[max(matches, key=len)] if matches else None


@frozen
class ContextSize:
    """How big a context is, in tokens.

    Attributes:
        tokens: ``usage_tokens + trailing_tokens``, the number to compare with the threshold.
        usage_tokens: total tokens the provider reported for the last usable assistant
            message (0 when there is none).
        trailing_tokens: estimated tokens of the messages after it (of all messages when
            there is no usable usage).
        last_usage_index: index in the message list of that assistant message, or None.
    """

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def context_size(messages: Sequence[Message]) -> ContextSize:
    """The size of ``messages`` (a context as built by ``repos.build_context``).

    Follows pi's ``estimateContextTokens`` (reference §4.2): the usage of the **last** assistant
    message whose stop reason is not ``aborted``/``error`` and whose usage total is non-zero,
    plus ``estimate_tokens`` of every message after it; without such a message, the sum of
    estimates.

    Stale usage is ignored: when the context starts from a compaction summary, an assistant
    message older than that summary (a kept message from before the compaction) reported the
    size of the context *before* compacting, so its usage does not count. pi's auto-compaction
    makes the same check by timestamp ("assistant message older than the latest compaction").
    """
    since = _compaction_time(messages)
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        if not isinstance(m, AssistantMessage) or m.stop_reason in ("aborted", "error"):
            continue
        if since is not None and m.timestamp < since:
            continue  # reported before the compaction: the size of the uncompacted context
        usage = m.usage.total
        if usage > 0:
            trailing = estimate_tokens(messages[index + 1 :])
            return ContextSize(usage + trailing, usage, trailing, index)
    estimated = estimate_tokens(messages)
    return ContextSize(estimated, 0, estimated, None)


def _compaction_time(messages: Sequence[Message]) -> int | None:
    # Roles read without building the messages (a session's context is built when read).
    roles = (
        [s.role for s in messages.slots]
        if isinstance(messages, LazyMessages)
        else [m.role for m in messages]
    )
    for index, role in enumerate(roles):
        if role == "compactionSummary":
            m = messages[index]
            if isinstance(m, CompactionSummaryMessage):
                return m.timestamp if m.timestamp > 0 else None
    return None


def should_compact(size: int, window: int, settings: CompactionSettings) -> bool:
    """Whether a context of ``size`` tokens must be compacted for a ``window``-token model.

    pi's ``shouldCompact``: ``settings.enabled and size > window - settings.reserve_tokens``.
    """
    return settings.enabled and size > window - settings.reserve_tokens
