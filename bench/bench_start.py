"""How long the harness takes to start (issue 24, point 6).

Run: .venv/bin/python bench/bench_start.py [--rounds N] [--sessions N]   (numbers go in
bench/README.md)

Each command runs in a fresh interpreter, in interleaved rounds (one of each per round, so
load from other work falls on all alike); the table prints the median wall time and the median
import time ``python -X importtime`` reports (the sum of its top-level modules' cumulative
times), beside a bare interpreter (``python -c pass``) as the floor. ``harness sessions list``
lists a folder of ``--sessions`` small sessions with the list cache warm, as a user's second
``list`` is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import AssistantMessage, JsonlSessionRepo, TextContent, UserMessage

_CLI = "from harness.cli import main; import sys; sys.argv[0] = 'harness'; main()"
COMMANDS: dict[str, list[str]] = {
    "python -c pass (floor)": ["-c", "pass"],
    "import harness": ["-c", "import harness"],
    "harness --help": ["-c", _CLI, "--help"],
    "harness sessions list": ["-c", _CLI, "sessions", "list"],
}
_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$")


def import_us(stderr: str) -> int:
    """Total import time in µs: the cumulative times of the top-level (unindented) modules."""
    total = 0
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m and not m.group(2).startswith(" "):
            total += int(m.group(1))
    return total


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return time.perf_counter() - start, import_us(done.stderr)


async def make_sessions(root: Path, n: int) -> None:
    repo = JsonlSessionRepo(root)
    for i in range(n):
        with await repo.create(f"/work/project{i % 7}") as s:
            s.append_message(UserMessage(content=f"question {i}"))
            s.append_message(AssistantMessage(content=[TextContent(text=f"answer {i}")]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--sessions", type=int, default=1000)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sessions"
        asyncio.run(make_sessions(root, ns.sessions))
        env = dict(os.environ, HARNESS_SESSIONS_DIR=str(root), HARNESS_CACHE_DIR=str(Path(tmp)))
        env.pop("PYTHONPROFILEIMPORTTIME", None)
        run_once(COMMANDS["harness sessions list"], env)  # fills the list cache
        wall: dict[str, list[float]] = {k: [] for k in COMMANDS}
        imports: dict[str, list[int]] = {k: [] for k in COMMANDS}
        for _ in range(ns.rounds):
            for name, args in COMMANDS.items():
                seconds, us = run_once(args, env)
                wall[name].append(seconds)
                imports[name].append(us)
    print(f"{ns.rounds} interleaved rounds, {ns.sessions:,} sessions for list; medians")
    print()
    print("| command | wall s | imports s (-X importtime) |")
    print("|---|---|---|")
    for name in COMMANDS:
        w = statistics.median(wall[name])
        i = statistics.median(imports[name]) / 1e6
        print(f"| {name} | {w:.3f} | {i:.3f} |")


if __name__ == "__main__":
    main()
