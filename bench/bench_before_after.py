"""Two checkouts of the project side by side in one run: did a change slow the hot paths?

Usage (from the repository root):

    .venv/bin/python bench/bench_before_after.py --before DIR [--after DIR] [--rounds 7]

``DIR`` is a checkout of the project (e.g. ``git worktree add /tmp/before <rev>``); ``--after``
defaults to this repository. Each row is measured by a fresh worker process that imports the
packages of one checkout (``PYTHONPATH``) and times one operation a few times after an untimed
call; the two checkouts take turns, round after round, so drifting machine speed hits both alike.
It prints each row's median per checkout and their ratio (after / before).

Rows, the same work as their namesakes in ``bench_events.py`` and ``bench_storage.py``:

* ``loop``: one prompt whose faux model calls a no-op tool every turn, 200 turns, JSONL store,
  ``fsync="never"``; ms per turn (bench_events' loop row).
* ``open``: ``open_session`` of the 100k-entry workload file; ms (bench_storage's open row).
* ``append``: 10,000 ``append_message`` calls on a new JSONL session, no fsync; ms (bench_storage's
  append row).

The workload comes from ``bench/gen_workload.py`` (full profile, made on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROWS = ("loop", "open", "append")
REPEATS = 3  # timed calls per worker, after one untimed call


def _worker(row: str, data: Path) -> list[float]:
    """Runs inside the worker process, with the checkout's packages on the path."""
    import asyncio

    import orjson

    if row == "open":
        from repos import open_session

        path = data / "s100k.jsonl"

        def once() -> None:
            open_session(path, fsync="never").close()

        return _timed(once)
    if row == "append":
        from repos import JsonlSessionRepo, decode_message

        messages = []
        with open(data / "appendsrc.jsonl", "rb") as f:
            next(f)
            for line in f:
                obj = orjson.loads(line)
                if obj.get("type") == "message":
                    messages.append(decode_message(obj["message"]))
        messages = [messages[i % len(messages)] for i in range(10_000)]
        repo = JsonlSessionRepo(tempfile.mkdtemp(), fsync="never")

        def once() -> None:
            session = asyncio.run(repo.create("/bench"))
            for message in messages:
                session.append_message(message)
            session.close()
            assert session.path is not None
            os.unlink(session.path)

        return _timed(once)
    if row == "loop":
        from harness import (
            AgentHarness,
            FauxModel,
            FauxReply,
            FauxToolCall,
            JsonlSessionRepo,
            ToolRun,
            tool,
        )

        @tool("noop", "does nothing")
        async def noop(input: Any, run: ToolRun) -> str:
            return "ok"

        turns = 200

        async def prompt() -> None:
            repo = JsonlSessionRepo(tempfile.mkdtemp(), fsync="never")
            session = await repo.create("/bench")
            replies: list[Any] = [
                FauxReply(tool_calls=[FauxToolCall(name="noop")]) for _ in range(turns - 1)
            ]
            model = FauxModel([*replies, "done"], chunk_size=1_000_000)
            harness = AgentHarness(session=session, model=model, tools=[noop], cwd="/tmp")
            await harness.prompt("go")

        return [t / turns for t in _timed(lambda: asyncio.run(prompt()))]
    raise SystemExit(f"unknown row {row!r}")


def _timed(fn: Any) -> list[float]:
    fn()  # untimed: imports, caches, page cache
    out = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e3)
    return out


def _measure(checkout: Path, row: str, data: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", row, "--data", str(data)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),  # never this checkout's folder on the path by accident
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout} {row} failed:\n{done.stderr}")
    result = json.loads(done.stdout)
    if result["from"] != str(checkout / "repos" / "__init__.py"):
        raise SystemExit(f"the worker imported {result['from']}, not {checkout}")
    return float(statistics.median(result["ms"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--before", type=Path)
    ap.add_argument("--after", type=Path, default=HERE.parent)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--data", type=Path)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        import repos

        ms = _worker(a.worker, a.data)
        print(json.dumps({"ms": ms, "from": repos.__file__}))
        return
    if a.before is None:
        ap.error("--before DIR is required")
    data = a.data
    if data is None:
        made = subprocess.run(
            [sys.executable, str(HERE / "gen_workload.py"), "--profile", "full"],
            capture_output=True,
            text=True,
            check=True,
        )
        data = Path(made.stdout.strip().splitlines()[-1])
    rows = a.rows.split(",")
    checkouts = {"before": a.before.resolve(), "after": a.after.resolve()}
    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(a.rounds):
        order = list(checkouts.items())
        if round_ % 2:  # who goes first alternates
            order.reverse()
        for row in rows:
            for name, checkout in order:
                times.setdefault((row, name), []).append(_measure(checkout, row, data))
        print(f"round {round_ + 1}/{a.rounds} done", file=sys.stderr)
    print(f"before: {checkouts['before']}\nafter:  {checkouts['after']}")
    print(f"{a.rounds} rounds, each a fresh process per row and checkout, median of {REPEATS}\n")
    print("| row | unit | before | after | after / before | spread of the ratio by round |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        before, after = times[(row, "before")], times[(row, "after")]
        ratios = sorted(b / a for a, b in zip(before, after, strict=True))
        unit = "ms per turn" if row == "loop" else "ms"
        print(
            f"| {row} | {unit} | {statistics.median(before):.3f} | {statistics.median(after):.3f} "
            f"| {statistics.median(after) / statistics.median(before):.2f} "
            f"| {ratios[0]:.2f}-{ratios[-1]:.2f} |"
        )


if __name__ == "__main__":
    main()
