"""One loop over EVENT_CLASSES with ``harness.connect`` sees every event about the harness's
session, the four a repository sends included (``session_created`` of a nested run's child,
``session_before_fork``/``session_fork`` of a fork, ``session_deleted``), and none about other
sessions."""

from __future__ import annotations

from pathlib import Path

from harness import EVENT_CLASSES, AgentHarness, FauxModel, JsonlSessionRepo, ResourceOptions


async def test_the_readme_loop_sees_the_repository_events_of_its_session(tmp_path: Path) -> None:
    skill = tmp_path / "project" / ".agents" / "skills" / "helper" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: Helps\n---\nHelp.\n")
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(tmp_path / "project"))
    other = await repo.create(str(tmp_path / "project"))
    agent = AgentHarness(
        session=session,
        model=FauxModel(["Hi.", "Helped."]),
        cwd=tmp_path / "project",
        resources=ResourceOptions(),
    )
    seen: list[tuple[str, str]] = []

    def show(sender: object, event: object) -> None:
        name = type(event).name  # type: ignore[attr-defined]
        seen.append((name, getattr(event, "session_id", "") or ""))

    for name in EVENT_CLASSES:
        agent.connect(name, show)
    await agent.prompt("Hello")
    child = await agent.run_skill("helper", "go")
    fork = await repo.fork(session.id)
    await repo.fork(other.id)  # another session's fork: not about this harness
    await repo.delete(other.id)
    await repo.delete(fork.id)  # the fork's own deletion is not about this session
    fork.close()
    session_events = [(n, i) for n, i in seen if n.startswith("session_")]
    assert ("session_created", child.session_id) in session_events
    assert ("session_before_fork", "") in session_events  # its source_id is this session
    assert ("session_fork", fork.id) in session_events
    assert all(i != other.id for _, i in session_events)
    assert "agent_start" in [n for n, _ in seen]
    await repo.delete(session.id)
    assert seen[-1] == ("session_deleted", session.id)
