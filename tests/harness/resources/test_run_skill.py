"""run_skill: a nested run in a child session, linked from the parent, disabled skills refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from resource_trees import write_skill

from harness import (
    SKILL_RUN_TYPE,
    AgentHarness,
    ApproveAlways,
    CustomEntry,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MemorySessionRepo,
    MessageEntry,
    PermissionRequest,
    SecuritySupervisor,
    SkillDisabledError,
    SkillNotFoundError,
    ToolResultMessage,
    connect,
    write_tool,
)


async def test_run_skill_runs_the_body_in_a_linked_child_session(
    project: Path, tmp_path: Path
) -> None:
    skill = write_skill(
        project / ".agents" / "skills",
        "release",
        "Cut a release",
        "Bump the version, then tag.",
        extra="disable-model-invocation: true\n",  # a user may still run it
    )
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(project))
    model = FauxModel(["Released 1.2."])
    h = AgentHarness(session=session, cwd=session.cwd, model=model, tool_context={"app": "state"})
    before = len(session.build_context().messages)

    result = await h.run_skill("release", "Release version 1.2")

    assert result.reply.text == "Released 1.2." and result.skill == "release"
    request = model.requests[0]
    assert "Bump the version, then tag." in request.system_prompt
    assert f"References are relative to {skill.parent}." in request.system_prompt
    assert [m.text for m in result.messages] == ["Release version 1.2", "Released 1.2."]
    assert len(session.build_context().messages) == before  # the parent's context is unchanged
    (link,) = [e for e in session.entries() if isinstance(e, CustomEntry)]
    assert link.custom_type == SKILL_RUN_TYPE
    assert link.data == {
        "skill": "release",
        "scope": "project",
        "sessionId": result.session_id,
        "sessionPath": result.session_path,
        "stopReason": "stop",
    }
    child = await repo.open(result.session_id)
    assert child.header.parent_session == str(session.path)
    assert sum(isinstance(e, MessageEntry) for e in child.entries()) == 2
    child.close()
    session.close()


async def test_run_skill_refuses_a_disabled_or_unknown_skill(project: Path) -> None:
    write_skill(project / ".agents" / "skills", "release", "Cut a release")
    session = await MemorySessionRepo().create(str(project))
    model = FauxModel([])
    h = AgentHarness(session=session, cwd=session.cwd, model=model)
    await h.disable_skills(["release"])
    with pytest.raises(SkillDisabledError) as disabled:
        await h.run_skill("release", "go")
    assert disabled.value.code == "skill_disabled"
    with pytest.raises(SkillNotFoundError):
        await h.run_skill("nope", "go")
    assert model.requests == [] and list(session.entries()) == []


async def test_the_nested_run_inherits_the_parents_supervisor_one_level_deeper(
    project: Path,
) -> None:
    write_skill(project / ".agents" / "skills", "probe", "Probe", "Answer.")
    session = await MemorySessionRepo().create(str(project))
    h = AgentHarness(session=session, cwd=session.cwd, model=FauxModel(["ok"]))
    senders: list[object] = []
    disconnect = connect("agent_start", lambda sender, event: senders.append(sender))
    try:
        await h.run_skill("probe", "go")
    finally:
        disconnect()
    (child,) = senders
    assert isinstance(child, AgentHarness) and child is not h
    assert child.supervisor is h.supervisor and child.depth == h.depth + 1


async def test_an_always_approval_in_the_parent_is_not_asked_again_in_the_skill_run(
    project: Path,
) -> None:
    write_skill(project / ".agents" / "skills", "stamp", "Stamp", "Write the stamp.")
    session = await MemorySessionRepo().create(str(project))
    asked: list[tuple[str, int]] = []

    async def approver(request: PermissionRequest) -> ApproveAlways:
        asked.append((request.operation_key, request.depth))
        return ApproveAlways()

    stamp = FauxToolCall(name="write", arguments={"path": "stamp.txt", "content": "x"})
    h = AgentHarness(
        session=session,
        cwd=project,
        # The parent writes once (asked, approved always), then the skill run writes the
        # same file: its supervisor knows the approval and does not ask.
        model=FauxModel(
            [FauxReply(tool_calls=[stamp]), "wrote", FauxReply(tool_calls=[stamp]), "ok"]
        ),
        tools=[write_tool()],
        supervisor=SecuritySupervisor(approver=approver, setting_sources=()),
    )
    await h.prompt("stamp it")
    result = await h.run_skill("stamp", "again")

    assert asked == [("write(stamp.txt)", 0)]
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False]
