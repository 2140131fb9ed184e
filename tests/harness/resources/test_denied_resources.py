"""The files the harness reads on its own (context files, skills and their files, prompt
templates, agent files) honour the user's ``read`` rules as the ``read`` tool does.

Review finding 13 (high): the user's settings deny ``read(.env)``; an untrusted project
holds ``.env`` and ``AGENTS.md -> .env`` (or ``.agents/skills/x/SKILL.md -> ../../../.env``, a
one-file skill, a prompt template). The link stays inside the project, so the confinement
let it through, and the resource loader put ``.env`` into the system prompt or the ``skill``
tool's output: the model saw what the rule denies. Now each file is judged on the path as
written and on the file it turned out to be, against the deny and ask ``read`` rules (the
supervisor's own matching), and a refused file is a diagnostic naming the rule.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from resource_trees import write_skill

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ResourceOptions,
    Resources,
    SecuritySupervisor,
    SkillContext,
    ToolResultMessage,
    load_agents,
)

SECRET = "DB_PASSWORD=hunter2-TOP-SECRET"
# What each denied file holds: a valid skill, template and agent file, so a file that is read
# is used (and its secret shows) rather than dropped for its shape.
CONTENT = f"---\nname: leaked\ndescription: {SECRET}\n---\n{SECRET}\n"


def user_rules(user_config: Path, deny: Sequence[str], ask: Sequence[str] = ()) -> None:
    """The user's own settings file (trusted) with these read rules."""
    user_config.mkdir(parents=True, exist_ok=True)
    permissions = {"deny": list(deny), "ask": list(ask)}
    (user_config / "settings.json").write_text(json.dumps({"permissions": permissions}))


def link(at: Path, target: Path) -> None:
    """A relative symlink ``at -> target``: it stays inside the project."""
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(os.path.relpath(target, at.parent))


def everything(resources: Resources, cwd: Path) -> tuple[str, list[str]]:
    """All text the model could be given from these resources, and the diagnostics' messages."""
    ctx = SkillContext(session_id=None, cwd=cwd)
    listing = asyncio.run(resources.listing(ctx))
    parts = [f"{r.name} {r.description}" for r in listing.records]
    parts += [asyncio.run(resources.load(r.name, r.scope, ctx)) or "" for r in listing.records]
    parts += [f.content for f in resources.context_files]
    parts += [t.content + t.description for t in resources.templates]
    return "\n".join(parts), [d.message for d in listing.diagnostics]


# (name, the rule, how the project links to the denied file): the finding's spellings.
SPELLINGS: list[tuple[str, str, str]] = [
    ("agents-md", "read(.env)", "AGENTS.md"),
    ("claude-md", "read(**/.env)", "CLAUDE.md"),
    ("nested-agents-md", "Read(.env)", "app/AGENTS.md"),  # Claude Code's spelling
    ("skill-md", "read(.env)", ".agents/skills/x/SKILL.md"),
    ("one-file-skill", "read(**/.env)", ".agents/skills/x.md"),  # a skill's extra *.md file
    ("harness-skill", "read(./.env)", ".harness/skills/x/SKILL.md"),
    ("template", "read(.env)", ".agents/prompts/t.md"),
    ("harness-template", "read(/**/.env)", ".harness/prompts/t.md"),
]


