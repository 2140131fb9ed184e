"""``FauxModel``: an offline, scripted model for the demo, tests and examples.

Like openai-agents' ``ScriptedModel``: each request takes the next scripted reply (or asks a
function for one), a request with no reply left is an error (not a silent default), and
:meth:`FauxModel.assert_consumed` fails when replies were left unused.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TypeAlias

from attrs import evolve, field, frozen

from hooks import (
    AssistantContent,
    AssistantMessage,
    JSONValue,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)

from .._errors import ProviderError
from .._tokens import estimate_tokens
from .base import (
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
)

__all__ = ["FauxModel", "FauxReply", "FauxScript", "FauxToolCall"]

_ids = itertools.count(1)


@frozen(kw_only=True)
class FauxToolCall:
    """A tool call in a scripted reply; ``id`` defaults to a fresh ``faux_call_<n>``."""

    name: str
    arguments: Mapping[str, JSONValue] = field(factory=dict)
    id: str | None = None


def _calls(value: Sequence[FauxToolCall]) -> tuple[FauxToolCall, ...]:
    return tuple(value)


@frozen(kw_only=True)
class FauxReply:
    """One scripted reply.

    ``stop_reason`` defaults to ``toolUse`` when there are tool calls, else ``stop``.
    ``error`` makes the request fail with a :class:`ProviderError` carrying that message,
    ``retryable`` and ``error_type`` (``"context_overflow"`` simulates a full context) after
    streaming ``text``.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: tuple[FauxToolCall, ...] = field(default=(), converter=_calls)
    stop_reason: StopReason | None = None
    error: str | None = None
    retryable: bool = False
    error_type: str = "faux_error"


FauxScript: TypeAlias = Callable[[ModelRequest], "FauxReply | str"]
"""A function of the request giving the reply, for replies that depend on the context."""


class FauxModel:
    """A scripted model: ``FauxModel(["hello", FauxReply(tool_calls=[...]), ...])``.

    Args:
        replies: replies used in order (a ``str`` is a text reply; a function of the request
            gives a reply), or one function used for every request.
        model_id: the id stored in sessions.
        chunk_size: characters per streamed delta (so ``message_update`` fires as with a real
            model).
        delay_s: pause before each delta, in seconds; lets tests abort mid-stream.

    Usage is estimated at 4 characters per token, like pi's estimator.
    """

    def __init__(
        self,
        replies: Sequence[FauxReply | str | FauxScript] | FauxScript = (),
        *,
        model_id: str = "faux-1",
        chunk_size: int = 16,
        delay_s: float = 0.0,
    ) -> None:
        self._script: FauxScript | None = replies if callable(replies) else None
        self._queue: list[FauxReply | str | FauxScript] = [] if callable(replies) else list(replies)
        self._id = model_id
        self._chunk = max(1, chunk_size)
        self._delay = delay_s
        self.requests: list[ModelRequest] = []
        """Every request received, in order (for assertions)."""
        self._token_estimates: dict[int, tuple[object, int]] = {}
        self.payloads: list[Mapping[str, JSONValue]] = []
        """Bodies given by ``before_provider_payload`` hooks, in order (none without hooks)."""

    @property
    def provider(self) -> str:
        return "faux"

    @property
    def id(self) -> str:
        return self._id

    @property
    def api(self) -> str:
        return "faux"

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet (0 for a function script)."""
        return len(self._queue)

    def add(self, *replies: FauxReply | str | FauxScript) -> None:
        """Queue more replies."""
        self._queue.extend(replies)

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if scripted replies were never requested."""
        if self._queue:
            raise AssertionError(f"{len(self._queue)} scripted faux replies were never used")

    def build_payload(self, request: ModelRequest) -> Mapping[str, JSONValue]:
        """A JSON view of the request (what a real provider would send), for payload hooks."""
        return {
            "model": self._id,
            "system": request.system_prompt,
            "messages": [
                {"role": m.role, "text": getattr(m, "text", "")} for m in request.messages
            ],
            "tools": [t.name for t in request.tools],
        }

    async def stream(
        self, request: ModelRequest, *, payload: Mapping[str, JSONValue] | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream the next scripted reply (see :class:`~harness.Model`)."""
        self.requests.append(request)
        if payload is not None:
            self.payloads.append(payload)
        partial = AssistantMessage(api=self.api, provider=self.provider, model=self._id)
        yield StreamResponse(status=200, headers={})
        yield StreamStart(partial=partial)
        reply = self._next(request)
        if reply is None:
            error = ProviderError(
                f"faux model {self._id!r} has no reply left for request #{len(self.requests)}",
                retryable=False,
                error_type="faux_exhausted",
            )
            yield StreamError(message=_failed(partial, error), error=error)
            return
        content: list[AssistantContent] = []
        for kind, text in (("thinking", reply.thinking), ("text", reply.text)):
            if not text:
                continue
            index = len(content)
            content.append(TextContent(text=""))
            for start in range(0, len(text), self._chunk):
                await asyncio.sleep(self._delay)
                so_far = text[: start + self._chunk]
                content[index] = (
                    ThinkingContent(thinking=so_far)
                    if kind == "thinking"
                    else TextContent(text=so_far)
                )
                partial = evolve(partial, content=tuple(content))
                yield StreamDelta(
                    kind="thinking" if kind == "thinking" else "text",
                    content_index=index,
                    delta=text[start : start + self._chunk],
                    partial=partial,
                )
        if reply.error is not None:
            error = ProviderError(
                reply.error, retryable=reply.retryable, error_type=reply.error_type
            )
            yield StreamError(message=_failed(partial, error), error=error)
            return
        for call in reply.tool_calls:
            await asyncio.sleep(self._delay)
            content.append(
                ToolCall(
                    id=call.id or f"faux_call_{next(_ids)}",
                    name=call.name,
                    arguments=call.arguments,
                )
            )
            partial = evolve(partial, content=tuple(content))
            yield StreamDelta(
                kind="toolcall", content_index=len(content) - 1, delta="", partial=partial
            )
        stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
        yield StreamDone(
            message=evolve(
                partial,
                stop_reason=stop,
                usage=_usage(request, reply, self._token_estimates),
                timestamp=now_ms(),
            )
        )

    def _next(self, request: ModelRequest) -> FauxReply | None:
        if self._script is not None:
            item: FauxReply | str | FauxScript = self._script
        elif self._queue:
            item = self._queue.pop(0)
        else:
            return None
        value = item(request) if callable(item) else item
        return FauxReply(text=value) if isinstance(value, str) else value


def _failed(partial: AssistantMessage, error: ProviderError) -> AssistantMessage:
    return evolve(partial, stop_reason="error", error_message=error.message, timestamp=now_ms())


def _usage(request: ModelRequest, reply: FauxReply, known: dict[int, tuple[object, int]]) -> Usage:
    input_tokens = -(-len(request.system_prompt) // 4)
    for message in request.messages:
        # Messages are frozen and reused from request to request: estimate each once (the
        # entry keeps the message alive, so its id() is not reused meanwhile).
        cached = known.get(id(message))
        if cached is None or cached[0] is not message:
            cached = known[id(message)] = (message, estimate_tokens((message,)))
        input_tokens += cached[1]
    chars_out = len(reply.text) + len(reply.thinking)
    chars_out += sum(len(c.name) + len(str(c.arguments)) for c in reply.tool_calls)
    output_tokens = -(-chars_out // 4)
    return Usage(
        input=input_tokens, output=output_tokens, total_tokens=input_tokens + output_tokens
    )
