"""`harness demo` end to end, in a subprocess, on real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from harness import MessageEntry, ToolResultMessage, open_session


def test_demo_blocks_redacts_forks_and_prints_the_files(tmp_path: Path) -> None:
    env = {**os.environ, "HARNESS_SESSIONS_DIR": str(tmp_path / "unused")}
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "demo", "--root", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout
    assert "hook   no_rm_rf blocks 'rm -rf build'" in out
    assert "event  tool_execution_start" in out and "event  agent_end" in out

    files = sorted((tmp_path / "demo" / "sessions").glob("*/*.jsonl"))
    assert len(files) == 2
    session_line = next(line for line in out.splitlines() if line.startswith("Session file: "))
    session_path = Path(session_line.removeprefix("Session file: "))
    fork_path = next(f for f in files if f != session_path)
    assert session_path in files

    # The secret never reached the session file: the hook patched the result before persisting.
    assert b"sk-demo" not in session_path.read_bytes()
    with open_session(session_path) as session:
        results = [
            e.message
            for e in session.entries()
            if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
        ]
        assert [r.is_error for r in results] == [True, False]
        assert "blocked by hook" in results[0].text
        assert "API_KEY=[REDACTED]" in results[1].text
        first_reply_id = session.entry_ids()[3]

    header = orjson.loads(fork_path.read_bytes().splitlines()[0])
    assert header["version"] == 3
    assert header["parentSession"] == str(session_path.resolve())
    assert fork_path.name.endswith(f"_{header['id']}.jsonl")
    with open_session(fork_path) as fork:
        assert fork.leaf_id == first_reply_id  # cut just before the second prompt
        assert len(fork) == 4
