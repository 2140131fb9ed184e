"""The four ways the tool gating could be slipped (issue 11), each closed: an abort requested
while a call is being gated, an input changed in place, a tool raising a BaseException or its
own CancelledError, and a hook that never returns."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    DEFAULT_HOOK_TIMEOUT_S,
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HookTimeoutError,
    JsonlSessionRepo,
    MessageEntry,
    SecuritySupervisor,
    ToolResultMessage,
    ToolRun,
    tool,
    write_tool,
)

BYPASS = SecuritySupervisor(mode="bypass", setting_sources=())


def results_of(session: Any) -> dict[str, ToolResultMessage]:
    return {
        e.message.tool_call_id: e.message
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    }


async def test_an_abort_requested_by_a_tool_call_receiver_stops_that_call(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    call = FauxToolCall(name="write", arguments={"path": "gated.txt", "content": "x"})
    model = FauxModel([FauxReply(tool_calls=[call]), "never"])
    h = AgentHarness(session=session, model=model, tools=[write_tool()], supervisor=BYPASS)

    @h.on("tool_call")
    async def stop(sender: object, event: Any) -> None:
        await h.abort()  # awaits nothing that suspends: the cancel is only requested

    reply = await h.prompt("go")
    assert not (tmp_path / "gated.txt").exists()  # before the fix the write still ran
    assert reply.tool_calls  # the reply that asked for the call
    (result,) = results_of(session).values()
    assert result.is_error


@tool("anything", "accepts any object", {"type": "object"})
async def anything(input: Mapping[str, Any], run: ToolRun) -> str:
    ran.append(dict(input))
    return "ran"


ran: list[dict[str, Any]] = []


async def test_an_input_made_non_json_in_place_never_reaches_the_tool(tmp_path: Path) -> None:
    ran.clear()
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    call = FauxToolCall(name="anything", arguments={"x": "a"})
    h = AgentHarness(
        session=session, model=FauxModel([FauxReply(tool_calls=[call]), "ok"]), tools=[anything]
    )
    kept: list[Any] = []

    @h.on("tool_call")
    def smuggle(sender: object, event: Any) -> None:
        event.input["x"] = object()  # the schema accepts it; PatchInput's JSON check is skipped
        kept.append(event.input)

    assert (await h.prompt("go")).text == "ok"
    assert ran == []  # before the fix the tool ran with a non-JSON value
    (result,) = results_of(session).values()
    assert result.is_error


async def test_the_tool_runs_with_a_copy_no_receiver_holds(tmp_path: Path) -> None:
    ran.clear()
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    call = FauxToolCall(name="anything", arguments={"x": "a"})
    h = AgentHarness(
        session=session, model=FauxModel([FauxReply(tool_calls=[call]), "ok"]), tools=[anything]
    )
    kept: list[Any] = []
    h.connect("tool_call", lambda s, event: kept.append(event.input))

    @h.on("permission_decision")
    def meddle_after_the_decision(sender: object, event: Any) -> None:
        kept[0]["x"] = "changed after it was approved"

    await h.prompt("go")
    assert ran == [{"x": "a"}]


@tool("quick", "writes a marker", {"type": "object"})
async def quick(input: Mapping[str, Any], run: ToolRun) -> str:
    (run.cwd / "quick.done").write_text("side effect")
    return "quick finished"


@tool("slow", "waits", {"type": "object"})
async def slow(input: Mapping[str, Any], run: ToolRun) -> str:
    await asyncio.sleep(30)
    return "slow finished"


class Custom(BaseException):
    pass


def _raiser(exc: type[BaseException]) -> Any:
    @tool("boom", "raises", {"type": "object"})
    async def boom(input: Mapping[str, Any], run: ToolRun) -> str:
        await asyncio.sleep(0.05)  # after its sibling finished
        raise exc("from the tool")

    return boom


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, GeneratorExit, Custom])
@pytest.mark.parametrize("execution", ["parallel", "sequential"])
def test_a_tool_raising_a_base_exception_leaves_every_call_with_a_result(
    tmp_path: Path, exc: type[BaseException], execution: Any
) -> None:
    repo = JsonlSessionRepo(tmp_path / "s")
    calls = [FauxToolCall(name=n, arguments={}) for n in ("quick", "boom", "slow")]

    async def main() -> str:
        session = await repo.create(str(tmp_path))
        h = AgentHarness(
            session=session,
            model=FauxModel([FauxReply(tool_calls=calls), "never"]),
            tools=[quick, _raiser(exc), slow],
            tool_execution=execution,
            cwd=tmp_path,
        )
        try:
            await h.prompt("go")
        finally:
            session_id = session.id
        return session_id

    # asyncio.run, not the test's loop: KeyboardInterrupt and SystemExit leave the event loop.
    with pytest.raises(exc):
        asyncio.run(main())
    (path,) = (tmp_path / "s").rglob("*.jsonl")

    async def reopen() -> dict[str, ToolResultMessage]:
        session = await repo.open(path.stem.split("_")[-1])
        return results_of(session)

    results = asyncio.run(reopen())
    assert [r.tool_name for r in results.values()] == ["quick", "boom", "slow"]
    by_name = {r.tool_name: r for r in results.values()}
    assert (tmp_path / "quick.done").exists()
    assert not by_name["quick"].is_error and by_name["quick"].text == "quick finished"
    assert by_name["boom"].is_error and by_name["slow"].is_error


@tool("self_cancel", "cancels itself", {"type": "object"})
async def self_cancel(input: Mapping[str, Any], run: ToolRun) -> str:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future  # raises CancelledError, though nobody cancelled the run
    return "unreachable"


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_a_tools_own_cancelled_error_is_its_failure_not_the_runs(
    tmp_path: Path, execution: Any
) -> None:
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    calls = [
        FauxToolCall(name="self_cancel", arguments={}),
        FauxToolCall(name="quick", arguments={}),
    ]
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "carried on"]),
        tools=[self_cancel, quick],
        tool_execution=execution,
        cwd=tmp_path,
    )
    reply = await h.prompt("go")  # before the fix this raised CancelledError
    assert reply.text == "carried on" and reply.stop_reason == "stop"
    results = {r.tool_name: r for r in results_of(session).values()}
    assert results["self_cancel"].is_error and not results["quick"].is_error


async def test_a_hung_tool_call_hook_times_out_and_blocks_the_call(tmp_path: Path) -> None:
    ran.clear()
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    call = FauxToolCall(name="anything", arguments={"x": "a"})
    h = AgentHarness(
        session=session, model=FauxModel([FauxReply(tool_calls=[call]), "ok"]), tools=[anything]
    )
    errors: list[Any] = []
    h.connect("handler_error", lambda s, event: errors.append(event))

    async def hang(sender: object, event: Any) -> None:
        await asyncio.sleep(3600)

    h.connect("tool_call", hang, timeout_s=0.1)
    async with asyncio.timeout(10):
        assert (await h.prompt("go")).text == "ok"  # before the fix: hung for ever
    assert ran == []  # failed closed
    assert [e.event_name for e in errors] == ["tool_call"]
    assert isinstance(errors[0].error, HookTimeoutError)
    assert errors[0].error.code == "hook_timeout" and errors[0].error.timeout_s == 0.1


async def test_a_hung_observer_times_out_as_a_handler_error_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    ran.clear()
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    call = FauxToolCall(name="anything", arguments={"x": "a"})
    h = AgentHarness(
        session=session, model=FauxModel([FauxReply(tool_calls=[call]), "ok"]), tools=[anything]
    )
    errors: list[Any] = []
    h.connect("handler_error", lambda s, event: errors.append(event))

    async def hang(sender: object, event: Any) -> None:
        await asyncio.sleep(3600)

    h.connect("tool_execution_start", hang, timeout_s=0.1)
    async with asyncio.timeout(10):
        assert (await h.prompt("go")).text == "ok"
    assert ran == [{"x": "a"}]
    assert [(e.event_name, type(e.error)) for e in errors] == [
        ("tool_execution_start", HookTimeoutError)
    ]


def test_the_default_hook_timeout_is_documented_and_finite() -> None:
    assert DEFAULT_HOOK_TIMEOUT_S == 30.0
    doc = (Path(__file__).parents[2] / "docs" / "events.md").read_text()
    assert "DEFAULT_HOOK_TIMEOUT_S" in doc and "30 s" in doc
