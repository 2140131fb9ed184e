"""One OpenAI reply being streamed, for both wire formats (Responses events, Chat chunks).

The stream comes from a server we may not trust (``base_url`` can point anywhere): every value
is read as plain JSON and checked for its type here, so a malformed or hostile event can at
worst end the reply with a :class:`~harness.ProviderError`, never crash the run or smuggle a
wrong type into the session. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson
from attrs import define, field

from hooks import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    now_ms,
)

from .._errors import ProviderError
from .base import StreamDelta, StreamDone, StreamError, priced_usage
from .registry import ModelRegistry

__all__ = ["PartKind", "ReplyBuilder", "count", "mapping", "text"]

PartKind = Literal["text", "thinking", "tool"]

_MAX_COUNT = 10**12  # a token count past this is nonsense from the server
ORIGIN_KEY = "reasoningOrigin"
"""Key in a thinking block's ``extra``: the origin (``scheme://host:port``) of the server that
sent its reasoning item. The item goes back only to that origin (a session that moves to
another ``base_url`` keeps its encrypted reasoning from the new server)."""
OFFICIAL_ORIGIN = "https://api.openai.com:443"
"""The origin of a reasoning item without ``ORIGIN_KEY`` (a session older than the key, or
pi's): OpenAI's own API, the only server that made such items."""


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url``, lower-cased, the port always written."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # a port that is not a number: an origin nothing else has
        return url
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def text(value: object) -> str:
    """``value`` if it is a string, else ""."""
    return value if isinstance(value, str) else ""


def count(value: object) -> int:
    """A token count: a non-negative int, else 0 (bools and floats are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), _MAX_COUNT)


@define
class Part:
    """One content block being streamed."""

    kind: PartKind
    content_index: int
    pieces: list[str] = field(factory=list)
    signature: str | None = None
    """thinking: the reasoning item (JSON) or the field it came in; text: the message id."""
    call_id: str = ""
    name: str = ""
    closed: bool = False
    arguments: dict[str, Any] | None = None
    refusal: bool = False
    cached: AssistantContent | None = None
    origin: str = ""
    """thinking: the origin of the server that sent its reasoning item (``ORIGIN_KEY``)."""

    def render(self) -> AssistantContent:
        if self.cached is None:
            self.cached = self._render()
        return self.cached

    def _render(self) -> AssistantContent:
        joined = "".join(self.pieces)
        self.pieces[:] = [joined] if joined else []  # the next partial joins two pieces, not all
        if self.kind == "text":
            extra = {"textSignature": self.signature} if self.signature else {}
            return TextContent(text=joined, extra=extra)
        if self.kind == "thinking":
            extra = {ORIGIN_KEY: self.origin} if self.origin and self.signature else {}
            return ThinkingContent(thinking=joined, thinking_signature=self.signature, extra=extra)
        return ToolCall(id=self.call_id, name=self.name, arguments=self.arguments or {})

    def close(self) -> None:
        """The block is complete: a tool call's arguments are parsed (None if invalid)."""
        self.closed = True
        self.cached = None
        if self.kind == "tool":
            self.arguments = _arguments("".join(self.pieces))

    def kept(self) -> bool:
        """Whether the finished reply keeps this block."""
        if self.kind == "tool":
            return self.closed and self.arguments is not None and bool(self.name)
        if self.kind == "thinking":
            return any(self.pieces) or bool(self.signature)
        return any(self.pieces)


def _arguments(raw: str) -> dict[str, Any] | None:
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class ReplyBuilder:
    """Accumulates parts, usage and the stop reason of one reply into an
    :class:`AssistantMessage` (pi's fields: ``api``, ``provider``, ``model``)."""

    def __init__(
        self,
        *,
        api: str,
        provider: str,
        model: str,
        registry: ModelRegistry | None,
        origin: str = "",
    ) -> None:
        self._api, self._provider, self._model = api, provider, model
        self._origin = origin
        self._registry = registry
        self._timestamp = now_ms()
        self.parts: list[Part] = []
        self.usage: dict[str, int] = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
        self.stop_reason: StopReason | None = None
        """Set once the stream said how it ended (None: it never did)."""
        self.error: ProviderError | None = None
        """An error the stream itself reported (an error event)."""

    def add(self, kind: PartKind) -> Part:
        part = Part(kind=kind, content_index=len(self.parts), origin=self._origin)
        self.parts.append(part)
        return part

    def grow(
        self, part: Part, piece: str, *, kind: Literal["text", "thinking", "toolcall"]
    ) -> Iterator[StreamDelta]:
        """Add ``piece`` to ``part``; one delta when it is not empty."""
        if piece:
            part.pieces.append(piece)
            part.cached = None
            yield StreamDelta(
                kind=kind, content_index=part.content_index, delta=piece, partial=self.partial()
            )

    def set_usage(self, *, prompt: int, cached: int, output: int) -> None:
        """OpenAI counts cached tokens inside the prompt tokens; ours are apart (pi's split)."""
        cached = min(cached, prompt)
        self.usage = {"input": prompt - cached, "output": output, "cache_read": cached}
        self.usage["cache_write"] = 0

    # messages

    def partial(self) -> AssistantMessage:
        """The reply so far, every started block in stream order."""
        return self._message(tuple(p.render() for p in self.parts), "stop")

    def failed(self, error: ProviderError) -> AssistantMessage:
        """What arrived before ``error``, without unfinished tool calls; stop reason ``error``."""
        return self._message(self._kept(), "error", error_message=error.message)

    def finish(self, what: str) -> StreamDone | StreamError:
        """The final event once the body ended. ``what`` names the stream in errors.

        An error the stream reported, a stream that never said how it ended, or a tool call
        whose arguments are not a JSON object (outside a ``length`` stop, where a cut call is
        expected and dropped) are errors.
        """
        if self.error is not None:
            return StreamError(message=self.failed(self.error), error=self.error)
        if self.stop_reason is None:
            error = ProviderError(
                f"{what} ended without saying how the reply finished (connection closed early?)",
                retryable=True,
                error_type="incomplete_stream",
            )
            return StreamError(message=self.failed(error), error=error)
        for part in self.parts:
            if not part.closed:
                part.close()
        broken = any(p.kind == "tool" and not p.kept() for p in self.parts)
        if broken and self.stop_reason != "length":
            error = ProviderError(
                f"{what} has a tool call whose arguments are not a JSON object, or no name",
                retryable=True,
                error_type="invalid_tool_input",
            )
            return StreamError(message=self.failed(error), error=error)
        stop = self.stop_reason
        kept = self._kept()
        if stop == "stop" and any(isinstance(b, ToolCall) for b in kept):
            stop = "toolUse"  # some servers say "stop" for a reply that calls tools
        return StreamDone(message=self._message(kept, stop))

    def _kept(self) -> tuple[AssistantContent, ...]:
        return tuple(p.render() for p in self.parts if p.kept())

    def _message(
        self,
        content: tuple[AssistantContent, ...],
        stop_reason: StopReason,
        *,
        error_message: str | None = None,
    ) -> AssistantMessage:
        return AssistantMessage(
            content=content,
            api=self._api,
            provider=self._provider,
            model=self._model,
            usage=priced_usage(
                **self.usage,
                provider=self._provider,
                model_id=self._model,
                registry=self._registry,
            ),
            stop_reason=stop_reason,
            error_message=error_message,
            timestamp=self._timestamp,
        )
