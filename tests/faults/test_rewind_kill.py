"""A rewind killed with SIGKILL leaves every file as it was or as it should be, never
half-written (issue 26): real processes, killed at random moments of a rewind loop, by
``tests/faults/_rewind_worker.py``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workspaces import call, make_harness, record_trees, store_of, tree

from harness import AgentHarness, FauxReply, JsonlSessionRepo, open_session

pytestmark = pytest.mark.faults

WORKER = Path(__file__).with_name("_rewind_worker.py")
FILES = 24
SIZE = 128 * 1024


async def test_a_kill_during_a_rewind_never_leaves_a_half_written_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(FILES):
        (ws / f"f{i:02}.txt").write_text(f"A{i}-" * (SIZE // 5))
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    writes = [
        call("write", path=f"f{i:02}.txt", content=f"B{i}+" * (SIZE // 5))
        for i in range(FILES)
        if i % 4
    ]
    replies = [
        FauxReply(tool_calls=writes),
        FauxReply(tool_calls=[call("bash", command="rm f00.txt f04.txt && echo new > g.txt")]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    trees = record_trees(harness, ws)
    await harness.prompt("rewrite everything")
    entries = list(trees)
    a, b = entries[0], entries[-1]
    as_text = {
        key: {rel: content.decode() for rel, (content, _) in trees[entry].items()}
        for key, entry in (("a", a), ("b", b))
    }
    names = set(as_text["a"]) | set(as_text["b"])
    expected = {k: {n: v.get(n) for n in names} for k, v in as_text.items()}
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    assert session.path is not None
    session.close()

    done = subprocess.run(
        [
            sys.executable,
            str(WORKER),
            str(session.path),
            str(ws),
            a,
            b,
            str(tmp_path / "expected.json"),
            "30",
            "7",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])

    assert result["bad"] == []
    assert result["mixed"] > 0, "no kill landed inside a rewind: the test proved nothing"
    # Afterwards a rewind completes: exactly A's files, no temporary file left behind.
    again = open_session(session.path)
    last = AgentHarness(session=again, cwd=ws, checkpoints=store_of(again), resources=None)
    await last.rewind_files(a, force=True)
    assert tree(ws) == trees[a]
    again.close()


def harness_cli(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def kill_once_written(ws: Path, args: list[str | Path]) -> None:
    """Run a forced ``harness`` rewind and SIGKILL it once it has written f.txt."""
    rewind = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *map(str, args), "--force"],
        cwd=ws,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while (ws / "f.txt").read_text() != "session v1\n":
        assert rewind.poll() is None and time.monotonic() < deadline
        time.sleep(0.002)
    rewind.send_signal(signal.SIGKILL)
    rewind.wait()


async def test_a_forced_rewind_killed_midway_leaves_what_it_overwrote_recoverable(
    tmp_path: Path,
) -> None:
    # Issue 26 attack, finding 3: the rewind's entry (each file's `before`) was appended only
    # after every file was written, so a kill midway lost the user's overwritten work (no
    # entry named its blob: gc removed it, and no command could bring it back).
    ws = tmp_path / "ws"
    ws.mkdir()
    root = tmp_path / "sessions"
    session = await JsonlSessionRepo(root).create(str(ws))
    big = "for i in $(seq -w 0 59); do head -c 2000000 /dev/zero | tr '\\0' s > big$i.bin; done"
    replies = [
        FauxReply(tool_calls=[call("write", path="f.txt", content="session v1\n")]),
        FauxReply(tool_calls=[call("bash", command=big)]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    await harness.prompt("write")
    leaf = session.leaf_id
    assert session.path is not None and session.id is not None and leaf is not None
    result = session.get_entry(leaf).parent_id  # the bash call's result
    assert result is not None
    session.close()
    (ws / "f.txt").write_text("USER WORK, precious\n")
    for i in range(60):
        (ws / f"big{i:02}.bin").write_text("user\n")

    kill_once_written(ws, [*("rewind", "--root", root, session.id, result), "--files-only"])
    assert (ws / "big59.bin").read_text() == "user\n", "the kill came too late to prove anything"
    gc = harness_cli(ws, "checkpoints", "gc", "--root", root, "--min-age", "0")
    assert gc.returncode == 0, gc.stderr
    listed = harness_cli(ws, "checkpoints", "list", "--root", root, session.id)
    assert "killed midway" in listed.stdout, listed.stderr

    # Done again, the killed rewind needs no --force: the files it never reached are as it
    # found them, not changed outside the session.
    again = harness_cli(ws, "rewind", "--root", root, session.id, result, "--files-only")
    assert again.returncode == 0, again.stderr
    assert all((ws / f"big{i:02}.bin").read_bytes() == b"s" * 2_000_000 for i in range(60))
    # The rewind to the leaf it started from puts back the user's work (gc kept it), the file
    # the killed rewind wrote and those the second one wrote alike.
    undo = harness_cli(ws, "rewind", "--root", root, session.id, leaf, "--files-only")

    assert undo.returncode == 0, undo.stderr
    assert (ws / "f.txt").read_text() == "USER WORK, precious\n"
    assert all((ws / f"big{i:02}.bin").read_text() == "user\n" for i in range(60))
