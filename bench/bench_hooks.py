"""The added cost of one command hook per tool call, beside the cost of starting a process.

Run: .venv/bin/python bench/bench_hooks.py [--quick]   (numbers go in bench/README.md)

A hook is a process: its start dominates. Rows:
- floors: ``subprocess.run(["true"])`` (fork/exec and wait, blocking), the shell running
  ``cat > /dev/null`` with an event on stdin (a hook without the harness), and ``true``
  through asyncio (``create_subprocess_exec``), as the harness starts hooks;
- per tool call, in one turn of N calls of a no-op tool (faux model, memory store): no hook,
  then one ``PreToolUse`` command hook ``true``, ``cat > /dev/null`` (reads the event), and
  ``exit 2`` (blocks the call); each row's "added" is its time per call minus the no-hook
  row's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

from harness import (
    AgentHarness,
    CommandHooks,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    ToolRun,
    tool,
)


@tool("noop", "does nothing", {"type": "object", "properties": {}})
async def noop(input: Any, run: ToolRun) -> str:
    return "ok"


def sync_floor(argv: list[str], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run(argv, input=b'{"hook_event_name": "PreToolUse"}\n', check=True)
    return (time.perf_counter() - start) / n * 1e3


async def async_floor(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        proc = await asyncio.create_subprocess_exec("true")
        await proc.wait()
    return (time.perf_counter() - start) / n * 1e3


async def per_call_ms(command: str | None, calls: int) -> float:
    """Milliseconds per tool call of one run of ``calls`` no-op calls, with one hook."""
    settings: dict[str, Any] = {}
    if command is not None:
        settings = {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": command}]}]}}
    session = await MemorySessionRepo().create()
    reply = FauxReply(tool_calls=[FauxToolCall(name="noop", arguments={}) for _ in range(calls)])
    harness = AgentHarness(
        session=session,
        model=FauxModel([reply, "done"]),
        tools=[noop],
        resources=None,
        command_hooks=CommandHooks.from_settings(settings),
    )
    start = time.perf_counter()
    await harness.prompt("go")
    return (time.perf_counter() - start) / calls * 1e3


async def median(fn: Callable[[], Awaitable[float]], rounds: int) -> float:
    return statistics.median([await fn() for _ in range(rounds)])


async def main(quick: bool) -> None:
    calls, rounds, n = (5, 1, 20) if quick else (50, 5, 200)
    print(f"| what | ms per call | added by the hook (ms) |  (median of {rounds} rounds)")
    print("|---|---|---|")
    print(f'| floor: `subprocess.run(["true"])` | {sync_floor(["true"], n):.2f} | |')
    shell = sync_floor(["/bin/sh", "-c", "cat > /dev/null"], n)
    print(f'| floor: `subprocess.run(["/bin/sh", "-c", "cat > /dev/null"])` | {shell:.2f} | |')
    print(f'| floor: asyncio `create_subprocess_exec("true")` | {await async_floor(n):.2f} | |')
    base = await median(lambda: per_call_ms(None, calls), rounds)
    print(f"| tool call, no hook | {base:.2f} | |")
    for label, command in (
        ("tool call, one hook `true`", "true"),
        ("tool call, one hook `cat > /dev/null`", "cat > /dev/null"),
        ("tool call, one hook `exit 2` (blocks)", "exit 2"),
    ):
        took = await median(lambda c=command: per_call_ms(c, calls), rounds)  # type: ignore[misc]
        print(f"| {label} | {took:.2f} | {took - base:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few calls, one round (smoke test)")
    asyncio.run(main(parser.parse_args().quick))
