"""One validator for every request the loop sends (tool pairing and emptiness rules).

The Anthropic API rejects a tool result without its call, a call without its result in the next
user turn, and empty text blocks; pi's bugs #4570 and #6832 were requests that broke these rules
after compactions. ``build_context`` normalises; this checks, right before sending.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repos import block_kind, content_blocks, slots_of

from ._errors import InvalidRequestError
from ._providers.base import LlmMessage

__all__ = ["check_request", "request_problems"]


def request_problems(messages: Sequence[LlmMessage], *, valid_prefix: int = 0) -> list[str]:
    """Every rule the messages break, as readable strings (empty when valid).

    Rules: each tool result directly follows the assistant message that called it (results of
    one message may come in any order but before anything else); every call gets exactly one
    result; no orphan or duplicate result; no empty or whitespace-only text block; no assistant
    message without content; no user message without content.

    ``valid_prefix``: the first N messages are known to form a valid request themselves (so no
    call is pending after them); checking starts after them, with the same result.

    The messages' JSON is read (a session's context is not built for a check).
    """
    problems: list[str] = [] if messages else ["no messages to send"]
    slots = slots_of(messages)
    waiting: dict[str, str] = {}  # call id -> tool name, for the last assistant message
    for index in range(valid_prefix, len(slots)):
        slot = slots[index]
        m, role = slot.json, slot.role
        where = f"message {index} ({role})"
        if role == "toolResult":
            call_id = m["toolCallId"]
            if call_id not in waiting:
                problems.append(f"{where}: result for {call_id!r} has no open call")
            waiting.pop(call_id, None)
            _check_blocks(where, content_blocks(m), problems)
            continue
        if waiting:
            problems.append(f"{where}: calls without results before it: {sorted(waiting)}")
            waiting = {}
        if role == "assistant":
            content = content_blocks(m)
            if not content:
                problems.append(f"{where}: empty assistant message")
            _check_blocks(where, content, problems)
            waiting = {
                b["id"]: b["name"] for b in content if block_kind(b, reply=True) == "toolCall"
            }
        elif role == "user":
            content = m.get("content", "")
            if isinstance(content, str):
                if not content.strip():
                    problems.append(f"{where}: empty user message")
            else:
                if not content:
                    problems.append(f"{where}: empty user message")
                _check_blocks(where, content, problems)
    if waiting:
        problems.append(f"end: calls without results: {sorted(waiting)}")
    return problems


def check_request(messages: Sequence[LlmMessage], *, valid_prefix: int = 0) -> None:
    """Raise :class:`InvalidRequestError` if :func:`request_problems` finds anything."""
    problems = request_problems(messages, valid_prefix=valid_prefix)
    if problems:
        raise InvalidRequestError(problems)


def _check_blocks(where: str, blocks: Sequence[Any], problems: list[str]) -> None:
    for i, block in enumerate(blocks):
        if block_kind(block, reply=False) == "text" and not block["text"].strip():
            problems.append(f"{where}: empty text block {i}")
