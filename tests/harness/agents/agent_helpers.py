"""Helpers of the tests in this folder: a priced registry for FauxModel, small tools, and
readers of the session's custom entries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness import (
    CustomEntry,
    CustomMessage,
    FauxReply,
    FauxToolCall,
    JSONValue,
    MessageEntry,
    ModelRegistry,
    Session,
    ToolResult,
    ToolRun,
    tool,
)

PRICE_PER_TOKEN_USD = 0.001
"""What every token costs the faux models in :func:`priced_registry` (both ways)."""


def priced_registry() -> ModelRegistry:
    """The package's registry with ``faux/faux-1`` (and ``faux/faux-child``) at
    :data:`PRICE_PER_TOKEN_USD` per token, input and output."""
    per_million = PRICE_PER_TOKEN_USD * 1_000_000
    cost = {"input": per_million, "output": per_million}
    return ModelRegistry.builtin().with_settings(
        {
            "faux": {
                "api": "anthropic-messages",
                "models": {"faux-1": {"cost": cost}, "faux-child": {"cost": cost}},
            }
        },
        "test",
    )


@tool(
    "note",
    "records a word",
    {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)
async def note(input: Mapping[str, Any], run: ToolRun) -> ToolResult:
    return ToolResult(content=f"noted {input['word']}")


def note_call(word: str) -> FauxReply:
    """A reply calling :data:`note` once."""
    return FauxReply(
        text=f"noting {word}", tool_calls=[FauxToolCall(name="note", arguments={"word": word})]
    )


def customs(session: Session, custom_type: str) -> list[Mapping[str, JSONValue]]:
    """The data of every ``custom`` entry of this type, in file order."""
    out = []
    for entry in session.entries():
        if isinstance(entry, CustomEntry) and entry.custom_type == custom_type:
            assert isinstance(entry.data, Mapping)
            out.append(entry.data)
    return out


def custom_messages(session: Session, custom_type: str) -> list[str]:
    """The text of every custom message (a ``message`` entry of role ``custom``) of this
    type, in file order."""
    return [
        e.message.text
        for e in session.entries()
        if isinstance(e, MessageEntry)
        and isinstance(e.message, CustomMessage)
        and e.message.custom_type == custom_type
    ]
