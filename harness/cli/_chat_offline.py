"""The scripted model of ``harness chat --offline``: try the chat with no key and no network.

It thinks one short line, then answers; replies stream a few characters at a time with a small
pause, so a Ctrl-C can land mid-stream as it would with a real model. What it does depends on
the prompt:

- ``!COMMAND``: calls the ``bash`` tool with COMMAND (which needs approval in the ``default``
  mode), then reports the first line of the result;
- ``count N``: counts from 1 to N (at most 100,000), a long reply to interrupt;
- anything else: echoes the prompt.
"""

from __future__ import annotations

import re

from hooks import ToolResultMessage

from .._providers.base import ModelRequest
from .._providers.faux import FauxModel, FauxReply, FauxToolCall

__all__ = ["CHAT_CHUNK_CHARS", "CHAT_DELAY_S", "OFFLINE_CHAT_MODEL_ID", "chat_offline_model"]

OFFLINE_CHAT_MODEL_ID = "offline-chat"
CHAT_CHUNK_CHARS = 4
"""Characters per streamed delta."""
CHAT_DELAY_S = 0.02
"""Pause before each delta, in seconds: ``count 1000`` takes about 20 s to stream."""

_MAX_COUNT = 100_000
_COUNT = re.compile(r"count\s+(\d+)\s*\Z", re.IGNORECASE)


def _reply(request: ModelRequest) -> FauxReply:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        status = "failed" if last.is_error else "returned"
        first = (last.text.strip().splitlines() or ["(no output)"])[0]
        return FauxReply(text=f"(offline) {last.tool_name} {status}: {first}")
    text = str(getattr(last, "text", "")) if last is not None else ""
    words = len(text.split())
    thinking = f"The user wrote {words} word{'' if words == 1 else 's'}."
    if text.startswith("!") and text[1:].strip():
        command = text[1:].strip()
        return FauxReply(
            thinking=thinking,
            text=f"(offline) Running {command!r}.",
            # The branch length keeps ids unique across processes (FauxModel's own restart).
            tool_calls=[
                FauxToolCall(
                    name="bash",
                    arguments={"command": command},
                    id=f"offline_call_{len(request.messages)}",
                )
            ],
        )
    count = _COUNT.match(text.strip())
    if count is not None:
        n = min(int(count.group(1)), _MAX_COUNT)
        numbers = " ".join(str(i) for i in range(1, n + 1))
        return FauxReply(thinking=thinking, text=f"(offline) Counting to {n}: {numbers}.")
    return FauxReply(thinking=thinking, text=f"(offline) You said: {text}")


def chat_offline_model() -> FauxModel:
    """A new scripted model for ``chat --offline`` (see the module docstring)."""
    return FauxModel(
        _reply,
        model_id=OFFLINE_CHAT_MODEL_ID,
        chunk_size=CHAT_CHUNK_CHARS,
        delay_s=CHAT_DELAY_S,
    )
