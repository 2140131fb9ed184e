"""Values carried by events and stored in sessions: messages, content blocks, usage.

Shapes follow pi's ``AgentMessage`` (packages/ai ``types.ts`` and the coding agent's message roles),
so a session written here opens in pi and vice versa. Python attributes are snake_case; the JSON
keys (camelCase) live only in ``repos._codec``. Every class keeps the fields it does not know in
``extra``, so a value read from a file and written back loses nothing.

Units: message ``timestamp`` is Unix time in milliseconds (pi's convention); token counts are
tokens; costs are US dollars.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

from attrs import field, frozen

__all__ = [
    "AssistantContent",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "ContentBlock",
    "Cost",
    "CustomMessage",
    "ImageContent",
    "JSONValue",
    "Message",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "UnknownContent",
    "UnknownMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "now_ms",
]

JSONValue: TypeAlias = Any
"""Free-form JSON (tool input, ``details``, ``extra``): what ``orjson.loads`` returns."""

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted", "refusal"]
"""Why an assistant message ended (pi's names; ``refusal`` added for the Anthropic API)."""


def now_ms() -> int:
    """Current Unix time in milliseconds, the unit of every message ``timestamp``."""
    return time.time_ns() // 1_000_000


def _extra() -> Any:
    return field(factory=dict, repr=False)


# --- content blocks -------------------------------------------------------------------------


@frozen(kw_only=True)
class TextContent:
    """A text block (``{"type": "text", "text": ...}``)."""

    text: str
    extra: Mapping[str, JSONValue] = _extra()


@frozen(kw_only=True)
class ImageContent:
    """An image block: base64 ``data`` and its ``mime_type`` (e.g. ``image/png``)."""

    data: str
    mime_type: str
    extra: Mapping[str, JSONValue] = _extra()


@frozen(kw_only=True)
class ThinkingContent:
    """Model reasoning. ``thinking_signature`` must be sent back unchanged (Anthropic requires it).

    ``redacted`` marks Anthropic's ``redacted_thinking``, whose opaque payload is the signature.
    """

    thinking: str
    thinking_signature: str | None = None
    redacted: bool = False
    extra: Mapping[str, JSONValue] = _extra()


@frozen(kw_only=True)
class ToolCall:
    """A tool call inside an assistant message. ``arguments`` is the parsed JSON input."""

    id: str
    name: str
    arguments: Mapping[str, JSONValue] = field(factory=dict)
    extra: Mapping[str, JSONValue] = _extra()


@frozen(kw_only=True)
class UnknownContent:
    """A block of a type this version does not know (e.g. a server tool block); kept verbatim."""

    raw: Mapping[str, JSONValue]

    @property
    def type(self) -> str:
        return str(self.raw.get("type", ""))


UserContent: TypeAlias = TextContent | ImageContent | UnknownContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall | UnknownContent
ContentBlock: TypeAlias = TextContent | ImageContent | ThinkingContent | ToolCall | UnknownContent


def _assistant_blocks(value: str | Iterable[AssistantContent]) -> tuple[AssistantContent, ...]:
    # A plain string is one text block (tuple("ab") would split it into characters).
    return (TextContent(text=value),) if isinstance(value, str) else tuple(value)


def _user_blocks(value: str | Iterable[UserContent]) -> tuple[UserContent, ...]:
    return (TextContent(text=value),) if isinstance(value, str) else tuple(value)


# --- usage ----------------------------------------------------------------------------------


@frozen(kw_only=True)
class Cost:
    """Cost of one response in US dollars, split like :class:`Usage`."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0
    extra: Mapping[str, JSONValue] = _extra()


@frozen(kw_only=True)
class Usage:
    """Token usage of one response.

    ``input`` excludes cached tokens (Anthropic's ``input_tokens``); ``cache_read`` and
    ``cache_write`` are Anthropic's ``cache_read_input_tokens`` / ``cache_creation_input_tokens``.
    ``total_tokens`` is None when the file did not record it (old pi files); :attr:`total`
    computes it then.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int | None = None
    cost: Cost = field(factory=Cost)
    extra: Mapping[str, JSONValue] = _extra()

    @property
    def total(self) -> int:
        """Total tokens of the exchange: the recorded value, else the sum of the parts."""
        if self.total_tokens is not None:
            return self.total_tokens
        return self.input + self.output + self.cache_read + self.cache_write


# --- messages -------------------------------------------------------------------------------


@frozen(kw_only=True)
class UserMessage:
    """A user turn: plain text or text/image blocks."""

    content: str | tuple[UserContent, ...]
    timestamp: int = field(factory=now_ms)
    extra: Mapping[str, JSONValue] = _extra()

    role: Literal["user"] = field(default="user", init=False)

    @property
    def text(self) -> str:
        """The text of the message, blocks joined by newlines (images skipped)."""
        return _joined_text(self.content)


@frozen(kw_only=True)
class AssistantMessage:
    """A model reply, as streamed and then persisted.

    ``api``/``provider``/``model`` name where it came from (pi's fields, e.g.
    ``anthropic-messages``, ``anthropic``, ``claude-sonnet-4-5``); ``error_message`` is set when
    ``stop_reason`` is ``error`` or ``aborted``.
    """

    content: tuple[AssistantContent, ...] = field(default=(), converter=_assistant_blocks)
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage = field(factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int = field(factory=now_ms)
    extra: Mapping[str, JSONValue] = _extra()

    role: Literal["assistant"] = field(default="assistant", init=False)

    @property
    def text(self) -> str:
        """The reply's text blocks joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextContent))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls in the reply, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolCall))


@frozen(kw_only=True)
class ToolResultMessage:
    """The result of one tool call, sent back to the model as a user-side ``tool_result``.

    ``details`` is free-form data for applications (not sent to the model); None means absent.
    """

    tool_call_id: str
    tool_name: str
    content: tuple[UserContent, ...] = field(default=(), converter=_user_blocks)
    details: JSONValue = None
    is_error: bool = False
    timestamp: int = field(factory=now_ms)
    extra: Mapping[str, JSONValue] = _extra()

    role: Literal["toolResult"] = field(default="toolResult", init=False)

    @property
    def text(self) -> str:
        return _joined_text(self.content)


@frozen(kw_only=True)
class BashExecutionMessage:
    """A shell command the *user* ran (pi's ``!cmd``); reaches the model as a user text."""

    command: str
    output: str
    exit_code: int | None = None
    cancelled: bool = False
    truncated: bool = False
    full_output_path: str | None = None
    exclude_from_context: bool = False
    timestamp: int = field(factory=now_ms)
    extra: Mapping[str, JSONValue] = _extra()

    role: Literal["bashExecution"] = field(default="bashExecution", init=False)


@frozen(kw_only=True)
class CustomMessage:
    """An application message that enters the model context as a user message.

    ``display`` only tells a UI whether to show it; ``details`` is never sent to the model.
    """

    custom_type: str
    content: str | tuple[UserContent, ...]
    display: bool = True
    details: JSONValue = None
    timestamp: int = field(factory=now_ms)
    extra: Mapping[str, JSONValue] = _extra()

    role: Literal["custom"] = field(default="custom", init=False)

    @property
    def text(self) -> str:
        return _joined_text(self.content)


@frozen(kw_only=True)
class BranchSummaryMessage:
    """Context-only message made from a ``branch_summary`` entry (never appended as a message)."""

    summary: str
    from_id: str
    timestamp: int = field(factory=now_ms)

    role: Literal["branchSummary"] = field(default="branchSummary", init=False)


@frozen(kw_only=True)
class CompactionSummaryMessage:
    """Context-only message made from the last ``compaction`` entry on the path."""

    summary: str
    tokens_before: int
    timestamp: int = field(factory=now_ms)

    role: Literal["compactionSummary"] = field(default="compactionSummary", init=False)


@frozen(kw_only=True)
class UnknownMessage:
    """A message whose role this version does not know; kept verbatim, never sent to a model."""

    raw: Mapping[str, JSONValue]

    @property
    def role(self) -> str:
        return str(self.raw.get("role", ""))


Message: TypeAlias = (
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
    | UnknownMessage
)


def _joined_text(content: str | tuple[UserContent, ...]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in content if isinstance(b, TextContent))
