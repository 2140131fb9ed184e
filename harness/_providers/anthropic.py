"""The Anthropic provider: streams replies from the Messages API through the official SDK.

Behaviour follows the Anthropic Messages API (``POST /v1/messages`` with ``stream: true``) and the
way pi's ``anthropic-messages`` provider maps it to pi messages (DESIGN §7):

* request: our user / assistant / tool-result messages become Anthropic ``messages``; the tool
  results that answer one assistant turn are merged into one user message; empty text blocks and
  messages left empty are never sent; thinking blocks and server-tool blocks (web search, code
  execution, MCP ...) go back exactly as the API sent them; :class:`~hooks.StreamOptions` give
  the timeout, extra headers, ``metadata.user_id`` and the prompt-cache retention;
* stream: raw SSE events (``message_start``, ``content_block_*``, ``message_delta``,
  ``message_stop``) are accumulated into one :class:`~hooks.AssistantMessage`; a ``pause_turn``
  stop is continued here (a follow-up request), up to a cap, and merged into the same message;
* errors: every SDK or transport failure becomes a :class:`~harness.ProviderError` reported as a
  :class:`~harness._providers.base.StreamError`; nothing from ``anthropic`` leaves this module.
  This provider never retries: it classifies (``retryable``, ``error_type``,
  ``retry_after_s``) and the harness decides, so each attempt is visible as a ``retry`` event.

Units: token counts are tokens; ``max_tokens`` and thinking budgets are output tokens; times are
seconds.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from typing import Any, Final, Literal

import anthropic
import orjson
from anthropic.types import (
    InputJSONDelta,
    Message,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
)
from attrs import define, field

from hooks import (
    AssistantContent,
    AssistantMessage,
    CacheRetention,
    JSONValue,
    StopReason,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownContent,
    now_ms,
)
from repos import block_kind, content_blocks, encode_message, slots_of

from .._errors import MissingApiKeyError, ProviderError
from .base import (
    DEFAULT_STREAM_IDLE_TIMEOUT_S,
    IdleDeadline,
    LlmMessage,
    ModelRequest,
    ReplyBudget,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
    ThinkingLevel,
    ToolSpec,
    client_secrets,
    is_context_overflow,
    is_transport_timeout,
    priced_usage,
    retry_after_s,
    server_error,
    status_retryable,
)
from .registry import ModelRegistry

__all__ = [
    "ANTHROPIC_API",
    "CACHE_CONTROL",
    "THINKING_BUDGETS",
    "AnthropicModel",
    "convert_messages",
]

ANTHROPIC_API: Final = "anthropic-messages"
"""The ``api`` value stored in assistant messages this provider writes (pi's name)."""

THINKING_BUDGETS: Final[Mapping[ThinkingLevel, int]] = {
    "minimal": 1024,
    "low": 4096,
    "medium": 10240,
    "high": 20480,
    "xhigh": 32000,
}
"""``thinking.budget_tokens`` per thinking level, in tokens (pi's default budgets)."""

CACHE_CONTROL: Final[Mapping[CacheRetention, Mapping[str, str] | None]] = {
    "none": None,
    "short": {"type": "ephemeral"},  # the API's default 5-minute cache
    "long": {"type": "ephemeral", "ttl": "1h"},
}
"""The ``cache_control`` marker sent per :data:`~hooks.CacheRetention` (None: no caching)."""

_REDACTED_THINKING_TEXT: Final = "[Reasoning redacted]"  # what pi shows for redacted_thinking

_STOP_REASONS: Final[Mapping[str, StopReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",  # continued here; extra["pauseTurn"] once the cap is reached
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
    "refusal": "refusal",
}

# Error types the API uses for transient failures (https://docs.anthropic.com/en/api/errors).
_RETRYABLE_ERROR_TYPES: Final = frozenset(
    {"overloaded_error", "rate_limit_error", "api_error", "timeout_error"}
)

# The API's error type for a status, for error bodies that carry none (a proxy's HTML page).
_STATUS_ERROR_TYPES: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# Blocks in which the API runs a tool itself; the result comes back as a block whose
# ``tool_use_id`` names the use (web_search_tool_result, mcp_tool_result ...).
_SERVER_TOOL_USES: Final = frozenset({"server_tool_use", "mcp_tool_use"})

_TOOL_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def _api_schema(schema: Mapping[str, JSONValue]) -> dict[str, Any]:
    """``schema`` as the API takes it: objects closed (``additionalProperties: false``), the
    constraints it does not enforce moved into descriptions (the SDK's ``transform_schema``);
    the harness still validates the answer against the schema as given. A schema the SDK
    cannot adapt is sent as it is (the API then says what it refuses)."""
    plain: dict[str, Any] = orjson.loads(orjson.dumps(schema))
    try:
        return anthropic.transform_schema(plain)
    except (ValueError, TypeError, KeyError):
        return plain


# What resets the idle deadline besides a non-empty delta (an empty delta does not: a server
# could send those for ever).
_CONTENT_EVENTS = frozenset(
    {"message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"}
)


def _env_credentials() -> bool:
    return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))


