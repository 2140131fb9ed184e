"""Cost of the event bus per event, and of the agent loop per turn (faux model).

Run: .venv/bin/python bench/bench_events.py   (numbers go in bench/README.md)
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MemorySessionRepo,
    ToolCallEvent,
    ToolRun,
    TurnStartEvent,
    connect,
    emit_tool_call,
    notify,
    tool,
)


class Sender:
    """Stands in for a harness (any weak-referenceable object)."""


async def per_call_us(fn: Callable[[], Awaitable[object]], n: int) -> float:
    """Median over 5 rounds of the time per call, in microseconds."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            await fn()
        rounds.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(rounds)


async def bus_us(receivers: int, n: int = 20_000) -> tuple[float, float]:
    """µs per event with ``receivers`` no-op sync receivers of each signal: a ``turn_start``
    observer's dispatch and a ``tool_call`` hook's (median of 5 rounds of ``n``).
    ``bench/bench_storage.py`` takes issue 24's bus row from here."""
    sender = Sender()
    disconnects = [
        connect("turn_start", lambda s, event: None, sender=sender) for _ in range(receivers)
    ]
    disconnects += [
        connect("tool_call", lambda s, event: None, sender=sender) for _ in range(receivers)
    ]
    turn = TurnStartEvent(turn_index=0)
    call = ToolCallEvent(tool_call_id="t", tool_name="bash", input={"c": 1}, turn_index=0)
    try:
        observer = await per_call_us(lambda s=sender, e=turn: notify(s, e), n)  # type: ignore[misc]
        hook = await per_call_us(lambda s=sender, e=call: emit_tool_call(s, e), n)  # type: ignore[misc]
    finally:
        for disconnect in disconnects:
            disconnect()
    return observer, hook


async def bench_bus() -> None:
    print("| event | receivers | µs per event |")
    print("|---|---|---|")
    for receivers in (0, 1, 10):
        observer, hook = await bus_us(receivers)
        print(f"| turn_start (observer) | {receivers} | {observer:.2f} |")
        print(f"| tool_call (hook) | {receivers} | {hook:.2f} |")


@tool("noop", "does nothing")
async def noop(input: Mapping[str, Any], run: ToolRun) -> str:
    return "ok"


async def bench_loop() -> None:
    print("\n| session store | turns in one run | ms per turn (loop + store + faux, no fsync) |")
    print("|---|---|---|")
    for label, turns in (("memory", 20), ("jsonl", 20), ("memory", 200), ("jsonl", 200)):
        results = []
        for _ in range(3):
            repo: Any = (
                MemorySessionRepo()
                if label == "memory"
                else JsonlSessionRepo(tempfile.mkdtemp(), fsync="never")
            )
            session = await repo.create("/bench")
            replies: list[FauxReply | str] = [
                FauxReply(tool_calls=[FauxToolCall(name="noop")]) for _ in range(turns - 1)
            ]
            model = FauxModel([*replies, "done"], chunk_size=1_000_000)
            harness = AgentHarness(session=session, model=model, tools=[noop])
            start = time.perf_counter()
            await harness.prompt("go")
            results.append((time.perf_counter() - start) / turns * 1e3)
        print(f"| {label} | {turns} | {statistics.median(results):.3f} |")


async def main() -> None:
    await bench_bus()
    await bench_loop()


if __name__ == "__main__":
    asyncio.run(main())
