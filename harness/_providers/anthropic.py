"""The Anthropic provider: streams replies from the Messages API through the official SDK.

Behaviour follows the Anthropic Messages API (``POST /v1/messages`` with ``stream: true``) and the
way pi's ``anthropic-messages`` provider maps it to pi messages (DESIGN §7):

* request: our user / assistant / tool-result messages become Anthropic ``messages``; the tool
  results that answer one assistant turn are merged into one user message; empty text blocks and
  messages left empty are never sent; thinking blocks go back with their signatures;
* stream: raw SSE events (``message_start``, ``content_block_*``, ``message_delta``,
  ``message_stop``) are accumulated into one :class:`~hooks.AssistantMessage`;
* errors: every SDK or transport failure becomes a :class:`~harness.ProviderError` reported as a
  :class:`~harness._providers.base.StreamError`; nothing from ``anthropic`` leaves this module.

Units: token counts are tokens; ``max_tokens`` and thinking budgets are output tokens.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any, Final, Literal

import anthropic
import orjson
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
)
from attrs import define, field

from hooks import (
    AssistantContent,
    AssistantMessage,
    Cost,
    ImageContent,
    JSONValue,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    Usage,
    UserContent,
    UserMessage,
    now_ms,
)

from .._errors import ProviderError
from .base import (
    LlmMessage,
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
    ThinkingLevel,
    ToolSpec,
)

__all__ = ["ANTHROPIC_API", "THINKING_BUDGETS", "AnthropicModel"]

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

_REDACTED_THINKING_TEXT: Final = "[Reasoning redacted]"  # what pi shows for redacted_thinking

_STOP_REASONS: Final[Mapping[str, StopReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",  # recorded in extra["pauseTurn"]; the loop continues it
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
    "refusal": "refusal",
}

# Error types the API uses for transient failures (https://docs.anthropic.com/en/api/errors).
_RETRYABLE_ERROR_TYPES: Final = frozenset(
    {"overloaded_error", "rate_limit_error", "api_error", "timeout_error"}
)

_TOOL_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


class AnthropicModel:
    """A Claude model reached through the Anthropic Messages API (streaming).

    Implements :class:`~harness._providers.base.Model`. Retries of failed requests (429, 5xx,
    overloaded, connection errors) are the SDK's, up to ``max_retries``; a failure after the
    stream started (an SSE ``error`` event, a dropped connection) is reported with
    ``ProviderError.retryable`` set, for the caller to decide.

    Args:
        model_id: Anthropic model id (``claude-sonnet-4-5``); also the ``model`` stored in replies.
        client: an SDK client to use (not closed by :meth:`aclose`); when given, ``api_key``,
            ``base_url`` and ``max_retries`` are ignored.
        api_key: API key; None lets the SDK read ``ANTHROPIC_API_KEY``.
        base_url: API base URL; None lets the SDK use its default (or ``ANTHROPIC_BASE_URL``).
        max_tokens: default ``max_tokens`` (output tokens) when the request sets none.
        max_retries: SDK retries before the stream starts.
        prompt_caching: mark the system prompt and the last user message with
            ``cache_control: {"type": "ephemeral"}`` (Anthropic prompt caching), as pi does.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 8192,
        max_retries: int = 2,
        prompt_caching: bool = True,
    ) -> None:
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
        self._prompt_caching = prompt_caching

    @property
    def provider(self) -> str:
        """Always ``anthropic``."""
        return "anthropic"

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

        Pure: no I/O. Thinking levels other than ``off`` send
        ``thinking={"type": "enabled", "budget_tokens": THINKING_BUDGETS[level]}`` and raise
        ``max_tokens`` to budget + max_tokens when it would not exceed the budget (the API requires
        ``budget_tokens < max_tokens``).

        Returns:
            A JSON-ready dict: ``model``, ``max_tokens``, ``messages`` and, when present,
            ``system``, ``tools``, ``thinking``.
        """
        max_tokens = request.max_tokens if request.max_tokens is not None else self._max_tokens
        payload: dict[str, Any] = {"model": self._id, "max_tokens": max_tokens}
        if request.system_prompt.strip():
            system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
            if self._prompt_caching:
                system["cache_control"] = {"type": "ephemeral"}
            payload["system"] = [system]
        messages = convert_messages(request.messages)
        if self._prompt_caching:
            _mark_cache_breakpoint(messages)
        payload["messages"] = messages
        if request.tools:
            payload["tools"] = [_tool_param(tool) for tool in request.tools]
        if request.thinking_level != "off":
            budget = THINKING_BUDGETS[request.thinking_level]
            payload["thinking"] = {"type": "enabled", "budget_tokens": budget}
            if max_tokens <= budget:
                payload["max_tokens"] = budget + max_tokens
        return payload

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream one reply to ``request`` from the Messages API.

        Yields, in order: :class:`StreamResponse` (HTTP status and headers, also for an HTTP
        error), :class:`StreamStart`, :class:`StreamDelta` per non-empty text, thinking or tool
        input delta, then exactly one :class:`StreamDone` or :class:`StreamError`.

        Stop reasons (Anthropic -> ours): ``end_turn``/``stop_sequence`` -> ``stop``;
        ``max_tokens``/``model_context_window_exceeded`` -> ``length``; ``tool_use`` ->
        ``toolUse``; ``refusal`` -> ``refusal`` with ``extra["stopDetails"]``; ``pause_turn`` ->
        ``stop`` with ``extra["pauseTurn"] = True``. A tool call whose block never closed or whose
        input JSON does not parse is dropped from the reply, so it can never run; outside a
        ``length`` stop that is reported as an error (``error_type="invalid_tool_input"``).

        Errors are reported, not raised: ``StreamError.message`` holds what arrived, with
        ``stop_reason="error"``, and ``StreamError.error`` is a :class:`ProviderError` whose
        ``retryable`` is True for overloaded (529), rate limits (429), 5xx, connection errors,
        timeouts, transient SSE ``error`` events and a stream that ended without ``message_stop``
        (``error_type="incomplete_stream"``).

        Cancellation (``asyncio.CancelledError``) propagates; the HTTP response is closed first,
        as it is when the consumer stops early (``aclose()``). ``request.session_id`` is not sent.
        """
        payload = self.build_payload(request)
        builder = _ReplyBuilder(model=self._id)
        try:
            sdk_stream = await self._client.messages.create(stream=True, **payload)
        except Exception as exc:  # the SDK boundary: whatever it raises is a failed request
            error = _request_error(exc)
            if isinstance(exc, anthropic.APIStatusError):
                yield StreamResponse(status=exc.status_code, headers=dict(exc.response.headers))
            yield StreamStart(partial=builder.partial())
            yield StreamError(message=builder.failed(error), error=error)
            return
        events = sdk_stream.__aiter__()
        try:
            response = sdk_stream.response
            yield StreamResponse(status=response.status_code, headers=dict(response.headers))
            yield StreamStart(partial=builder.partial())
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
                except Exception as exc:  # SDK/transport failure while reading the body
                    error = _stream_error(exc)
                    yield StreamError(message=builder.failed(error), error=error)
                    return
                for delta in builder.apply(event):
                    yield delta
            yield builder.finish()
        finally:
            # A failed close leaves nothing to report or undo (cancellation still propagates).
            with contextlib.suppress(Exception):
                if isinstance(events, AsyncGenerator):
                    await events.aclose()  # else GC finalises it later, outside this task
                await sdk_stream.close()


