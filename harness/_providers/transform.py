"""Messages from one provider made sendable to another (pi's ``transformMessages``).

A session may switch model mid-way (``set_model``). What one API wrote, another cannot always
take back: a thinking block's signature only verifies with the API (and model) that signed it,
an OpenAI reasoning item only means something to OpenAI, and tool-call ids have API-specific
forms (Anthropic: ``^[a-zA-Z0-9_-]+$``, at most 64 characters; OpenAI's Responses API writes
``call_…|fc_…``). pi's rules, which we follow:

* from the same provider, API and model: everything goes back as it came;
* otherwise thinking with text becomes plain text, empty or redacted thinking is dropped,
  blocks only the source API knows are dropped, and a tool-call id is rewritten by the
  target's rule (the same rule for the call and its result, so they still pair).

Pure functions; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hooks import (
    AssistantContent,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
)

__all__ = ["foreign_content", "is_native", "sanitized_id"]

_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def is_native(message: AssistantMessage, *, api: str, provider: str, model_id: str) -> bool:
    """Whether ``message`` was written by this very API, provider and model (pi's
    ``isSameModel``): only then do signatures and provider-only blocks go back unchanged."""
    return message.api == api and message.provider == provider and message.model == model_id


def sanitized_id(tool_call_id: str, *, max_length: int) -> str:
    """A tool-call id in the form every API takes: the part before ``|`` (an OpenAI Responses
    id ``call|item``), characters outside ``[a-zA-Z0-9_-]`` replaced by ``_``, cut to
    ``max_length`` (Anthropic and OpenAI Responses: 64; OpenAI Chat Completions: 40)."""
    head = tool_call_id.split("|", 1)[0] or tool_call_id
    return _ID_INVALID.sub("_", head)[:max_length] or "call"


def foreign_content(
    message: AssistantMessage, rewrite_id: Callable[[str], str]
) -> tuple[AssistantContent, ...]:
    """The content of a message another model wrote, as this model may receive it: thinking
    with text becomes a text block (its signature would not verify), empty and redacted
    thinking and unknown blocks are dropped, text loses provider-only fields, and each tool
    call's id goes through ``rewrite_id``."""
    out: list[AssistantContent] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if not block.redacted and block.thinking.strip():
                out.append(TextContent(text=block.thinking))
        elif isinstance(block, TextContent):
            out.append(TextContent(text=block.text))
        elif isinstance(block, ToolCall):
            out.append(
                ToolCall(id=rewrite_id(block.id), name=block.name, arguments=block.arguments)
            )
    return tuple(out)
