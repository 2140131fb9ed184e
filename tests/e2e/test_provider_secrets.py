"""What a model server's errors can put into the session: a server that echoes the
credentials it was sent (a key in a 401's message, an ``Authorization`` header in a stream's
error event) never gets the key into the error message, the session file or the terminal, and
an error text of megabytes is cut (docs/security.md, "Model providers")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_server import JsonReply, ReplayServer, SseReply

from harness import AgentHarness, JsonlSessionRepo, StreamOptions
from harness._providers.anthropic import AnthropicModel
from harness._providers.base import MAX_ERROR_CHARS, Model, ModelRequest, StreamError
from harness._providers.openai import OpenAIModel
from hooks import UserMessage

pytest.importorskip("openai")

KEY = "sk-live-0123456789abcdef"
PASSWORD = "pw-0123456789"
HEADER = "hdr-token-0123456789"


def _model(provider: str, url: str) -> Model:
    if provider == "anthropic":
        return AnthropicModel("claude-x", api_key=KEY, base_url=url)
    if provider == "openai-userinfo":  # a password in the base URL (sent as Basic auth)
        url = url.replace("http://", f"http://user:{PASSWORD}@")
    return OpenAIModel("gpt-x", api="chat", api_key=KEY, base_url=url + "/v1")


def _echo(provider: str, status: int | None) -> JsonReply | SseReply:
    said = f"Incorrect API key provided: {KEY}; Authorization: Bearer {HEADER}; pw {PASSWORD}"
    if status is not None:
        body = {"type": "error", "error": {"type": "authentication_error", "message": said}}
        return JsonReply(status=status, body=json.dumps(body).encode())
    if provider == "anthropic":
        event = {"type": "error", "error": {"type": "api_error", "message": said}}
        return SseReply(body=f"event: error\ndata: {json.dumps(event)}\n\n".encode())
    return SseReply(body=f"data: {json.dumps({'error': {'message': said}})}\n\n".encode())


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-userinfo"])
@pytest.mark.parametrize("status", [401, None], ids=["http-error", "stream-error"])
async def test_credentials_a_server_echoes_never_reach_the_session(
    provider: str, status: int | None, tmp_path: Path, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(_echo(provider, status))
    model = _model(provider, replay_server.url)
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=model,
        resources=None,
        cwd=tmp_path,
        raise_on_error=False,
        stream_options=StreamOptions(headers={"X-Proxy-Token": f"Bearer {HEADER}"}, max_retries=0),
    )
    reply = await harness.prompt("hi")
    await model.aclose()  # type: ignore[attr-defined]
    (request,) = replay_server.requests
    sent = json.dumps(request.headers)
    assert HEADER in sent and (KEY in sent or provider == "openai-userinfo")
    assert reply.stop_reason == "error" and "[redacted]" in (reply.error_message or "")
    stored = b"".join(p.read_bytes() for p in (tmp_path / "s").rglob("*.jsonl"))
    assert b"Incorrect API key provided" in stored
    for secret in (KEY, HEADER, PASSWORD) if provider == "openai-userinfo" else (KEY, HEADER):
        assert secret not in (reply.error_message or "")
        assert secret.encode() not in stored


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_redirect_to_another_origin_never_carries_the_key(provider: str) -> None:
    # Anthropic sends its key as x-api-key, which httpx's own redirect rule does not strip:
    # this holds only while the SDKs drop credentials when a redirect leaves the origin.
    with ReplayServer() as other, ReplayServer() as first:
        path = "/v1/messages" if provider == "anthropic" else "/v1/chat/completions"
        first.enqueue(JsonReply(status=307, body=b"", headers={"location": other.url + path}))
        model = _model(provider, first.url)
        request = ModelRequest(system_prompt="", messages=[UserMessage(content="hi")])
        events = [e async for e in model.stream(request)]
        await model.aclose()  # type: ignore[attr-defined]
        assert isinstance(events[-1], StreamError)
        (sent,) = first.requests
        assert KEY in json.dumps(sent.headers)
        for followed in other.requests:  # a redirect may be followed, without the key
            assert KEY not in json.dumps(followed.headers)
            assert "authorization" not in followed.headers
            assert "x-api-key" not in followed.headers


# 500 KB (250 times what is kept, 5 times what the session may grow by) by default; the 5 MB it
# was found with under stress (the SDK's SSE parser takes seconds over one such line).
@pytest.mark.parametrize("size", [500_000, pytest.param(5_000_000, marks=pytest.mark.stress)])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("status", [400, None], ids=["http-error", "stream-error"])
async def test_a_servers_error_text_is_cut_before_it_is_stored(
    provider: str, status: int | None, size: int, tmp_path: Path, replay_server: ReplayServer
) -> None:
    # 5 MB of error text would be stored with every failed reply and printed in full.
    said = "E" * size
    if status is not None:
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": said}}
        replay_server.enqueue(JsonReply(status=status, body=json.dumps(body).encode()))
    elif provider == "anthropic":
        event = {"type": "error", "error": {"type": "api_error", "message": said}}
        replay_server.enqueue(
            SseReply(body=f"event: error\ndata: {json.dumps(event)}\n\n".encode())
        )
    else:
        replay_server.enqueue(
            SseReply(body=f"data: {json.dumps({'error': {'message': said}})}\n\n".encode())
        )
    model = _model(provider, replay_server.url)
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=model,
        resources=None,
        cwd=tmp_path,
        raise_on_error=False,
        stream_options=StreamOptions(max_retries=0),
    )
    reply = await harness.prompt("hi")
    await model.aclose()  # type: ignore[attr-defined]
    message = reply.error_message or ""
    assert "EEEE" in message and "more characters)" in message
    assert len(message) <= MAX_ERROR_CHARS + 100
    stored = sum(p.stat().st_size for p in (tmp_path / "s").rglob("*.jsonl"))
    assert stored < 100_000
