"""Three compactions in a row, the first after a split turn: the original Goal and its "must"
constraint survive each one (issue: the second used to keep "No prior history.", put the
split turn's context above "## Goal" and make the second question the Goal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import (
    AgentHarness,
    CompactionEntry,
    CompactionSettings,
    ExtractiveSummarizer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ToolResult,
    ToolRun,
    tool,
)

GOAL = "Port the theme loader to Python."
CONSTRAINT = "It must keep the public API unchanged."
SECOND = "Now add tests for the loader."
THIRD = "Finally write the changelog entry."


@tool("read", "reads a file", {"type": "object", "properties": {"path": {"type": "string"}}})
async def read(input: Any, run: ToolRun) -> ToolResult:
    return ToolResult(content=f"contents of {input['path']}: " + "x" * 600)


@tool("edit", "edits a file", {"type": "object", "properties": {"path": {"type": "string"}}})
async def edit(input: Any, run: ToolRun) -> ToolResult:
    return ToolResult(content="no match for oldText", is_error=True)


def _long_turn(prefix: str, files: int) -> list[FauxReply | str]:
    """One turn of several tool calls (so a small keep_recent_tokens cuts inside it)."""
    replies: list[FauxReply | str] = [
        FauxReply(
            text=f"{prefix}: reading {i}",
            tool_calls=[FauxToolCall(name="read", arguments={"path": f"{prefix}/f{i}.py"})],
        )
        for i in range(files)
    ]
    replies.append(
        FauxReply(
            text=f"{prefix}: editing",
            tool_calls=[FauxToolCall(name="edit", arguments={"path": f"{prefix}/main.py"})],
        )
    )
    replies.append(f"{prefix}: done for now")
    return replies


def _sections(summary: str) -> list[str]:
    return [line for line in summary.splitlines() if line.startswith("## ")]


async def test_goal_and_constraints_survive_three_compactions(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    h = AgentHarness(
        session=session,
        model=FauxModel([*_long_turn("one", 5), *_long_turn("two", 3), *_long_turn("three", 3)]),
        tools=[read, edit],
        summarizer=ExtractiveSummarizer(),
        compaction=CompactionSettings(enabled=False, keep_recent_tokens=250),
        resources=None,
        cwd=tmp_path,
    )
    summaries: list[str] = []
    for text in (f"{GOAL} {CONSTRAINT}", SECOND, THIRD):
        await h.prompt(text)
        entry = await h.compact()
        assert isinstance(entry, CompactionEntry)
        summaries.append(entry.summary)

    first, second, third = summaries
    # The first compaction cut inside the first (long) turn: a split-turn summary.
    assert "Turn Context (split turn)" in first
    assert GOAL in first and CONSTRAINT in first
    for summary in (second, third):
        # Goal first, the original goal before any later question, the constraint kept.
        assert _sections(summary)[0] == "## Goal"
        goal = summary.split("## Goal\n", 1)[1].split("\n## ", 1)[0]
        assert goal.splitlines()[0] == f"- {GOAL} {CONSTRAINT}"
        assert SECOND in summary  # in the Goal, or in this compaction's own split turn
        constraints = summary.split("## Constraints & Preferences\n", 1)[1].split("\n## ", 1)[0]
        assert CONSTRAINT in constraints
        assert "No prior history." not in summary
        assert "Turn Context" not in summary.split("## Goal", 1)[0]
        # A failed edit is blocked, never listed as done.
        done = summary.split("### Done", 1)[1].split("###", 1)[0]
        assert "(failed)" not in done and "main.py" not in done
        blocked = summary.split("### Blocked", 1)[1].split("## ", 1)[0]
        assert "no match for oldText" in blocked
    third_goal = third.split("## Goal\n", 1)[1].split("\n## ", 1)[0]
    assert third_goal.splitlines()[:2] == [f"- {GOAL} {CONSTRAINT}", f"- {SECOND}"]
    # And the model sees the latest summary: the context starts with it.
    context = h.session.build_context().messages
    assert GOAL in getattr(context[0], "summary", "")
