"""``StreamOptions``: per-request options a ``before_provider_request`` hook may patch.

Patch semantics follow pi's harness (reference §5.6): a scalar field is replaced when the patch
gives it (None included: None resets it to "provider default"); ``headers`` and ``metadata`` merge
per key, a key set to None deletes it, and the whole map set to None clears it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

from attrs import evolve, field, frozen

from ._messages import JSONValue
from ._results import UNSET, Unset

__all__ = ["CacheRetention", "StreamOptions", "StreamOptionsPatch"]

CacheRetention: TypeAlias = Literal["none", "short", "long"]
"""Prompt caching: ``none`` off, ``short`` (Anthropic: 5-minute cache), ``long`` (1 hour)."""


def _headers(value: Mapping[str, str]) -> Mapping[str, str]:
    return dict(value)


def _metadata(value: Mapping[str, JSONValue]) -> Mapping[str, JSONValue]:
    return dict(value)


@frozen(kw_only=True)
class StreamOptions:
    """Options of one model request.

    Attributes:
        timeout_s: request timeout in seconds; None leaves the provider's default.
        max_retries: how many times a retryable failure is retried (harness retry policy).
        max_retry_delay_s: longest wait between attempts, in seconds (a longer ``retry-after``
            from the server ends the retries instead).
        headers: extra HTTP headers.
        metadata: provider metadata (Anthropic: ``{"user_id": ...}``).
        cache_retention: prompt caching, see :data:`CacheRetention`.
    """

    timeout_s: float | None = None
    max_retries: int = 3
    max_retry_delay_s: float = 60.0
    headers: Mapping[str, str] = field(factory=dict, converter=_headers)
    metadata: Mapping[str, JSONValue] = field(factory=dict, converter=_metadata)
    cache_retention: CacheRetention = "short"

    def patched(self, patch: StreamOptionsPatch) -> StreamOptions:
        """These options with ``patch`` applied (see the module docstring)."""
        changes: dict[str, object] = {}
        for name in ("timeout_s", "max_retries", "max_retry_delay_s", "cache_retention"):
            value = getattr(patch, name)
            if value is not UNSET:
                changes[name] = value
        for name in ("headers", "metadata"):
            value = getattr(patch, name)
            if value is UNSET:
                continue
            if value is None:
                changes[name] = {}
                continue
            merged = dict(getattr(self, name))
            for key, item in value.items():
                if item is None:
                    merged.pop(key, None)
                else:
                    merged[key] = item
            changes[name] = merged
        return evolve(self, **changes)  # type: ignore[arg-type]


@frozen(kw_only=True)
class StreamOptionsPatch:
    """A change to :class:`StreamOptions`; fields left :data:`UNSET` are not changed."""

    timeout_s: float | Unset | None = UNSET
    max_retries: int | Unset = UNSET
    max_retry_delay_s: float | Unset = UNSET
    headers: Mapping[str, str | None] | Unset | None = UNSET
    metadata: Mapping[str, JSONValue | None] | Unset | None = UNSET
    cache_retention: CacheRetention | Unset = UNSET
