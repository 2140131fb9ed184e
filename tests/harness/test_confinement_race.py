"""A folder swapped for a symlink while read and write run: zero escapes in 5,000 tries each.

Before the kernel enforced the boundary (check with ``resolve()``, then open), 7 to 32 of 5,000
reads returned the outside file and 5 to 10 of 5,000 writes landed outside; the naive check in
this file shows the swapper really opens that window.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import ToolError, ToolResult, ToolRun, read_tool, write_tool
from hooks import JSONValue

TRIES = 5000
HOLD_S = 0.0002  # how long the paced swapper keeps each state (pacing only; nothing is timed)


def make_run(cwd: Path) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(tool_call_id="t1", cwd=cwd, on_update=on_update)


def layout(tmp_path: Path) -> tuple[Path, Path]:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "d").mkdir(parents=True)
    outside.mkdir()
    (work / "d" / "f.txt").write_text("inside")
    (outside / "f.txt").write_text("OUTSIDE")
    return work, outside


@contextmanager
def swapping(work: Path, outside: Path, *, hold_s: float = 0.0) -> Iterator[None]:
    """A thread that keeps replacing ``work/d`` with a symlink to ``outside`` and back.

    With ``hold_s`` each state lasts a little, so the tool's calls meet both even when the
    scheduler would otherwise run the swapper's whole time slice in one state.
    """
    stop = threading.Event()
    d, real = work / "d", work / "d.real"

    def clear() -> None:  # a write may have made a new d while the real one was away
        try:
            if d.is_symlink():
                d.unlink()
            elif d.exists():
                shutil.rmtree(d)
        except OSError:
            pass  # a write is filling it right now: the caller tries again

    def swap() -> None:
        while not stop.is_set():
            if hold_s:
                time.sleep(hold_s)
            os.rename(d, real)  # d is the real folder here, always
            with contextlib.suppress(FileExistsError):  # a write made a new d meanwhile
                os.symlink(outside, d)
            if hold_s:
                time.sleep(hold_s)
            while True:
                try:
                    os.rename(real, d)
                    break
                except OSError:
                    clear()

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_the_swapper_opens_the_window_a_naive_check_falls_into(tmp_path: Path) -> None:
    work, outside = layout(tmp_path)
    escapes = 0
    with swapping(work, outside):
        for _ in range(50 * TRIES):
            try:
                target = (work / "d" / "f.txt").resolve()
                if target.is_relative_to(work.resolve()) and target.read_text() == "OUTSIDE":
                    escapes += 1
                    break
            except OSError:
                continue
    assert escapes  # the race is real: the check passed, then the read went outside


async def test_no_read_escapes_while_a_folder_is_swapped_for_a_symlink(tmp_path: Path) -> None:
    work, outside = layout(tmp_path)
    read, run = read_tool(), make_run(work)
    escapes = inside = 0
    with swapping(work, outside, hold_s=HOLD_S):
        for _ in range(TRIES):
            try:
                result = await read.execute({"path": "d/f.txt"}, run)
            except ToolError:
                continue  # refused: the symlink was there, or d was being moved
            assert isinstance(result, ToolResult)
            text = result.content[0].text  # type: ignore[union-attr]
            escapes += text == "OUTSIDE"
            inside += text == "inside"
    assert escapes == 0
    assert inside > 0  # the test did read, not only get refused


async def test_no_write_lands_outside_while_a_folder_is_swapped_for_a_symlink(
    tmp_path: Path,
) -> None:
    work, outside = layout(tmp_path)
    write, run = write_tool(), make_run(work)
    written = 0
    with swapping(work, outside, hold_s=HOLD_S):
        for i in range(TRIES):
            try:
                await write.execute({"path": f"d/w{i}.txt", "content": "x"}, run)
                written += 1
            except ToolError:
                continue
    assert sorted(os.listdir(outside)) == ["f.txt"]  # nothing landed outside
    assert written > 0
    await asyncio.sleep(0)
