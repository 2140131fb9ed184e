"""Usage figures of sessions: tokens, cost, turns, tool calls and their error rate, compactions.

One walk over a session's entries (every branch: tokens spent on an abandoned branch were
spent) feeds :class:`UsageStats` under a key: the whole session, or each reply's model, day or
the session's folder. ``harness sessions stats``, the exported page and ``harness serve`` show
these figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal, TypeAlias

import attrs

from hooks import AssistantMessage, ToolResultMessage
from repos import CompactionEntry, Entry, MessageEntry

from ._providers.registry import ModelRegistry, cost_of

__all__ = ["GroupBy", "UsageStats", "entry_day", "merge", "session_stats"]

GroupBy: TypeAlias = Literal["session", "model", "day", "folder"]


@attrs.frozen(kw_only=True)
class UsageStats:
    """Usage summed over replies (assistant messages) and what followed them.

    Tokens are counts; ``cost`` is in US dollars: what the replies recorded, plus, for a reply
    that recorded none (imported Claude Code sessions, older files), its tokens at the model
    registry's prices; ``estimated`` is that part. ``unpriced`` counts replies with tokens but
    no known price. ``turns`` counts replies (one model response and its tool calls, pi's
    turn); ``tool_errors`` counts tool results marked as errors (denied, failed, blocked).
    """

    sessions: int = 0
    turns: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    estimated: float = 0.0
    unpriced: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    tool_errors: int = 0
    compactions: int = 0

    @property
    def cache_hit_rate(self) -> float | None:
        """Cached input tokens read, over all input tokens (read, written to the cache, and
        uncached); None without input."""
        whole = self.input + self.cache_read + self.cache_write
        return self.cache_read / whole if whole else None

    @property
    def tool_error_rate(self) -> float | None:
        """Tool results that were errors, over tool results; None without results."""
        return self.tool_errors / self.tool_results if self.tool_results else None

    def __add__(self, other: UsageStats) -> UsageStats:
        return UsageStats(
            **{
                f.name: getattr(self, f.name) + getattr(other, f.name)
                for f in attrs.fields(UsageStats)
            }
        )

    def as_json(self) -> dict[str, int | float | None]:
        """The figures as JSON (``camelCase`` keys as in session files), rates included."""
        return {
            "sessions": self.sessions,
            "turns": self.turns,
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "cost": round(self.cost, 6),
            "costEstimated": round(self.estimated, 6),
            "unpricedReplies": self.unpriced,
            "toolCalls": self.tool_calls,
            "toolResults": self.tool_results,
            "toolErrors": self.tool_errors,
            "toolErrorRate": self.tool_error_rate,
            "cacheHitRate": self.cache_hit_rate,
            "compactions": self.compactions,
        }

    def cost_text(self) -> str:
        """``$0.1234``, saying how much of it is estimated and how many replies had no price."""
        text = f"${self.cost:.4f}"
        if self.estimated:
            text += f" (estimated: ${self.estimated:.4f})"
        if self.unpriced:
            text += f" (+ {self.unpriced} replies of unknown price)"
        return text


def entry_day(entry: Entry) -> str:
    """The UTC day (``YYYY-MM-DD``) of an entry: its message's timestamp (milliseconds) for a
    message, else the entry's own ISO timestamp; ``unknown`` when neither reads."""
    when = _entry_time(entry)
    return "unknown" if when is None else when.date().isoformat()


def _reply_stats(message: AssistantMessage, registry: ModelRegistry) -> UsageStats:
    u = message.usage
    tokens = u.input or u.output or u.cache_read or u.cache_write
    cost = estimated = 0.0
    unpriced = 0
    if u.cost.total or not tokens:
        cost = u.cost.total
    else:
        info = registry.find(message.model, message.provider or None)
        priced = cost_of(u, info.prices if info is not None else None)
        if priced is None:
            unpriced = 1
        else:
            cost = estimated = priced.total
    return UsageStats(
        turns=1,
        input=u.input,
        output=u.output,
        cache_read=u.cache_read,
        cache_write=u.cache_write,
        cost=cost,
        estimated=estimated,
        unpriced=unpriced,
        tool_calls=len(message.tool_calls),
    )


def _model_key(message: AssistantMessage) -> str:
    return "/".join(p for p in (message.provider, message.model) if p) or "(unknown)"


def session_stats(
    entries: Iterable[Entry],
    *,
    registry: ModelRegistry | None = None,
    by: GroupBy = "session",
    folder: str = "",
    since: datetime | None = None,
) -> dict[str, UsageStats]:
    """The usage of one session's ``entries``, grouped.

    Args:
        by: ``session`` (one key, ``""``), ``model`` (each reply's ``provider/model``; a tool
            result and a compaction count for the model of the reply before them), ``day``
            (UTC day of each entry, :func:`entry_day`) or ``folder`` (``folder``, the
            session's recorded cwd).
        since: only entries of that time or later (timezone-aware).

    Returns:
        key -> figures, with ``sessions`` 1 in every group the session appears in.
    """
    registry = registry or ModelRegistry.builtin()
    groups: dict[str, UsageStats] = {}
    model = "(unknown)"
    since_day = since.astimezone(UTC) if since is not None else None

    def key_of(entry: Entry) -> str:
        if by == "model":
            return model
        if by == "day":
            return entry_day(entry)
        return folder if by == "folder" else ""

    def add(entry: Entry, stats: UsageStats) -> None:
        key = key_of(entry)
        if key not in groups:
            groups[key] = UsageStats(sessions=1)
        groups[key] = groups[key] + stats

    for entry in entries:
        if since_day is not None and not _at_or_after(entry, since_day):
            continue
        if isinstance(entry, MessageEntry):
            message = entry.message
            if isinstance(message, AssistantMessage):
                model = _model_key(message)
                add(entry, _reply_stats(message, registry))
            elif isinstance(message, ToolResultMessage):
                add(entry, UsageStats(tool_results=1, tool_errors=int(message.is_error)))
        elif isinstance(entry, CompactionEntry):
            add(entry, UsageStats(compactions=1))
    return groups


def _at_or_after(entry: Entry, since: datetime) -> bool:
    when = _entry_time(entry)
    return when is None or when >= since


def _entry_time(entry: Entry) -> datetime | None:
    if isinstance(entry, MessageEntry):
        ms = getattr(entry.message, "timestamp", None)
        if isinstance(ms, int | float) and not isinstance(ms, bool) and 0 < ms < 10**14:
            return datetime.fromtimestamp(ms / 1000, UTC)
    try:
        when = datetime.fromisoformat(entry.timestamp.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def merge(into: dict[str, UsageStats], groups: dict[str, UsageStats]) -> None:
    """Add ``groups`` into ``into`` key by key (sessions counted once per key)."""
    for key, stats in groups.items():
        into[key] = into[key] + stats if key in into else stats
