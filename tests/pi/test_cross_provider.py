"""pi's own reader agrees with a session that changed provider mid-way (Anthropic -> OpenAI's
Responses API -> Anthropic): same leaf, branch, context message by message (thinking with
OpenAI's reasoning item as its signature, ``call|item`` tool-call ids, ``textSignature``), and
the same model at the leaf."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from cross_provider import run_across_providers
from pi_oracle import PiReader, ours
from replay_server import ReplayServer

from harness import encode_message

pytestmark = pytest.mark.pi


async def test_pi_reads_a_session_that_changed_provider(
    pi: PiReader,
    tmp_path: Path,
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    openai_client: Any,
) -> None:
    h = await run_across_providers(tmp_path, replay_server, anthropic_client, openai_client)
    session = h.session
    assert session.path is not None
    state = pi.state(session.path)
    context = session.build_context()
    assert state.leaf_id == session.leaf_id
    assert state.branch_ids == session.path_ids(session.leaf_id)
    assert ours(context.messages) == state.context
    assert [encode_message(m) for m in context.messages] == state.messages
    assert state.model == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    # Spelled out, so the comparison cannot pass on two empty lists.
    apis = [m.get("api") for m in state.messages if m["role"] == "assistant"]
    assert apis == [
        "anthropic-messages",
        "anthropic-messages",
        "openai-responses",
        "openai-responses",
        "anthropic-messages",
    ]
    reasoning = next(m for m in state.messages if m.get("api") == "openai-responses")
    signature = json.loads(reasoning["content"][0]["thinkingSignature"])
    assert signature["type"] == "reasoning" and signature["encrypted_content"]
    assert reasoning["content"][1]["id"] == "call_rrr|fc_1rrr"