@pytest.mark.parametrize(("kind", "rule", "at"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_a_link_to_a_file_a_read_rule_denies_is_refused_with_a_diagnostic(
    project: Path, user_config: Path, kind: str, rule: str, at: str
) -> None:
    user_rules(user_config, deny=[rule])
    env = project / ".env"
    env.write_text(CONTENT)
    link(project / at, env)
    cwd = project / "app" if at.startswith("app/") else project
    text, messages = everything(Resources(cwd, ResourceOptions()), cwd)
    assert SECRET not in text
    refusals = [m for m in messages if rule in m and "denies reading" in m]
    assert refusals, messages


@pytest.mark.parametrize("folder", [".harness/agents", ".claude/agents"])
def test_an_agent_file_a_read_rule_denies_is_refused(
    project: Path, user_config: Path, folder: str
) -> None:
    """Agent files are never read through a link of their own, but their folder may be one
    (``.harness/agents -> conf``): the file is judged where it turned out to be."""
    user_rules(user_config, deny=["read(conf/**)"])
    (project / "conf").mkdir()
    (project / "conf" / "x.md").write_text(CONTENT)
    link(project / folder, project / "conf")
    catalog = load_agents(project)
    assert catalog.agents == ()
    assert any("read(conf/**)" in d.message for d in catalog.diagnostics), catalog
    # a code rule given through the supervisor's check, the same way
    user_rules(user_config, deny=[])
    check = SecuritySupervisor(rules={"deny": ["read(**/x.md)"]}).read_check(project)
    assert load_agents(project, read_check=check).agents == ()
    assert [a.name for a in load_agents(project).agents] == ["leaked"]


def test_a_link_chain_to_the_denied_file_is_refused(project: Path, user_config: Path) -> None:
    """``AGENTS.md -> docs/notes.md -> docs/deep/x -> .env``: judged on where it leads."""
    user_rules(user_config, deny=["read(.env)"])
    (project / ".env").write_text(CONTENT)
    link(project / "docs" / "deep" / "x", project / ".env")
    link(project / "docs" / "notes.md", project / "docs" / "deep" / "x")
    link(project / "AGENTS.md", project / "docs" / "notes.md")
    link(project / ".agents" / "skills" / "x" / "SKILL.md", project / "docs" / "notes.md")
    text, messages = everything(Resources(project, ResourceOptions()), project)
    assert SECRET not in text
    assert sum("read(.env)" in m for m in messages) == 2, messages


def test_a_glob_rule_covers_the_link_and_an_ask_rule_refuses_too(
    project: Path, user_config: Path
) -> None:
    """``read(**/*.pem)`` denies a key a template links to; an ask rule refuses as well
    (nobody can be asked while resources load, as a folder walk leaves such files out)."""
    user_rules(user_config, deny=["read(**/*.pem)"], ask=["read(private/**)"])
    (project / "keys").mkdir()
    (project / "keys" / "server.pem").write_text(CONTENT)
    (project / "private").mkdir()
    (project / "private" / "notes.md").write_text(CONTENT)
    link(project / ".agents" / "prompts" / "t.md", project / "keys" / "server.pem")
    link(project / "AGENTS.md", project / "private" / "notes.md")
    text, messages = everything(Resources(project, ResourceOptions()), project)
    assert SECRET not in text
    assert any("read(**/*.pem)" in m for m in messages), messages
    assert any("read(private/**)" in m and "asks before reading" in m for m in messages)


def test_a_file_no_rule_covers_still_loads(project: Path, user_config: Path) -> None:
    user_rules(user_config, deny=["read(.env)", "read(**/*.pem)"])
    (project / "docs.md").write_text("Project rules.")
    link(project / "AGENTS.md", project / "docs.md")
    write_skill(project / ".agents" / "skills", "fine", "A fine skill", "Fine body.")
    write_skill(user_config / "skills", "mine", "The user's skill", "Mine.")
    (user_config / "AGENTS.md").write_text("User rules.")
    resources = Resources(project, ResourceOptions())
    text, messages = everything(resources, project)
    assert "Project rules." in text and "Fine body." in text and "Mine." in text, messages
    assert "User rules." in text


async def test_through_a_harness_the_model_never_sees_the_denied_file(
    project: Path, tmp_path: Path
) -> None:
    """The rule from the harness's own supervisor (code), not a settings file: the system
    prompt and the ``skill`` tool's output never hold ``.env``."""
    (project / ".env").write_text(CONTENT)
    link(project / "AGENTS.md", project / ".env")
    link(project / ".agents" / "skills" / "leaked" / "SKILL.md", project / ".env")
    write_skill(project / ".agents" / "skills", "good", "A good skill", "Good body.")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    model = FauxModel(
        [
            FauxReply(tool_calls=[FauxToolCall(name="skill", arguments={"name": "leaked"})]),
            FauxReply(tool_calls=[FauxToolCall(name="skill", arguments={"name": "good"})]),
            "done",
        ]
    )
    supervisor = SecuritySupervisor(rules={"deny": ["read(**/.env)"]}, setting_sources=())
    h = AgentHarness(session=session, model=model, cwd=project, supervisor=supervisor)
    await h.prompt("go")
    assert model.requests and all(SECRET not in r.system_prompt for r in model.requests)
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [True, False]
    assert all(SECRET not in r.text for r in results) and "Good body." in results[1].text
    messages = [d.message for d in (await h.get_skill_listing()).diagnostics]
    assert sum("read(**/.env)" in m for m in messages) == 2, messages
    session.close()
