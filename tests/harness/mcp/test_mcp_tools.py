"""MCP servers as tools: real servers written with the ``mcp`` SDK (in-process, stdio
subprocesses, streamable HTTP on 127.0.0.1) called by FauxModel agents."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import PNG, build, stdio, wait_gone

from harness import (
    AgentHarness,
    Block,
    Event,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HttpServer,
    ImageContent,
    JsonlSessionRepo,
    McpOptions,
    McpServerErrorEvent,
    McpServerStartEvent,
    McpServerStopEvent,
    MemorySessionRepo,
    ModelRequest,
    PatchInput,
    PermissionRules,
    SecuritySupervisor,
    StdioServer,
    TextContent,
    ToolCallEvent,
    ToolResultMessage,
)


def call(name: str, **arguments: Any) -> FauxToolCall:
    return FauxToolCall(name=f"mcp__probe__{name}", arguments=arguments)


def supervisor(**options: Any) -> SecuritySupervisor:
    return SecuritySupervisor(setting_sources=(), **options)


async def harness_for(
    server: object,
    script: list[Any] | Callable[[ModelRequest], Any],
    tmp_path: Path,
    **options: Any,
) -> tuple[AgentHarness, FauxModel, list[Event]]:
    session = await MemorySessionRepo().create(str(tmp_path))
    model = FauxModel(script)
    options.setdefault("supervisor", supervisor())
    harness = AgentHarness(
        session=session,
        model=model,
        mcp_servers={"probe": server},
        resources=None,
        cwd=tmp_path,
        **options,
    )
    events: list[Event] = []
    for name in ("mcp_server_start", "mcp_server_error", "mcp_server_stop"):
        harness.connect(name, lambda sender, event: events.append(event))
    return harness, model, events


def results(harness: AgentHarness) -> list[ToolResultMessage]:
    messages = harness.session.build_context().messages
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def text(result: ToolResultMessage) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.fixture(params=["in_process", "stdio", "http", "sse"])
def any_server(request: pytest.FixtureRequest) -> object:
    if request.param == "in_process":
        return build()
    if request.param == "stdio":
        return stdio()
    return request.getfixturevalue(f"{request.param}_server")


async def test_an_agent_lists_and_calls_tools_of_each_transport(
    any_server: object, tmp_path: Path
) -> None:
    harness, model, events = await harness_for(
        any_server,
        [
            FauxReply(
                tool_calls=[
                    call("echo", text="hello"),
                    call("picture"),
                    call("fail", reason="no disk"),
                    call("structured", count=21),
                ]
            ),
            "done",
        ],
        tmp_path,
    )
    reply = await harness.prompt("use the tools")
    assert reply.text == "done"
    echo, picture, fail, structured = results(harness)
    assert (text(echo), echo.is_error) == ("hello", False)
    image = picture.content[0]
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert image.data == __import__("base64").b64encode(PNG).decode()
    assert fail.is_error and "failed on purpose: no disk" in text(fail)
    assert structured.details == {"structuredContent": {"count": 21, "double": 42}}
    # The model was offered each tool with the server's schema, description and hints.
    offered = {t.name: t for t in model.requests[0].tools}
    assert offered["mcp__probe__echo"].parameters["required"] == ["text"]
    assert offered["mcp__probe__echo"].description.startswith("Return the text as it was given.")
    assert "read-only" in offered["mcp__probe__echo"].description
    assert "destructive" in offered["mcp__probe__danger"].description
    started = [e for e in events if isinstance(e, McpServerStartEvent)]
    assert [(e.server, e.restart) for e in started] == [("probe", False)]
    assert "mcp__probe__add_tool" in started[0].tool_names
    await harness.shutdown()
    assert [type(e) for e in events][-1] is McpServerStopEvent
    assert harness.mcp_servers[0].state == "stopped"


async def test_a_deny_rule_on_the_tool_or_the_server_blocks_it_in_every_mode(
    tmp_path: Path,
) -> None:
    for rule in ("mcp__probe__danger", "mcp__probe", "mcp__probe__*"):
        harness, _, _ = await harness_for(
            build(),
            [FauxReply(tool_calls=[call("danger", path="/")]), "ok"],
            tmp_path,
            supervisor=supervisor(mode="bypass", rules=PermissionRules(deny=[rule])),
        )
        await harness.prompt("go")
        (denied,) = results(harness)
        assert denied.is_error and f"denied by the rule {rule}" in text(denied)
        await harness.shutdown()


async def test_an_allow_rule_runs_a_controlled_tool_and_without_one_the_denial_names_it(
    tmp_path: Path,
) -> None:
    harness, _, _ = await harness_for(
        build(), [FauxReply(tool_calls=[call("danger", path="x")]), "ok"], tmp_path
    )
    await harness.prompt("go")
    (denied,) = results(harness)
    assert denied.is_error and "'mcp__probe__danger'" in text(denied)
    assert "'mcp__probe'" in text(denied)  # the server-wide rule is named too
    await harness.shutdown()
    allowed, _, _ = await harness_for(
        build(),
        [FauxReply(tool_calls=[call("danger", path="x")]), "ok"],
        tmp_path,
        supervisor=supervisor(rules=PermissionRules(allow=["mcp__probe__danger"])),
    )
    await allowed.prompt("go")
    assert [text(r) for r in results(allowed)] == ["deleted x"]
    await allowed.shutdown()


async def test_plan_mode_runs_read_only_tools_and_refuses_the_rest(tmp_path: Path) -> None:
    harness, _, _ = await harness_for(
        build(),
        [FauxReply(tool_calls=[call("echo", text="look"), call("danger", path="x")]), "ok"],
        tmp_path,
        supervisor=supervisor(mode="plan"),
    )
    await harness.prompt("plan it")
    echo, danger = results(harness)
    assert (text(echo), echo.is_error) == ("look", False)
    assert danger.is_error and "plan mode" in text(danger)
    await harness.shutdown()


async def test_a_tool_call_hook_patches_and_blocks_mcp_calls(tmp_path: Path) -> None:
    harness, _, _ = await harness_for(
        build(),
        [FauxReply(tool_calls=[call("echo", text="secret"), call("pid")]), "ok"],
        tmp_path,
    )

    @harness.on(ToolCallEvent)
    def gate(sender: object, event: ToolCallEvent) -> PatchInput | Block | None:
        if event.tool_name == "mcp__probe__echo":
            return PatchInput(input={"text": "redacted"})
        return Block(reason="pids are private")

    await harness.prompt("go")
    echo, pid = results(harness)
    assert text(echo) == "redacted"
    assert echo.extra["effectiveInput"] == {"text": "redacted"}
    assert pid.is_error and text(pid) == "pids are private"
    await harness.shutdown()


async def test_a_server_killed_mid_session_is_restarted_at_the_next_call(tmp_path: Path) -> None:
    pids: list[int] = []

    def script(request: ModelRequest) -> FauxReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage) and last.text.isdigit():
            pids.append(int(last.text))
        turn = len(pids)
        if turn == 1 and not any("restarted" in getattr(m, "text", "") for m in request.messages):
            if len([m for m in request.messages if isinstance(m, ToolResultMessage)]) == 1:
                os.kill(pids[0], signal.SIGKILL)  # the server dies between two calls
                assert wait_gone(pids[0])
                return FauxReply(tool_calls=[call("echo", text="are you there")])
            return FauxReply(tool_calls=[call("pid")])
        if turn == 0:
            return FauxReply(tool_calls=[call("pid")])
        return FauxReply(text="carried on")

    harness, _, events = await harness_for(stdio(), script, tmp_path)
    reply = await harness.prompt("go")
    assert reply.text == "carried on"
    first, crashed, second = results(harness)
    assert crashed.is_error and "'probe'" in text(crashed)
    assert len(pids) == 2 and pids[0] != pids[1]
    assert [text(first), text(second)] == [str(p) for p in pids]
    errors = [e for e in events if isinstance(e, McpServerErrorEvent)]
    assert [(e.server, e.phase) for e in errors] == [("probe", "call")]
    restarts = [e.restart for e in events if isinstance(e, McpServerStartEvent)]
    assert restarts == [False, True]
    await harness.shutdown()
    assert wait_gone(pids[1])


async def test_a_call_past_its_timeout_is_an_error_and_the_server_is_restarted(
    tmp_path: Path,
) -> None:
    harness, _, events = await harness_for(
        stdio(),
        [
            FauxReply(tool_calls=[call("pid")]),
            FauxReply(tool_calls=[call("sleep", seconds=60)]),
            FauxReply(tool_calls=[call("pid")]),
            "still here",
        ],
        tmp_path,
        mcp_options=McpOptions(call_timeout_s=1.0),
    )
    reply = await harness.prompt("go")
    assert reply.text == "still here"
    before, slow, after = results(harness)
    assert slow.is_error and "'probe'" in text(slow) and "within 1 s" in text(slow)
    assert not after.is_error and text(after) != text(before)  # a new process answered
    assert wait_gone(int(text(before)))
    assert [e.phase for e in events if isinstance(e, McpServerErrorEvent)] == ["call"]
    await harness.shutdown()
    assert wait_gone(int(text(after)))


async def test_a_server_that_cannot_start_names_its_command(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-mcp-server"
    exits = StdioServer(
        sys.executable, ["-c", "import sys; sys.stderr.write('no config file\\n'); sys.exit(2)"]
    )
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel(["fine without them"]),
        mcp_servers={"gone": StdioServer(str(missing)), "exits": exits},
        resources=None,
        cwd=tmp_path,
        supervisor=supervisor(),
    )
    events: list[McpServerErrorEvent] = []
    harness.connect("mcp_server_error", lambda sender, event: events.append(event))
    reply = await harness.prompt("hi")
    assert reply.text == "fine without them"  # the run goes on without their tools
    by_name = {e.server: e for e in events}
    assert by_name["gone"].phase == "start" and str(missing) in by_name["gone"].error
    assert "No such file" in by_name["gone"].error
    assert "no config file" in by_name["exits"].error  # the server's own stderr
    status = {s.name: s for s in harness.mcp_servers}
    assert status["gone"].state == "broken" and str(missing) in (status["gone"].error or "")
    await harness.shutdown()


async def test_a_server_that_keeps_failing_is_not_restarted_for_ever(tmp_path: Path) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel(["a", "b", "c"]),
        mcp_servers={"gone": StdioServer(str(tmp_path / "missing"))},
        mcp_options=McpOptions(max_restarts=1),
        resources=None,
        cwd=tmp_path,
        supervisor=supervisor(),
    )
    errors: list[McpServerErrorEvent] = []
    harness.connect("mcp_server_error", lambda sender, event: errors.append(event))
    for text_ in ("a", "b", "c"):
        await harness.prompt(text_)
    assert [e.restarts_left for e in errors] == [1, 0]  # two tries, then it stays down
    assert harness.mcp_servers[0].state == "failed"
    await harness.shutdown()


async def test_no_server_process_is_left_after_shutdown(tmp_path: Path) -> None:
    harness, _, _ = await harness_for(
        stdio(), [FauxReply(tool_calls=[call("pid")]), "ok"], tmp_path
    )
    await harness.prompt("go")
    pid = int(text(results(harness)[0]))
    await harness.shutdown()
    assert wait_gone(pid)


async def test_a_server_blocking_its_own_loop_is_killed_at_shutdown(tmp_path: Path) -> None:
    from mcp_servers import SCRIPT

    harness, _, _ = await harness_for(
        StdioServer(sys.executable, [str(SCRIPT), "--hostile"]),
        [FauxReply(tool_calls=[FauxToolCall(name="mcp__probe__hang", arguments={})]), "ok"],
        tmp_path,
        mcp_options=McpOptions(call_timeout_s=0.5),
    )
    children_before = _children()
    await harness.prompt("go")
    (hung,) = results(harness)
    assert hung.is_error and "within 0.5 s" in text(hung)
    started = _children() - children_before
    await harness.shutdown()
    assert started and all(wait_gone(pid) for pid in started)


def _children() -> set[int]:
    """Our live child processes (from /proc)."""
    me = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                found.add(int(entry))
    return found


async def test_a_tools_list_changed_notification_offers_the_new_tool_next_turn(
    tmp_path: Path,
) -> None:
    harness, model, _ = await harness_for(
        stdio(),
        [
            FauxReply(tool_calls=[call("add_tool")]),
            FauxReply(tool_calls=[call("extra")]),
            "done",
        ],
        tmp_path,
        supervisor=supervisor(rules=PermissionRules(allow=["mcp__probe__add_tool"])),
    )
    await harness.prompt("go")
    first, second = (set(t.name for t in r.tools) for r in model.requests[:2])
    assert "mcp__probe__extra" not in first and "mcp__probe__extra" in second
    assert [text(r) for r in results(harness)] == ["added extra", "extra answered"]
    await harness.shutdown()


async def test_a_reopened_session_says_which_servers_are_gone(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(tmp_path))
    first = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[call("echo", text="x")]), "ok"]),
        mcp_servers={"probe": build()},
        resources=None,
        cwd=tmp_path,
        supervisor=supervisor(),
    )
    await first.prompt("go")
    await first.shutdown()
    assert session.path is not None
    session.close()

    reopened = await repo.open(session.path)
    again = AgentHarness(
        session=reopened,
        model=FauxModel(["without it", "still without it"]),
        resources=None,
        cwd=tmp_path,
        supervisor=supervisor(),
    )
    errors: list[McpServerErrorEvent] = []
    again.connect("mcp_server_error", lambda sender, event: errors.append(event))
    await again.prompt("and now?")
    (gone,) = errors
    assert (gone.server, gone.phase) == ("probe", "restore")
    assert "not configured" in gone.error and "mcp__probe__echo" in gone.error
    await again.prompt("once more")
    assert len(errors) == 1  # said once; the session now records that none are offered
    reopened.close()

    back = await repo.open(session.path)
    with_server = AgentHarness(
        session=back,
        model=FauxModel(["with it"]),
        mcp_servers={"probe": build()},
        resources=None,
        cwd=tmp_path,
        supervisor=supervisor(),
    )
    quiet: list[McpServerErrorEvent] = []
    with_server.connect("mcp_server_error", lambda sender, event: quiet.append(event))
    await with_server.prompt("back")
    assert quiet == []
    await with_server.shutdown()
    back.close()


async def test_http_server_headers_reach_the_server(
    http_server: HttpServer, tmp_path: Path
) -> None:
    with_headers = HttpServer(http_server.url, headers={"X-Probe": "1"})
    harness, _, _ = await harness_for(
        with_headers, [FauxReply(tool_calls=[call("echo", text="over http")]), "ok"], tmp_path
    )
    await harness.prompt("go")
    assert [text(r) for r in results(harness)] == ["over http"]
    assert harness.mcp_servers[0].transport == "http"
    await harness.shutdown()


async def test_start_mcp_servers_starts_them_before_the_first_prompt(tmp_path: Path) -> None:
    harness, _, events = await harness_for(build(), ["ok"], tmp_path)
    assert harness.mcp_servers[0].state == "stopped"
    (status,) = await harness.start_mcp_servers()
    assert status.state == "ready" and "mcp__probe__echo" in status.tools
    assert [type(e) for e in events] == [McpServerStartEvent]
    await harness.prompt("hi")
    assert [type(e) for e in events] == [McpServerStartEvent]  # not started twice
    await harness.shutdown()


async def test_prompt_and_shutdown_may_come_from_different_tasks(tmp_path: Path) -> None:
    harness, _, events = await harness_for(
        stdio(), [FauxReply(tool_calls=[call("pid")]), "ok"], tmp_path
    )
    await asyncio.create_task(harness.prompt("go"))  # the servers start in that task's run
    pid = int(text(results(harness)[0]))
    await asyncio.create_task(harness.shutdown())  # and stop from another one
    assert wait_gone(pid)
    assert [type(e) for e in events] == [McpServerStartEvent, McpServerStopEvent]


def test_prompt_sync_starts_the_servers_in_each_event_loop(tmp_path: Path) -> None:
    harness = asyncio.run(
        harness_for(
            stdio(),
            [
                FauxReply(tool_calls=[call("pid")]),
                "one",
                FauxReply(tool_calls=[call("pid")]),
                "two",
            ],
            tmp_path,
        )
    )[0]
    assert harness.prompt_sync("first").text == "one"
    # asyncio.run ended: its loop's tasks were cancelled, and the server with them.
    first = int(text(results(harness)[0]))
    assert wait_gone(first)
    assert harness.prompt_sync("second").text == "two"
    second = int(text(results(harness)[1]))
    assert second != first
    asyncio.run(harness.shutdown())
    assert wait_gone(second)
