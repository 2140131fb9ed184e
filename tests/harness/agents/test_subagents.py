"""Sub-agents: definitions from code and files, the task tool running nested harnesses in child
sessions linked both ways, concurrency, inherited supervisor and approvals, hooks seeing the
children, abort, failures, and budgets shared with the parent."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import note, note_call

from harness import (
    AgentDefinition,
    AgentHarness,
    ApproveAlways,
    Block,
    CommandHooks,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    ModelRequest,
    PermissionRequest,
    SecuritySupervisor,
    Session,
    SubagentStopEvent,
    ToolCallEvent,
    ToolResultMessage,
    load_agents,
    open_session,
    read_tool,
    write_tool,
)


def task(agent: str, prompt: str, call_id: str) -> FauxToolCall:
    return FauxToolCall(
        name="task",
        arguments={"subagent_type": agent, "description": "a task", "prompt": prompt},
        id=call_id,
    )


def results(session: Session) -> list[ToolResultMessage]:
    return [
        e.message
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]


def write_agent(folder: Path, name: str, front: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(f"---\n{front}---\n{body}\n")
    return path


async def test_agents_from_code_and_files_run_in_linked_child_sessions(
    session: Session, project: Path, repo: JsonlSessionRepo
) -> None:
    write_agent(
        project / ".harness" / "agents",
        "checker",
        "name: checker\ndescription: Checks facts.\n",
        "You check facts.",
    )
    write_agent(
        project / ".claude" / "agents",
        "y",
        "name: y-reviewer\ndescription: Reviews text.\ntools: Read, Grep\nmodel: opus\n",
        "You review text. MARK-Y",
    )
    catalog = load_agents(project)
    coded = [
        AgentDefinition("researcher", "Finds things.", "You research.", model=FauxModel(["r"])),
        AgentDefinition("writer", "Writes things.", "You write.", model=FauxModel(["w"])),
    ]

    def script(request: ModelRequest) -> FauxReply | str:
        if "MARK-Y" in request.system_prompt:  # the child, on the parent's model
            return f"reviewed with {sorted(t.name for t in request.tools)}"
        if len(request.messages) == 1:
            return FauxReply(tool_calls=[task("y-reviewer", "Review the README.", "call_y")])
        return "all done"

    h = AgentHarness(
        session=session,
        cwd=project,
        model=FauxModel(script),
        tools=[read_tool(), write_tool(), note],
        agents=[*coded, *catalog.agents],
        resources=None,
    )
    assert [a.name for a in h.agents] == ["researcher", "writer", "checker", "y-reviewer"]
    # The project is not trusted: the Claude Code file's model (opus) is ignored, and said so.
    (ignored,) = [d for d in catalog.diagnostics if d.name == "y-reviewer"]
    assert "model" in ignored.message and not ignored.dropped
    assert catalog.agents[1].model is None and catalog.agents[1].source == "claude_code"

    reply = await h.prompt("Review it")

    assert reply.text == "all done"
    (result,) = results(session)
    # Read is the only tool of the agent's list the parent has (Grep is not one of its tools).
    assert result.text == "reviewed with ['read']" and not result.is_error
    details = result.details
    assert isinstance(details, dict) and details["agent"] == "y-reviewer"
    # Linked both ways: the result names the child, the child's header the parent's call.
    child = await repo.open(str(details["sessionId"]))
    assert details["sessionPath"] == str(child.path)
    assert child.header.parent_session == str(session.path)
    call_entry = next(
        e.id
        for e in session.entries()
        if isinstance(e, MessageEntry) and e.message.role == "assistant"
    )
    assert child.header.metadata == {
        "agent": "y-reviewer",
        "parentSessionId": session.id,
        "parentToolCallId": "call_y",
        "parentEntryId": call_entry,
    }
    assert [m.text for m in child.build_context().messages] == [
        "Review the README.",
        "reviewed with ['read']",
    ]
    child.close()


async def test_two_task_calls_of_one_turn_run_at_the_same_time(session: Session) -> None:
    slow = {"chunk_size": 2, "delay_s": 0.005}
    agents = [
        AgentDefinition(
            "alpha", "A.", "You are alpha.", model=FauxModel(["alpha's answer"], **slow)
        ),
        AgentDefinition("beta", "B.", "You are beta.", model=FauxModel(["beta's answer"], **slow)),
    ]
    parent = FauxModel(
        [FauxReply(tool_calls=[task("alpha", "go", "c1"), task("beta", "go", "c2")]), "both"]
    )
    h = AgentHarness(session=session, model=parent, agents=agents, resources=None)
    order: list[str] = []
    h.on("agent_start")(
        lambda sender, event: order.append(f"start {sender.depth}") if sender is not h else None
    )
    h.on("agent_end")(
        lambda sender, event: order.append(f"end {sender.depth}") if sender is not h else None
    )

    await h.prompt("ask both")

    # Both children started before either ended: they ran concurrently.
    assert order == ["start 1", "start 1", "end 1", "end 1"]
    assert [r.text for r in results(session)] == ["alpha's answer", "beta's answer"]


async def test_an_always_approval_in_the_parent_is_not_asked_again_in_the_child(
    session: Session, project: Path
) -> None:
    asked: list[tuple[str, int]] = []

    async def approver(request: PermissionRequest) -> ApproveAlways:
        asked.append((request.operation_key, request.depth))
        return ApproveAlways()

    stamp = FauxToolCall(name="write", arguments={"path": "stamp.txt", "content": "x"})
    child_model = FauxModel([FauxReply(tool_calls=[stamp]), "stamped again"])
    h = AgentHarness(
        session=session,
        cwd=project,
        model=FauxModel(
            [
                FauxReply(tool_calls=[stamp]),
                FauxReply(tool_calls=[task("stamper", "stamp", "t")]),
                "ok",
            ]
        ),
        tools=[write_tool()],
        agents=[AgentDefinition("stamper", "Stamps.", "You stamp.", model=child_model)],
        supervisor=SecuritySupervisor(approver=approver, setting_sources=()),
        resources=None,
    )

    await h.prompt("stamp twice")

    assert asked == [("write(stamp.txt)", 0)]
    assert [r.is_error for r in results(session)] == [False, False]
    assert child_model.remaining == 0


async def test_the_parents_hooks_see_the_childs_events_and_subagent_stop(
    session: Session,
) -> None:
    child_model = FauxModel([note_call("secret"), "gave up"])
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[task("noter", "note it", "t1")]), "fine"]),
        tools=[note],
        agents=[AgentDefinition("noter", "Notes.", "You note.", model=child_model)],
        resources=None,
    )
    stops: list[tuple[Any, ...]] = []
    children: list[AgentHarness] = []

    @h.on("subagent_stop")
    def stopped(sender: AgentHarness, event: SubagentStopEvent) -> None:
        children.append(sender)
        stops.append((event.depth, event.parent_session_id, event.agent_type, event.session_id))

    @h.on("tool_call")
    def guard(sender: AgentHarness, event: ToolCallEvent) -> Block | None:
        # A guard connected to the parent applies to its sub-agents' calls too.
        return Block(reason="no notes here") if sender.depth > 0 else None

    await h.prompt("go")

    (child,) = children
    assert stops == [(1, session.id, "noter", child.session.id)]
    assert child.parent_session_id == session.id and child.depth == 1
    child_results = [m for m in child.session.build_context().messages if m.role == "toolResult"]
    assert [(m.is_error, m.text) for m in child_results] == [(True, "no notes here")]


async def test_a_parent_abort_stops_a_running_child(
    session: Session, repo: JsonlSessionRepo
) -> None:
    child_model = FauxModel(["word " * 400], chunk_size=4, delay_s=0.002)
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[task("talker", "talk", "t1")]), "unused"]),
        agents=[AgentDefinition("talker", "Talks.", "You talk.", model=child_model)],
        resources=None,
    )
    streaming = asyncio.Event()
    h.on("message_update")(lambda sender, event: streaming.set() if sender is not h else None)

    running = asyncio.create_task(h.prompt("talk a lot"))
    await streaming.wait()
    await h.abort()
    reply = await running

    assert not h.busy
    (result,) = results(session)
    assert result.is_error and result.text == "Tool execution was aborted."
    assert reply.tool_calls[0].id == "t1"
    # The child stopped too, its partial reply persisted as aborted.
    (child_info,) = [i for i in await repo.list() if i.id != session.id]
    child = await repo.open(child_info.id)
    last = child.build_context().messages[-1]
    assert last.role == "assistant" and last.stop_reason == "aborted"  # type: ignore[union-attr]
    assert 0 < len(last.text) < len("word " * 400)  # type: ignore[union-attr]
    child.close()


async def test_a_child_that_fails_gives_an_error_result_and_the_parent_goes_on(
    session: Session,
) -> None:
    failing = FauxModel([FauxReply(error="the child's model is down")])
    parent = FauxModel([FauxReply(tool_calls=[task("fragile", "try", "t1")]), "handled"])
    h = AgentHarness(
        session=session,
        model=parent,
        agents=[AgentDefinition("fragile", "Breaks.", "You break.", model=failing)],
        resources=None,
    )

    reply = await h.prompt("try it")

    assert reply.text == "handled"
    (result,) = results(session)
    assert result.is_error and "the child's model is down" in result.text
    assert isinstance(result.details, dict) and result.details["stopReason"] == "error"
    # The parent's next request saw the error result.
    assert parent.requests[1].messages[-1].is_error  # type: ignore[union-attr]


async def test_a_childs_usage_counts_in_the_parents_budget(session: Session) -> None:
    child_model = FauxModel([note_call(f"w{i}") for i in range(20)])
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[task("noter", "note many words", "t1")]), "x"]),
        tools=[note],
        agents=[AgentDefinition("noter", "Notes.", "You note.", model=child_model)],
        resources=None,
        max_tokens=400,
    )
    limits: list[tuple[str, int, float]] = []
    h.on("limit_reached")(
        lambda sender, event: limits.append((event.stop_reason, sender.depth, event.used))
    )

    reply = await h.prompt("go")

    # The child stopped at the parent's token limit, then the parent did, after the turn.
    assert [(r, d) for r, d, _ in limits] == [("max_tokens", 1), ("max_tokens", 0)]
    assert reply.stop_reason == "max_tokens"
    (result,) = results(session)
    assert result.is_error and "max_tokens" in result.text
    assert isinstance(result.details, dict)
    child = open_session(Path(str(result.details["sessionPath"])))
    parent_tokens, child_tokens = (
        sum(
            e.message.usage.total
            for e in s.entries()
            if isinstance(e, MessageEntry) and e.message.role == "assistant"
        )
        for s in (session, child)
    )
    child.close()
    # One budget: the parent's count is its own reply and every token of the child; the
    # child stopped when that count reached the parent's limit, and no request followed.
    assert limits[0][2] == limits[1][2] == parent_tokens + child_tokens >= 400
    assert 0 < child_model.remaining < 20


# --- definitions that do not fit ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("agents", "problem"),
    [
        ([AgentDefinition("Bad Name", "d", "i")], "name"),
        ([AgentDefinition("a", "d", "i"), AgentDefinition("a", "d", "i")], "two agents"),
        ([AgentDefinition("a", "d", "i", tools=["nope"])], "unknown tools"),
        ([AgentDefinition("a", "d", "i", thinking="loud")], "thinking"),
    ],
)
async def test_a_bad_definition_in_code_is_refused(
    session: Session, agents: list[AgentDefinition], problem: str
) -> None:
    from harness import AgentDefinitionError

    with pytest.raises(AgentDefinitionError) as refused:
        AgentHarness(session=session, agents=agents, tools=[note], resources=None)
    assert refused.value.code == "agent_definition" and problem in refused.value.problem


async def test_rules_name_the_task_tool_as_claude_code_does(session: Session) -> None:
    agents = [
        AgentDefinition("reader", "Reads.", "You read.", model=FauxModel(["read it"])),
        AgentDefinition("writer", "Writes.", "You write.", model=FauxModel(["wrote it"])),
    ]
    parent = FauxModel(
        [FauxReply(tool_calls=[task("reader", "r", "c1"), task("writer", "w", "c2")]), "ok"]
    )
    h = AgentHarness(
        session=session,
        model=parent,
        agents=agents,
        supervisor=SecuritySupervisor(rules={"deny": ["Task(writer)"]}, setting_sources=()),
        resources=None,
    )

    await h.prompt("both")

    first, second = results(session)
    assert (first.is_error, first.text) == (False, "read it")
    assert second.is_error and "task(writer) is denied by the rule Task(writer)" in second.text


async def test_command_hooks_see_task_as_claude_codes_task_and_the_childs_stop(
    session: Session, project: Path
) -> None:
    log = project / "stops.jsonl"
    record = project / "record.py"
    record.write_text(
        f"import json, sys\nwith open({str(log)!r}, 'a') as f:\n    f.write(sys.stdin.read())\n"
    )
    hooks = CommandHooks.from_settings(
        {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": "Task",
                        "hooks": [{"type": "command", "command": "echo 'not now' >&2; exit 2"}],
                    }
                ],
                "SubagentStop": [
                    {"hooks": [{"type": "command", "command": f"{sys.executable} {record}"}]}
                ],
                "SessionStart": [
                    {"hooks": [{"type": "command", "command": f"{sys.executable} {record}"}]}
                ],
            }
        }
    )
    agents = [AgentDefinition("helper", "Helps.", "You help.", model=FauxModel(["helped"]))]
    parent = FauxModel([FauxReply(tool_calls=[task("helper", "x", "c1")]), "blocked, then", "fine"])
    h = AgentHarness(
        session=session,
        cwd=project,
        model=parent,
        agents=agents,
        command_hooks=hooks,
        resources=None,
    )

    await h.prompt("first")
    (blocked,) = results(session)
    assert blocked.is_error and "not now" in blocked.text  # "Task" matched the task tool

    # Without the PreToolUse hook, the child runs: its stop reaches the parent's hooks.
    log.unlink()
    h2 = AgentHarness(
        session=session,
        cwd=project,
        model=FauxModel([FauxReply(tool_calls=[task("helper", "x", "c2")]), "done"]),
        agents=[AgentDefinition("helper", "Helps.", "You help.", model=FauxModel(["helped"]))],
        command_hooks=CommandHooks.from_settings(
            {
                "hooks": {
                    "SubagentStop": [
                        {"hooks": [{"type": "command", "command": f"{sys.executable} {record}"}]}
                    ],
                    "SessionStart": [
                        {"hooks": [{"type": "command", "command": f"{sys.executable} {record}"}]}
                    ],
                }
            }
        ),
        resources=None,
    )
    await h2.prompt("second")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    # The parent's SessionStart ran, the child's did not; the child's SubagentStop did.
    assert [e["hook_event_name"] for e in events] == ["SessionStart", "SubagentStop"]
    stop = events[1]
    assert (stop["agent_type"], stop["parent_session_id"], stop["depth"]) == (
        "helper",
        session.id,
        1,
    )
    assert stop["session_id"] != session.id
