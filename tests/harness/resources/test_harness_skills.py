"""Skills through AgentHarness: managing them, the catalog, the skill tool and its journal."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from resource_trees import write_skill

from harness import (
    SKILL_BODY_TYPE,
    SKILL_CATALOG_TYPE,
    AgentHarness,
    CustomEntry,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ResourceOptions,
    ResourcesUpdateEvent,
    Session,
    SkillNotFoundError,
    ToolResultMessage,
)


def load(name: str) -> FauxReply:
    return FauxReply(tool_calls=[FauxToolCall(name="skill", arguments={"name": name})])


def customs(session: Session, custom_type: str) -> list[Any]:
    return [
        e.data
        for e in session.entries()
        if isinstance(e, CustomEntry) and e.custom_type == custom_type
    ]


def last_result(session: Session) -> ToolResultMessage:
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    return results[-1]


@pytest.fixture
def skills_dir(project: Path) -> Path:
    root = project / ".agents" / "skills"
    write_skill(root, "review", "Review a diff for bugs", "Read every hunk twice.")
    write_skill(
        root, "deploy", "Ship it", "Run the deploy.", extra="disable-model-invocation: true\n"
    )
    return root


async def test_the_model_loads_an_offered_skill_and_the_prompt_lists_the_catalog(
    project: Path, skills_dir: Path, repo: JsonlSessionRepo
) -> None:
    session = await repo.create(str(project))
    model = FauxModel([load("review"), "Reviewed."])
    h = AgentHarness(session=session, cwd=session.cwd, model=model)
    reply = await h.prompt("Review my change")
    assert reply.text == "Reviewed."
    first = model.requests[0]
    assert "- review [project]: Review a diff for bugs" in first.system_prompt
    assert "deploy" not in first.system_prompt  # disable-model-invocation
    assert [t.name for t in first.tools] == ["skill"]
    result = last_result(session)
    assert not result.is_error and "Read every hunk twice." in result.text
    assert result.details == {
        "name": "review",
        "scope": "project",
        "location": str(skills_dir / "review" / "SKILL.md"),
        "journaled": False,
    }
    (offer,) = customs(session, SKILL_CATALOG_TYPE)
    assert [e["name"] for e in offer["entries"]] == ["review"] and offer["omitted"] == 0
    (body,) = customs(session, SKILL_BODY_TYPE)
    assert body["body"] == "Read every hunk twice."
    session.close()


async def test_the_skill_tool_refuses_a_name_outside_this_turns_catalog(
    project: Path, skills_dir: Path, repo: JsonlSessionRepo
) -> None:
    session = await repo.create(str(project))
    model = FauxModel([load("deploy"), load("invented"), "ok"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model)
    await h.prompt("go")
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [True, True]
    assert all("Valid names: review." in r.text for r in results)
    assert customs(session, SKILL_BODY_TYPE) == []
    session.close()


async def test_the_catalog_is_capped_with_the_omitted_count(
    project: Path, repo: JsonlSessionRepo
) -> None:
    for i in range(5):
        write_skill(project / ".agents" / "skills", f"skill-{i}", f"Task {i}")
    session = await repo.create(str(project))
    model = FauxModel(["ok"])
    h = AgentHarness(
        session=session, cwd=session.cwd, model=model, resources=ResourceOptions(max_skills=3)
    )
    await h.prompt("hi")
    prompt = model.requests[0].system_prompt
    assert [f"skill-{i}" in prompt for i in range(5)] == [True, True, True, False, False]
    assert "(2 more skills are not listed.)" in prompt
    assert h.skill_offer.omitted == 2 and len(h.skill_offer.entries) == 3
    session.close()


async def test_the_default_cap_is_twenty(project: Path, repo: JsonlSessionRepo) -> None:
    for i in range(22):
        write_skill(project / ".agents" / "skills", f"s{i:02d}", "x")
    session = await repo.create(str(project))
    h = AgentHarness(session=session, cwd=session.cwd, model=FauxModel(["ok"]))
    await h.prompt("hi")
    assert len(h.skill_offer.entries) == 20 and h.skill_offer.omitted == 2
    session.close()


async def test_a_reopened_session_reads_the_journaled_catalog_and_body_after_the_file_changed(
    project: Path, skills_dir: Path, repo: JsonlSessionRepo
) -> None:
    session = await repo.create(str(project))
    h = AgentHarness(session=session, cwd=session.cwd, model=FauxModel([load("review"), "first"]))
    await h.prompt("one")
    session.close()
    write_skill(skills_dir, "review", "A different description", "Totally new text.")

    reopened = await repo.open(session.id)
    model = FauxModel([load("review"), "second"])
    h2 = AgentHarness(session=reopened, cwd=reopened.cwd, model=model)
    assert h2.skill_offer.entries[0].description == "Review a diff for bugs"
    await h2.prompt("two")
    assert "Review a diff for bugs" in model.requests[0].system_prompt
    assert "A different description" not in model.requests[0].system_prompt
    result = last_result(reopened)
    assert "Read every hunk twice." in result.text and "Totally new" not in result.text
    assert result.details["journaled"] is True  # type: ignore[index]
    assert len(customs(reopened, SKILL_CATALOG_TYPE)) == 1  # the same catalog, not re-offered

    # An explicit refresh offers the new text from the next prompt on.
    assert (await h2.refresh_skills()).error is None
    model.add(load("review"), "third")
    await h2.prompt("three")
    assert "A different description" in model.requests[-1].system_prompt
    assert "Totally new text." in last_result(reopened).text
    assert len(customs(reopened, SKILL_CATALOG_TYPE)) == 2
    reopened.close()


async def test_enable_disable_validate_the_whole_batch_and_update_a_live_run(
    project: Path, skills_dir: Path, repo: JsonlSessionRepo
) -> None:
    write_skill(skills_dir, "lint", "Lint the code", extra="aliases: [check]\n")
    session = await repo.create(str(project))
    events: list[ResourcesUpdateEvent] = []
    disabled_mid_run: list[str] = []

    async def disable_during_run(sender: object, event: Any) -> None:
        if event.turn_index == 0:
            disabled_mid_run.extend(await h.disable_skills(["check"]))

    model = FauxModel([load("lint"), load("lint"), "done"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model)
    h.connect("resources_update", lambda s, event: events.append(event))
    with pytest.raises(SkillNotFoundError) as caught:
        await h.disable_skills(["review", "nope"])
    assert caught.value.names == ("nope",) and caught.value.code == "skill_not_found"
    assert all(r.enabled for r in await h.get_skills()) and events == []

    h.connect("turn_end", disable_during_run)
    await h.prompt("go")
    assert disabled_mid_run == ["lint"]
    first, second = (
        m for m in session.build_context().messages if isinstance(m, ToolResultMessage)
    )
    assert not first.is_error and second.is_error  # the live run's catalog lost "lint"
    assert [t.name for t in model.requests[2].tools] == ["skill"]
    assert "lint" not in model.requests[2].system_prompt
    assert [(e.source, e.disabled) for e in events] == [("disable", ("lint",))]
    assert [e["name"] for e in customs(session, SKILL_CATALOG_TYPE)[-1]["entries"]] == ["review"]

    assert await h.enable_skills(["lint", "review"]) == ("lint",)
    record = await h.get_skill_record("check")
    assert record is not None and record.name == "lint" and record.enabled
    assert events[-1].source == "enable" and events[-1].disabled == ()
    session.close()


async def test_refresh_reports_added_updated_removed_and_keeps_disabled_intent(
    project: Path, skills_dir: Path, repo: JsonlSessionRepo
) -> None:
    session = await repo.create(str(project))
    h = AgentHarness(session=session, cwd=session.cwd, model=FauxModel([]))
    events: list[ResourcesUpdateEvent] = []
    h.connect("resources_update", lambda s, event: events.append(event))
    await h.disable_skills(["review"])
    write_skill(skills_dir, "review", "Edited description")
    write_skill(skills_dir, "fresh", "Brand new")
    (skills_dir / "deploy" / "SKILL.md").unlink()
    report = await h.refresh_skills()
    assert (report.added, report.updated, report.removed) == (("fresh",), ("review",), ("deploy",))
    record = await h.get_skill_record("review")
    assert record is not None and not record.enabled
    assert events[-1].source == "refresh" and events[-1].added == ("fresh",)
    assert events[-1].skills == ("fresh", "review")
    assert (await h.refresh_skills()).added == ()
    session.close()


async def test_build_skills_runs_in_parallel_and_isolates_one_failure(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good", extra="build: echo built > out.txt\n")
    write_skill(root, "bad", extra="build: echo failing; exit 3\n")
    write_skill(root, "none")
    write_skill(root, "idle", extra="build: touch ran.txt\n")
    session = await repo.create(str(tmp_path))
    h = AgentHarness(
        session=session,
        cwd=session.cwd,
        resources=ResourceOptions(discover=False, skill_roots=[root]),
    )
    await h.disable_skills(["idle"])
    results = {r.name: r for r in await h.build_skills()}
    assert set(results) == {"good", "bad"}
    assert results["good"].ok and (root / "good" / "out.txt").read_text() == "built\n"
    assert not results["bad"].ok and results["bad"].returncode == 3
    assert "failing" in results["bad"].output
    assert not (root / "idle" / "ran.txt").exists()
    session.close()


async def test_no_resources_means_no_catalog_no_skill_tool(
    project: Path, skills_dir: Path, repo: JsonlSessionRepo
) -> None:
    session = await repo.create(str(project))
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model, resources=None)
    await h.prompt("hi")
    assert model.requests[0].system_prompt == "You are a helpful assistant."
    assert not model.requests[0].tools and await h.get_skills() == ()
    session.close()


async def test_a_user_tool_named_skill_is_refused_while_resources_are_on(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    from harness import tool

    @tool("skill", "mine")
    async def mine(input: Any, run: Any) -> str:
        return "x"

    session = await repo.create(str(tmp_path))
    with pytest.raises(ValueError, match="skill"):
        AgentHarness(session=session, cwd=session.cwd, tools=[mine])
    assert AgentHarness(session=session, cwd=session.cwd, tools=[mine], resources=None).tools == (
        mine,
    )
    session.close()


async def test_get_skills_lists_everything_with_diagnostics(
    project: Path, skills_dir: Path, repo: JsonlSessionRepo
) -> None:
    (skills_dir / "broken").mkdir()
    (skills_dir / "broken" / "SKILL.md").write_text("---\nname: [\n---\n")
    session = await repo.create(str(project))
    h = AgentHarness(session=session, cwd=session.cwd)
    listing = await h.get_skill_listing()
    assert [r.name for r in listing.records] == ["deploy", "review"]
    assert [d.code for d in listing.diagnostics] == ["parse_failed"]
    assert await h.get_skill_record("nope") is None
    session.close()


def test_prompt_sync_still_works_with_skills(project: Path, skills_dir: Path) -> None:
    session = asyncio.run(JsonlSessionRepo(project / "s").create(str(project)))
    h = AgentHarness(session=session, cwd=session.cwd, model=FauxModel([load("review"), "ok"]))
    assert h.prompt_sync("go").text == "ok"
    session.close()


async def test_the_catalog_line_says_which_scopes_a_skill_overrides(
    project: Path, skills_dir: Path, user_config: Path, repo: JsonlSessionRepo
) -> None:
    write_skill(user_config / "skills", "review", "The user's own review")
    session = await repo.create(str(project))
    model = FauxModel(["ok"])
    h = AgentHarness(session=session, cwd=session.cwd, model=model)
    await h.prompt("hi")
    (line,) = [x for x in model.requests[0].system_prompt.splitlines() if x.startswith("- ")]
    assert line.startswith("- review [project]: Review a diff for bugs")
    assert line.endswith("(overrides: user)")
    assert h.skill_offer.entries[0].shadows == ("user",)
    session.close()
