"""harness.tracing: the spans of a real run, collected by OpenTelemetry's in-memory exporter.

A run with two turns, two tool calls (one of which starts a skill's sub-run), an automatic
compaction before the second request; the spans must form the documented tree with the GenAI
attributes. Nothing is emitted for a harness that is not instrumented or once uninstrumented,
and contents only when asked. ``--otel`` sends the spans of ``harness run`` over OTLP/HTTP to a
local collector (a real HTTP server decoding the protobuf body)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness import (
    AgentHarness,
    CompactionSettings,
    ExtractiveSummarizer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    ResourceOptions,
    ToolResult,
    tool,
)
from harness.tracing import instrument

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _project(tmp_path: Path) -> Path:
    skill = tmp_path / "project" / ".agents" / "skills" / "helper" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: Helps\n---\nHelp with the task.\n")
    return tmp_path / "project"


async def _agent(project: Path) -> AgentHarness:
    session = await MemorySessionRepo().create(str(project))
    holder: dict[str, AgentHarness] = {}

    @tool("big", "A lot of output", {"type": "object", "properties": {}})
    async def big(input: dict[str, Any], run: Any) -> ToolResult:
        return ToolResult(content="word " * 1600)

    @tool("delegate", "Ask a helper", {"type": "object", "properties": {}})
    async def delegate(input: dict[str, Any], run: Any) -> str:
        result = await holder["agent"].run_skill(
            "helper", "do it", model=FauxModel(["Helped."], model_id="child-model")
        )
        return result.reply.text

    model = FauxModel(
        [
            FauxReply(
                text="Working.",
                tool_calls=[FauxToolCall(name="big"), FauxToolCall(name="delegate")],
            ),
            "All done.",
        ]
    )
    agent = AgentHarness(
        session=session,
        model=model,
        tools=[big, delegate],
        cwd=project,
        resources=ResourceOptions(),
        compaction=CompactionSettings(reserve_tokens=300, keep_recent_tokens=100),
        context_window=1500,
        summarizer=ExtractiveSummarizer(),
    )
    holder["agent"] = agent
    return agent


def _tree(spans: tuple[ReadableSpan, ...]) -> list[str]:
    """Each span as ``indent + name``, children under parents, in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    out: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in by_parent.get(parent, []):
            out.append("  " * depth + span.name)
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out


def _one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


async def test_a_run_gives_the_documented_span_tree(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = await _agent(_project(tmp_path))
    with instrument(agent, tracer_provider=provider):
        assert (await agent.prompt("Go")).text == "All done."
    spans = exporter.get_finished_spans()
    assert _tree(spans) == [
        "invoke_agent harness",
        "  turn 0",
        "    chat faux-1",
        "    execute_tool big",
        "    execute_tool delegate",
        "      invoke_agent harness",
        "        turn 0",
        "          chat child-model",
        "  turn 1",
        "    compaction",
        "    chat faux-1",
    ]
    runs = [s for s in spans if s.name == "invoke_agent harness"]
    top, child = sorted(runs, key=lambda s: s.start_time or 0)
    assert top.attributes is not None and child.attributes is not None
    assert top.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert top.attributes["gen_ai.conversation.id"] == agent.session.id
    assert top.attributes["harness.depth"] == 0 and child.attributes["harness.depth"] == 1
    assert child.attributes["harness.parent_session"] == agent.session.id
    assert child.context is not None and top.context is not None
    assert child.context.trace_id == top.context.trace_id  # one trace

    chats = [s for s in spans if s.name == "chat faux-1"]
    first = min(chats, key=lambda s: s.start_time or 0)
    assert first.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.system"] == "faux"
    assert first.attributes["gen_ai.request.model"] == "faux-1"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("toolUse",)
    assert int(str(first.attributes["gen_ai.usage.input_tokens"])) > 0
    assert int(str(first.attributes["gen_ai.usage.output_tokens"])) > 0
    assert "gen_ai.input.messages" not in first.attributes  # contents only when asked

    big = _one(spans, "execute_tool big")
    assert big.attributes is not None
    assert big.attributes["gen_ai.tool.name"] == "big"
    assert big.attributes["gen_ai.tool.call.id"]
    assert big.attributes["harness.permission.decision"] == "approve"
    assert "gen_ai.tool.call.result" not in big.attributes
    compaction = _one(spans, "compaction")
    assert compaction.attributes is not None
    assert compaction.attributes["harness.compaction.trigger"] == "threshold"
    assert compaction.attributes["harness.compaction.outcome"] == "compacted"
    assert compaction.attributes["harness.compaction.entry_id"]


async def test_a_failing_tool_call_is_an_error_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    model = FauxModel([FauxReply(tool_calls=[FauxToolCall(name="nope")]), "ok"])
    agent = AgentHarness(session=session, model=model, cwd=tmp_path, resources=None)
    with instrument(agent, tracer_provider=provider):
        await agent.prompt("x")
    span = _one(exporter.get_finished_spans(), "execute_tool nope")
    assert span.status.status_code.name == "ERROR"
    assert span.attributes is not None and span.attributes["error.type"] == "tool_error"


async def test_contents_are_recorded_only_when_asked(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    model = FauxModel([FauxReply(tool_calls=[FauxToolCall(name="nope")]), "secret reply"])
    agent = AgentHarness(session=session, model=model, cwd=tmp_path, resources=None)
    with instrument(agent, tracer_provider=provider, capture_content=True):
        await agent.prompt("secret prompt")
    spans = exporter.get_finished_spans()
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    assert chats[0].attributes is not None and chats[1].attributes is not None
    inputs = json.loads(str(chats[0].attributes["gen_ai.input.messages"]))
    assert inputs[-1]["role"] == "user" and inputs[-1]["content"] == "secret prompt"
    outputs = json.loads(str(chats[1].attributes["gen_ai.output.messages"]))
    assert outputs[0]["content"][0]["text"] == "secret reply"
    tool_span = _one(spans, "execute_tool nope")
    assert tool_span.attributes is not None
    assert "unknown tool" in str(tool_span.attributes["gen_ai.tool.call.result"])


async def test_nothing_is_emitted_when_tracing_is_off(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    traced = AgentHarness(session=session, model=FauxModel(["a", "b"]), resources=None)
    other_session = await MemorySessionRepo().create(str(tmp_path))
    other = AgentHarness(session=other_session, model=FauxModel(["c"]), resources=None)
    instrumentation = instrument(traced, tracer_provider=provider)
    await other.prompt("not traced")  # another harness: nothing
    assert exporter.get_finished_spans() == ()
    await traced.prompt("traced")
    count = len(exporter.get_finished_spans())
    assert count == 3  # run, turn, chat
    instrumentation.uninstrument()
    await traced.prompt("off again")
    assert len(exporter.get_finished_spans()) == count


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_otel_flag_sends_spans_over_otlp(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HARNESS_"))},
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
            "OTEL_SERVICE_NAME": "readme-agent",
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "run",
                "--root",
                str(tmp_path / "s"),
                "--offline",
                "-p",
                "hello",
                "--otel",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
        server.server_close()
    names = [
        span.name
        for request in _Collector.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert sorted(names) == ["chat offline", "invoke_agent harness", "turn 0"], names
    services = {
        attr.value.string_value
        for request in _Collector.received
        for resource in request.resource_spans
        for attr in resource.resource.attributes
        if attr.key == "service.name"
    }
    assert services == {"readme-agent"}
