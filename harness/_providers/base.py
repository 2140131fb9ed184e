"""The model interface the agent loop streams from, and the events a stream yields.

A *model* here is a configured endpoint: it knows its provider, its model id and how to stream
one request. The loop never sees SDK types: providers translate at their boundary and raise or
report :class:`~harness.ProviderError` only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from attrs import field, frozen

from hooks import AssistantMessage, JSONValue, StreamOptions, ToolResultMessage, UserMessage

from .._errors import ProviderError

__all__ = [
    "LlmMessage",
    "Model",
    "ModelRequest",
    "StreamDelta",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamResponse",
    "StreamStart",
    "ThinkingLevel",
    "ToolSpec",
]

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]

LlmMessage: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
"""The only roles a provider receives; the loop converts the rest (pi's ``convertToLlm``)."""


@frozen(kw_only=True)
class ToolSpec:
    """What the model is told about a tool: name, description and JSON-schema ``parameters``."""

    name: str
    description: str
    parameters: Mapping[str, JSONValue]


def _llm_messages(value: Iterable[LlmMessage]) -> tuple[LlmMessage, ...]:
    return tuple(value)


def _tool_specs(value: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    return tuple(value)


@frozen(kw_only=True)
class ModelRequest:
    """One request to a model.

    ``messages`` is already normalised (tool results follow their calls, no empty blocks) and holds
    only user, assistant and tool-result messages. ``max_tokens`` None lets the model choose its
    default. ``session_id`` is passed along for providers that use it (caching, metadata).
    ``options`` are the request's stream options (timeout, headers, metadata, caching) after
    ``before_provider_request`` hooks; retries are the harness's, not the provider's.
    """

    system_prompt: str
    messages: tuple[LlmMessage, ...] = field(converter=_llm_messages)
    tools: tuple[ToolSpec, ...] = field(default=(), converter=_tool_specs)
    thinking_level: ThinkingLevel = "off"
    max_tokens: int | None = None
    session_id: str | None = None
    options: StreamOptions = field(factory=StreamOptions)


@frozen(kw_only=True)
class StreamResponse:
    """The HTTP response arrived (status and headers), before any content."""

    status: int
    headers: Mapping[str, str]


@frozen(kw_only=True)
class StreamStart:
    """The reply started; ``partial`` is the (empty) message being built."""

    partial: AssistantMessage


@frozen(kw_only=True)
class StreamDelta:
    """A piece of the reply arrived.

    ``kind`` says which block grew; ``content_index`` indexes ``partial.content``; ``delta`` is the
    new text (for ``toolcall``: raw JSON text of the arguments so far).
    """

    kind: Literal["text", "thinking", "toolcall"]
    content_index: int
    delta: str
    partial: AssistantMessage


@frozen(kw_only=True)
class StreamDone:
    """The reply finished; ``message.stop_reason`` is stop, length, toolUse or refusal."""

    message: AssistantMessage


@frozen(kw_only=True)
class StreamError:
    """The request failed. ``message`` holds what arrived, with ``stop_reason="error"``."""

    message: AssistantMessage
    error: ProviderError


StreamEvent: TypeAlias = StreamResponse | StreamStart | StreamDelta | StreamDone | StreamError


@runtime_checkable
class Model(Protocol):
    """A model the loop can stream from.

    ``stream`` yields, in order: optionally one :class:`StreamResponse`, one :class:`StreamStart`,
    any number of :class:`StreamDelta`, then exactly one :class:`StreamDone` or
    :class:`StreamError`. It does not raise for request failures; it reports them as
    :class:`StreamError` (cancellation propagates as ``asyncio.CancelledError``).
    """

    @property
    def provider(self) -> str:
        """Provider name as stored in sessions (``anthropic``, ``faux``)."""
        ...

    @property
    def id(self) -> str:
        """Model id as stored in sessions (``claude-sonnet-4-5``)."""
        ...

    @property
    def api(self) -> str:
        """API name as stored in assistant messages (``anthropic-messages``)."""
        ...

    def build_payload(self, request: ModelRequest) -> Mapping[str, JSONValue]:
        """The request body this model would send for ``request`` (pure; no I/O).

        The harness shows it to ``before_provider_payload`` hooks, which may return a
        replacement.
        """
        ...

    def stream(
        self, request: ModelRequest, *, payload: Mapping[str, JSONValue] | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream one reply to ``request``; send ``payload`` instead of the built body if given."""
        ...
