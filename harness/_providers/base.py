"""The model interface the agent loop streams from, and the events a stream yields.

A *model* here is a configured endpoint: it knows its provider, its model id and how to stream
one request. The loop never sees SDK types: providers translate at their boundary and raise or
report :class:`~harness.ProviderError` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Final, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from attrs import define, field, frozen

from hooks import (
    AssistantMessage,
    Cost,
    JSONValue,
    LazyMessages,
    StreamOptions,
    ToolResultMessage,
    Usage,
    UserMessage,
)

from .._errors import ProviderError
from .registry import ModelRegistry, cost_of

__all__ = [
    "DEFAULT_STREAM_IDLE_TIMEOUT_S",
    "MAX_ERROR_CHARS",
    "MAX_REPLY_BLOCKS",
    "MAX_REPLY_CHARS",
    "MAX_REPLY_EVENTS",
    "IdleDeadline",
    "LlmMessage",
    "Model",
    "ModelRequest",
    "ReplyBudget",
    "StreamDelta",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamResponse",
    "StreamStart",
    "SupportsOutputSchema",
    "ThinkingLevel",
    "ToolSpec",
    "client_secrets",
    "is_context_overflow",
    "is_transport_timeout",
    "priced_usage",
    "retry_after_s",
    "server_error",
    "status_retryable",
    "supports_output_schema",
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


def _llm_messages(value: Iterable[LlmMessage]) -> Sequence[LlmMessage]:
    # A lazy sequence is immutable already; making it a tuple would build every message.
    return value if isinstance(value, LazyMessages) else tuple(value)


def _tool_specs(value: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    return tuple(value)


@frozen(kw_only=True)
class ModelRequest:
    """One request to a model.

    ``messages`` is already normalised (tool results follow their calls, no empty blocks) and holds
    only user, assistant and tool-result messages; the loop's is a :class:`~hooks.LazyMessages`,
    each message built when first read (a provider may read the slots' JSON instead).
    ``max_tokens`` None lets the model choose its default. ``session_id`` is passed along for
    providers that use it (caching, metadata).
    ``options`` are the request's stream options (timeout, headers, metadata, caching) after
    ``before_provider_request`` hooks; retries are the harness's, not the provider's.
    ``output_schema`` (a JSON Schema whose root is an object) asks a model that
    :class:`SupportsOutputSchema` for a final text matching it (``prompt(output_schema=...)``);
    other models never get one.
    """

    system_prompt: str
    messages: Sequence[LlmMessage] = field(converter=_llm_messages)
    tools: tuple[ToolSpec, ...] = field(default=(), converter=_tool_specs)
    thinking_level: ThinkingLevel = "off"
    max_tokens: int | None = None
    session_id: str | None = None
    options: StreamOptions = field(factory=StreamOptions)
    output_schema: Mapping[str, JSONValue] | None = None


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


@runtime_checkable
class SupportsOutputSchema(Protocol):
    """A model whose API can constrain a reply to a JSON Schema (``ModelRequest.output_schema``):
    Anthropic's ``output_config.format``, OpenAI's ``text.format`` / ``response_format``.
    ``prompt(output_schema=...)`` uses it when ``supports_output_schema`` is True, and a
    ``respond`` tool otherwise."""

    @property
    def supports_output_schema(self) -> bool: ...


def supports_output_schema(model: Model) -> bool:
    """Whether ``model`` takes ``ModelRequest.output_schema`` (:class:`SupportsOutputSchema`)."""
    return isinstance(model, SupportsOutputSchema) and model.supports_output_schema


# --- what every provider shares: retry rules, context overflow, usage and cost ----------------
# Providers never retry themselves: they classify a failure (ProviderError.retryable,
# error_type, retry_after_s) and the harness's loop decides, so every attempt is visible.

_CONTEXT_OVERFLOW: Final = re.compile(
    "|".join(
        (
            r"prompt is too long",  # Anthropic: "prompt is too long: 210000 tokens > 200000"
            r"exceeds? (?:the )?(?:model'?s? )?(?:maximum )?context (?:window|limit|length)",
            r"context (?:window|limit|length) (?:exceeded|overflow)",
            r"maximum context length",  # OpenAI Chat Completions, vLLM, OpenRouter
            r"context[_ ]length[_ ]exceeded",  # OpenAI's error code
            r"exceeds the available context size",  # llama.cpp's server
            r"greater than the context length",  # LM Studio
            r"input (?:is too long|token count.*exceeds the maximum)",
            r"maximum prompt length is \d+",
            r"reduce the length of the messages",
        )
    ),
    re.IGNORECASE,
)


def is_context_overflow(text: str) -> bool:
    """Whether an API error message (or code) says the prompt does not fit the model's window.

    The wordings of Anthropic, OpenAI (both APIs and the ``context_length_exceeded`` code) and
    the usual OpenAI-compatible servers (vLLM, llama.cpp, LM Studio, OpenRouter), as pi's
    ``isContextOverflow`` lists them. Such a failure is never retried as it is: the loop
    compacts once and sends again.
    """
    return bool(_CONTEXT_OVERFLOW.search(text))


def status_retryable(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an HTTP error may succeed when sent again: the server's own
    ``x-should-retry: true|false`` when present (both SDKs honour it), else 408, 409, 429 and
    5xx."""
    should_retry = headers.get("x-should-retry")
    if should_retry in ("true", "false"):
        return should_retry == "true"
    return status in (408, 409, 429) or status >= 500


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait the server asked for, in seconds: ``retry-after-ms``, else ``retry-after`` as
    seconds or an HTTP date; None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        with contextlib.suppress(ValueError):
            value = float(millis)
            if value >= 0 and value != float("inf"):
                return value / 1000
    retry_after = headers.get("retry-after")
    if retry_after is None:
        return None
    try:
        seconds = float(retry_after)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(retry_after)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # an HTTP date is always GMT
            return None
        return max(0.0, when.timestamp() - time.time())
    return seconds if 0 <= seconds != float("inf") else None


def is_transport_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is the HTTP library's timeout (httpx, or the fork newer SDKs ship),
    matched by class name rather than importing a transitive dependency."""
    return any(cls.__name__ == "TimeoutException" for cls in type(exc).__mro__)


MAX_REPLY_CHARS = 4_000_000
"""Characters of text, thinking and tool arguments one reply may stream (about 1M tokens, far
past any model's output limit)."""
MAX_REPLY_EVENTS = 200_000
"""Stream events one reply may have (a reply of 128k tokens, the largest output limit, has
fewer)."""
MAX_REPLY_BLOCKS = 4_096
"""Content blocks one reply may have."""


@define
class ReplyBudget:
    """What one reply has streamed so far, against the caps above: a server that streams for
    ever, or sends enormous or countless pieces, ends its reply with an error instead of
    holding the run and filling memory."""

    what: str
    chars: int = 0
    events: int = 0

    def spend(self, deltas: Iterable[StreamDelta]) -> ProviderError | None:
        """Count one stream event and the deltas it made; the error once a cap is passed."""
        self.events += 1
        blocks = 0
        for delta in deltas:
            self.chars += len(delta.delta)
            blocks = len(delta.partial.content)
        if self.chars > MAX_REPLY_CHARS:
            over = f"more than {MAX_REPLY_CHARS:,} characters"
        elif self.events > MAX_REPLY_EVENTS:
            over = f"more than {MAX_REPLY_EVENTS:,} events"
        elif blocks > MAX_REPLY_BLOCKS:
            over = f"more than {MAX_REPLY_BLOCKS:,} content blocks"
        else:
            return None
        return ProviderError(
            f"{self.what} sent {over} in one reply: it was ended there",
            retryable=False,
            error_type="reply_too_large",
        )


DEFAULT_STREAM_IDLE_TIMEOUT_S = 300.0
"""How long a reply may go without content (``stream_idle_timeout_s`` of the model classes):
the SDKs' timeout is per read, so keep-alive comments or ``ping`` events would hold a run for
ever. Long enough for a slow local model's first token."""

_T = TypeVar("_T")


class IdleDeadline:
    """The idle-content deadline of one reply: :meth:`next` waits for the stream's next event
    at most until ``timeout_s`` after the last content (:meth:`content`), whatever else the
    server sends meanwhile (keep-alives, pings, empty events); None waits as long as the SDK."""

    def __init__(self, timeout_s: float | None, what: str) -> None:
        self.timeout_s = timeout_s
        self.what = what
        self._last = time.monotonic()

    def content(self) -> None:
        """Content arrived: the deadline starts again."""
        self._last = time.monotonic()

    async def next(self, events: AsyncIterator[_T]) -> _T:
        """The next event.

        Raises:
            StopAsyncIteration: the stream ended.
            ProviderError: no content for ``timeout_s`` (``error_type="stream_stalled"``,
                retryable as a timeout is).
        """
        if self.timeout_s is None:
            return await anext(events)
        deadline = asyncio.timeout(max(0.0, self._last + self.timeout_s - time.monotonic()))
        try:
            async with deadline:
                return await anext(events)
        except TimeoutError:
            if not deadline.expired():
                raise  # the SDK's own
        raise ProviderError(
            f"{self.what} sent no content for {self.timeout_s:g} s (only keep-alives, pings or "
            "empty events): the reply was ended there (stream_idle_timeout_s)",
            retryable=True,
            error_type="stream_stalled",
        )


_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie", re.I)
_MIN_SECRET_CHARS = 8  # shorter values (a placeholder key) would blank ordinary words


def client_secrets(client: object, *headers: Mapping[str, object]) -> tuple[str, ...]:
    """What an SDK client sends that must never be shown or stored: its API key and token,
    the password of its base URL, and the values of credential-like ``headers``."""
    found = [getattr(client, "api_key", None), getattr(client, "auth_token", None)]
    found.append(getattr(getattr(client, "base_url", None), "password", None))
    for name, value in (item for mapping in headers for item in mapping.items()):
        if _SECRET_HEADER.search(name) and isinstance(value, str):
            found.append(value)
            found.append(value.partition(" ")[2])  # "Bearer <token>": the token alone too
    return tuple(s for s in found if isinstance(s, str) and len(s) >= _MIN_SECRET_CHARS)


MAX_ERROR_CHARS = 2_000
"""An error message from a server is cut to this many characters."""


def server_error(error: ProviderError, secrets: Iterable[str]) -> ProviderError:
    """``error`` as it may be stored and shown: each of ``secrets`` in its message replaced by
    ``[redacted]`` (a server may echo the key it was sent: "Incorrect API key provided:
    sk-..."), and the message cut to :data:`MAX_ERROR_CHARS` (a server's error text is stored
    in the session with every failed reply)."""
    message = error.message
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, "[redacted]")
    if len(message) > MAX_ERROR_CHARS:
        cut = len(message) - MAX_ERROR_CHARS
        message = f"{message[:MAX_ERROR_CHARS]}… ({cut} more characters)"
    if message != error.message:
        error.message = message
        error.args = (message,)
    return error


def priced_usage(
    *,
    input: int,
    output: int,
    cache_read: int,
    cache_write: int,
    provider: str,
    model_id: str,
    registry: ModelRegistry | None = None,
) -> Usage:
    """A reply's :class:`~hooks.Usage` (tokens; ``input`` excludes cached tokens) with its cost
    from the model's prices in ``registry`` (default: the package's), as pi prices each reply;
    a model without known prices costs 0 (shown as unknown, never guessed)."""
    usage = Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input + output + cache_read + cache_write,
    )
    info = (registry or ModelRegistry.builtin()).find(model_id, provider)
    cost = cost_of(usage, info.prices if info is not None else None)
    return Usage(
        input=usage.input,
        output=usage.output,
        cache_read=usage.cache_read,
        cache_write=usage.cache_write,
        total_tokens=usage.total_tokens,
        cost=cost if cost is not None else Cost(),
    )
