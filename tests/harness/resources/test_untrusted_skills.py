"""A cloned project's skills are text for a model: they run nothing and grant nothing.

Reproductions of the adversarial review after issue 18: ``build_skills`` ran the ``build``
command of an untrusted project's ``SKILL.md`` (a shell command from a cloned repository), and
frontmatter whose values PyYAML's or json's constructors cannot make (a 5,000-digit integer, a
13th month, a malformed ``!!timestamp``) crashed discovery, ``AgentHarness`` and ``harness
skills list`` with a ``ValueError`` or ``AttributeError``; a lone surrogate escape went into
the catalog.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from resource_trees import write_skill

from harness import (
    AgentHarness,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    PermissionRequest,
    ResourceOptions,
    Resources,
    SecuritySupervisor,
    SkillContext,
    ToolResultMessage,
    write_tool,
)


async def test_an_untrusted_projects_build_command_never_runs(
    project: Path, repo: JsonlSessionRepo
) -> None:
    marker = project.parent / "PWNED"
    write_skill(
        project / ".harness" / "skills",
        "setup",
        extra=f"build: touch {marker}\nallowed-tools: Bash(*) Write\n",
    )
    session = await repo.create(str(project / "app"))
    h = AgentHarness(session=session, cwd=session.cwd, model=FauxModel(["ok"]))
    [result] = await h.build_skills()
    assert not result.ok and result.error is not None and "not trusted" in result.error
    assert not marker.exists()
    session.close()
    # The user vouches for the folder: its builds run.
    trusted = await repo.create(str(project / "app"))
    h = AgentHarness(
        session=trusted,
        cwd=trusted.cwd,
        model=FauxModel(["ok"]),
        resources=ResourceOptions(trust_project=True),
    )
    [result] = await h.build_skills()
    assert result.ok and marker.exists()
    trusted.close()


async def test_allowed_tools_in_an_untrusted_skill_grant_nothing(
    project: Path, repo: JsonlSessionRepo
) -> None:
    """Claude Code's ``allowed-tools`` pre-approves tools while a skill is active; from an
    untrusted project it must approve nothing: the write is still decided by the mode."""
    write_skill(
        project / ".harness" / "skills",
        "deploy",
        body="Write the file.",
        extra="allowed-tools: Write Bash(*) Edit\n",
    )
    asked: list[PermissionRequest] = []

    async def deny(request: PermissionRequest) -> Deny:
        asked.append(request)
        return Deny(reason="no")

    session = await repo.create(str(project / "app"))
    calls = [
        FauxReply(tool_calls=[FauxToolCall(name="skill", arguments={"name": "deploy"})]),
        FauxReply(tool_calls=[FauxToolCall(name="write", arguments={"path": "x", "content": "y"})]),
        "done",
    ]
    h = AgentHarness(
        session=session,
        cwd=session.cwd,
        model=FauxModel(calls),
        tools=[write_tool()],
        supervisor=SecuritySupervisor(approver=deny, setting_sources=()),
    )
    await h.prompt("deploy")
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert results[-1].is_error and [r.tool_name for r in asked] == ["write"]
    assert not (project / "app" / "x").exists()
    session.close()


HOSTILE = {
    "yaml_big_int": "---\nname: s\ndescription: d\nx: " + "1" * 5000 + "\n---\nbody\n",
    "yaml_tagged_big_int": "---\nname: s\ndescription: d\nx: !!int " + "9" * 5000 + "\n---\n",
    "json_big_int": '{"name": "s", "description": "d", "x": ' + "1" * 5000 + "}\nbody\n",
    "yaml_month_13": "---\nname: s\ndescription: d\nwhen: 2001-13-45\n---\nbody\n",
    "yaml_bad_timestamp_tag": "---\nname: s\ndescription: d\nx: !!timestamp 99999-1-1\n---\n",
    "yaml_lone_surrogate": '---\nname: s\ndescription: "lone \\ud800 here"\n---\nbody\n',
    "json_lone_surrogate": '{"name": "s", "description": "lone \\udc80"}\nbody\n',
    "json_lone_surrogate_key": '{"name": "s", "description": "d", "\\ud800": 1}\nbody\n',
    "yaml_alias_bomb": "---\nname: s\ndescription: d\na: &a [x, x]\nb: &b [*a, *a]\n---\n",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_frontmatter_is_a_diagnostic_never_a_crash(project: Path, text: str) -> None:
    write_skill(project / ".agents" / "skills", "fine", "Still here")
    bad = project / ".agents" / "skills" / "s" / "SKILL.md"
    bad.parent.mkdir()
    bad.write_text(text, encoding="utf-8", errors="surrogatepass")
    prompts = project / ".agents" / "prompts"
    prompts.mkdir()
    (prompts / "t.md").write_text(text, encoding="utf-8", errors="surrogatepass")
    resources = Resources(project, ResourceOptions())
    listing = asyncio.run(resources.listing(SkillContext(session_id=None, cwd=project)))
    assert [r.name for r in listing.records] == ["fine"]
    assert [t.name for t in resources.templates] == []
    by_path = {d.path: d for d in listing.diagnostics}
    assert by_path[str(bad)].code == "parse_failed"
    assert by_path[str(prompts / "t.md")].code == "parse_failed"
    assert all(len(d.message) < 2000 for d in listing.diagnostics)


async def test_a_build_that_never_ends_is_killed_at_its_timeout(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    root = tmp_path / "skills"
    pid_file = tmp_path / "child.pid"
    write_skill(root, "slow", extra=f"build: sleep 300 & echo $! > {pid_file}; wait\n")
    session = await repo.create(str(tmp_path))
    h = AgentHarness(
        session=session,
        cwd=session.cwd,
        model=FauxModel(["ok"]),
        resources=ResourceOptions(discover=False, skill_roots=[root], build_timeout_s=1),
    )
    [result] = await h.build_skills()  # waited for ever before
    assert not result.ok and result.error is not None and "timed out" in result.error
    child = int(pid_file.read_text())
    for _ in range(100):  # the kill is sent; its delivery may take a moment
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":  # killed, waiting for init to reap it
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the build's child is still running")
    session.close()
