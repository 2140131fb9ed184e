"""What AnthropicModel sends: stream options, prompt caching, thinking, replacement payloads and
server-tool blocks in history. The real SDK posts to the replay server, which records each body.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import anthropic_streams as streams
import pytest
from replay_server import ReplayServer, SseReply

from harness._providers.anthropic import THINKING_BUDGETS, AnthropicModel
from harness._providers.base import (
    ModelRequest,
    StreamDone,
    StreamEvent,
)
from hooks import (
    AssistantMessage,
    CacheRetention,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
)

MODEL_ID = "claude-test-model"
NO_CACHE = StreamOptions(cache_retention="none")


def _request(*messages: Any, **kwargs: Any) -> ModelRequest:
    if not messages:
        messages = (UserMessage(content="Say just hello"),)
    kwargs.setdefault("system_prompt", "You are terse.")
    kwargs.setdefault("options", NO_CACHE)
    return ModelRequest(messages=messages, **kwargs)


async def _send(
    server: ReplayServer,
    model: AnthropicModel,
    request: ModelRequest,
    payload: dict[str, Any] | None = None,
) -> tuple[list[StreamEvent], dict[str, Any]]:
    """Stream ``request`` against a scripted ``stream-text.sse``; the events and the sent body."""
    server.enqueue(SseReply(body=streams.text()))
    events = [event async for event in model.stream(request, payload=payload)]
    assert isinstance(events[-1], StreamDone), events[-1]
    body = server.requests[-1].body
    assert isinstance(body, dict)
    return events, body


# --- stream options ---------------------------------------------------------------------------


async def test_headers_and_metadata_user_id(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    options = StreamOptions(
        cache_retention="none",
        headers={"X-Trace-Id": "trace-42", "anthropic-beta": "some-beta-2025"},
        metadata={"user_id": "user-7", "session": "s-1", "team": 3},
    )
    _, body = await _send(replay_server, model, _request(options=options))

    headers = replay_server.requests[-1].headers
    assert headers["x-trace-id"] == "trace-42"
    assert headers["anthropic-beta"] == "some-beta-2025"
    # Only user_id is accepted by the API; the other keys are dropped.
    assert body["metadata"] == {"user_id": "user-7"}


@pytest.mark.parametrize("metadata", [{}, {"session": "s-1"}, {"user_id": 7}, {"user_id": ""}])
async def test_metadata_without_a_user_id_is_not_sent(
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    metadata: dict[str, Any],
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    options = StreamOptions(cache_retention="none", metadata=metadata)
    _, body = await _send(replay_server, model, _request(options=options))
    assert "metadata" not in body


def _cache_controls(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every ``cache_control`` in a JSON body, with where it sits."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "cache_control":
                found.append((path, item))
            else:
                found.extend(_cache_controls(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_cache_controls(item, f"{path}[{index}]"))
    return found


@pytest.mark.parametrize(
    ("retention", "marker"),
    [
        ("none", None),
        ("short", {"type": "ephemeral"}),
        ("long", {"type": "ephemeral", "ttl": "1h"}),
    ],
)
async def test_cache_retention(
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    retention: CacheRetention,
    marker: dict[str, str] | None,
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    # The last user message ends with empty and whitespace text blocks: they are never sent,
    # so they can never carry the marker; it goes on the last block that is sent.
    messages = (
        UserMessage(content="first"),
        AssistantMessage(api="anthropic-messages", content=(TextContent(text="ok"),)),
        UserMessage(
            content=(TextContent(text="second"), TextContent(text=""), TextContent(text=" \n"))
        ),
    )
    request = _request(*messages, options=StreamOptions(cache_retention=retention))
    _, body = await _send(replay_server, model, request)

    if marker is None:
        assert _cache_controls(body) == []
        assert body["messages"][-1] == {
            "role": "user",
            "content": [{"type": "text", "text": "second"}],
        }
        return
    assert _cache_controls(body) == [
        (".system[0]", marker),
        (".messages[2].content[0]", marker),
    ]
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "second", "cache_control": marker}
    ]
    assert body["messages"][0] == {"role": "user", "content": "first"}


async def test_cache_marker_on_last_tool_result_and_never_on_an_assistant_turn(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    call = AssistantMessage(
        api="anthropic-messages", content=(ToolCall(id="x", name="n", arguments={}),)
    )
    result = ToolResultMessage(tool_call_id="x", tool_name="n", content=(TextContent(text="42"),))
    request = _request(UserMessage(content="go"), call, result, options=StreamOptions())
    _, body = await _send(replay_server, model, request)
    assert _cache_controls(body) == [
        (".system[0]", {"type": "ephemeral"}),
        (".messages[2].content[0]", {"type": "ephemeral"}),
    ]
    assert body["messages"][2]["content"][0]["type"] == "tool_result"

    # A conversation ending with an assistant turn (a prefill): only the system prompt is marked.
    prefill = AssistantMessage(api="anthropic-messages", content=(TextContent(text="Sure"),))
    request = _request(UserMessage(content="go"), prefill, options=StreamOptions())
    _, body = await _send(replay_server, model, request)
    assert _cache_controls(body) == [(".system[0]", {"type": "ephemeral"})]


async def test_timeout_option_is_used_by_the_sdk(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    # The option is the SDK request timeout: a generous one lets the request through...
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    _, body = await _send(
        replay_server, model, _request(options=StreamOptions(cache_retention="none", timeout_s=30))
    )
    assert body["messages"] == [{"role": "user", "content": "Say just hello"}]
    # ...and a short one fails it (test_anthropic_errors.py: error_type "timeout").


# --- thinking and temperature -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "budget", "max_tokens"),
    [
        ("minimal", 1024, 8192),
        ("high", 20480, 20480 + 8192),
        ("xhigh", 32000, 32000 + 8192),
    ],
)
async def test_thinking_budgets_and_no_temperature(
    replay_server: ReplayServer,
    anthropic_client: anthropic.AsyncAnthropic,
    level: Any,
    budget: int,
    max_tokens: int,
) -> None:
    assert THINKING_BUDGETS[level] == budget
    model = AnthropicModel(MODEL_ID, client=anthropic_client, temperature=0.3)
    _, body = await _send(replay_server, model, _request(thinking_level=level))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens
    assert "temperature" not in body  # the API rejects a temperature with thinking on


async def test_temperature_sent_when_thinking_is_off(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client, temperature=0.3)
    _, body = await _send(replay_server, model, _request())
    assert body["temperature"] == 0.3
    assert "thinking" not in body

    _, body = await _send(
        replay_server, AnthropicModel(MODEL_ID, client=anthropic_client), _request()
    )
    assert "temperature" not in body


# --- replacement payloads ---------------------------------------------------------------------


async def test_replacement_payload_is_sent_as_given(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    options = StreamOptions(cache_retention="none", headers={"x-hooked": "yes"}, timeout_s=30)
    request = _request(options=options)
    built = model.build_payload(request)
    assert built == model.build_payload(request)  # pure: same request, same body
    assert built is not model.build_payload(request)  # and a fresh dict each time
    replacement = {
        **built,
        "messages": [{"role": "user", "content": "Say hello from the hook"}],
        "stop_sequences": ["\n\n"],
        "top_k": 5,  # not a keyword of the SDK's messages.create: the body goes as it is
    }
    frozen_copy = json.loads(json.dumps(replacement))

    events, body = await _send(replay_server, model, request, payload=replacement)

    assert body == {**frozen_copy, "stream": True}
    assert replacement == frozen_copy  # the caller's payload is not changed
    assert replay_server.requests[-1].headers["x-hooked"] == "yes"  # options still apply
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.text == streams.TEXT


async def test_stream_without_payload_sends_the_built_body(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    request = _request()
    _, body = await _send(replay_server, model, request)
    assert body == {**model.build_payload(request), "stream": True}


# --- server-tool blocks in history ------------------------------------------------------------

SERVER_BLOCKS: list[dict[str, Any]] = [
    {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "weather"},
    },
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com",
                "title": "Weather",
                "encrypted_content": "EqgfCioIARgBIiQ3",
                "page_age": None,
            }
        ],
        "caller": {"type": "direct"},
    },
    {
        "type": "server_tool_use",
        "id": "srvtoolu_2",
        "name": "web_fetch",
        "input": {"url": "https://example.com"},
    },
    {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_2",
        "content": {"type": "web_fetch_tool_error", "error_code": "url_not_accessible"},
    },
    {
        "type": "server_tool_use",
        "id": "srvtoolu_3",
        "name": "code_execution",
        "input": {"code": "print(1)"},
    },
    {
        "type": "code_execution_tool_result",
        "tool_use_id": "srvtoolu_3",
        "content": {
            "type": "code_execution_result",
            "stdout": "1\n",
            "stderr": "",
            "return_code": 0,
            "content": [],
        },
    },
    {
        "type": "mcp_tool_use",
        "id": "mcptoolu_1",
        "name": "lookup",
        "server_name": "docs",
        "input": {"q": "x"},
    },
    {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_1",
        "is_error": False,
        "content": [{"type": "text", "text": "found"}],
    },
    {"type": "container_upload", "file_id": "file_1"},
]


async def test_server_tool_blocks_go_back_unchanged(
    replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    model = AnthropicModel(MODEL_ID, client=anthropic_client)
    native = AssistantMessage(
        api="anthropic-messages",
        content=(
            TextContent(text="Looking it up."),
            *(UnknownContent(raw=block) for block in SERVER_BLOCKS),
            TextContent(text="Sunny."),
        ),
    )
    foreign = AssistantMessage(
        api="openai-responses",
        content=(
            *(UnknownContent(raw=block) for block in SERVER_BLOCKS),
            TextContent(text="From elsewhere."),
        ),
    )
    request = _request(
        UserMessage(content="weather?"),
        native,
        UserMessage(content="and again?"),
        foreign,
        UserMessage(content="thanks"),
    )
    _, body = await _send(replay_server, model, request)

    assert body["messages"] == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking it up."},
                *SERVER_BLOCKS,
                {"type": "text", "text": "Sunny."},
            ],
        },
        {"role": "user", "content": "and again?"},
        # From another API, unknown blocks mean nothing to Anthropic: dropped.
        {"role": "assistant", "content": [{"type": "text", "text": "From elsewhere."}]},
        {"role": "user", "content": "thanks"},
    ]
