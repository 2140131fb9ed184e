"""adonis's write rules, and write_skill enforcing them and writing atomically."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import (
    AgentHarness,
    JsonlSessionRepo,
    ResourceOptions,
    ResourcesUpdateEvent,
    SkillWriteRefusedError,
    SkillWriteRequest,
    skill_write_verdict,
)

SCOPES = ("actor:ann", "tenant:acme", "global")


@pytest.mark.parametrize(
    ("scope", "author", "elevated", "allowed", "rule"),
    [
        ("actor:bob", "human", True, False, 1),  # not a scope you are in, even elevated
        ("actor:bob", "agent", False, False, 1),
        ("actor:ann", "agent", False, True, 2),  # your own scope is yours
        ("actor:ann", "human", False, True, 2),
        ("tenant:acme", "agent", True, False, 3),  # an agent never writes above its own
        ("global", "agent", True, False, 3),
        ("tenant:acme", "human", False, False, 4),  # a human needs the host's elevation
        ("tenant:acme", "human", True, True, 4),
        ("global", "human", True, True, 4),
    ],
)
def test_every_rule_of_the_write_verdict(
    scope: str, author: str, elevated: bool, allowed: bool, rule: int
) -> None:
    verdict = skill_write_verdict(
        SkillWriteRequest(scope=scope, scopes=SCOPES, author=author, elevated=elevated)  # type: ignore[arg-type]
    )
    assert (verdict.allowed, verdict.rule) == (allowed, rule)
    assert (verdict.reason is None) == allowed


async def test_write_skill_enforces_the_verdict_writes_atomically_and_refreshes(
    project: Path, user_config: Path, tmp_path: Path
) -> None:
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    h = AgentHarness(session=session, cwd=session.cwd)
    events: list[ResourcesUpdateEvent] = []
    h.connect("resources_update", lambda s, event: events.append(event))
    scopes = ("project", "user", "extra", "internal")

    with pytest.raises(SkillWriteRefusedError) as refused:
        await h.write_skill(
            SkillWriteRequest(scope="user", scopes=scopes, author="agent", elevated=True),
            name="shared",
            description="Would edit every prompt of the user",
            body="...",
        )
    assert refused.value.code == "skill_write_refused"
    assert not (user_config / "skills").exists() and events == []

    path = await h.write_skill(
        SkillWriteRequest(scope="project", scopes=scopes, author="agent"),
        name="learned",
        description="What the agent learned",
        body="Do the thing.",
    )
    assert path == project / ".agents" / "skills" / "learned" / "SKILL.md"
    assert [p.name for p in path.parent.iterdir()] == ["SKILL.md"]  # no temporary file left
    record = await h.get_skill_record("learned")
    assert record is not None and record.description == "What the agent learned"
    assert events[-1].source == "write" and events[-1].added == ("learned",)

    human = SkillWriteRequest(scope="user", scopes=scopes, author="human", elevated=True)
    written = await h.write_skill(human, name="mine", description="Mine", body="b")
    assert written == user_config / "skills" / "mine" / "SKILL.md"
    with pytest.raises(SkillWriteRefusedError):
        await h.write_skill(human, name="Bad Name", description="x", body="b")
    session.close()


async def test_write_skill_needs_a_folder_for_the_scope(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))
    h = AgentHarness(session=session, cwd=session.cwd, resources=ResourceOptions(discover=False))
    request = SkillWriteRequest(scope="extra", scopes=("extra",), author="human")
    with pytest.raises(SkillWriteRefusedError) as refused:
        await h.write_skill(request, name="x", description="d", body="b")
    assert "no skills folder" in refused.value.reason
    session.close()
