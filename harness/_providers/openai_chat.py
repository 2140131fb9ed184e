"""OpenAI's Chat Completions API (``POST /v1/chat/completions``): request bodies and chunks.

The format every OpenAI-compatible server speaks (Ollama, vLLM, llama.cpp's server, LM Studio,
OpenRouter ...). Follows the API's streamed ``chat.completion.chunk`` objects and pi's
``openai-completions`` provider: text from ``delta.content``; reasoning from
``delta.reasoning_content`` or ``delta.reasoning`` (llama.cpp, vLLM, Ollama), stored as thinking
whose signature names the field it came in; tool calls from ``delta.tool_calls`` by ``index``
(arguments streamed in pieces, or whole in one chunk, as local servers do); usage from the
chunk that carries it (``stream_options.include_usage``; servers that never send it leave 0);
``finish_reason`` mapped to our stop reasons. A stream that never gives a ``finish_reason`` is
an error (cut short). No I/O.
"""

from __future__ import annotations

import uuid
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

from .base import ModelRequest, StreamDelta
from .openai_reply import Part, ReplyBuilder, count, mapping, text
from .openai_responses import REASONING_EFFORT
from .registry import ModelInfo
from .transform import foreign_content, is_native, sanitized_id

__all__ = ["CHAT_API", "ChatFolder", "chat_body"]

CHAT_API: Final = "openai-completions"

_FINISH_REASONS: Final[Mapping[str, StopReason]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "content_filter": "refusal",
}
_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")


def chat_body(
    request: ModelRequest,
    *,
    model_id: str,
    provider: str,
    info: ModelInfo | None,
    max_tokens: int | None,
    temperature: float | None,
    official: bool,
) -> dict[str, Any]:
    """The ``POST /v1/chat/completions`` body for ``request`` (without ``stream``).

    The system prompt is the first message; usage is asked for with ``stream_options``;
    the output limit is ``max_completion_tokens`` on OpenAI's own endpoint (``official``) and
    ``max_tokens`` elsewhere (what compatible servers read); a thinking level other than
    ``off`` sends ``reasoning_effort`` for models that reason (or that the registry does not
    know); ``request.output_schema`` becomes ``response_format`` (``json_schema``, not strict).
    """
    images = info is None or "image" in info.input
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    messages.extend(_messages(request, model_id=model_id, provider=provider, images=images))
    body: dict[str, Any] = {
        "model": model_id,
        "messages": messages,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": {"type": "object", **_plain(t.parameters)},
                },
            }
            for t in request.tools
        ]
    limit = request.max_tokens or max_tokens
    if limit is not None:
        body["max_completion_tokens" if official else "max_tokens"] = limit
    if request.thinking_level != "off" and (info is None or info.reasoning):
        body["reasoning_effort"] = REASONING_EFFORT[request.thinking_level]
    elif temperature is not None:
        body["temperature"] = temperature
    if request.output_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "output",
                "schema": _plain(request.output_schema),
                "strict": False,
            },
        }
    return body


def _plain(value: Mapping[str, JSONValue]) -> dict[str, Any]:
    copied: dict[str, Any] = orjson.loads(orjson.dumps(value))
    return copied


def _call_id(tool_call_id: str) -> str:
    return sanitized_id(tool_call_id, max_length=40)  # OpenAI's limit for Chat Completions


def _messages(
    request: ModelRequest, *, model_id: str, provider: str, images: bool
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            content = _user_content(message.content, images=images)
            if content:
                out.append({"role": "user", "content": content})
        elif isinstance(message, ToolResultMessage):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": _call_id(message.tool_call_id),
                    "content": message.text or ("(see attached image)" if message.content else ""),
                }
            )
            pictures = tuple(b for b in message.content if isinstance(b, ImageContent))
            if pictures and images:
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Attached image(s) from tool result:"},
                            *_user_content(pictures, images=True),
                        ],
                    }
                )
        else:
            converted = _assistant(message, model_id=model_id, provider=provider)
            if converted is not None:
                out.append(converted)
    return out