# --- request building -------------------------------------------------------------------------


def convert_messages(messages: tuple[LlmMessage, ...]) -> list[dict[str, Any]]:
    """Convert our messages to Anthropic ``messages`` (Messages API shapes).

    Consecutive tool results become one user message of ``tool_result`` blocks (the API wants all
    results of an assistant turn in the next user message). Whitespace-only text blocks are
    dropped (the API rejects them), and so is a message left with no content. Thinking, redacted
    thinking and unknown blocks are sent back only when the message came from this API; from
    another API, thinking becomes plain text (its signature would not verify) and the rest is
    dropped.
    """
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            results.append(_tool_result_param(message))
            continue
        if results:
            out.append({"role": "user", "content": results})
            results = []
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                if message.content.strip():
                    out.append({"role": "user", "content": message.content})
                continue
            blocks = _user_blocks(message.content)
            if blocks:
                out.append({"role": "user", "content": blocks})
        else:
            blocks = _assistant_blocks(message)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    if results:
        out.append({"role": "user", "content": results})
    return out


def _user_blocks(content: tuple[UserContent, ...]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent):
            source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            blocks.append({"type": "image", "source": source})
        else:
            blocks.append(_plain(block.raw))
    return blocks


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    native = message.api == ANTHROPIC_API
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            blocks.extend(_thinking_blocks(block, native=native))
        elif isinstance(block, ToolCall):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": _tool_id(block.id),
                    "name": block.name,
                    "input": _plain(block.arguments),
                }
            )
        elif native:
            blocks.append(_plain(block.raw))
    return blocks


