"""Added cost per MCP tool call (issue 20): the harness's MCP tool beside the SDK's own client
call as the floor, over stdio and in-process, measured in one run, taking turns.

Rows, per transport:
- ``sdk call``: ``mcp.Client.call_tool`` on a client of our own (the floor);
- ``harness tool``: the tool the harness offers the model, ``execute`` called directly (the
  SDK call plus our timeout, result mapping and bounds);
- ``harness turn``: one whole agent turn with a batch of calls of that tool (FauxModel, memory
  session: loop, hooks, supervisor, session appends), per call, beside the same turn with a
  local tool doing nothing (``local tool turn``): what the agent loop costs any tool.

Run: .venv/bin/python bench/bench_mcp.py [--quick]   (numbers go in bench/README.md)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    SecuritySupervisor,
    StdioServer,
    ToolRun,
    tool,
)

SERVER = Path(__file__).resolve().parent / "_mcp_echo_server.py"
BATCH = 20  # tool calls in one turn


def build() -> MCPServer:
    server = MCPServer("bench")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Echo."""
        return text

    return server


@tool("echo", "local echo", {"type": "object", "properties": {"text": {"type": "string"}}})
async def local_echo(input: Mapping[str, Any], run: ToolRun) -> str:
    return str(input["text"])


async def timed(fn: Callable[[], Awaitable[object]], n: int) -> float:
    """Seconds per call over ``n`` calls."""
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n


async def turn_per_call(harness_tools: dict[str, Any], name: str, rounds: int) -> float:
    """Seconds per call of a turn of ``BATCH`` calls of ``name`` (median over rounds)."""
    times = []
    for _ in range(rounds):
        session = await MemorySessionRepo().create("/bench")
        calls = [FauxToolCall(name=name, arguments={"text": "hi"}) for _ in range(BATCH)]
        model = FauxModel([FauxReply(tool_calls=calls), "done"], chunk_size=1_000_000)
        agent = AgentHarness(
            session=session,
            model=model,
            resources=None,
            supervisor=SecuritySupervisor(setting_sources=()),
            **harness_tools,
        )
        await agent.start_mcp_servers()
        start = time.perf_counter()
        await agent.prompt("go")
        times.append((time.perf_counter() - start) / BATCH)
        await agent.shutdown()
    return statistics.median(times)


async def measure(transport: str, n: int, rounds: int) -> dict[str, float]:
    server: Any = build() if transport == "in-process" else None
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    config: Any = server if server is not None else StdioServer(sys.executable, [str(SERVER)])
    session = await MemorySessionRepo().create("/bench")
    agent = AgentHarness(session=session, mcp_servers={"bench": config}, resources=None)
    await agent.start_mcp_servers()
    mcp_tool = agent.turn_settings().tools["mcp__bench__echo"]
    run = ToolRun(tool_call_id="bench", cwd=Path("/bench"), on_update=_ignore)
    floor: list[float] = []
    ours: list[float] = []
    async with Client(server if server is not None else params, cache=None) as client:
        for _ in range(3):  # warm up both
            await client.call_tool("echo", {"text": "hi"})
            await mcp_tool.execute({"text": "hi"}, run)
        for _ in range(rounds):  # taking turns, so a slow moment hits both alike
            floor.append(await timed(lambda: client.call_tool("echo", {"text": "hi"}), n))
            ours.append(await timed(lambda: mcp_tool.execute({"text": "hi"}, run), n))
    await agent.shutdown()
    mcp_turn = await turn_per_call({"mcp_servers": {"bench": config}}, "mcp__bench__echo", rounds)
    local_turn = await turn_per_call({"tools": [local_echo]}, "echo", rounds)
    return {
        "sdk call": statistics.median(floor),
        "harness tool": statistics.median(ours),
        "harness turn": mcp_turn,
        "local tool turn": local_turn,
    }


async def _ignore(partial: object) -> None:
    return None


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls (a smoke run)")
    args = parser.parse_args()
    n, rounds = (20, 2) if args.quick else (300, 7)
    print(
        "| transport | sdk call (floor) ms | harness tool ms | added ms | harness turn ms per "
        f"call (batch of {BATCH}) | local tool turn ms per call | target (added) | met |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for transport, target in (("in-process", 1.0), ("stdio", 5.0)):
        got = await measure(transport, n, rounds)
        added = (got["harness tool"] - got["sdk call"]) * 1e3
        print(
            f"| {transport} | {got['sdk call'] * 1e3:.3f} | {got['harness tool'] * 1e3:.3f} "
            f"| {added:.3f} | {got['harness turn'] * 1e3:.3f} | {got['local tool turn'] * 1e3:.3f} "
            f"| < {target:g} ms | {'yes' if added < target else 'NO'} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
