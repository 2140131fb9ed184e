"""OpenAI's Responses API (``POST /v1/responses``): request bodies and stream events.

Follows the API's streaming events (``response.output_item.added`` / ``.done``,
``response.output_text.delta``, ``response.reasoning_summary_text.delta``,
``response.function_call_arguments.delta``, ``response.refusal.delta``,
``response.completed`` / ``.incomplete`` / ``.failed``, ``error``) and the way pi's
``openai-responses`` provider stores them:

* a reasoning item becomes a thinking block whose text is the reasoning summary and whose
  ``thinkingSignature`` is the whole item as JSON, ``encrypted_content`` included, so it can be
  sent back in the next request (requests are sent with ``store: false`` and
  ``include: ["reasoning.encrypted_content"]``: the API keeps nothing, the session does);
* a message item becomes text, its id kept as ``textSignature``;
* a function call gets the id ``<call_id>|<item id>``; its result is sent with the call id.

No I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import orjson

from hooks import (
    AssistantMessage,
    ImageContent,
    JSONValue,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserContent,
    UserMessage,
)

from .._errors import ProviderError
from .base import ModelRequest, StreamDelta, is_context_overflow
from .openai_reply import OFFICIAL_ORIGIN, ORIGIN_KEY, Part, ReplyBuilder, count, mapping, text
from .registry import ModelInfo
from .transform import foreign_content, is_native, sanitized_id

__all__ = ["RESPONSES_API", "ResponsesFolder", "responses_body"]

RESPONSES_API: Final = "openai-responses"

REASONING_EFFORT: Final[Mapping[str, str]] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}

# Error codes of a failed response that a new attempt may get past.
_RETRYABLE_CODES: Final = frozenset(
    {"server_error", "rate_limit_exceeded", "internal_error", "server_is_overloaded", "timeout"}
)


def responses_body(
    request: ModelRequest,
    *,
    model_id: str,
    provider: str,
    info: ModelInfo | None,
    max_tokens: int | None,
    temperature: float | None,
    origin: str = OFFICIAL_ORIGIN,
) -> dict[str, Any]:
    """The ``POST /v1/responses`` body for ``request`` (without ``stream``).

    ``origin``: the server it goes to; a reasoning item goes back only to the origin that sent
    it (``ORIGIN_KEY``).

    ``instructions`` carries the system prompt; tools are function tools (``strict: false``,
    parallel calls allowed). A thinking level other than ``off`` sends ``reasoning.effort``
    (``xhigh`` as ``high``) with ``summary: auto`` for models that reason (or that the
    registry does not know); a model known to reason always gets ``include:
    ["reasoning.encrypted_content"]``; ``request.session_id`` becomes ``prompt_cache_key``;
    ``request.output_schema`` becomes ``text.format`` (``json_schema``, not strict).
    """
    images = info is None or "image" in info.input
    body: dict[str, Any] = {
        "model": model_id,
        "input": _input(
            request, model_id=model_id, provider=provider, images=images, origin=origin
        ),
        "store": False,
    }
    if request.system_prompt:
        body["instructions"] = request.system_prompt
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": {"type": "object", **_plain(t.parameters)},
                "strict": False,
            }
            for t in request.tools
        ]
    limit = request.max_tokens or max_tokens
    if limit is not None:
        body["max_output_tokens"] = limit
    reasoning = request.thinking_level != "off" and (info is None or info.reasoning)
    if reasoning:
        body["reasoning"] = {"effort": REASONING_EFFORT[request.thinking_level], "summary": "auto"}
    if reasoning or (info is not None and info.reasoning):
        # A reasoning model reasons at its default effort even when not asked to; with
        # store: false only the encrypted item lets the next request carry that reasoning.
        body["include"] = ["reasoning.encrypted_content"]
    if not reasoning and temperature is not None:
        body["temperature"] = temperature
    if request.session_id:
        body["prompt_cache_key"] = request.session_id
    if request.output_schema is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": "output",
                "schema": _plain(request.output_schema),
                "strict": False,
            }
        }
    return body


def _plain(value: Mapping[str, JSONValue]) -> dict[str, Any]:
    copied: dict[str, Any] = orjson.loads(orjson.dumps(value))
    return copied


def _call_id(tool_call_id: str) -> str:
    return sanitized_id(tool_call_id, max_length=64)


def _input(
    request: ModelRequest, *, model_id: str, provider: str, images: bool, origin: str
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            content = _user_parts(message.content, images=images)
            if content:
                items.append({"role": "user", "content": content})
        elif isinstance(message, ToolResultMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": _call_id(message.tool_call_id),
                    "output": message.text or ("(see attached image)" if message.content else ""),
                }
            )
            pictures = [b for b in message.content if isinstance(b, ImageContent)]
            if pictures and images:
                items.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "Attached image(s) from tool result:"},
                            *_user_parts(tuple(pictures), images=True),
                        ],
                    }
                )
        else:
            items.extend(
                _assistant_items(message, model_id=model_id, provider=provider, origin=origin)
            )
    return items


def _user_parts(content: str | tuple[UserContent, ...], *, images: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}] if content.strip() else []
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent) and block.text.strip():
            parts.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageContent) and images:
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "input_image", "detail": "auto", "image_url": url})
    return parts


def _assistant_items(
    message: AssistantMessage, *, model_id: str, provider: str, origin: str
) -> list[dict[str, Any]]:
    native = is_native(message, api=RESPONSES_API, provider=provider, model_id=model_id)
    content = message.content if native else foreign_content(message, _call_id)
    # A reasoning item is only sent with the output it led to: not from a failed reply.
    replay = native and message.stop_reason not in ("error", "aborted")
    items: list[dict[str, Any]] = []
    skipped_reasoning = False
    for block in content:
        if isinstance(block, ThinkingContent):
            made_by = block.extra.get(ORIGIN_KEY, OFFICIAL_ORIGIN)
            item = _reasoning_item(block.thinking_signature) if replay else None
            if made_by != origin:  # encrypted reasoning never goes to another server
                item = None
            if item is None:
                skipped_reasoning = True
            else:
                items.append(item)
        elif isinstance(block, TextContent) and block.text.strip():
            item_text: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                "status": "completed",
            }
            signature = block.extra.get("textSignature")
            if native and isinstance(signature, str) and signature.startswith("msg"):
                item_text["id"] = signature[:64]
            items.append(item_text)
        elif isinstance(block, ToolCall):
            call_id, _, item_id = block.id.partition("|")
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": _call_id(call_id),
                "name": block.name,
                "arguments": orjson.dumps(block.arguments).decode(),
            }
            # The API pairs a call's item id with its reasoning item: send the id only when
            # that reasoning goes back too.
            if native and not skipped_reasoning and item_id.startswith("fc"):
                call["id"] = item_id[:64]
            items.append(call)
    return items


def _reasoning_item(signature: str | None) -> dict[str, Any] | None:
    if not signature:
        return None
    try:
        item = orjson.loads(signature)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    # Without its encrypted content the item names reasoning the API did not keep (store:
    # false): sending it back would be refused.
    return item if isinstance(item.get("encrypted_content"), str) else None


# --- the stream -------------------------------------------------------------------------------


class ResponsesFolder:
    """Folds Responses API stream events (JSON objects) into a :class:`ReplyBuilder`."""

    def __init__(self, builder: ReplyBuilder) -> None:
        self.builder = builder
        self._by_output: dict[int, Part] = {}
        self._summary_parts: dict[int, int] = {}

    def apply(self, event: object) -> Iterator[StreamDelta]:
        """Fold one event in; yield deltas for visible content."""
        data = mapping(event)
        kind = text(data.get("type"))
        b = self.builder
        if kind == "response.output_item.added":
            self._added(data)
        elif kind == "response.reasoning_summary_part.added":
            part = self._part(data, "thinking")
            if part is not None:
                seen = self._summary_parts.get(part.content_index, 0)
                self._summary_parts[part.content_index] = seen + 1
                if seen:
                    yield from b.grow(part, "\n\n", kind="thinking")
        elif kind == "response.reasoning_summary_text.delta":
            part = self._part(data, "thinking")
            if part is not None:
                yield from b.grow(part, text(data.get("delta")), kind="thinking")
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            part = self._part(data, "text")
            if part is not None:
                part.refusal = part.refusal or kind == "response.refusal.delta"
                yield from b.grow(part, text(data.get("delta")), kind="text")
        elif kind == "response.function_call_arguments.delta":
            part = self._part(data, "tool")
            if part is not None:
                yield from b.grow(part, text(data.get("delta")), kind="toolcall")
        elif kind == "response.function_call_arguments.done":
            part = self._part(data, "tool")
            if part is not None and isinstance(data.get("arguments"), str):
                part.pieces = [data["arguments"]]
        elif kind == "response.output_item.done":
            self._done(data)
        elif kind in ("response.completed", "response.incomplete"):
            self._finished(mapping(data.get("response")))
        elif kind == "response.failed":
            error = mapping(mapping(data.get("response")).get("error"))
            b.error = _event_error(error, "the response failed")
        elif kind == "error":
            b.error = _event_error(data, "the stream sent an error")

    def _added(self, data: Mapping[str, Any]) -> None:
        item = mapping(data.get("item"))
        kinds = {"reasoning": "thinking", "message": "text", "function_call": "tool"}
        kind = kinds.get(text(item.get("type")))
        index = data.get("output_index")
        if kind is None or not isinstance(index, int):
            return  # a server-side tool (web search ...) or nonsense: nothing we store
        part = self.builder.add(kind)  # type: ignore[arg-type]
        if kind == "tool":
            part.call_id = f"{text(item.get('call_id'))}|{text(item.get('id'))}"
            part.name = text(item.get("name"))
            if text(item.get("arguments")):
                part.pieces.append(text(item.get("arguments")))
        self._by_output[index] = part

    def _at(self, data: Mapping[str, Any]) -> Part | None:
        index = data.get("output_index")
        return self._by_output.get(index) if isinstance(index, int) else None

    def _part(self, data: Mapping[str, Any], kind: str) -> Part | None:
        part = self._at(data)
        return part if part is not None and part.kind == kind and not part.closed else None

    def _done(self, data: Mapping[str, Any]) -> None:
        item = mapping(data.get("item"))
        part = self._at(data)
        if part is None or part.closed:
            return
        kind = text(item.get("type"))
        if part.kind == "thinking" and kind == "reasoning":
            summary = item.get("summary")
            texts = (
                [text(mapping(s).get("text")) for s in summary] if isinstance(summary, list) else []
            )
            if any(texts):
                part.pieces = ["\n\n".join(t for t in texts if t)]
            # The whole item goes back in the next request: encrypted_content is the reasoning.
            part.signature = orjson.dumps(dict(item)).decode()
        elif part.kind == "text" and kind == "message":
            content = item.get("content")
            pieces = content if isinstance(content, list) else []
            texts = [
                text(mapping(p).get("text")) or text(mapping(p).get("refusal")) for p in pieces
            ]
            if any(texts):
                part.pieces = ["".join(texts)]
            part.refusal = part.refusal or any(mapping(p).get("type") == "refusal" for p in pieces)
            if text(item.get("id")):
                part.signature = text(item.get("id"))
        elif part.kind == "tool" and kind == "function_call":
            if isinstance(item.get("arguments"), str):
                part.pieces = [item["arguments"]]
            part.call_id = f"{text(item.get('call_id'))}|{text(item.get('id'))}"
            part.name = text(item.get("name")) or part.name
        part.close()

    def _finished(self, response: Mapping[str, Any]) -> None:
        usage = mapping(response.get("usage"))
        if usage:
            self.builder.set_usage(
                prompt=count(usage.get("input_tokens")),
                cached=count(mapping(usage.get("input_tokens_details")).get("cached_tokens")),
                output=count(usage.get("output_tokens")),
            )
        stop: StopReason = "stop"
        if text(response.get("status")) == "incomplete":
            reason = text(mapping(response.get("incomplete_details")).get("reason"))
            stop = "refusal" if reason == "content_filter" else "length"
        elif any(p.refusal for p in self.builder.parts):
            stop = "refusal"
        self.builder.stop_reason = stop


def _event_error(error: Mapping[str, Any], fallback: str) -> ProviderError:
    code = text(error.get("code")) or text(error.get("type"))
    message = text(error.get("message")) or fallback
    shown = f"OpenAI stream failed with {code or 'an error'}: {message}"
    if code == "context_length_exceeded" or is_context_overflow(message):
        return ProviderError(shown, retryable=False, error_type="context_overflow")
    return ProviderError(shown, retryable=code in _RETRYABLE_CODES, error_type=code)
