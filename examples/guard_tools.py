"""A hook that blocks `rm -rf` in the bash tool and rewrites where the write tool writes.

Run: .venv/bin/python examples/guard_tools.py   (offline: the scripted faux model asks for both)
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from harness import (
    AgentHarness,
    Block,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    PatchInput,
    SecuritySupervisor,
    ToolCallEvent,
    ToolResultMessage,
    bash_tool,
    write_tool,
)


def guard(sender: object, event: ToolCallEvent) -> Block | PatchInput | None:
    if event.tool_name == "bash" and "rm -rf" in str(event.input.get("command", "")):
        return Block(reason="rm -rf is not allowed here")
    if event.tool_name == "write":
        # Keep the agent's files in drafts/: the tool runs with the patched input.
        name = Path(str(event.input["path"])).name
        return PatchInput(input={**event.input, "path": f"drafts/{name}"})
    return None  # no opinion: later hooks decide, and the tool runs


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="harness-example-") as folder:  # removed at the end
        workdir = Path(folder)
        session = await JsonlSessionRepo(workdir / "sessions").create(str(workdir))
        model = FauxModel(
            [
                FauxReply(
                    tool_calls=[
                        FauxToolCall(name="bash", arguments={"command": "rm -rf /"}),
                        FauxToolCall(
                            name="write", arguments={"path": "report.md", "content": "# Hi"}
                        ),
                    ]
                ),
                "Done: I did not delete anything, and the report is written.",
            ]
        )
        # accept_edits: the supervisor approves writes inside the working folder (hooks run first).
        harness = AgentHarness(
            session=session,
            model=model,
            tools=[bash_tool(), write_tool()],
            supervisor=SecuritySupervisor(mode="accept_edits"),
            cwd=workdir,
        )
        harness.connect(ToolCallEvent, guard)
        await harness.prompt("Clean up, then write a report")
        for message in session.build_context().messages:
            if isinstance(message, ToolResultMessage):
                print(f"{message.tool_name}: is_error={message.is_error} {message.text}")
        print("files:", sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*.md")))


if __name__ == "__main__":
    asyncio.run(main())
