"""Token estimates without a tokenizer: pi's rule of 4 characters per token (reference §4.2)."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["estimate_tokens"]

_IMAGE_CHARS = 4800  # pi counts an image as 4800 characters


def estimate_tokens(messages: Iterable[Message]) -> int:
    """Estimated tokens of ``messages``: ceil(characters / 4) per message, as pi estimates.

    Counted: text, thinking, tool names and JSON arguments, tool results, summaries, a user
    shell run's command and output; an image counts as 4800 characters.
    """
    return sum(-(-_chars(m) // 4) for m in messages)


def _chars(message: Message) -> int:
    if isinstance(message, UserMessage | CustomMessage | ToolResultMessage):
        content = message.content
        if isinstance(content, str):
            return len(content)
        return sum(_block_chars(b) for b in content)
    if isinstance(message, AssistantMessage):
        return sum(_block_chars(b) for b in message.content)
    if isinstance(message, BashExecutionMessage):
        return len(message.command) + len(message.output)
    if isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        return len(message.summary)
    return 0


def _block_chars(block: object) -> int:
    if isinstance(block, TextContent):
        return len(block.text)
    if isinstance(block, ThinkingContent):
        return len(block.thinking)
    if isinstance(block, ToolCall):
        return len(block.name) + len(orjson.dumps(dict(block.arguments)))
    if isinstance(block, ImageContent):
        return _IMAGE_CHARS
    return 0
