"""Model, thinking level and active tools: persisted as entries, restored on reopen."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    ActiveToolsChangeEntry,
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    ModelChangeEntry,
    ResourceOptions,
    ThinkingLevelChangeEntry,
    ToolRun,
    tool,
)


def named_tool(name: str) -> Any:
    @tool(name, f"the {name} tool")
    async def execute(input: Mapping[str, Any], run: ToolRun) -> str:
        return name

    return execute


TOOLS = [named_tool("alpha"), named_tool("beta")]


async def test_settings_survive_close_and_reopen(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path)
    session = await repo.create(str(tmp_path))
    default, opus = FauxModel(["a"], model_id="faux-small"), FauxModel(["b"], model_id="faux-big")
    h = AgentHarness(session=session, model=default, tools=TOOLS)
    await h.set_model(opus)
    await h.set_thinking_level("high")
    await h.set_active_tools(["beta"])
    await h.prompt("hello")
    assert opus.requests[0].thinking_level == "high"
    assert [t.name for t in opus.requests[0].tools] == ["beta"]
    types = [type(e) for e in session.entries()][:3]
    assert types == [ModelChangeEntry, ThinkingLevelChangeEntry, ActiveToolsChangeEntry]
    session.close()

    reopened = await repo.open(session.id)
    fresh_default = FauxModel(["c"], model_id="faux-small")
    fresh_big = FauxModel(["d", "e"], model_id="faux-big")
    h2 = AgentHarness(session=reopened, model=fresh_default, models=[fresh_big], tools=TOOLS)
    assert h2.model is fresh_big
    assert h2.thinking_level == "high"
    assert h2.active_tools == ("beta",)

    seen: list[tuple[str, str]] = []
    for name in ("model_update", "thinking_level_update", "tools_update"):
        h2.connect(name, lambda s, event: seen.append((event.name, event.source)))
    await h2.prompt("again")
    assert seen == [
        ("model_update", "restore"),
        ("thinking_level_update", "restore"),
        ("tools_update", "restore"),
    ]
    assert fresh_big.requests and not fresh_default.requests
    await h2.prompt("and again")  # restore events fire once
    assert len(seen) == 3


async def test_a_model_the_harness_does_not_know_is_not_restored(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path)
    session = await repo.create(str(tmp_path))
    session.append_model_change("anthropic", "claude-opus-4-5")
    mine = FauxModel(["x"])
    assert AgentHarness(session=session, model=mine).model is mine


async def test_changes_while_busy_are_written_at_the_next_turn_boundary(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    started, release = asyncio.Event(), asyncio.Event()

    @tool("gate", "waits")
    async def gate(input: Mapping[str, Any], run: ToolRun) -> str:
        started.set()
        await release.wait()
        return "ok"

    first, second = (
        FauxModel([FauxReply(tool_calls=[FauxToolCall(name="gate")])]),
        FauxModel(["done"]),
    )
    h = AgentHarness(session=session, model=first, tools=[gate])
    save_points: list[bool] = []
    h.connect("save_point", lambda s, event: save_points.append(event.had_pending_writes))
    run = asyncio.create_task(h.prompt("go"))
    await started.wait()
    await h.set_model(second)
    assert not any(isinstance(e, ModelChangeEntry) for e in session.entries())  # not yet
    release.set()
    await run
    kinds = [e.message.role if isinstance(e, MessageEntry) else e.type for e in session.entries()]
    assert kinds == ["user", "assistant", "toolResult", "model_change", "assistant"]
    assert save_points == [True, False]
    assert second.requests  # the next request used the new model


async def test_bad_settings_are_refused(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    h = AgentHarness(session=session, tools=TOOLS)
    with pytest.raises(ValueError, match="thinking level"):
        await h.set_thinking_level("extreme")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown tools"):
        await h.set_active_tools(["gamma"])
    with pytest.raises(ValueError, match="unique"):
        await h.set_tools([TOOLS[0], TOOLS[0]])
    assert len(session) == 0


async def test_set_tools_and_resources_emit_updates(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    h = AgentHarness(session=session, tools=TOOLS[:1])
    updates: list[Any] = []
    h.connect("tools_update", lambda s, event: updates.append(event))
    h.connect("resources_update", lambda s, event: updates.append(event))
    await h.set_tools(TOOLS, active=["alpha"])
    skills = tmp_path / "skills" / "review"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\ndescription: Review a diff\n---\nLook for bugs.\n")
    await h.set_resources(ResourceOptions(discover=False, skill_roots=[tmp_path / "skills"]))
    tools_event, resources_event = updates
    assert tools_event.tool_names == ("alpha", "beta")
    assert tools_event.previous_tool_names == ("alpha",)
    assert tools_event.active_tool_names == ("alpha",) and tools_event.source == "set"
    assert resources_event.source == "set" and resources_event.skills == ("review",)
    last = list(session.entries())[-1]
    assert isinstance(last, ActiveToolsChangeEntry) and last.active_tool_names == ("alpha",)
