"""OpenAIModel through the real ``openai`` SDK against the local replay server, in both wire
formats: the Responses API (events) and Chat Completions (chunks).

Every stream is hand-written (``tests/fixtures/openai_streams.py``). Expected costs are worked
out by hand from the registry's published prices (gpt-4.1: $2 input, $8 output, $0.50 cached
input per million tokens).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai_streams as streams
import pytest
from replay_server import ReplayServer, SseReply

from harness import (
    AgentHarness,
    AssistantMessage,
    CompactionSettings,
    ContextOverflowError,
    ExtractiveSummarizer,
    ImageContent,
    JsonlSessionRepo,
    MessageEntry,
    MissingApiKeyError,
    ProviderError,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolRun,
    UserMessage,
    open_session,
    tool,
)
from harness._providers.base import (
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamStart,
    ToolSpec,
)
from harness._providers.openai import OpenAIModel

openai = pytest.importorskip("openai")

APIS = ["responses", "chat"]
PATHS = {"responses": "/v1/responses", "chat": "/v1/chat/completions"}
LOOKUP = ToolSpec(
    name="lookup",
    description="looks a word up",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)


@tool("lookup", "looks a word up", {"type": "object", "properties": {"word": {"type": "string"}}})
async def lookup(input: Any, run: ToolRun) -> ToolResult:
    return ToolResult(content=f"{input['word']}: a definition")


def _model(client: Any, api: str, model_id: str = "gpt-4.1") -> OpenAIModel:
    return OpenAIModel(model_id, api=api, client=client)  # type: ignore[arg-type]


async def _collect(model: OpenAIModel, request: ModelRequest | None = None) -> list[StreamEvent]:
    request = request or ModelRequest(
        system_prompt="You are terse.", messages=[UserMessage(content="Say hello")]
    )
    events = [e async for e in model.stream(request)]
    terminal = [e for e in events if isinstance(e, StreamDone | StreamError)]
    assert len(terminal) == 1 and events[-1] is terminal[0]
    assert sum(isinstance(e, StreamStart) for e in events) == 1
    return events


def _done(events: list[StreamEvent]) -> Any:
    assert isinstance(events[-1], StreamDone), events[-1]
    return events[-1].message


async def _harness(tmp_path: Path, model: OpenAIModel, **kwargs: Any) -> AgentHarness:
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    kwargs.setdefault("stream_options", StreamOptions(max_retries=2, cache_retention="none"))
    return AgentHarness(
        session=session, model=model, retry_base_delay_s=0.01, resources=None, **kwargs
    )


# --- text, usage, cost ----------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_text_usage_and_cost(
    api: str, replay_server: ReplayServer, openai_client: Any
) -> None:
    body = streams.responses_text() if api == "responses" else streams.chat_text()
    replay_server.enqueue(SseReply(body=body))
    events = await _collect(_model(openai_client, api))
    reply = _done(events)
    assert reply.text == streams.TEXT
    assert "".join(e.delta for e in events if isinstance(e, StreamDelta)) == streams.TEXT
    assert (reply.api, reply.provider, reply.model) == (
        "openai-responses" if api == "responses" else "openai-completions",
        "openai",
        "gpt-4.1",
    )
    assert reply.stop_reason == "stop"
    # 1000 prompt tokens of which 400 cached: ours counts input without the cached part.
    usage = reply.usage
    assert (usage.input, usage.cache_read, usage.output, usage.total) == (600, 400, 50, 1050)
    # 600 x $2 + 400 x $0.50 + 50 x $8, per million tokens.
    assert usage.cost.total == pytest.approx(0.0012 + 0.0002 + 0.0004)
    (request,) = replay_server.requests
    assert request.path == PATHS[api]
    assert request.body["model"] == "gpt-4.1" and request.body["stream"] is True
    if api == "responses":
        assert request.body["instructions"] == "You are terse."
        assert request.body["store"] is False
    else:
        assert request.body["messages"][0] == {"role": "system", "content": "You are terse."}
        assert request.body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("api", APIS)
async def test_parallel_tool_calls_with_streamed_arguments(
    api: str, replay_server: ReplayServer, openai_client: Any
) -> None:
    body = (
        streams.responses_parallel_calls() if api == "responses" else streams.chat_parallel_calls()
    )
    replay_server.enqueue(SseReply(body=body))
    request = ModelRequest(
        system_prompt="", messages=[UserMessage(content="define two")], tools=[LOOKUP]
    )
    events = await _collect(_model(openai_client, api), request)
    reply = _done(events)
    assert reply.stop_reason == "toolUse"
    assert [(c.name, dict(c.arguments)) for c in reply.tool_calls] == [
        ("lookup", {"word": "tree"}),
        ("lookup", {"word": "leaf"}),
    ]
    ids = [c.id for c in reply.tool_calls]
    assert ids == (
        ["call_aaa|fc_0aaa", "call_bbb|fc_1bbb"] if api == "responses" else ["call_aaa", "call_bbb"]
    )
    pieces = [e for e in events if isinstance(e, StreamDelta) and e.kind == "toolcall"]
    assert len(pieces) >= 3  # the arguments arrived in pieces, for both calls
    assert {e.content_index for e in pieces} == {0, 1}
    sent = replay_server.requests[0].body
    tools = sent["tools"]
    assert [t.get("name") or t["function"]["name"] for t in tools] == ["lookup"]


@pytest.mark.parametrize("api", APIS)
async def test_a_refusal(api: str, replay_server: ReplayServer, openai_client: Any) -> None:
    body = streams.responses_refusal() if api == "responses" else streams.chat_refusal()
    replay_server.enqueue(SseReply(body=body))
    reply = _done(await _collect(_model(openai_client, api)))
    assert reply.stop_reason == "refusal"
    assert reply.text == "I can't help with that."


@pytest.mark.parametrize("api", APIS)
async def test_length(api: str, replay_server: ReplayServer, openai_client: Any) -> None:
    body = streams.responses_length() if api == "responses" else streams.chat_length()
    replay_server.enqueue(SseReply(body=body))
    reply = _done(await _collect(_model(openai_client, api)))
    assert reply.stop_reason == "length"
    assert reply.text == "This answer goes on and"


@pytest.mark.parametrize("api", APIS)
async def test_images_are_sent(api: str, replay_server: ReplayServer, openai_client: Any) -> None:
    body = streams.responses_text() if api == "responses" else streams.chat_text()
    replay_server.enqueue(SseReply(body=body))
    message = UserMessage(
        content=(
            TextContent(text="what is this?"),
            ImageContent(data="iVBORw0K", mime_type="image/png"),
        )
    )
    await _collect(_model(openai_client, api), ModelRequest(system_prompt="", messages=[message]))
    sent = replay_server.requests[0].body
    if api == "responses":
        parts = sent["input"][0]["content"]
        assert parts[1] == {
            "type": "input_image",
            "detail": "auto",
            "image_url": "data:image/png;base64,iVBORw0K",
        }
    else:
        parts = sent["messages"][0]["content"]
        assert parts[1] == {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,iVBORw0K"},
        }


# --- reasoning carried across turns ---------------------------------------------------------


async def test_encrypted_reasoning_goes_into_the_next_request_and_survives_a_reopen(
    tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    replay_server.enqueue(
        SseReply(body=streams.responses_reasoning_then_call()),
        SseReply(body=streams.responses_text("tree: a definition", "msg_2")),
        SseReply(body=streams.responses_text("again", "msg_3")),
    )
    model = _model(openai_client, "responses", "o4-mini")
    h = await _harness(tmp_path, model, tools=[lookup], thinking_level="high")
    reply = await h.prompt("define tree")
    assert reply.text == "tree: a definition"
    first, second = (r.body for r in replay_server.requests)
    assert first["reasoning"] == {"effort": "high", "summary": "auto"}
    assert first["include"] == ["reasoning.encrypted_content"]
    # The reasoning item goes back exactly as it came, before the call it led to.
    items = second["input"]
    kinds = [i.get("type", i.get("role")) for i in items]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    assert items[1] == streams.reasoning_item(summary=streams.SUMMARY)
    assert items[1]["encrypted_content"] == streams.ENCRYPTED
    assert items[2]["call_id"] == "call_rrr" and items[2]["id"] == "fc_1rrr"
    assert items[3] == {
        "type": "function_call_output",
        "call_id": "call_rrr",
        "output": "tree: a definition",
    }
    # Stored in the session: a reopened session sends it again.
    assert h.session.path is not None
    stored = [
        e.message
        for e in open_session(h.session.path).entries()
        if isinstance(e, MessageEntry) and e.message.role == "assistant"
    ]
    thinking = stored[0].content[0]
    assert isinstance(thinking, ThinkingContent)
    assert json.loads(thinking.thinking_signature or "")["encrypted_content"] == streams.ENCRYPTED
    reopened = open_session(h.session.path)
    again = AgentHarness(session=reopened, model=model, resources=None, thinking_level="high")
    await again.prompt("once more")
    third = replay_server.requests[2].body["input"]
    assert third[1] == streams.reasoning_item(summary=streams.SUMMARY)
    # The text reply went back as an output message with its id.
    assert third[4]["type"] == "message" and third[4]["id"] == "msg_2"


async def test_chat_reasoning_content_is_thinking_and_goes_back_in_its_field(
    tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    replay_server.enqueue(
        SseReply(body=streams.chat_reasoning_then_text()), SseReply(body=streams.chat_text())
    )
    h = await _harness(tmp_path, _model(openai_client, "chat", "local-reasoner"))
    reply = await h.prompt("hi")
    assert reply.content[0] == ThinkingContent(
        thinking="Think briefly.", thinking_signature="reasoning_content"
    )
    await h.prompt("and?")
    sent = replay_server.requests[1].body["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": streams.TEXT,
        "reasoning_content": "Think briefly.",
    }


# --- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_429_then_success(
    api: str, tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    body = streams.responses_text() if api == "responses" else streams.chat_text()
    replay_server.enqueue(
        streams.error_reply(
            429,
            "Rate limit reached",
            kind="requests",
            code="rate_limit_exceeded",
            headers={"retry-after-ms": "10"},
        ),
        SseReply(body=body),
    )
    h = await _harness(tmp_path, _model(openai_client, api))
    retries: list[Any] = []
    h.connect("retry", lambda s, event: retries.append(event))
    reply = await h.prompt("hi")
    assert reply.text == streams.TEXT
    assert [(r.attempt, r.error_type, r.delay_s) for r in retries] == [
        (1, "rate_limit_exceeded", 0.01)
    ]


async def test_insufficient_quota_is_not_retried(
    replay_server: ReplayServer, openai_client: Any
) -> None:
    replay_server.enqueue(
        streams.error_reply(429, "You exceeded your quota", code="insufficient_quota")
    )
    events = await _collect(_model(openai_client, "responses"))
    error = events[-1]
    assert isinstance(error, StreamError)
    assert (error.error.status, error.error.retryable) == (429, False)


@pytest.mark.parametrize("api", APIS)
async def test_500_exhausting_retries_raises(
    api: str, tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    replay_server.enqueue(
        *[streams.error_reply(500, "The server had an error", kind="server_error")] * 3
    )
    h = await _harness(tmp_path, _model(openai_client, api))
    with pytest.raises(ProviderError) as info:
        await h.prompt("hi")
    assert info.value.status == 500 and info.value.retryable
    assert info.value.reply is not None and info.value.reply.stop_reason == "error"
    assert len(replay_server.requests) == 3


@pytest.mark.parametrize("api", APIS)
async def test_context_overflow_compacts_once_and_retries_once(
    api: str, tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    body = streams.responses_text() if api == "responses" else streams.chat_text()
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    for i in range(4):
        session.append_message(UserMessage(content=f"question {i} " + "x" * 4000))
        session.append_message(_stored_reply(f"answer {i}", api))
    h = AgentHarness(
        session=session,
        model=_model(openai_client, api),
        resources=None,
        summarizer=ExtractiveSummarizer(),
        compaction=CompactionSettings(keep_recent_tokens=1000),
        stream_options=StreamOptions(max_retries=2),
    )
    compactions: list[Any] = []
    h.connect("session_before_compact", lambda s, event: compactions.append(event))
    replay_server.enqueue(streams.overflow_reply(), SseReply(body=body))
    reply = await h.prompt("go on")
    assert reply.text == streams.TEXT
    assert len(compactions) == 1 and compactions[0].trigger == "overflow"
    assert len(replay_server.requests) == 2
    # A second overflow is not retried again: it raises.
    replay_server.enqueue(streams.overflow_reply(), streams.overflow_reply())
    with pytest.raises(ContextOverflowError):
        await h.prompt("more")


def _stored_reply(text: str, api: str) -> AssistantMessage:
    return AssistantMessage(
        content=text,
        api="openai-responses" if api == "responses" else "openai-completions",
        provider="openai",
        model="gpt-4.1",
    )


@pytest.mark.parametrize("api", APIS)
async def test_a_mid_stream_disconnect_is_retryable_and_retried(
    api: str, tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    body = streams.responses_text() if api == "responses" else streams.chat_text()
    replay_server.enqueue(SseReply(body=body, cut_after=len(body) // 2, ending="abrupt"))
    events = await _collect(_model(openai_client, api))
    error = events[-1]
    assert isinstance(error, StreamError)
    assert error.error.retryable
    assert error.error.error_type in ("connection_error", "incomplete_stream")
    assert error.message.stop_reason == "error"
    # Through the harness: retried, and only the complete reply is stored.
    replay_server.enqueue(
        SseReply(body=body, cut_after=len(body) // 2, ending="abrupt"), SseReply(body=body)
    )
    h = await _harness(tmp_path, _model(openai_client, api))
    reply = await h.prompt("hi")
    assert reply.text == streams.TEXT
    replies = [
        e.message
        for e in h.session.entries()
        if isinstance(e, MessageEntry) and e.message.role == "assistant"
    ]
    assert replies == [reply]


async def test_a_response_failed_event_is_an_error(
    replay_server: ReplayServer, openai_client: Any
) -> None:
    replay_server.enqueue(
        SseReply(body=streams.responses_failed("server_error", "The model crashed"))
    )
    events = await _collect(_model(openai_client, "responses"))
    error = events[-1]
    assert isinstance(error, StreamError)
    assert (error.error.error_type, error.error.retryable) == ("server_error", True)


async def test_a_connection_refused_is_retryable(openai_client: Any) -> None:
    client = openai_client.with_options(base_url="http://127.0.0.1:9/v1")
    events = await _collect(_model(client, "chat"))
    error = events[-1]
    assert isinstance(error, StreamError)
    assert (error.error.error_type, error.error.retryable) == ("connection_error", True)


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MissingApiKeyError) as info:
        OpenAIModel("gpt-4.1")
    assert info.value.variable == "OPENAI_API_KEY"
    assert info.value.code == "missing_api_key"
    # A local server needs no key.
    local = OpenAIModel("qwen3:8b", api="chat", base_url="http://127.0.0.1:9/v1")
    assert local.api == "openai-completions"


# --- a server that behaves like a local model server ---------------------------------------


async def test_a_local_model_server(
    tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    """Ollama / llama.cpp style: no id on the stream, usage only on some chunks, a whole tool
    call in one chunk without index or id."""
    replay_server.enqueue(
        SseReply(body=streams.local_server_call({"word": "tree"})),
        SseReply(body=streams.local_server_text()),
    )
    model = OpenAIModel("qwen3:8b", api="chat", client=openai_client, provider="ollama")
    h = await _harness(tmp_path, model, tools=[lookup])
    reply = await h.prompt("define tree")
    assert reply.text == streams.TEXT
    assert (reply.provider, reply.model, reply.api) == ("ollama", "qwen3:8b", "openai-completions")
    assert (reply.usage.input, reply.usage.output) == (20, 4)
    assert reply.usage.cost.total == 0  # not in the registry: no price, no guess
    calls = [
        b
        for e in h.session.entries()
        if isinstance(e, MessageEntry) and e.message.role == "assistant"
        for b in e.message.content
        if isinstance(b, ToolCall)
    ]
    assert len(calls) == 1 and calls[0].arguments == {"word": "tree"}
    assert calls[0].id.startswith("call_")  # the server gave none: one was made
    second = replay_server.requests[1].body["messages"]
    assert second[2]["tool_calls"][0]["id"] == calls[0].id
    assert second[3] == {
        "role": "tool",
        "tool_call_id": calls[0].id,
        "content": "tree: a definition",
    }
    assert "max_completion_tokens" not in replay_server.requests[1].body


def test_reasoning_without_encrypted_content_is_not_sent_back(openai_client: Any) -> None:
    """With store: false, a reasoning item the API did not encrypt cannot be referred to again:
    it is left out, and so is the item id of the call it led to."""
    model = _model(openai_client, "responses", "o4-mini")
    stored = AssistantMessage(
        content=(
            ThinkingContent(thinking="", thinking_signature='{"type": "reasoning", "id": "rs_9"}'),
            ToolCall(id="call_x|fc_9", name="lookup", arguments={"word": "a"}),
        ),
        api="openai-responses",
        provider="openai",
        model="o4-mini",
        stop_reason="toolUse",
    )
    from harness import ToolResultMessage

    body = model.build_payload(
        ModelRequest(
            system_prompt="",
            messages=[
                UserMessage(content="q"),
                stored,
                ToolResultMessage(tool_call_id="call_x|fc_9", tool_name="lookup", content="a"),
            ],
        )
    )
    kinds = [i.get("type", i.get("role")) for i in body["input"]]
    assert kinds == ["user", "function_call", "function_call_output"]
    assert "id" not in body["input"][1] and body["input"][1]["call_id"] == "call_x"
    # A reasoning model reasons anyway: its encrypted reasoning is asked for, effort is not.
    assert body["include"] == ["reasoning.encrypted_content"] and "reasoning" not in body
