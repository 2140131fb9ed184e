"""Child process for the rewind kill test (run as a script, never imported by pytest).

``_rewind_worker.py SESSION WS A B EXPECTED ROUNDS SEED``: import once, time one rewind cycle,
then ROUNDS times fork a child that opens the session and rewinds the files of WS to entry A,
then B, then A, ... (forced: a killed rewind leaves files its entry does not record) until it
is killed with SIGKILL after a random delay. After each kill every recorded file must hold the
bytes it has at A or at B (EXPECTED: a JSON file ``{"a": {path: text|null}, "b": {...}}``),
and any other file must be a rewind's temporary file in the folder of one of those names.
Prints one JSON line: ``{"rounds", "mixed" (kills that left some files at A and some at B),
"bad" (violations)}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sys
import time
from pathlib import Path

from harness import AgentHarness, CheckpointStore, open_session


def store(session_path: str) -> CheckpointStore:
    """The store of the sessions root the session lies in (the test's ``make_harness``)."""
    return CheckpointStore(Path(session_path).parent.parent / ".checkpoints")


def child(session_path: str, ws: str, a: str, b: str) -> None:
    async def loop() -> None:
        session = open_session(Path(session_path))
        harness = AgentHarness(
            session=session, cwd=ws, checkpoints=store(session_path), resources=None
        )
        while True:
            for target in (a, b):
                await harness.rewind_files(target, force=True)

    asyncio.run(loop())


def one_cycle(session_path: str, ws: str, a: str, b: str) -> float:
    async def cycle() -> float:
        session = open_session(Path(session_path))
        harness = AgentHarness(
            session=session, cwd=ws, checkpoints=store(session_path), resources=None
        )
        started = time.perf_counter()
        await harness.rewind_files(a, force=True)
        await harness.rewind_files(b, force=True)
        session.close()
        return time.perf_counter() - started

    return asyncio.run(cycle())


def check(ws: Path, expected: dict[str, dict[str, str | None]]) -> tuple[list[str], str]:
    """Violations, and which state the files are in: ``a``, ``b`` or ``mixed``."""
    bad = []
    at: set[str] = set()
    names = set(expected["a"]) | set(expected["b"])
    # A rewind's temporary files (rewind.py) lie in the folders of the files it writes.
    temp = re.compile(r"\.harness-rewind\.[0-9a-f]{16}\.[0-9a-f]{32}\.tmp")
    folders = {os.path.dirname(n) for n in names}
    for folder, _, files in os.walk(ws):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), ws)
            if rel in names:
                continue
            if temp.fullmatch(name) is None or os.path.dirname(rel) not in folders:
                bad.append(f"unexpected file {rel}")
    for rel in sorted(names):
        path = ws / rel
        now = path.read_text() if path.exists() else None
        states = [k for k in ("a", "b") if expected[k].get(rel) == now]
        if not states:
            bad.append(f"{rel} is neither as at A nor as at B: {now!r:.40}")
        elif len(states) == 1:
            at.add(states[0])
    return bad, ("mixed" if len(at) > 1 else at.pop() if at else "a")


def main() -> None:
    session_path, ws, a, b, expected_path, rounds, seed = sys.argv[1:8]
    expected = json.loads(Path(expected_path).read_text())
    rng = random.Random(int(seed))
    cycle = one_cycle(session_path, ws, a, b)
    mixed = 0
    bad: list[str] = []
    for _ in range(int(rounds)):
        pid = os.fork()
        if pid == 0:
            try:
                child(session_path, ws, a, b)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, 2.0 * cycle))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        problems, where = check(Path(ws), expected)
        bad.extend(problems)
        mixed += where == "mixed"
    print(json.dumps({"rounds": int(rounds), "mixed": mixed, "bad": bad, "cycle_s": cycle}))


if __name__ == "__main__":
    main()
