"""How long the harness takes to start (issue 24, point 6).

Run: .venv/bin/python bench/bench_start.py [--rounds N] [--sessions N] [--before DIR]
(numbers go in bench/README.md)

Each command runs in a fresh interpreter, in interleaved rounds (one of each per round, so
load from other work falls on all alike); the table prints the median wall time, CPU time
(user + system of the child: less moved by other work on the machine than wall time) and the
import time ``python -X importtime`` reports (the sum of its top-level modules' cumulative
times), beside a bare interpreter (``python -c pass``) as the floor. ``--before DIR``: also
time the source tree ``DIR`` (e.g. ``git archive`` of an older commit, put first on
``PYTHONPATH``) in the same rounds. ``harness sessions list``
lists a folder of ``--sessions`` small sessions with the list cache warm, as a user's second
``list`` is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
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


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds and CPU seconds of one plain run, and import µs of one run under
    ``-X importtime`` (apart: its logging costs time of its own)."""
    cmd = [sys.executable, *args]
    cpu = _cpu()
    start = time.perf_counter()
    # cwd: a folder holding no package (with -c, the cwd comes first on sys.path).
    subprocess.run(cmd, capture_output=True, env=env, cwd="/", timeout=120, check=True)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=120,
        check=True,
    )
    return wall, cpu, import_us(done.stderr)


async def make_sessions(root: Path, n: int) -> None:
    repo = JsonlSessionRepo(root)
    for i in range(n):
        with await repo.create(f"/work/project{i % 7}") as s:
            s.append_message(UserMessage(content=f"question {i}"))
            s.append_message(AssistantMessage(content=[TextContent(text=f"answer {i}")]))


Medians = dict[tuple[str, str], tuple[float, float, float]]
"""(tree, command) -> median wall s, CPU s and import s (``-X importtime``)."""


async def measure(rounds: int, sessions: int, before: Path | None = None) -> Medians:
    """Every command of :data:`COMMANDS` (tree "now", and "before" given ``before``, an
    absolute path: the children run in ``/``) in ``rounds`` interleaved rounds, ``harness
    sessions list`` over ``sessions`` small sessions with the list cache warm; the medians.
    ``bench/bench_storage.py`` takes issue 24's start-up rows from here."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sessions"
        await make_sessions(root, sessions)
        env = dict(os.environ, HARNESS_SESSIONS_DIR=str(root), HARNESS_CACHE_DIR=str(Path(tmp)))
        env.pop("PYTHONPROFILEIMPORTTIME", None)
        trees = {"now": env}
        if before is not None:
            trees["before"] = dict(env, PYTHONPATH=str(before))
        run_once(COMMANDS["harness sessions list"], env)  # fills the list cache
        rows = [(tree, name) for name in COMMANDS for tree in trees]
        samples: dict[tuple[str, str], list[tuple[float, float, int]]] = {r: [] for r in rows}
        for _ in range(rounds):
            for tree, name in rows:
                samples[tree, name].append(run_once(COMMANDS[name], trees[tree]))
    out: Medians = {}
    for row, got in samples.items():
        wall, cpu, us = (statistics.median(s[k] for s in got) for k in range(3))
        out[row] = (wall, cpu, us / 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--before", type=Path, help="an older source tree to time too")
    ns = parser.parse_args()
    before = ns.before.resolve() if ns.before is not None else None
    medians = asyncio.run(measure(ns.rounds, ns.sessions, before))
    print(f"{ns.rounds} interleaved rounds, {ns.sessions:,} sessions for list; medians")
    print()
    print("| command | code | wall s | CPU s | imports s (-X importtime) |")
    print("|---|---|---|---|---|")
    for (tree, name), (wall, cpu, imports) in medians.items():
        print(f"| {name} | {tree} | {wall:.3f} | {cpu:.3f} | {imports:.3f} |")


if __name__ == "__main__":
    main()
