"""The scripted model of ``--offline`` (``run``, ``chat``, ``rpc``): try everything with no key
and no network.

It thinks one short line, then answers. What it does depends on the last message:

- a tool result: reports the first line of what the tool returned (or that it failed);
- ``!COMMAND``: calls the ``bash`` tool with COMMAND (which needs approval in the ``default``
  mode);
- ``@TOOL {JSON}``: calls TOOL (an MCP tool, say) with those arguments (none: ``{}``);
- ``count N``: counts from 1 to N (at most 100,000), a long reply to interrupt;
- anything else: echoes the prompt.

Tool call ids are ``offline_call_<branch length>``: ``FauxModel``'s own restart at
``faux_call_1`` in every process, and a session continued by a second run would hold one id
twice. Paced (``chat`` and ``rpc``), replies stream a few characters at a time with a small
pause, so an interrupt can land mid-stream as with a real model.
"""

from __future__ import annotations

import json
import re

from hooks import ToolResultMessage

from .._providers.base import ModelRequest
from .._providers.faux import FauxModel, FauxReply, FauxToolCall

__all__ = ["OFFLINE_MODEL_ID", "PACED_CHUNK_CHARS", "PACED_DELAY_S", "offline_model"]

OFFLINE_MODEL_ID = "offline"
PACED_CHUNK_CHARS = 4
"""Characters per streamed delta when paced."""
PACED_DELAY_S = 0.02
"""Pause before each delta when paced, in seconds: ``count 1000`` takes about 20 s."""

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
    call_id = f"offline_call_{len(request.messages)}"
    if text.startswith("@") and text[1:].strip():
        return _call(text[1:], call_id, thinking)
    if text.startswith("!") and text[1:].strip():
        command = text[1:].strip()
        return FauxReply(
            thinking=thinking,
            text=f"(offline) Running {command!r}.",
            tool_calls=[FauxToolCall(name="bash", arguments={"command": command}, id=call_id)],
        )
    count = _COUNT.match(text.strip())
    if count is not None:
        n = min(int(count.group(1)), _MAX_COUNT)
        numbers = " ".join(str(i) for i in range(1, n + 1))
        return FauxReply(thinking=thinking, text=f"(offline) Counting to {n}: {numbers}.")
    return FauxReply(thinking=thinking, text=f"(offline) You said: {text}")


def _call(text: str, call_id: str, thinking: str) -> FauxReply:
    """``TOOL {JSON}``: a call of TOOL with those arguments (none: ``{}``)."""
    name, _, given = text.strip().partition(" ")
    try:
        arguments = json.loads(given) if given.strip() else {}
    except ValueError as exc:
        return FauxReply(text=f"(offline) the arguments of {name} are not JSON: {exc}")
    if not isinstance(arguments, dict):
        return FauxReply(text=f"(offline) the arguments of {name} must be a JSON object")
    return FauxReply(
        thinking=thinking,
        text=f"(offline) Calling {name}.",
        tool_calls=[FauxToolCall(name=name, arguments=arguments, id=call_id)],
    )


def offline_model(*, paced: bool = False) -> FauxModel:
    """A new scripted model (see the module docstring); ``paced`` streams slowly enough to
    interrupt (``chat``, ``rpc``), else in 16-character deltas at once (``run``)."""
    if paced:
        return FauxModel(
            _reply, model_id=OFFLINE_MODEL_ID, chunk_size=PACED_CHUNK_CHARS, delay_s=PACED_DELAY_S
        )
    return FauxModel(_reply, model_id=OFFLINE_MODEL_ID)
