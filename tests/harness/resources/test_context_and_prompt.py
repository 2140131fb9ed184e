"""Context files, the system prompt as a function, per-prompt overrides, initial history."""

from __future__ import annotations

from pathlib import Path

import pytest
from resource_trees import write_skill

from harness import (
    AgentHarness,
    AssistantMessage,
    FauxModel,
    JsonlSessionRepo,
    MemorySessionRepo,
    MessageEntry,
    ModelChangeEntry,
    PromptParts,
    ResourceOptions,
    SessionNotEmptyError,
    StreamOptionsPatch,
    UserMessage,
)
from harness._resources.context_files import MAX_CONTEXT_TOTAL_BYTES


async def test_context_files_in_documented_order(
    project: Path, user_config: Path, tmp_path: Path
) -> None:
    user_config.mkdir(parents=True)
    (user_config / "AGENTS.md").write_text("USER RULES")
    (project / "AGENTS.md").write_text("ROOT RULES")
    (project / "CLAUDE.md").write_text("ignored: AGENTS.md wins in its folder")
    (project / "app" / "CLAUDE.md").write_text("APP RULES")
    (project.parent / "AGENTS.md").write_text("outside the repository")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project / "app"))
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model, system_prompt="BASE")
    assert [Path(f.path) for f in h.context_files] == [
        user_config / "AGENTS.md",
        project / "AGENTS.md",
        project / "app" / "CLAUDE.md",
    ]
    assert [f.scope for f in h.context_files] == ["user", "project", "project"]
    await h.prompt("hi")
    prompt = model.requests[0].system_prompt
    assert prompt.startswith("BASE\n\n")
    assert prompt.index("USER RULES") < prompt.index("ROOT RULES") < prompt.index("APP RULES")
    assert "ignored" not in prompt and "outside" not in prompt
    session.close()


async def test_refresh_lists_context_files_in_resources_update(
    project: Path, tmp_path: Path
) -> None:
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    h = AgentHarness(session=session, cwd=session.cwd)
    events: list[object] = []
    h.connect("resources_update", lambda s, event: events.append(event))
    (project / "AGENTS.md").write_text("new rules")
    await h.refresh_skills()
    assert events[-1].context_files == (str(project / "AGENTS.md"),)  # type: ignore[attr-defined]
    session.close()


async def test_the_system_prompt_may_be_a_function_of_the_parts(
    project: Path, tmp_path: Path
) -> None:
    (project / "AGENTS.md").write_text("Be brief.")
    write_skill(project / ".agents" / "skills", "review", "Review code")
    prompts = project / ".agents" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "fix.md").write_text("Fix $1")
    seen: list[PromptParts] = []

    def build(parts: PromptParts) -> str:
        seen.append(parts)
        return (
            f"files={len(parts.context_files)} skills={[e.name for e in parts.catalog.entries]} "
            f"templates={[t.name for t in parts.templates]} tools={list(parts.tools)}"
        )

    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model, system_prompt=build)
    await h.prompt("hi")
    assert model.requests[0].system_prompt == (
        "files=1 skills=['review'] templates=['fix'] tools=['skill']"
    )
    assert "Be brief." in seen[-1].context_text and "review" in seen[-1].catalog_text
    session.close()


async def test_per_prompt_overrides_are_for_one_call_only(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))
    base, other = FauxModel(["one", "three"]), FauxModel(["two"], model_id="faux-other")
    h = AgentHarness(session=session, cwd=session.cwd, model=base, resources=None)
    options: list[object] = []
    h.connect("before_provider_request", lambda s, event: options.append(event.options.metadata))
    await h.prompt("a")
    reply = await h.prompt("b", model=other, thinking_level="high", metadata={"user_id": "u1"})
    await h.prompt("c")
    assert reply.model == "faux-other" and reply.text == "two"
    assert other.requests[0].thinking_level == "high"
    assert [r.thinking_level for r in base.requests] == ["off", "off"]
    assert options == [{}, {"user_id": "u1"}, {}]
    assert h.model is base and h.thinking_level == "off"
    assert not any(isinstance(e, ModelChangeEntry) for e in session.entries())
    with pytest.raises(ValueError):
        await h.prompt("d", thinking_level="extreme")  # type: ignore[arg-type]
    assert StreamOptionsPatch  # the patch type the metadata goes through
    session.close()


