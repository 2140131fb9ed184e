"""A session that changes provider mid-way: Anthropic -> OpenAI (Responses) -> Anthropic.

Every request is checked to be valid for its API (pi's conversion rules,
``harness/_providers/transform.py``): no thinking signature goes to an API that did not sign
it, every tool-call id has the form the receiving API allows, and each call still pairs with
its result. pi's own reader agrees with the same file in ``tests/pi/test_cross_provider.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import anthropic_streams
import openai_streams
import pytest
from cross_provider import PROMPTS, run_across_providers
from replay_server import ReplayServer

from harness import AssistantMessage, MessageEntry, ModelChangeEntry, ThinkingContent, ToolCall

pytest.importorskip("openai")

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _walk(value: Any) -> list[dict[str, Any]]:
    """Every JSON object inside ``value``."""
    found: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


async def test_one_session_across_providers(
    tmp_path: Path,
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    openai_client: Any,
) -> None:
    h = await run_across_providers(tmp_path, replay_server, anthropic_client, openai_client)
    requests = replay_server.requests
    assert [r.path for r in requests] == [
        "/v1/messages",
        "/v1/messages",
        "/v1/responses",
        "/v1/responses",
        "/v1/messages",
    ]

    # OpenAI, after Anthropic: the Claude thinking went as text, no signature, ids valid.
    to_openai = requests[2].body
    objects = _walk(to_openai["input"])
    assert not any("signature" in o or o.get("type") == "thinking" for o in objects)
    texts = [o.get("text") for o in objects if o.get("type") == "output_text"]
    assert anthropic_streams.THINKING in texts  # thinking kept, as plain text (pi)
    calls = [o for o in objects if o.get("type") == "function_call"]
    outputs = [o for o in objects if o.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == [anthropic_streams.THINKING_TOOL_ID]
    assert [o["call_id"] for o in outputs] == [anthropic_streams.THINKING_TOOL_ID]
    assert all("id" not in c for c in calls)  # a foreign call has no OpenAI item id
    assert all(OPENAI_ID.match(c["call_id"]) for c in calls)
    assert "reasoning" in to_openai  # o4-mini reasons: the thinking level went through

    # Back on Anthropic: OpenAI's reasoning went as text, its ids re-mapped, Claude's own
    # thinking went back signed, exactly as it came.
    to_claude = requests[4].body
    blocks = [
        b for m in to_claude["messages"] if isinstance(m["content"], list) for b in m["content"]
    ]
    thinking = [b for b in blocks if b.get("type") == "thinking"]
    assert thinking == [
        {
            "type": "thinking",
            "thinking": anthropic_streams.THINKING,
            "signature": anthropic_streams.SIGNATURE,
        }
    ]
    assert not any(b.get("type") == "reasoning" or "encrypted_content" in b for b in blocks)
    assert openai_streams.SUMMARY in [b.get("text") for b in blocks if b.get("type") == "text"]
    uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
    assert uses == results == [anthropic_streams.THINKING_TOOL_ID, "call_rrr_fc_1rrr"]
    assert all(ANTHROPIC_ID.match(i) for i in uses)
    assert "encrypted" not in json.dumps(to_claude)

    # The session records which model wrote each reply, in pi's fields.
    replies = [
        e.message
        for e in h.session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]
    assert [(r.provider, r.api) for r in replies] == [
        ("anthropic", "anthropic-messages"),
        ("anthropic", "anthropic-messages"),
        ("openai", "openai-responses"),
        ("openai", "openai-responses"),
        ("anthropic", "anthropic-messages"),
    ]
    assert isinstance(replies[2].content[0], ThinkingContent)
    assert isinstance(replies[2].content[1], ToolCall)
    changes = [
        (e.provider, e.model_id) for e in h.session.entries() if isinstance(e, ModelChangeEntry)
    ]
    assert changes == [("openai", "o4-mini"), ("anthropic", "claude-sonnet-4-5")]
    assert PROMPTS[1] in json.dumps(to_openai["input"][-1])  # the prompt went last
