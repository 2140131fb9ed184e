"""A rewind killed with SIGKILL leaves every file as it was or as it should be, never
half-written (issue 26): real processes, killed at random moments of a rewind loop, by
``tests/faults/_rewind_worker.py``."""

from __future__ import annotations

import json
import subprocess
import sys
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