def _thinking_blocks(block: ThinkingContent, *, native: bool) -> list[dict[str, Any]]:
    signature = block.thinking_signature
    if native and block.redacted and signature:
        return [{"type": "redacted_thinking", "data": signature}]
    if block.redacted:
        return []
    if native and signature:
        return [{"type": "thinking", "thinking": block.thinking, "signature": signature}]
    # No valid signature (another API, or a stream cut before signature_delta): the API would
    # reject the block, so the reasoning goes back as plain text, as pi does.
    if block.thinking.strip():
        return [{"type": "text", "text": block.thinking}]
    return []


def _tool_result_param(message: ToolResultMessage) -> dict[str, Any]:
    param: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": _tool_id(message.tool_call_id),
        "is_error": message.is_error,
    }
    content = _user_blocks(message.content)
    if not content and message.is_error:
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


def _mark_cache_breakpoint(messages: list[dict[str, Any]]) -> None:
    """Put ``cache_control`` on the last block of the last message if it is a user message."""
    if not messages or messages[-1]["role"] != "user":
        return
    last = messages[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    block = last["content"][-1]
    if block.get("type") in ("text", "image", "tool_result"):
        block["cache_control"] = {"type": "ephemeral"}


def _plain(value: Mapping[str, JSONValue]) -> dict[str, Any]:
    """A deep copy of ``value`` as plain dicts and lists, which the SDK can serialise."""
    return {key: _plain_value(item) for key, item in value.items()}


def _plain_value(value: JSONValue) -> JSONValue:
    if isinstance(value, Mapping):
        return _plain(value)
    if isinstance(value, list | tuple):
        return [_plain_value(item) for item in value]
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
        if self.kind == "text":
            return TextContent(text="".join(self.parts))
        if self.kind == "thinking":
            signature = "".join(self.signature) or None
            return ThinkingContent(thinking="".join(self.parts), thinking_signature=signature)
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
}


