"""The session file in use is the harness's own data wherever it lies (review finding 12): a
session continued from a file in the working folder could be replaced or removed by the
model's ``write``/``edit``/``bash`` in ``accept_edits`` or ``bypass``, unasked; a sub-agent's
calls could do the same to its parent's file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness import (
    AgentDefinition,
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    PermissionDecisionEvent,
    SecuritySupervisor,
    Session,
    bash_tool,
    edit_tool,
    open_session,
    read_tool,
    write_tool,
)


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    """A session continued from ``project/s.jsonl``: a file in the working folder, outside
    every store."""
    project = tmp_path / "project"
    project.mkdir()
    made = await JsonlSessionRepo(tmp_path / "store").create(str(project))
    assert made.path is not None
    made.close()
    shutil.copyfile(made.path, project / "s.jsonl")
    return open_session(project / "s.jsonl")


def calls(*replies: FauxReply | str) -> FauxModel:
    return FauxModel(list(replies))


def call(name: str, **arguments: object) -> FauxReply:
    return FauxReply(tool_calls=[FauxToolCall(name=name, arguments=arguments)])


@pytest.mark.parametrize("mode", ["accept_edits", "bypass"])
@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("write", {"path": "s.jsonl", "content": "{}\n"}),
        ("write", {"path": "s.jsonl.torn", "content": "{}\n"}),
        ("edit", {"path": "./s.jsonl", "oldText": "session", "newText": "x"}),
        ("bash", {"command": "rm -f s.jsonl"}),
        ("bash", {"command": "cp /dev/null s.jsonl"}),
        ("read", {"path": "s.jsonl"}),
    ],
)
async def test_the_session_file_in_use_is_never_changed_unasked(
    session: Session, mode: str, name: str, arguments: dict[str, object]
) -> None:
    assert session.path is not None
    project = session.path.parent
    decided: list[PermissionDecisionEvent] = []
    h = AgentHarness(
        session=session,
        cwd=project,
        model=calls(call(name, **arguments), "done"),
        tools=[write_tool(), edit_tool(), bash_tool(), read_tool()],
        supervisor=SecuritySupervisor(mode=mode, setting_sources=()),  # type: ignore[arg-type]
        resources=None,
    )
    h.on("permission_decision")(lambda sender, event: decided.append(event))
    before = session.path.read_bytes()

    reply = await h.prompt("go")  # raised SessionGoneError when the file was removed

    assert reply.stop_reason == "stop"
    [event] = decided
    assert event.decision == "deny" and "protected path" in event.reason
    assert session.path.read_bytes().startswith(before)
    assert not (project / "s.jsonl.torn").exists()


async def test_a_sub_agent_cannot_change_its_parents_session_file(session: Session) -> None:
    assert session.path is not None
    project = session.path.parent
    before = session.path.read_bytes()
    child = calls(call("write", path="s.jsonl", content="{}\n"), "child done")
    parent = calls(call("task", subagent_type="helper", prompt="clean up"), "done")
    h = AgentHarness(
        session=session,
        cwd=project,
        model=parent,
        tools=[write_tool()],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        resources=None,
        agents=[AgentDefinition("helper", "Helps.", "You help.", model=child)],
    )

    reply = await h.prompt("delegate")

    assert reply.stop_reason == "stop"
    assert "protected path" in child.requests[1].messages[-1].text
    assert session.path.read_bytes().startswith(before)


async def test_other_files_beside_it_keep_the_mode(session: Session) -> None:
    assert session.path is not None
    project = session.path.parent
    h = AgentHarness(
        session=session,
        cwd=project,
        model=calls(call("write", path="notes.jsonl", content="fine"), "done"),
        tools=[write_tool()],
        supervisor=SecuritySupervisor(mode="accept_edits", setting_sources=()),
        resources=None,
    )
    assert (await h.prompt("go")).stop_reason == "stop"
    assert (project / "notes.jsonl").read_text() == "fine"
