"""Models named by strings: ``AgentHarness(model="openai/gpt-4.1")``, a user-defined local model
from the settings' ``models`` key, and "did you mean" for names the registry lacks."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import openai_streams
import pytest
from replay_server import ReplayServer, SseReply

from harness import (
    AgentHarness,
    AnthropicModel,
    JsonlSessionRepo,
    UnknownModelError,
    load_registry,
)

pytest.importorskip("openai")


async def _session(tmp_path: Path):  # type: ignore[no-untyped-def]
    return await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))


async def test_provider_slash_id_and_a_thinking_suffix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    from harness import OpenAIModel

    h = AgentHarness(session=await _session(tmp_path), model="openai/o4-mini:high", resources=None)
    assert isinstance(h.model, OpenAIModel)
    assert (h.model.provider, h.model.id, h.model.api) == ("openai", "o4-mini", "openai-responses")
    assert h.thinking_level == "high"
    assert h.context_window == 200_000  # o4-mini's published window
    claude = AgentHarness(
        session=await _session(tmp_path / "2"), model="claude-sonnet-4-20250514", resources=None
    )
    assert isinstance(claude.model, AnthropicModel)
    assert claude.model.id == "claude-sonnet-4-20250514"  # sent and stored as written
    assert claude.model_info is not None and claude.model_info.id == "claude-sonnet-4"


async def test_an_unknown_name_says_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(UnknownModelError) as info:
        AgentHarness(session=await _session(tmp_path), model="openai/gpt-4.2", resources=None)
    assert "openai/gpt-4.1" in info.value.suggestions
    assert "did you mean" in str(info.value)


async def test_a_local_model_from_the_settings_is_usable_by_name(
    tmp_path: Path, replay_server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "models": {
                    "ollama": {
                        "api": "openai-completions",
                        "baseUrl": f"{replay_server.url}/v1",
                        "models": {"qwen3:8b": {"contextWindow": 32768, "maxTokens": 4096}},
                    }
                }
            }
        )
    )
    registry = load_registry(user_settings=settings).registry
    replay_server.enqueue(SseReply(body=openai_streams.local_server_text()))
    h = AgentHarness(
        session=await _session(tmp_path),
        model="ollama/qwen3:8b",
        registry=registry,
        resources=None,
    )
    assert h.context_window == 32768
    reply = await h.prompt("hi")
    assert (reply.provider, reply.model, reply.text) == ("ollama", "qwen3:8b", openai_streams.TEXT)
    (request,) = replay_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "qwen3:8b"
    # No OpenAI key goes to a provider of the settings that names none.
    assert request.headers["authorization"] == "Bearer no-key"
    # A model the registry lacks on a custom server runs, with a note.
    replay_server.enqueue(SseReply(body=openai_streams.local_server_text()))
    with caplog.at_level(logging.WARNING, logger="harness"):
        other = AgentHarness(
            session=await _session(tmp_path / "2"),
            model="ollama/llama3.2",
            registry=registry,
            resources=None,
        )
    assert "not in the registry" in caplog.text
    assert (await other.prompt("hi")).model == "llama3.2"
    assert other.context_window == 200_000  # unknown: the default