class _ReplyBuilder:
    """Accumulates raw stream events into an :class:`AssistantMessage`; no I/O."""

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._timestamp = now_ms()  # one timestamp for every partial and the final message
        self._blocks: dict[int, _Block] = {}
        self._order: list[_Block] = []
        self._usage: dict[str, int] = {
            "input": 0,
            "output": 0,
            "cache_read": 0,
            "cache_write": 0,
        }
        self._stop_reason: str | None = None
        self._stop_details: dict[str, Any] | None = None
        self._stopped = False

    # events -> deltas

    def apply(self, event: object) -> Iterator[StreamDelta]:
        """Fold one SDK stream event in; yield a delta if visible content grew."""
        if isinstance(event, RawMessageStartEvent):
            usage = event.message.usage
            self._set_usage(
                input=usage.input_tokens,
                output=usage.output_tokens,
                cache_read=usage.cache_read_input_tokens,
                cache_write=usage.cache_creation_input_tokens,
            )
        elif isinstance(event, RawContentBlockStartEvent):
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
            growing = self._blocks.get(event.index)
            if growing is not None:
                yield from self._apply_delta(growing, event.delta)
        elif isinstance(event, RawContentBlockStopEvent):
            stopping = self._blocks.get(event.index)
            if stopping is not None:
                stopping.close()
        elif isinstance(event, RawMessageDeltaEvent):
            if event.delta.stop_reason is not None:
                self._stop_reason = event.delta.stop_reason
            if event.delta.stop_details is not None:
                self._stop_details = _raw_dict(event.delta.stop_details)
            counts = event.usage
            # Cumulative counts: a field present here replaces message_start's.
            self._set_usage(
                input=counts.input_tokens,
                output=counts.output_tokens,
                cache_read=counts.cache_read_input_tokens,
                cache_write=counts.cache_creation_input_tokens,
            )
        elif isinstance(event, RawMessageStopEvent):
            self._stopped = True

    def _apply_delta(self, block: _Block, delta: object) -> Iterator[StreamDelta]:
        if isinstance(delta, TextDelta) and block.kind == "text":
            yield from self._grow(block, "text", delta.text)
        elif isinstance(delta, ThinkingDelta) and block.kind == "thinking":
            yield from self._grow(block, "thinking", delta.thinking)
        elif isinstance(delta, SignatureDelta) and block.kind == "thinking":
            block.signature.append(delta.signature)
            block.cached = None
        elif isinstance(delta, InputJSONDelta) and block.kind in ("tool", "server_tool"):
            block.parts.append(delta.partial_json)
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

    def _set_usage(self, **counts: int | None) -> None:
        for name, value in counts.items():
            if value is not None:
                self._usage[name] = value

    # messages

    def partial(self) -> AssistantMessage:
        """The reply so far, every started block in stream order (tool input {} until closed)."""
        return self._message(tuple(block.render() for block in self._order), "stop")

    def failed(self, error: ProviderError) -> AssistantMessage:
        """What arrived before ``error``, with half tool calls dropped; stop reason ``error``."""
        return self._message(self._kept_content(), "error", error_message=error.message)

    def finish(self) -> StreamDone | StreamError:
        """The final event once the body ended: done, or an error if it was incomplete."""
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
        u = self._usage
        usage = Usage(
            input=u["input"],
            output=u["output"],
            cache_read=u["cache_read"],
            cache_write=u["cache_write"],
            total_tokens=u["input"] + u["output"] + u["cache_read"] + u["cache_write"],
            cost=Cost(),  # no price table yet
        )
        return AssistantMessage(
            content=content,
            api=ANTHROPIC_API,
            provider="anthropic",
            model=self._model,
            usage=usage,
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
        should_retry = exc.response.headers.get("x-should-retry")
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"  # the API's own verdict, as the SDK honours it
        else:
            status = exc.status_code
            retryable = (
                status in (408, 409, 429) or status >= 500 or error_type in _RETRYABLE_ERROR_TYPES
            )
        return ProviderError(
            f"Anthropic API returned HTTP {exc.status_code} ({error_type or 'no error type'}): "
            f"{api_message or exc.message}",
            retryable=retryable,
            status=exc.status_code,
            error_type=error_type,
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
            f"Anthropic request timed out: {exc}", retryable=True, error_type="timeout"
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
        return ProviderError(
            f"Anthropic stream failed with {error_type or 'an error event'}: "
            f"{api_message or exc.message}",
            retryable=error_type in _RETRYABLE_ERROR_TYPES,
            error_type=error_type,
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
