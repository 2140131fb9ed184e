"""A hook that blocks `rm -rf` in the bash tool; the model gets the reason as an error result.

Run: python examples/block_rm_rf.py
"""

from __future__ import annotations

import asyncio
import tempfile

from harness import (
    AgentHarness,
    Block,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ToolCallEvent,
    ToolResultMessage,
    bash_tool,
)


def no_rm_rf(sender: object, event: ToolCallEvent) -> Block | None:
    if event.tool_name == "bash" and "rm -rf" in str(event.input.get("command", "")):
        return Block(reason="rm -rf is not allowed here")
    return None  # no opinion: later hooks decide, and the tool runs


async def main() -> None:
    folder = tempfile.mkdtemp(prefix="harness-example-")
    session = await JsonlSessionRepo(folder).create(folder)
    model = FauxModel(
        [
            FauxReply(tool_calls=[FauxToolCall(name="bash", arguments={"command": "rm -rf /"})]),
            "All right, I will not delete anything.",
        ]
    )
    harness = AgentHarness(session=session, model=model, tools=[bash_tool()])
    harness.connect(ToolCallEvent, no_rm_rf)
    reply = await harness.prompt("Free some disk space")
    result = next(m for m in session.build_context().messages if isinstance(m, ToolResultMessage))
    print(f"tool result: is_error={result.is_error} text={result.text!r}")
    print(f"reply: {reply.text}")


if __name__ == "__main__":
    asyncio.run(main())
