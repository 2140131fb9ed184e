"""What tracing costs a run: off (never instrumented), off again (instrumented, then
uninstrumented) and on (spans to an in-memory exporter), per turn of a faux-model run whose
every turn makes a tool call; and the HTML renderer's time on a 10,000-entry session.

Run: .venv/bin/python bench/bench_tracing.py [--turns N]   (numbers go in bench/README.md)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness import AgentHarness, FauxModel, FauxReply, FauxToolCall, MemorySessionRepo, tool
from harness._html.page import export_page
from harness.tracing import instrument
from repos import open_session


@tool("noop", "does nothing", {"type": "object", "properties": {}})
async def noop(input: dict[str, Any], run: Any) -> str:
    return "ok"


async def _run(turns: int, mode: str) -> float:
    """ms per turn of one run of ``turns`` turns."""
    session = await MemorySessionRepo().create(os.getcwd())
    replies: list[FauxReply | str] = [
        FauxReply(tool_calls=[FauxToolCall(name="noop")]) for _ in range(turns - 1)
    ]
    agent = AgentHarness(
        session=session, model=FauxModel([*replies, "done"]), tools=[noop], resources=None
    )
    instrumentation = None
    if mode != "off":
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        instrumentation = instrument(agent, tracer_provider=provider)
        if mode == "off again":
            instrumentation.uninstrument()
    start = time.perf_counter()
    await agent.prompt("go")
    elapsed = time.perf_counter() - start
    if instrumentation is not None:
        instrumentation.uninstrument()
    return elapsed * 1000 / turns


def _big_session(entries: int) -> Path:
    folder = Path(tempfile.mkdtemp())
    path = folder / "big.jsonl"
    lines = [
        '{"type":"session","version":3,"id":"big","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}'
    ]
    parent = "null"
    for i in range(entries):
        role = "user" if i % 2 == 0 else "assistant"
        body = (
            f'{{"role":"user","content":"Question **{i}** about `code`","timestamp":1}}'
            if role == "user"
            else f'{{"role":"assistant","content":[{{"type":"text","text":"Answer {i}: use '
            f'`x`.\\n\\n```python\\nprint({i})\\n```"}}],"api":"a","provider":"p","model":"m",'
            f'"usage":{{"input":1,"output":1}},"stopReason":"stop","timestamp":1}}'
        )
        lines.append(
            f'{{"type":"message","id":"e{i}","parentId":{parent},'
            f'"timestamp":"2025-01-01T00:00:00Z","message":{body}}}'
        )
        parent = f'"e{i}"'
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--entries", type=int, default=10_000)
    args = parser.parse_args()
    print(f"| tracing | ms per turn (median of 5 runs of {args.turns} turns) |")
    print("|---|---|")
    modes = ("off", "off again", "on")
    asyncio.run(_run(args.turns, "on"))  # warm-up: imports, caches
    times: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(5):  # interleaved, so drift in the machine's load hits every mode alike
        for mode in modes:
            times[mode].append(asyncio.run(_run(args.turns, mode)))
    for mode in modes:
        print(f"| {mode} | {statistics.median(times[mode]):.3f} |")
    path = _big_session(args.entries)
    with open_session(path) as session:
        start = time.perf_counter()
        page = export_page(session)
        elapsed = time.perf_counter() - start
    print(f"\nexport of {args.entries} entries: {elapsed:.2f} s, {len(page) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
