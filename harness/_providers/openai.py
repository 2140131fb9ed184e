"""The OpenAI provider: streams replies through the official ``openai`` SDK, from the Responses
API (OpenAI's own endpoint) or Chat Completions (any OpenAI-compatible server).

Installed with the ``openai`` extra (``pip install 'jsonl-harness[openai]'``). Wire formats and
how replies are stored (pi's ``openai-responses`` / ``openai-completions`` providers) are in
:mod:`.openai_responses` and :mod:`.openai_chat`. The SDK does the HTTP, the SSE decoding and
the authentication; events come back as plain JSON and are checked here, value by value, since
``base_url`` may name any server. Errors follow the Anthropic provider's rules (shared in
:mod:`.base`): every failure is a :class:`~harness.ProviderError` reported as a
:class:`~harness._providers.base.StreamError`, classified (``retryable``, ``error_type``,
``retry_after_s``) but never retried here, so the harness shows each attempt; nothing from
``openai`` leaves this module.

Units: token counts are tokens; times are seconds.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final, Literal

import openai
from attrs import evolve

from .._errors import MissingApiKeyError, ProviderError
from .base import (
    DEFAULT_STREAM_IDLE_TIMEOUT_S,
    IdleDeadline,
    ModelRequest,
    ReplyBudget,
    StreamError,
    StreamEvent,
    StreamResponse,
    StreamStart,
    client_secrets,
    is_context_overflow,
    is_transport_timeout,
    retry_after_s,
    server_error,
    status_retryable,
)
from .openai_chat import CHAT_API, ChatFolder, chat_body
from .openai_reply import ReplyBuilder, mapping, origin_of, text
from .openai_responses import RESPONSES_API, ResponsesFolder, responses_body
from .registry import ModelInfo, ModelRegistry

__all__ = ["NO_KEY", "OpenAIModel"]

NO_KEY: Final = "no-key"
"""The key sent to a server on a ``base_url`` when none is configured: local servers (Ollama,
llama.cpp, vLLM, LM Studio) want none, and the SDK insists on one."""

_APIS: Final[Mapping[str, str]] = {"responses": RESPONSES_API, "chat": CHAT_API}
_PATHS: Final[Mapping[str, str]] = {"responses": "/responses", "chat": "/chat/completions"}

# Error types/codes that say "try again later" even without a 5xx or 429 status.
_RETRYABLE_ERRORS: Final = frozenset(
    {"server_error", "rate_limit_exceeded", "overloaded_error", "internal_error", "timeout"}
)


class OpenAIModel:
    """A model reached through OpenAI's API or any server that speaks it (streaming).

    Implements :class:`~harness._providers.base.Model`. Stop reasons (API -> ours): Responses
    ``completed`` -> ``stop`` (``toolUse`` with tool calls; ``refusal`` when the message is a
    refusal), ``incomplete`` for ``max_output_tokens`` -> ``length``, for ``content_filter`` ->
    ``refusal``; Chat ``finish_reason`` ``stop`` / ``length`` / ``tool_calls`` /
    ``content_filter`` -> ``stop`` / ``length`` / ``toolUse`` / ``refusal``. A stream that ends
    without saying how is an error (``incomplete_stream``, retryable).

    Args:
        model_id: the model id sent and stored (``gpt-4.1``, ``qwen3:8b``).
        api: ``responses`` (OpenAI's Responses API, the default) or ``chat`` (Chat
            Completions, what OpenAI-compatible servers speak).
        base_url: the API's base URL (``http://localhost:11434/v1``); None lets the SDK use
            ``OPENAI_BASE_URL``, else OpenAI's endpoint.
        api_key: the key; None reads ``OPENAI_API_KEY``. With a ``base_url`` (given or from
            ``OPENAI_BASE_URL``) and no key anywhere, :data:`NO_KEY` is sent (local servers
            want none).
        client: an SDK client to use (not closed by :meth:`aclose`); ``api_key``, ``base_url``
            and ``max_retries`` are then ignored.
        provider: the provider name stored in replies (``openai``; a user-defined provider's
            name, e.g. ``ollama``).
        info: what the registry knows of the model (input kinds, reasoning, output limit);
            None: found in ``registry`` by provider and id, if it is there.
        registry: where prices come from (each reply's ``usage.cost``); default the package's.
        max_tokens: default output limit when the request sets none (None: the server's).
        max_retries: retries by the SDK itself before the stream starts, invisible to the
            harness; 0 (the default) leaves retrying to the harness.
        temperature: sampling temperature, None for the server's default; not sent with
            reasoning.
        structured_output: send ``prompt(output_schema=...)``'s schema (Responses:
            ``text.format``, Chat Completions: ``response_format``, both ``json_schema`` with
            ``strict: false``). False for a server that does not take it: the harness then
            offers a ``respond`` tool instead.
        stream_idle_timeout_s: a reply that gets no content (a text, reasoning or tool-input
            delta, an output item's start or end, the last chunk) for this many seconds ends
            as an error (``error_type="stream_stalled"``, retryable), keeping what arrived:
            keep-alive comments and empty chunks do not count (the SDK's timeout is per read,
            so a server sending them could hold a run for ever). None: no limit but the SDK's.

    Raises:
        MissingApiKeyError: no key, no client and no ``base_url`` (code ``missing_api_key``,
            ``variable="OPENAI_API_KEY"``).
        ValueError: ``api`` is not ``responses`` or ``chat``.
    """

    def __init__(
        self,
        model_id: str,
        *,
        api: Literal["responses", "chat"] = "responses",
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        provider: str = "openai",
        info: ModelInfo | None = None,
        registry: ModelRegistry | None = None,
        max_tokens: int | None = None,
        max_retries: int = 0,
        temperature: float | None = None,
        structured_output: bool = True,
        stream_idle_timeout_s: float | None = DEFAULT_STREAM_IDLE_TIMEOUT_S,
    ) -> None:
        if api not in _APIS:
            raise ValueError(f"api must be 'responses' or 'chat', got {api!r}")
        if stream_idle_timeout_s is not None and not stream_idle_timeout_s > 0:
            raise ValueError(
                f"stream_idle_timeout_s must be more than 0 or None, got {stream_idle_timeout_s}"
            )
        self._idle_timeout_s = stream_idle_timeout_s
        custom_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if client is None and custom_url:
            _check_url(custom_url, "base_url" if base_url else "OPENAI_BASE_URL")
        if client is None and not api_key:
            api_key = os.environ.get("OPENAI_API_KEY") or None
            if api_key is None and not custom_url:
                raise MissingApiKeyError(
                    "OpenAIModel needs an API key: set the OPENAI_API_KEY environment variable, "
                    "or pass api_key=..., base_url=... (a local server) or client=...",
                    variable="OPENAI_API_KEY",
                )
        self._id = model_id
        self._api: Literal["responses", "chat"] = api
        self._provider = provider
        self._registry = registry
        self._info = (
            info
            if info is not None
            else (registry or ModelRegistry.builtin()).find(model_id, provider)
        )
        self._owns_client = client is None
        self._client = (
            client
            if client is not None
            else openai.AsyncOpenAI(
                api_key=api_key or NO_KEY, base_url=base_url, max_retries=max_retries
            )
        )
        self._shown_url = shown_url(str(self._client.base_url))
        self._origin = origin_of(str(self._client.base_url))
        # max_completion_tokens is OpenAI's own name; compatible servers read max_tokens.
        self._official = client is None and not custom_url
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._structured_output = structured_output

    @property
    def supports_output_schema(self) -> bool:
        """Whether ``ModelRequest.output_schema`` is sent (``structured_output``)."""
        return self._structured_output

    @property
    def provider(self) -> str:
        """``openai``, or the provider name given."""
        return self._provider

    @property
    def id(self) -> str:
        """The model id given at construction."""
        return self._id

    @property
    def api(self) -> str:
        """``openai-responses`` or ``openai-completions`` (pi's names)."""
        return _APIS[self._api]

    @property
    def info(self) -> ModelInfo | None:
        """What the registry knows of this model, None when nothing."""
        return self._info

    def __repr__(self) -> str:
        return f"OpenAIModel({self._id!r}, api={self._api!r}, provider={self._provider!r})"

    async def aclose(self) -> None:
        """Close the SDK client if this model created it; a client passed in is left open."""
        if self._owns_client:
            await self._client.close()

    def build_payload(self, request: ModelRequest) -> dict[str, Any]:
        """The request body for ``request`` (without ``stream``); pure, a new dict each call.

        Messages another provider or model wrote are converted as pi converts them
        (:mod:`.transform`): foreign thinking as text, tool-call ids in the form this API
        takes (``[a-zA-Z0-9_-]``, 64 characters for Responses, 40 for Chat).
        """
        common: dict[str, Any] = {
            "model_id": self._id,
            "provider": self._provider,
            "info": self._info,
            "max_tokens": self._max_tokens,
            "temperature": self._temperature,
        }
        if not self._structured_output:
            request = evolve(request, output_schema=None)
        if self._api == "chat":
            return chat_body(request, official=self._official, **common)
        return responses_body(request, origin=self._origin, **common)

    async def stream(
        self, request: ModelRequest, *, payload: Mapping[str, Any] | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one reply to ``request``.

        Args:
            request: what to ask; ``options`` give the timeout (``timeout_s``) and extra HTTP
                ``headers``, also when ``payload`` is given.
            payload: the body to send instead of :meth:`build_payload`'s (a
                ``before_provider_payload`` hook's), sent as given apart from ``stream: true``.

        Yields, in order: one :class:`StreamResponse` (status and headers, also of an HTTP
        error), :class:`StreamStart`, a :class:`StreamDelta` per non-empty piece of text,
        thinking or tool-call arguments, then exactly one :class:`StreamDone` or
        :class:`StreamError`.

        Errors are reported, not raised. ``retryable``: 408, 409, 429 (not
        ``insufficient_quota``), 5xx, ``x-should-retry: true``, connection errors, timeouts,
        a stream cut short, and error events whose code says the server failed. A context
        overflow (``error_type="context_overflow"``: OpenAI's ``context_length_exceeded``, or
        the wording of a compatible server) is never retryable; the harness compacts once.
        Cancellation propagates, after the HTTP response is closed.
        """
        body = dict(payload) if payload is not None else self.build_payload(request)
        body["stream"] = True
        builder = ReplyBuilder(
            api=self.api,
            provider=self._provider,
            model=self._id,
            registry=self._registry,
            origin=self._origin if self._api == "responses" else "",
        )
        folder = ChatFolder(builder) if self._api == "chat" else ResponsesFolder(builder)
        options: openai.RequestOptions = {}
        if request.options.timeout_s is not None:
            options["timeout"] = request.options.timeout_s
        if request.options.headers:
            options["headers"] = dict(request.options.headers)
        # A server may echo what it was sent: errors never carry the credentials.
        secrets = client_secrets(
            self._client, self._client.default_headers, request.options.headers
        )
        try:
            sdk_stream = await self._client.post(
                _PATHS[self._api],
                cast_to=object,  # events as plain JSON: we check every value ourselves
                body=body,
                options=options,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
        except Exception as exc:  # the SDK boundary: whatever it raises is a failed request
            error = server_error(_request_error(exc, self._shown_url), secrets)
            if isinstance(exc, openai.APIStatusError):
                yield StreamResponse(status=exc.status_code, headers=dict(exc.response.headers))
            yield StreamStart(partial=builder.partial())
            yield StreamError(message=builder.failed(error), error=error)
            return
        events = sdk_stream.__aiter__()
        budget = ReplyBudget(what="the OpenAI server")
        idle = IdleDeadline(self._idle_timeout_s, "the OpenAI server")
        try:
            response = sdk_stream.response
            yield StreamResponse(status=response.status_code, headers=dict(response.headers))
            yield StreamStart(partial=builder.partial())
            while builder.error is None:
                try:
                    event = await idle.next(events)
                except StopAsyncIteration:
                    break
                except ProviderError as stalled:  # only keep-alives for too long
                    yield StreamError(message=builder.failed(stalled), error=stalled)
                    return
                except Exception as exc:  # SDK/transport failure while reading the body
                    error = server_error(_stream_error(exc), secrets)
                    yield StreamError(message=builder.failed(error), error=error)
                    return
                deltas = list(folder.apply(event))
                if deltas or _structural(event):
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
                    await events.aclose()
                await sdk_stream.close()
        what = "OpenAI Responses stream" if self._api == "responses" else "OpenAI chat stream"
        yield builder.finish(what)


# Responses events that start or end a part of the reply (what resets the idle deadline
# besides a delta).
_STRUCTURE_EVENTS = frozenset(
    {
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.completed",
        "response.incomplete",
    }
)


def _structural(event: object) -> bool:
    """A Responses event starting or ending a part, or a chat chunk that says how the reply
    ends (``finish_reason``)."""
    if not isinstance(event, dict):
        return False
    if event.get("type") in _STRUCTURE_EVENTS:
        return True
    choices = event.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and c.get("finish_reason") for c in choices
    )


# --- errors -----------------------------------------------------------------------------------


def shown_url(url: str) -> str:
    """``url`` as an error may show it: no user, password, query or fragment (they may hold
    credentials)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # a port that is not a number: not shown
        port = ""
    return urllib.parse.urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def _check_url(url: str, source: str) -> None:
    """Refuse a base URL the SDK would only fail on later, with a vaguer message."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # Not a URL, so not split reliably: what could be a user and password goes unshown.
        shown = url.rpartition("@")[2].partition("?")[0].partition("#")[0]
        raise ProviderError(
            f"{source} {shown or '(empty)'!r} is not an http(s) URL: write it with "
            "its scheme, e.g. http://localhost:11434/v1",
            retryable=False,
            error_type="invalid_base_url",
        )


def _request_error(exc: Exception, url: str) -> ProviderError:
    """A failure of the request itself (before any body was read), with ``exc`` as cause;
    ``url`` the server's (shown in connection errors)."""
    error = _request_error_of(exc, url)
    error.__cause__ = exc
    return error


def _stream_error(exc: Exception) -> ProviderError:
    """A failure while reading the stream (after the 200 response arrived)."""
    error = _stream_error_of(exc)
    error.__cause__ = exc
    return error


def _error_fields(body: object) -> tuple[str, str, str]:
    """``(type, code, message)`` of an OpenAI error body (the SDK gives the inner ``error``
    object, or the whole body), "" where absent or not text."""
    data = mapping(body)
    inner = mapping(data.get("error")) or data
    code = inner.get("code")
    code_text = str(code) if isinstance(code, int) and not isinstance(code, bool) else text(code)
    return text(inner.get("type")), code_text, text(inner.get("message"))


def _request_error_of(exc: Exception, url: str) -> ProviderError:
    if isinstance(exc, openai.APIStatusError):
        kind, code, api_message = _error_fields(exc.body)
        status = exc.status_code
        error_type = code or kind or ("server_error" if status >= 500 else f"http_{status}")
        message = f"OpenAI API returned HTTP {status} ({error_type}): {api_message or exc.message}"
        if code == "context_length_exceeded" or is_context_overflow(api_message):
            return ProviderError(
                message, retryable=False, status=status, error_type="context_overflow"
            )
        headers = exc.response.headers
        retryable = code != "insufficient_quota" and (
            status_retryable(status, headers)
            or ("x-should-retry" not in headers and error_type in _RETRYABLE_ERRORS)
        )
        return ProviderError(
            message,
            retryable=retryable,
            status=status,
            error_type=error_type,
            retry_after_s=retry_after_s(headers),
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(
            f"OpenAI API response did not match the expected schema: {exc}",
            retryable=False,
            status=exc.status_code,
            error_type="invalid_response",
        )
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(
            f"OpenAI request timed out (no response within the timeout): {exc}",
            retryable=True,
            error_type="timeout",
        )
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(
            f"could not reach the OpenAI API at {url}: {exc}",
            retryable=True,
            error_type="connection_error",
        )
    # The client's own refusal (bad arguments): the same request cannot succeed.
    return ProviderError(
        f"OpenAI request could not be sent: {type(exc).__name__}: {exc}",
        retryable=False,
        error_type="client_error",
    )


def _stream_error_of(exc: Exception) -> ProviderError:
    if isinstance(exc, openai.APITimeoutError) or is_transport_timeout(exc):
        return ProviderError(
            f"OpenAI stream timed out (no data within the timeout): {type(exc).__name__}",
            retryable=True,
            error_type="timeout",
        )
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(
            f"OpenAI stream was interrupted: {exc}", retryable=True, error_type="connection_error"
        )
    if isinstance(exc, openai.APIError):
        # The SDK raises this for a chunk that carries {"error": ...} mid-stream.
        kind, code, api_message = _error_fields(exc.body)
        error_type = code or kind
        message = f"OpenAI stream failed with {error_type or 'an error'}: {api_message or exc}"
        if code == "context_length_exceeded" or is_context_overflow(api_message):
            return ProviderError(message, retryable=False, error_type="context_overflow")
        return ProviderError(
            message, retryable=error_type in _RETRYABLE_ERRORS, error_type=error_type
        )
    if isinstance(exc, ValueError):
        # Malformed event data (not JSON): the server sent something we cannot read.
        return ProviderError(
            f"OpenAI stream sent unreadable data: {type(exc).__name__}: {exc}",
            retryable=False,
            error_type="invalid_response",
        )
    return ProviderError(
        f"OpenAI stream was interrupted: {type(exc).__name__}: {exc}",
        retryable=True,
        error_type="connection_error",
    )
