"""Give an agent the tools of an MCP server: here an in-process server built with the mcp
SDK's own MCPServer (one tool), called by the offline faux model, gated by the supervisor.

Run: .venv/bin/python examples/mcp_in_process.py
(needs the extra: pip install 'jsonl-harness[mcp]')
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    ToolResultMessage,
)

weather = MCPServer("weather")


@weather.tool(annotations=ToolAnnotations(read_only_hint=True))
def forecast(city: str) -> str:
    """Tomorrow's weather for a city."""
    return f"Sunny in {city}, 21 °C."


async def main() -> None:
    session = await MemorySessionRepo().create(".")
    model = FauxModel(
        [
            FauxReply(
                tool_calls=[FauxToolCall(name="mcp__weather__forecast", arguments={"city": "Oslo"})]
            ),
            "Pack sunglasses.",
        ]
    )
    # The tool is read-only (its annotation), so it runs without asking; any other MCP tool
    # needs an allow rule such as "mcp__weather__forecast" or "mcp__weather", or an approver.
    agent = AgentHarness(session=session, model=model, mcp_servers={"weather": weather})
    try:
        reply = await agent.prompt("What's the weather in Oslo tomorrow?")
    finally:
        await agent.shutdown()  # stops the servers (in-process here: nothing to kill)
    for message in session.build_context().messages:
        if isinstance(message, ToolResultMessage):
            print(f"{message.tool_name}: {message.text}")
    print(reply.text)


if __name__ == "__main__":
    asyncio.run(main())
