"""What checkpoints add to a tool call (issue 26): the same call with and without them, side by
side in one run, taking turns.

Run: .venv/bin/python bench/bench_checkpoints.py [--rounds 30] [--quick]   (numbers go in
bench/README.md). Each row times one tool call through the tool alone and through
``Checkpoints.run`` (what the agent loop calls with checkpoints on: capture before, the call,
capture after, the checkpoint entry appended to a JSONL session), alternating, and reports the
medians and their difference, and the time each call with checkpoints spent outside the
tool's own ``execute()``, in wall time and in the calling thread's CPU time (contents a
``write``/``edit`` hands to the store's worker thread are waited for after each call,
untimed). Every ``write``/``edit`` writes new content to a file of its own side (the steady
state of an agent editing a file: the content before is the one recorded after its previous
call, the content after is new and must be read, then hashed and stored on the worker); the
"changed in between" rows write one file from both sides, so the content before is new too (a
file someone else changed since: both contents are read on the call's path).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from harness import (
    CheckpointStore,
    JsonlSessionRepo,
    Tool,
    ToolRun,
    bash_tool,
    edit_tool,
    write_tool,
)
from harness._checkpoints import Checkpoints
from hooks import JSONValue

PREFIX = "bench-checkpoints-"


def _run(cwd: Path) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(tool_call_id="bench", cwd=cwd, on_update=on_update)


async def _pair(
    checkpoints: Checkpoints,
    tool: Tool,
    cwd: Path,
    make_input: Callable[[int, str], Mapping[str, JSONValue]],
    rounds: int,
) -> tuple[float, float, float, float, float]:
    """Ms per call without and with checkpoints (medians), the median of the differences of
    each pair of calls made one after the other (the pair shares the machine's load), and the
    median time a call with checkpoints spent outside the tool's own ``execute()`` (what the
    checkpoint added to that very call: no second call's noise in it), in wall time and in
    the calling thread's CPU time (which a loaded machine's preemptions do not stretch).
    After each call with checkpoints, the contents it handed to the store's worker are waited
    for, untimed: in a run the model's next reply comes between two calls, and the worker is
    done long before."""
    plain: list[float] = []
    checked: list[float] = []
    inside: list[float] = []
    inside_cpu: list[float] = []
    run = _run(cwd)
    for i in range(rounds):
        for side in ("p", "c"):
            value = make_input(i, side)
            if side == "c":
                spent: list[float] = []

                async def execute(
                    v: Mapping[str, JSONValue] = value, spent: list[float] = spent
                ) -> object:
                    began, began_cpu = time.perf_counter(), time.thread_time()
                    try:
                        return await tool.execute(v, run)
                    finally:
                        spent.append(time.perf_counter() - began)
                        spent.append(time.thread_time() - began_cpu)

                start, start_cpu = time.perf_counter(), time.thread_time()
                # Results are dropped after the timing, on both sides: freeing an edit's
                # diff is the tool's cost, not the checkpoint's.
                result = await checkpoints.run(tool, value, run, entry_id=None, execute=execute)
                checked.append(time.perf_counter() - start)
                inside_cpu.append(time.thread_time() - start_cpu - spent[1])
                inside.append(checked[-1] - spent[0])
                del result
                await checkpoints.settle()
            else:
                start = time.perf_counter()
                result = await tool.execute(value, run)
                plain.append(time.perf_counter() - start)
                del result
    added = statistics.median(c - p for p, c in zip(plain, checked, strict=True))
    return (
        statistics.median(plain) * 1000,
        statistics.median(checked) * 1000,
        added * 1000,
        statistics.median(inside) * 1000,
        statistics.median(inside_cpu) * 1000,
    )


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=b@b", "-c", "user.name=b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _files(root: Path, count: int) -> None:
    per = 100
    for d in range(count // per):
        folder = root / f"d{d:03}"
        folder.mkdir()
        for f in range(per):
            (folder / f"f{f:03}.txt").write_text(f"file {d} {f}\n" * 20)


async def main(rounds: int, quick: bool) -> None:
    base = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    repo = JsonlSessionRepo(base / "sessions")
    rows: list[tuple[str, float, float, float, float, float]] = []

    async def measure(
        name: str,
        ws: Path,
        tool: Tool,
        make_input: Callable[[int, str], Mapping[str, JSONValue]],
    ) -> None:
        session = await repo.create(str(ws))
        checkpoints = Checkpoints(session, CheckpointStore(base / "store"), ws)
        rows.append((name, *await _pair(checkpoints, tool, ws, make_input, rounds)))
        session.close()

    files = base / "files"
    files.mkdir()
    sizes = (1_000, 100_000) if quick else (1_000, 100_000, 1_000_000)
    for size in sizes:
        line = "x" * 99 + "\n"
        body = line * (size // 100)

        def write_input(
            i: int, side: str, body: str = body, size: int = size
        ) -> Mapping[str, JSONValue]:
            return {"path": f"w{size}{side}.txt", "content": f"{i}\n{body}"}

        await measure(f"write, {size:,} bytes", files, write_tool(), write_input)
        for side in "pc":
            (files / f"e{size}{side}.txt").write_text(f"v0\n{body}")

        def edit_input(i: int, side: str, size: int = size) -> Mapping[str, JSONValue]:
            return {"path": f"e{size}{side}.txt", "oldText": f"v{i}\n", "newText": f"v{i + 1}\n"}

        await measure(f"edit, {size:,} bytes", files, edit_tool(), edit_input)

        def cold_input(
            i: int, side: str, body: str = body, size: int = size
        ) -> Mapping[str, JSONValue]:
            return {"path": f"cold{size}.txt", "content": f"{i}{side}\n{body}"}

        await measure(f"write, {size:,} bytes, changed in between", files, write_tool(), cold_input)

    count = 1_000 if quick else 10_000
    repo_ws = base / "git"
    repo_ws.mkdir()
    _files(repo_ws, count)
    _git(repo_ws, "init", "-q")
    _git(repo_ws, "add", ".")
    _git(repo_ws, "commit", "-qm", "files")
    bash = bash_tool()
    await measure(
        f"bash `true`, git repository of {count:,} files",
        repo_ws,
        bash,
        lambda i, side: {"command": "true"},
    )
    await measure(
        f"bash changing 1 file, git repository of {count:,} files",
        repo_ws,
        bash,
        lambda i, side: {"command": f"echo {i} > d000/f{side}.txt"},
    )
    plain_ws = base / "plain"
    plain_ws.mkdir()
    _files(plain_ws, 1_000)
    await measure(
        "bash `true`, plain folder of 1,000 files",
        plain_ws,
        bash,
        lambda i, side: {"command": "true"},
    )

    print(f"rounds: {rounds} calls each way; {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}")
    print()
    print(
        "| tool call | without (ms) | with checkpoints (ms) | added (ms, median of pairs) "
        "| added within the call (ms, median) | of it CPU, calling thread (ms, median) |"
    )
    print("|---|---|---|---|---|---|")
    for name, without, with_, added, within, cpu in rows:
        print(f"| {name} | {without:.3f} | {with_:.3f} | {added:.3f} | {within:.3f} | {cpu:.3f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.rounds, args.quick))
    finally:
        for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}{os.getpid()}-*"):
            shutil.rmtree(folder, ignore_errors=True)