async def test_initial_history_only_for_an_empty_session(tmp_path: Path) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    model = FauxModel(["hello again", "x"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model, resources=None)
    history = [
        UserMessage(content="earlier question"),
        AssistantMessage(content=(), stop_reason="stop"),
    ]
    await h.prompt("continue", initial_history=history)
    messages = [e.message for e in session.entries() if isinstance(e, MessageEntry)]
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0].text == "earlier question"
    count = len(list(session.entries()))
    with pytest.raises(SessionNotEmptyError) as refused:
        await h.prompt("again", initial_history=history)
    assert refused.value.code == "session_not_empty" and refused.value.entry_count == count
    assert len(list(session.entries())) == count and not h.busy


async def test_no_discovery_switch_keeps_explicit_roots_only(
    project: Path, user_config: Path, tmp_path: Path
) -> None:
    write_skill(user_config / "skills", "user-skill")
    write_skill(project / ".agents" / "skills", "project-skill")
    (project / "AGENTS.md").write_text("rules")
    write_skill(tmp_path / "mine", "explicit")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    h = AgentHarness(
        session=session,
        cwd=session.cwd,
        resources=ResourceOptions(discover=False, skill_roots=[tmp_path / "mine"]),
    )
    assert [r.name for r in await h.get_skills()] == ["explicit"]
    assert h.context_files == () and h.templates == ()
    default = AgentHarness(session=session, cwd=session.cwd)
    assert [r.name for r in await default.get_skills()] == ["project-skill", "user-skill"]
    session.close()


async def test_context_files_hold_at_most_their_budget_in_all(
    project: Path, user_config: Path, tmp_path: Path
) -> None:
    # The review's note (finding 15): an AGENTS.md and a CLAUDE.md of 250 KB in each of 12
    # folders gave a 3,000,618-character system prompt to a user working 12 folders deep.
    user_config.mkdir(parents=True)
    (user_config / "AGENTS.md").write_text("USER RULES")
    deep = project
    for i in range(12):
        deep = deep / f"d{i}"
        deep.mkdir()
        (deep / "AGENTS.md").write_text(f"AGENTS {i} " + "a" * 250_000)
        (deep / "CLAUDE.md").write_text(f"CLAUDE {i} " + "c" * 250_000)
    (project / "CLAUDE.md").write_text("ROOT RULES")
    (deep / "AGENTS.md").write_text("NEAREST RULES")  # small: it still fits after the others
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(deep))
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model, system_prompt="BASE")
    await h.prompt("hi")

    prompt = model.requests[0].system_prompt
    assert len(prompt) <= MAX_CONTEXT_TOTAL_BYTES + 2_000
    for kept in ("USER RULES", "ROOT RULES", "AGENTS 0 ", "NEAREST RULES"):
        assert kept in prompt
    assert "AGENTS 1 " not in prompt and "CLAUDE" not in prompt.replace("CLAUDE.md", "")
    assert [Path(f.path) for f in h.context_files] == [
        user_config / "AGENTS.md",
        project / "CLAUDE.md",
        project / "d0" / "AGENTS.md",
        deep / "AGENTS.md",
    ]
    listing = await h.get_skill_listing()
    over = [d for d in listing.diagnostics if d.code == "over_budget"]
    folder = project / "d0"
    left_out = []
    for i in range(1, 11):
        folder = folder / f"d{i}"
        left_out.append(str(folder / "AGENTS.md"))
    assert [d.path for d in over] == left_out  # each named; the folder's CLAUDE.md not read
    assert all(d.dropped and d.kind == "context_file" for d in over)
    session.close()
