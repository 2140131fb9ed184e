"""Compaction settings (pi's ``CompactionSettings``, reference §4.1)."""

from __future__ import annotations

from attrs import field, frozen, validators

__all__ = ["CompactionSettings"]

_TOKENS = [validators.instance_of(int), validators.ge(0)]


@frozen(kw_only=True)
class CompactionSettings:
    """When to compact and how much recent history to keep verbatim.

    Follows pi's ``DEFAULT_COMPACTION_SETTINGS`` (coding-agent ``core/compaction/compaction.ts``).

    Args:
        enabled: whether automatic compaction may run (a manual compaction ignores it).
        reserve_tokens: tokens kept free below the model's context window; compaction triggers
            once the context exceeds ``window - reserve_tokens``. The history summary's
            ``max_tokens`` is 0.8 of it, a split turn's prefix summary 0.5.
        keep_recent_tokens: estimated tokens of recent messages kept verbatim after the cut.

    Raises:
        TypeError: a token count is not an int.
        ValueError: a token count is negative.
    """

    enabled: bool = True
    reserve_tokens: int = field(default=16384, validator=_TOKENS)
    keep_recent_tokens: int = field(default=20000, validator=_TOKENS)
