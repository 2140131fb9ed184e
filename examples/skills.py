"""Offer skills to a model that loads one when the task calls for it (progressive disclosure).

A project folder gets two skills in `.agents/skills/`; the faux model is shown a one-line
catalog, calls the built-in `skill` tool for `release-notes`, and answers following its body.
The catalog and the body are journaled in the session, so reopening it later reads back what
the model was given. Then one skill is run directly with `run_skill`, in a child session.

Run: .venv/bin/python examples/skills.py   (offline: the scripted faux model)
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from harness import (
    SKILL_BODY_TYPE,
    SKILL_CATALOG_TYPE,
    AgentHarness,
    CustomEntry,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ToolResultMessage,
)

SKILLS = {
    "release-notes": (
        "Write release notes from a list of changes",
        "Group the changes under Added, Fixed and Removed. One line each, past tense.",
    ),
    "triage": ("Label and prioritise a bug report", "Ask for a reproduction first."),
}


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="harness-skills-") as folder:  # removed at the end
        project = Path(folder)
        (project / ".git").mkdir()  # the repository root: discovery stops here
        for name, (description, body) in SKILLS.items():
            folder = project / ".agents" / "skills" / name
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(f"---\ndescription: {description}\n---\n{body}\n")

        session = await JsonlSessionRepo(project / "sessions").create(str(project))
        model = FauxModel(
            [
                FauxReply(
                    tool_calls=[FauxToolCall(name="skill", arguments={"name": "release-notes"})]
                ),
                "Added: a skills catalog. Fixed: nothing yet.",
                "Reproduction first, please.",
            ]
        )
        agent = AgentHarness(session=session, model=model, cwd=project)  # discovers from its cwd
        reply = await agent.prompt("Write the release notes for: skills catalog")

        catalog = [
            line for line in model.requests[0].system_prompt.splitlines() if line[:2] == "- "
        ]
        print("catalog:", *catalog, sep="\n  ")
        result = next(
            m for m in session.build_context().messages if isinstance(m, ToolResultMessage)
        )
        print("skill tool served:", result.details)
        print("reply:", reply.text)
        journaled = [e.custom_type for e in session.entries() if isinstance(e, CustomEntry)]
        print("journaled:", journaled == [SKILL_CATALOG_TYPE, SKILL_BODY_TYPE])

        run = await agent.run_skill("triage", "Bug: the app crashes on start")
        print(f"run_skill {run.skill}: {run.reply.text} (child session {run.session_id[:8]}...)")
        session.close()


if __name__ == "__main__":
    asyncio.run(main())