def _user_content(
    content: str | tuple[UserContent, ...], *, images: bool
) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content if content.strip() else ""
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent) and block.text.strip():
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent) and images:
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _assistant(message: AssistantMessage, *, model_id: str, provider: str) -> dict[str, Any] | None:
    native = is_native(message, api=CHAT_API, provider=provider, model_id=model_id)
    content = message.content if native else foreign_content(message, _call_id)
    texts = [b.text for b in content if isinstance(b, TextContent) and b.text.strip()]
    calls = [b for b in content if isinstance(b, ToolCall)]
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    # A server that streams reasoning in a field reads it back from the same field (pi).
    thinking = [b for b in content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    field = thinking[0].thinking_signature if native and thinking else None
    if field in _REASONING_FIELDS:
        out[field] = "\n".join(b.thinking for b in thinking)
    if calls:
        out["tool_calls"] = [
            {
                "id": _call_id(c.id),
                "type": "function",
                "function": {"name": c.name, "arguments": orjson.dumps(c.arguments).decode()},
            }
            for c in calls
        ]
    if out["content"] is None and not calls:
        return None  # nothing to send (an empty or thinking-only reply)
    return out


# --- the stream -------------------------------------------------------------------------------


class ChatFolder:
    """Folds Chat Completions chunks (JSON objects) into a :class:`ReplyBuilder`."""

    def __init__(self, builder: ReplyBuilder) -> None:
        self.builder = builder
        self._current: Part | None = None
        self._calls: dict[int, Part] = {}

    def apply(self, chunk: object) -> Iterator[StreamDelta]:
        """Fold one chunk in; yield deltas for visible content."""
        data = mapping(chunk)
        usage = mapping(data.get("usage"))
        if usage:
            details = mapping(usage.get("prompt_tokens_details"))
            self.builder.set_usage(
                prompt=count(usage.get("prompt_tokens")),
                cached=count(details.get("cached_tokens")),
                output=count(usage.get("completion_tokens")),
            )
        choices = data.get("choices")
        choice = mapping(choices[0]) if isinstance(choices, list) and choices else {}
        delta = mapping(choice.get("delta"))
        for name in _REASONING_FIELDS:
            piece = text(delta.get(name))
            if piece:
                part = self._block("thinking")
                part.signature = part.signature or name
                yield from self.builder.grow(part, piece, kind="thinking")
        for name in ("content", "refusal"):
            piece = text(delta.get(name))
            if piece:
                part = self._block("text")
                part.refusal = part.refusal or name == "refusal"
                yield from self.builder.grow(part, piece, kind="text")
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                yield from self._call(mapping(call), position)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            stop = _FINISH_REASONS.get(reason, "stop")
            if stop == "stop" and any(p.refusal for p in self.builder.parts):
                stop = "refusal"
            self.builder.stop_reason = stop

    def _block(self, kind: str) -> Part:
        """The block being written, or a new one when the kind changes."""
        current = self._current
        if current is None or current.kind != kind:
            current = self._current = self.builder.add(kind)  # type: ignore[arg-type]
        return current

    def _call(self, call: Mapping[str, Any], position: int) -> Iterator[StreamDelta]:
        index = call.get("index")
        # Local servers may send whole calls without an index: each list entry is one call.
        key = index if isinstance(index, int) and not isinstance(index, bool) else -1 - position
        call_id = text(call.get("id"))
        part = self._calls.get(key)
        if part is None or (call_id and part.call_id and call_id != part.call_id):
            part = self._current = self.builder.add("tool")
            self._calls[key] = part
        function = mapping(call.get("function"))
        if call_id:
            part.call_id = call_id
        elif not part.call_id:
            part.call_id = f"call_{uuid.uuid4().hex[:24]}"  # the server gave none
        if text(function.get("name")):
            part.name = text(function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, Mapping):  # some servers send the object itself
            arguments = orjson.dumps(dict(arguments)).decode()
        yield from self.builder.grow(part, text(arguments), kind="toolcall")