class AnthropicModel:
    """A Claude model reached through the Anthropic Messages API (streaming).

    Implements :class:`~harness._providers.base.Model`. Failed requests are not retried here
    (the SDK's own retries are off unless ``max_retries`` says otherwise): every failure is
    reported with :attr:`ProviderError.retryable`, ``error_type`` and ``retry_after_s`` set, and
    the harness retries, so each attempt can be shown.

    Args:
        model_id: Anthropic model id (``claude-sonnet-4-5``); also the ``model`` stored in replies.
        client: an SDK client to use (not closed by :meth:`aclose`); when given, ``api_key``,
            ``base_url`` and ``max_retries`` are ignored.
        api_key: API key; None reads ``ANTHROPIC_API_KEY`` (or the SDK's
            ``ANTHROPIC_AUTH_TOKEN``).
        base_url: API base URL; None lets the SDK use its default (or ``ANTHROPIC_BASE_URL``).
        max_tokens: default ``max_tokens`` (output tokens) when the request sets none.
        max_retries: retries done by the SDK itself before the stream starts, invisible to the
            harness; 0 (the default) leaves retrying to the harness.
        temperature: sampling temperature sent with every request, None for the API's default.
            Not sent while thinking is on (the API rejects it then).
        max_pause_continuations: how many times a reply that stops with ``pause_turn`` (a
            server tool ran long) is continued before it is returned as it stands.
        registry: where the model's prices come from (each reply's ``usage.cost``); default
            the package's registry. A model it does not know costs 0.
        structured_output: send ``prompt(output_schema=...)``'s schema as
            ``output_config.format`` (the API's structured outputs; the schema is adapted
            with the SDK's ``transform_schema``). False for a model that does not take it:
            the harness then offers a ``respond`` tool instead.
        stream_idle_timeout_s: a reply that gets no content (a block's start, delta or stop,
            a ``message_delta``) for this many seconds ends as an error (``error_type=
            "stream_stalled"``, retryable), keeping what arrived: ``ping`` events do not count
            (the SDK's timeout is per read, so pings could hold a run for ever). None: no
            limit but the SDK's.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 8192,
        max_retries: int = 0,
        temperature: float | None = None,
        max_pause_continuations: int = 5,
        registry: ModelRegistry | None = None,
        structured_output: bool = True,
        stream_idle_timeout_s: float | None = DEFAULT_STREAM_IDLE_TIMEOUT_S,
    ) -> None:
        if stream_idle_timeout_s is not None and not stream_idle_timeout_s > 0:
            raise ValueError(
                f"stream_idle_timeout_s must be more than 0 or None, got {stream_idle_timeout_s}"
            )
        self._idle_timeout_s = stream_idle_timeout_s
        if max_pause_continuations < 0:
            raise ValueError(
                f"max_pause_continuations must be 0 or more, got {max_pause_continuations}"
            )
        if client is None and not api_key and not _env_credentials():
            raise MissingApiKeyError(
                "AnthropicModel needs an API key: set the ANTHROPIC_API_KEY environment "
                "variable, or pass api_key=... or client=...",
                variable="ANTHROPIC_API_KEY",
            )
        self._id = model_id
        self._owns_client = client is None
        self._client = (
            client
            if client is not None
            else anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=max_retries
            )
        )
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._max_pause_continuations = max_pause_continuations
        self._registry = registry
        self._structured_output = structured_output

    @property
    def provider(self) -> str:
        """Always ``anthropic``."""
        return "anthropic"

    @property
    def supports_output_schema(self) -> bool:
        """Whether ``ModelRequest.output_schema`` is sent (``structured_output``)."""
        return self._structured_output

    @property
    def id(self) -> str:
        """The model id given at construction."""
        return self._id

    @property
    def api(self) -> str:
        """Always ``anthropic-messages``."""
        return ANTHROPIC_API

    def __repr__(self) -> str:
        return f"AnthropicModel({self._id!r})"

    async def aclose(self) -> None:
        """Close the SDK client if this model created it; a client passed in is left open."""
        if self._owns_client:
            await self._client.close()

    def build_payload(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request body for ``request`` (without ``stream``).

        Pure: no I/O, and a new dict each call (the caller may change it and pass it to
        :meth:`stream`).

        * Thinking levels other than ``off`` send ``thinking={"type": "enabled", "budget_tokens":
          THINKING_BUDGETS[level]}`` and raise ``max_tokens`` to budget + max_tokens when it
          would not exceed the budget (the API requires ``budget_tokens < max_tokens``); the
          ``temperature`` is then left out.
        * ``request.options.cache_retention`` puts :data:`CACHE_CONTROL` on the system prompt and
          on the last block of the last message when that is a user message (``none``: nowhere).
        * ``request.options.metadata``: only ``user_id`` (a non-empty string) is sent, as
          ``metadata.user_id``; the API accepts no other key, so other keys are dropped.

        * ``request.output_schema``: sent as ``output_config.format`` (``json_schema``), unless
          the model was made with ``structured_output=False``.

        Returns:
            A JSON-ready dict: ``model``, ``max_tokens``, ``messages`` and, when present,
            ``system``, ``tools``, ``thinking``, ``temperature``, ``metadata``,
            ``output_config``.
        """
        options = request.options
        cache_control = CACHE_CONTROL[options.cache_retention]
        max_tokens = request.max_tokens if request.max_tokens is not None else self._max_tokens
        payload: dict[str, Any] = {"model": self._id, "max_tokens": max_tokens}
        if request.system_prompt.strip():
            system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
            if cache_control is not None:
                system["cache_control"] = dict(cache_control)
            payload["system"] = [system]
        messages = convert_messages(request.messages)
        if cache_control is not None:
            _mark_cache_breakpoint(messages, cache_control)
        payload["messages"] = messages
        if request.tools:
            payload["tools"] = [_tool_param(tool) for tool in request.tools]
        if request.thinking_level != "off":
            budget = THINKING_BUDGETS[request.thinking_level]
            payload["thinking"] = {"type": "enabled", "budget_tokens": budget}
            if max_tokens <= budget:
                payload["max_tokens"] = budget + max_tokens
        elif self._temperature is not None:
            payload["temperature"] = self._temperature
        user_id = options.metadata.get("user_id")
        if isinstance(user_id, str) and user_id:
            payload["metadata"] = {"user_id": user_id}
        if request.output_schema is not None and self._structured_output:
            payload["output_config"] = {
                "format": {"type": "json_schema", "schema": _api_schema(request.output_schema)}
            }
        return payload

    async def stream(
        self, request: ModelRequest, *, payload: Mapping[str, Any] | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one reply to ``request`` from the Messages API.

        Args:
            request: what to ask; its ``options`` give the timeout (``timeout_s``, None for the
                SDK's default) and extra HTTP ``headers``, also when ``payload`` is given.
            payload: the request body to send instead of :meth:`build_payload`'s (a
                ``before_provider_payload`` hook's replacement), sent as given apart from
                ``stream: true``; never changed.

        Yields, in order: one :class:`StreamResponse` (HTTP status and headers of the first
        response, also for an HTTP error), :class:`StreamStart`, :class:`StreamDelta` per
        non-empty text, thinking or tool input delta, then exactly one :class:`StreamDone` or
        :class:`StreamError`.

        ``pause_turn`` (the API paused a long server-tool turn): the request is sent again with
        the paused content appended as an assistant turn (server-tool blocks as received), and
        the continuation's blocks, deltas (``content_index`` counting on) and usage (summed) go
        into the same reply. After ``max_pause_continuations`` continuations the reply is
        returned as it stands: stop reason ``stop`` and ``extra["pauseTurn"] = True``.

        Stop reasons (Anthropic -> ours): ``end_turn``/``stop_sequence`` -> ``stop``;
        ``max_tokens``/``model_context_window_exceeded`` -> ``length`` (not an error);
        ``tool_use`` -> ``toolUse``; ``refusal`` -> ``refusal`` with ``extra["stopDetails"]``. A
        tool call whose block never closed or whose input JSON does not parse is dropped from
        the reply, so it can never run; outside a ``length`` stop that is reported as an error
        (``error_type="invalid_tool_input"``).

        Errors are reported, not raised: ``StreamError.message`` holds what arrived, with
        ``stop_reason="error"``, and ``StreamError.error`` is a :class:`ProviderError` (see its
        ``error_type`` values). ``retryable`` is True for overloaded (529), rate limits (429),
        other 5xx, 408/409, connection errors, timeouts, transient SSE ``error`` events and a
        stream that ended without ``message_stop``; an ``x-should-retry`` header overrides the
        status; a context overflow (``error_type="context_overflow"``) is never retryable.
        ``retry_after_s`` comes from ``retry-after-ms`` / ``retry-after``.

        Cancellation (``asyncio.CancelledError``) propagates; the HTTP response is closed first,
        as it is when the consumer stops early (``aclose()``). ``request.session_id`` is not sent.
        """
        body = _plain(payload) if payload is not None else self.build_payload(request)
        body["stream"] = True
        messages = body.get("messages")
        base_messages: list[Any] = list(messages) if isinstance(messages, list) else []
        options = _sdk_options(request.options)
        # A server may echo what it was sent: errors never carry the credentials.
        secrets = client_secrets(
            self._client, self._client.default_headers, request.options.headers
        )
        builder = _ReplyBuilder(model=self._id, registry=self._registry)
        started = False
        continuations = 0
        budget = ReplyBudget(what="the Anthropic server")  # over every continuation
        while True:
            try:
                sdk_stream = await self._client.post(
                    "/v1/messages",
                    cast_to=Message,
                    body=body,
                    options=options,
                    stream=True,
                    stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
                )
            except Exception as exc:  # the SDK boundary: whatever it raises is a failed request
                error = server_error(_request_error(exc), secrets)
                if not started:
                    if isinstance(exc, anthropic.APIStatusError):
                        headers = dict(exc.response.headers)
                        yield StreamResponse(status=exc.status_code, headers=headers)
                    yield StreamStart(partial=builder.partial())
                yield StreamError(message=builder.failed(error), error=error)
                return
            events = sdk_stream.__aiter__()
            idle = IdleDeadline(self._idle_timeout_s, "the Anthropic server")
            try:
                if not started:
                    response = sdk_stream.response
                    yield StreamResponse(
                        status=response.status_code, headers=dict(response.headers)
                    )
                    yield StreamStart(partial=builder.partial())
                    started = True
                while True:
                    try:
                        event = await idle.next(events)
                    except StopAsyncIteration:
                        break
                    except ProviderError as stalled:  # only keep-alive pings for too long
                        yield StreamError(message=builder.failed(stalled), error=stalled)
                        return
                    except Exception as exc:  # SDK/transport failure while reading the body
                        error = server_error(_stream_error(exc), secrets)
                        yield StreamError(message=builder.failed(error), error=error)
                        return
                    try:
                        deltas = list(builder.apply(event))
                    except MalformedEventError as exc:
                        bad = ProviderError(
                            f"Anthropic stream sent a malformed event: {exc}",
                            retryable=False,
                            error_type="invalid_response",
                        )
                        yield StreamError(message=builder.failed(bad), error=bad)
                        return
                    if deltas or getattr(event, "type", None) in _CONTENT_EVENTS:
                        idle.content()
                    for delta in deltas:
                        yield delta
                    over = budget.spend(deltas)
                    if over is not None:
                        yield StreamError(message=builder.failed(over), error=over)
                        return
            finally:
                # A failed close leaves nothing to report or undo (cancellation still propagates).
                with contextlib.suppress(Exception):
                    if isinstance(events, AsyncGenerator):
                        await events.aclose()  # else GC finalises it later, outside this task
                    await sdk_stream.close()
            failed = builder.segment_error()
            if failed is not None:
                yield failed
                return
            if not builder.paused or continuations >= self._max_pause_continuations:
                yield builder.done()
                return
            continuations += 1
            turn = builder.continuation_blocks()
            body = {**body, "messages": _with_assistant_turn(base_messages, turn)}
            builder.next_segment()


def _sdk_options(options: StreamOptions) -> anthropic.RequestOptions:
    """Per-request SDK options: the timeout (seconds) and the extra headers."""
    sdk_options: anthropic.RequestOptions = {}
    if options.timeout_s is not None:
        sdk_options["timeout"] = options.timeout_s
    if options.headers:
        sdk_options["headers"] = dict(options.headers)
    return sdk_options


def _with_assistant_turn(messages: list[Any], blocks: list[dict[str, Any]]) -> list[Any]:
    """``messages`` followed by an assistant turn of ``blocks`` (a prefill is extended)."""
    if messages and isinstance(messages[-1], Mapping) and messages[-1].get("role") == "assistant":
        last = messages[-1]
        content = last.get("content")
        if isinstance(content, str):
            prefill: list[Any] = [{"type": "text", "text": content}] if content else []
        else:
            prefill = list(content) if isinstance(content, list) else []
        return [*messages[:-1], {**last, "content": [*prefill, *blocks]}]
    return [*messages, {"role": "assistant", "content": blocks}]


# --- request building -------------------------------------------------------------------------


def convert_messages(messages: Sequence[LlmMessage]) -> list[dict[str, Any]]:
    """Convert our messages to Anthropic ``messages`` (Messages API shapes).

    Consecutive tool results become one user message of ``tool_result`` blocks (the API wants all
    results of an assistant turn in the next user message). Whitespace-only text blocks are
    dropped (the API rejects them), and so is a message left with no content. Thinking, redacted
    thinking and unknown blocks (server-tool blocks such as ``server_tool_use``,
    ``web_search_tool_result``, ``mcp_tool_use``, ``code_execution_tool_result``) are sent back
    unchanged only when the message came from this API; from another API, thinking becomes plain
    text (its signature would not verify) and the rest is dropped. A server-tool use left without
    its result (a reply returned at the ``pause_turn`` cap) is dropped too, unless its message is
    the last one (a turn still being continued).

    Built from the messages' JSON (``repos.slots_of``; blocks read as the decoder reads them,
    ``repos.block_kind``), so a session's context is not built as typed values for a request.
    """
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    slots = slots_of(messages)
    last = len(slots) - 1
    for position, slot in enumerate(slots):
        m, role = slot.json, slot.role
        if role == "toolResult":
            results.append(_tool_result_param(m))
            continue
        if results:
            out.append({"role": "user", "content": results})
            results = []
        if role == "user":
            content = m.get("content", "")
            if isinstance(content, str):
                if content.strip():
                    out.append({"role": "user", "content": content})
                continue
            blocks = _user_blocks(content)
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif role == "assistant":
            blocks = _assistant_blocks(m)
            if position != last:
                blocks = _without_dangling_server_tool_uses(blocks)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    if results:
        out.append({"role": "user", "content": results})
    return out


def _user_blocks(content: list[Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        kind = block_kind(block, reply=False)
        if kind == "text":
            if block["text"].strip():
                blocks.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            source = {"type": "base64", "media_type": block["mimeType"], "data": block["data"]}
            blocks.append({"type": "image", "source": source})
        else:
            blocks.append(_plain(block))
    return blocks


def _assistant_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    native = message.get("api") == ANTHROPIC_API
    blocks: list[dict[str, Any]] = []
    for block in content_blocks(message):
        kind = block_kind(block, reply=True)
        if kind == "text":
            if block["text"].strip():
                blocks.append({"type": "text", "text": block["text"]})
        elif kind == "thinking":
            blocks.extend(_thinking_blocks(block, native=native))
        elif kind == "toolCall":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": _tool_id(block["id"]),
                    "name": block["name"],
                    "input": _plain(block.get("arguments", {})),
                }
            )
        elif native:
            blocks.append(_plain(block))
    return blocks


def _without_dangling_server_tool_uses(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answered = {block.get("tool_use_id") for block in blocks}
    return [
        block
        for block in blocks
        if block.get("type") not in _SERVER_TOOL_USES or block.get("id") in answered
    ]


def _thinking_blocks(block: Mapping[str, Any], *, native: bool) -> list[dict[str, Any]]:
    signature = block.get("thinkingSignature")
    redacted = bool(block.get("redacted", False))
    if native and redacted and signature:
        return [{"type": "redacted_thinking", "data": signature}]
    if redacted:
        return []
    if native and signature:
        return [{"type": "thinking", "thinking": block["thinking"], "signature": signature}]
    # No valid signature (another API, or a stream cut before signature_delta): the API would
    # reject the block, so the reasoning goes back as plain text, as pi does.
    if block["thinking"].strip():
        return [{"type": "text", "text": block["thinking"]}]
    return []


def _tool_result_param(message: Mapping[str, Any]) -> dict[str, Any]:
    # as the decoder reads it: anything but true is not an error (a session line's `null`
    # stays in the message's extra keys, and came back here: issue 24 attack, F2)
    is_error = message.get("isError") is True
    param: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": _tool_id(message["toolCallId"]),
        "is_error": is_error,
    }
    content = _user_blocks(content_blocks(message))
    if not content and is_error:
        # The API rejects an error result with empty content.
        content = [{"type": "text", "text": "(no error message)"}]
    if content:
        param["content"] = content
    return param


def _tool_param(tool: ToolSpec) -> dict[str, Any]:
    schema = _plain(tool.parameters)
    schema.setdefault("type", "object")  # the API requires an object schema
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def _tool_id(tool_call_id: str) -> str:
    # Anthropic ids must match ^[a-zA-Z0-9_-]+$ (max 64); ids from other providers may not.
    return _TOOL_ID_INVALID.sub("_", tool_call_id)[:64]


def _mark_cache_breakpoint(
    messages: list[dict[str, Any]], cache_control: Mapping[str, str]
) -> None:
    """Put ``cache_control`` on the last block of the last message if it is a user message.

    Only text, image and tool_result blocks take it; ``convert_messages`` never leaves an empty
    text block, so an empty block can never carry it.
    """
    if not messages or messages[-1]["role"] != "user":
        return
    last = messages[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    block = last["content"][-1]
    if block.get("type") in ("text", "image", "tool_result"):
        block["cache_control"] = dict(cache_control)


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``value`` as plain dicts and lists, which the SDK can serialise."""
    return {key: _plain_value(item) for key, item in value.items()}


def _plain_value(value: JSONValue) -> JSONValue:
    if isinstance(value, Mapping):
        return _plain(value)
    if isinstance(value, list | tuple):
        return [_plain_value(item) for item in value]
    return value


_MAX_COUNT = 10**12  # a token count past this is nonsense from the server


class MalformedEventError(ValueError):
    """A stream event holds a value of the wrong type (the SDK does not check them)."""


def _index(event: object) -> int:
    index = getattr(event, "index", None)
    if isinstance(index, bool) or not isinstance(index, int):
        raise MalformedEventError(f"a block index that is not an integer: {index!r:.40}")
    return index


def _string(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise MalformedEventError(f"a {name} that is not text: {value!r:.40}")
    return value


# --- stream accumulation ----------------------------------------------------------------------

_BlockKind = Literal["text", "thinking", "redacted", "tool", "server_tool", "opaque"]


@define
class _Block:
    """One content block being streamed, keyed by its Anthropic ``index``."""

    kind: _BlockKind
    raw: dict[str, Any]  # the content_block_start payload, as sent by the API
    content_index: int
    parts: list[str] = field(factory=list)  # text, thinking or input JSON pieces
    signature: list[str] = field(factory=list)
    closed: bool = False
    input: dict[str, Any] | None = None  # parsed tool input, once closed and valid
    cached: AssistantContent | None = None  # last rendering, reused until the block changes

    def render(self) -> AssistantContent:
        if self.cached is None:
            self.cached = self._render()
        return self.cached

    def _render(self) -> AssistantContent:
        if self.kind in ("text", "thinking"):
            joined = "".join(self.parts)
            self.parts[:] = [joined] if joined else []  # the next partial joins two parts, not all
        if self.kind == "text":
            return TextContent(text=joined)
        if self.kind == "thinking":
            signature = "".join(self.signature) or None
            return ThinkingContent(thinking=joined, thinking_signature=signature)
        if self.kind == "redacted":
            data = str(self.raw.get("data", ""))
            return ThinkingContent(
                thinking=_REDACTED_THINKING_TEXT, thinking_signature=data, redacted=True
            )
        if self.kind == "tool":
            return ToolCall(
                id=str(self.raw.get("id", "")),
                name=str(self.raw.get("name", "")),
                arguments=self.input if self.input is not None else {},
            )
        if self.kind == "server_tool" and self.input is not None:
            return UnknownContent(raw={**self.raw, "input": self.input})
        return UnknownContent(raw=self.raw)

    def close(self) -> None:
        self.closed = True
        self.cached = None
        if self.kind in ("tool", "server_tool"):
            self.input = _parse_input(self.parts, self.raw.get("input"))

    def kept(self) -> bool:
        """Whether the finished reply keeps this block."""
        if self.kind == "text":
            return any(self.parts)  # the API rejects empty text blocks sent back
        if self.kind == "thinking":
            return any(self.parts) or any(self.signature)
        if self.kind in ("tool", "server_tool"):
            # A half tool call (cut at max_tokens, or broken JSON) must never be executed.
            return self.closed and self.input is not None
        return True


def _parse_input(parts: list[str], start_input: object) -> dict[str, Any] | None:
    """The tool input: the streamed JSON, else the start block's input; None if invalid."""
    text = "".join(parts)
    if not text.strip():
        # No input_json_delta, or only "" (stream-tool-use.sse): the input is the start's, {}.
        return dict(start_input) if isinstance(start_input, dict) else {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


_BLOCK_KINDS: Final[Mapping[str, _BlockKind]] = {
    "text": "text",
    "thinking": "thinking",
    "redacted_thinking": "redacted",
    "tool_use": "tool",
    "server_tool_use": "server_tool",
    "mcp_tool_use": "server_tool",
}


_USAGE_FIELDS: Final = ("input", "output", "cache_read", "cache_write")


class _ReplyBuilder:
    """Accumulates raw stream events into an :class:`AssistantMessage`; no I/O.

    A reply may span several responses (*segments*: a ``pause_turn`` and its continuations);
    blocks keep counting across them, usage is summed.
    """

    def __init__(self, *, model: str, registry: ModelRegistry | None) -> None:
        self._model = model
        self._registry = registry
        self._timestamp = now_ms()  # one timestamp for every partial and the final message
        self._blocks: dict[int, _Block] = {}  # this segment's blocks by Anthropic index
        self._order: list[_Block] = []  # every segment's blocks, in stream order
        self._usage: dict[str, int] = dict.fromkeys(_USAGE_FIELDS, 0)  # this segment's
        self._prior_usage: dict[str, int] = dict.fromkeys(_USAGE_FIELDS, 0)  # earlier segments'
        self._stop_reason: str | None = None
        self._stop_details: dict[str, Any] | None = None
        self._stopped = False

    # segments

    @property
    def paused(self) -> bool:
        """Whether the segment just read stopped with ``pause_turn``."""
        return self._stop_reason == "pause_turn"

    def next_segment(self) -> None:
        """Start reading a continuation: block indices restart, usage adds up."""
        for name in _USAGE_FIELDS:
            self._prior_usage[name] += self._usage[name]
        self._usage = dict.fromkeys(_USAGE_FIELDS, 0)
        self._blocks = {}
        self._stop_reason = None
        self._stop_details = None
        self._stopped = False

    def continuation_blocks(self) -> list[dict[str, Any]]:
        """The reply so far as the assistant turn of a ``pause_turn`` continuation request.

        Blocks go back as the API sent them (server-tool blocks unchanged). The API rejects an
        assistant turn whose last text ends with whitespace, so that is trimmed.
        """
        blocks = _assistant_blocks(encode_message(self._message(self._kept_content(), "stop")))
        if blocks and blocks[-1].get("type") == "text":
            text = str(blocks[-1].get("text", "")).rstrip()
            blocks[-1] = {**blocks[-1], "text": text}
            if not text:
                blocks.pop()
        return blocks

    # events -> deltas

    def apply(self, event: object) -> Iterator[StreamDelta]:
        """Fold one SDK stream event in; yield a delta if visible content grew."""
        # The SDK builds events without checking types: every value is checked here, before
        # it changes anything (a wrong one raises MalformedEventError).
        if isinstance(event, RawMessageStartEvent):
            self._take_usage(getattr(getattr(event, "message", None), "usage", None))
        elif isinstance(event, RawContentBlockStartEvent):
            _index(event)
            raw = _raw_dict(event.content_block)
            kind = _BLOCK_KINDS.get(str(raw.get("type")), "opaque")
            block = _Block(kind=kind, raw=raw, content_index=len(self._order))
            # The start block may already hold content (the API sends "" today); keep it.
            if kind == "text" and raw.get("text"):
                block.parts.append(str(raw["text"]))
            elif kind == "thinking":
                if raw.get("thinking"):
                    block.parts.append(str(raw["thinking"]))
                if raw.get("signature"):
                    block.signature.append(str(raw["signature"]))
            self._blocks[event.index] = block
            self._order.append(block)
        elif isinstance(event, RawContentBlockDeltaEvent):
            growing = self._blocks.get(_index(event))
            if growing is not None:
                yield from self._apply_delta(growing, event.delta)
        elif isinstance(event, RawContentBlockStopEvent):
            stopping = self._blocks.get(_index(event))
            if stopping is not None:
                stopping.close()
        elif isinstance(event, RawMessageDeltaEvent):
            delta = getattr(event, "delta", None)
            stop_reason = getattr(delta, "stop_reason", None)
            if stop_reason is not None:
                self._stop_reason = _string(stop_reason, "stop_reason")
            stop_details = getattr(delta, "stop_details", None)
            if stop_details is not None:
                self._stop_details = _raw_dict(stop_details)
            # Cumulative counts: a field present here replaces message_start's.
            self._take_usage(getattr(event, "usage", None))
        elif isinstance(event, RawMessageStopEvent):
            self._stopped = True

    def _apply_delta(self, block: _Block, delta: object) -> Iterator[StreamDelta]:
        if isinstance(delta, TextDelta) and block.kind == "text":
            yield from self._grow(block, "text", _string(delta.text, "text"))
        elif isinstance(delta, ThinkingDelta) and block.kind == "thinking":
            yield from self._grow(block, "thinking", _string(delta.thinking, "thinking"))
        elif isinstance(delta, SignatureDelta) and block.kind == "thinking":
            block.signature.append(_string(delta.signature, "signature"))
            block.cached = None
        elif isinstance(delta, InputJSONDelta) and block.kind in ("tool", "server_tool"):
            block.parts.append(_string(delta.partial_json, "partial_json"))
            if block.kind == "tool" and delta.partial_json:
                yield self._delta("toolcall", block, delta.partial_json)
        # citations_delta and unknown deltas carry nothing we store yet.

    def _grow(
        self, block: _Block, kind: Literal["text", "thinking"], text: str
    ) -> Iterator[StreamDelta]:
        if text:
            block.parts.append(text)
            block.cached = None
            yield self._delta(kind, block, text)

    def _delta(
        self, kind: Literal["text", "thinking", "toolcall"], block: _Block, text: str
    ) -> StreamDelta:
        return StreamDelta(
            kind=kind, content_index=block.content_index, delta=text, partial=self.partial()
        )

    def _take_usage(self, usage: object) -> None:
        self._set_usage(
            input=getattr(usage, "input_tokens", None),
            output=getattr(usage, "output_tokens", None),
            cache_read=getattr(usage, "cache_read_input_tokens", None),
            cache_write=getattr(usage, "cache_creation_input_tokens", None),
        )

    def _set_usage(self, **counts: object) -> None:
        """Take the counts that are counts: the SDK builds events without checking types, and
        a server may send a negative, huge or non-numeric count (a cost must never go below
        zero nor a sum crash): a non-integer is ignored, the rest clamped to 0..10**12."""
        for name, value in counts.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self._usage[name] = min(max(value, 0), _MAX_COUNT)

    # messages

    def partial(self) -> AssistantMessage:
        """The reply so far, every started block in stream order (tool input {} until closed)."""
        return self._message(tuple(block.render() for block in self._order), "stop")

    def failed(self, error: ProviderError) -> AssistantMessage:
        """What arrived before ``error``, with half tool calls dropped; stop reason ``error``."""
        return self._message(self._kept_content(), "error", error_message=error.message)

    def segment_error(self) -> StreamError | None:
        """Once a body ended: the error if it was incomplete or left a broken tool call."""
        if not self._stopped:
            error = ProviderError(
                "Anthropic stream ended without message_stop (connection closed early?)",
                retryable=True,
                error_type="incomplete_stream",
            )
            return StreamError(message=self.failed(error), error=error)
        stop_reason = _STOP_REASONS.get(self._stop_reason or "end_turn", "stop")
        broken_tool = any(block.kind == "tool" and not block.kept() for block in self._order)
        if broken_tool and stop_reason != "length":
            # Only a reply cut at max_tokens may end inside a tool call; anything else is a
            # malformed stream, and guessing the arguments could run the wrong thing.
            error = ProviderError(
                "Anthropic stream has a tool call whose input is unfinished or not valid JSON",
                retryable=True,
                error_type="invalid_tool_input",
            )
            return StreamError(message=self.failed(error), error=error)
        return None

    def done(self) -> StreamDone:
        """The final event, once :meth:`segment_error` found nothing wrong."""
        stop_reason = _STOP_REASONS.get(self._stop_reason or "end_turn", "stop")
        extra: dict[str, Any] = {}
        if self._stop_details is not None:
            extra["stopDetails"] = self._stop_details
        if self._stop_reason == "pause_turn":
            extra["pauseTurn"] = True
        if self._stop_reason is not None and self._stop_reason not in _STOP_REASONS:
            extra["anthropicStopReason"] = self._stop_reason  # a new value; kept for later
        return StreamDone(message=self._message(self._kept_content(), stop_reason, extra=extra))

    def _kept_content(self) -> tuple[AssistantContent, ...]:
        return tuple(block.render() for block in self._order if block.kept())

    def _message(
        self,
        content: tuple[AssistantContent, ...],
        stop_reason: StopReason,
        *,
        error_message: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        u = {name: self._prior_usage[name] + self._usage[name] for name in _USAGE_FIELDS}
        return AssistantMessage(
            content=content,
            api=ANTHROPIC_API,
            provider="anthropic",
            model=self._model,
            usage=priced_usage(
                **u, provider="anthropic", model_id=self._model, registry=self._registry
            ),
            stop_reason=stop_reason,
            error_message=error_message,
            timestamp=self._timestamp,
            extra=extra or {},
        )


def _raw_dict(value: object) -> dict[str, Any]:
    """The JSON dict of an SDK model as the API sent it (unset fields left out)."""
    if isinstance(value, anthropic.BaseModel):
        return value.to_dict(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    return {}


# --- errors -----------------------------------------------------------------------------------


def _request_error(exc: Exception) -> ProviderError:
    """Translate a failure of the request itself (before any body was read).

    The SDK exception is kept as ``__cause__``, as ``raise ... from exc`` would.
    """
    error = _request_error_of(exc)
    error.__cause__ = exc
    return error


def _stream_error(exc: Exception) -> ProviderError:
    """Translate a failure while reading the SSE body (after the 200 response arrived)."""
    error = _stream_error_of(exc)
    error.__cause__ = exc
    return error


def _request_error_of(exc: Exception) -> ProviderError:
    if isinstance(exc, anthropic.APIStatusError):
        error_type, api_message = _error_body(exc.body)
        status = exc.status_code
        if not error_type:
            error_type = _STATUS_ERROR_TYPES.get(status, "api_error" if status >= 500 else "")
        message = (
            f"Anthropic API returned HTTP {status} ({error_type or 'no error type'}): "
            f"{api_message or exc.message}"
        )
        if _is_context_overflow(error_type, api_message):
            # The same request overflows again, whatever the headers say: compact first.
            return ProviderError(
                message, retryable=False, status=status, error_type="context_overflow"
            )
        headers = exc.response.headers
        retryable = status_retryable(status, headers) or (
            "x-should-retry" not in headers and error_type in _RETRYABLE_ERROR_TYPES
        )
        return ProviderError(
            message,
            retryable=retryable,
            status=status,
            error_type=error_type,
            retry_after_s=retry_after_s(headers),
        )
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(
            f"Anthropic API response did not match the expected schema: {exc}",
            retryable=False,
            status=exc.status_code,
            error_type="invalid_response",
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError(
            f"Anthropic request timed out (no response within the timeout): {exc}",
            retryable=True,
            error_type="timeout",
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError(
            f"could not reach the Anthropic API: {exc}",
            retryable=True,
            error_type="connection_error",
        )
    # Anything else is the client's own refusal (no credentials, bad arguments): retrying the
    # same request cannot help.
    return ProviderError(
        f"Anthropic request could not be sent: {type(exc).__name__}: {exc}",
        retryable=False,
        error_type="client_error",
    )


def _stream_error_of(exc: Exception) -> ProviderError:
    if isinstance(exc, anthropic.APIStatusError):
        # The SDK raises this for an SSE `event: error` (e.g. overloaded_error mid-stream).
        error_type, api_message = _error_body(exc.body)
        message = (
            f"Anthropic stream failed with {error_type or 'an error event'}: "
            f"{api_message or exc.message}"
        )
        if _is_context_overflow(error_type, api_message):
            return ProviderError(message, retryable=False, error_type="context_overflow")
        return ProviderError(
            message, retryable=error_type in _RETRYABLE_ERROR_TYPES, error_type=error_type
        )
    if is_transport_timeout(exc):
        # The SDK's transport: no data arrived within the request timeout.
        return ProviderError(
            f"Anthropic stream timed out (no data within the timeout): {type(exc).__name__}",
            retryable=True,
            error_type="timeout",
        )
    if isinstance(exc, ValueError):
        # Malformed event data (JSON or schema): the server sent something we cannot read.
        return ProviderError(
            f"Anthropic stream sent unreadable data: {type(exc).__name__}: {exc}",
            retryable=False,
            error_type="invalid_response",
        )
    # Transport errors (dropped connection, read timeout): the same request may well succeed.
    return ProviderError(
        f"Anthropic stream was interrupted: {type(exc).__name__}: {exc}",
        retryable=True,
        error_type="connection_error",
    )


def _error_body(body: object) -> tuple[str, str]:
    """``(error.type, error.message)`` of an Anthropic error body, "" where absent."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            return str(error.get("type") or ""), str(error.get("message") or "")
    return "", ""


def _is_context_overflow(error_type: str, api_message: str) -> bool:
    """Whether an API error says the prompt does not fit the model's context window."""
    return error_type in ("invalid_request_error", "") and is_context_overflow(api_message)
