"""``harness sessions copy`` run for real in a subprocess: JSONL to SQLite and back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from cli_in_process import run_cli

from hooks import UserMessage
from repos import JsonlSessionRepo

REPO_ROOT = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """``harness sessions copy ARGS...``: in-process through the CLI's entry point
    (``cli_in_process``), or with ``process`` in a real process."""
    env = {**os.environ, "HARNESS_SESSIONS_DIR": str(tmp_path / "default-root")}
    if not process:
        return run_cli(["sessions", "copy", *args], env=env, cwd=REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "sessions", "copy", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


def test_copy_round_trip_is_byte_identical_and_a_second_copy_adds_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "jsonl"
    repo = JsonlSessionRepo(root)
    for n in range(3):  # outside an event loop, so that the copies run in-process
        s = asyncio.run(repo.create(f"/proj/{n}", session_id=f"s{n}"))
        for i in range(n * 5):
            s.append_message(UserMessage(content=f"{n}/{i}"))
        s.close()
    db = tmp_path / "all.db"
    first = _cli(tmp_path, "--from", f"jsonl:{root}", "--to", f"sqlite:{db}")
    assert first.returncode == 0, first.stderr
    assert "3 copied, 0 resumed, 0 unchanged, 0 conflicts" in first.stdout
    second = _cli(tmp_path, "--from", f"jsonl:{root}", "--to", f"sqlite:{db}")
    assert second.returncode == 0 and "0 copied, 0 resumed, 3 unchanged" in second.stdout
    assert "0 lines written" in second.stdout
    back = tmp_path / "back"
    third = _cli(tmp_path, "--from", f"sqlite:{db}", "--to", f"jsonl:{back}")
    assert third.returncode == 0, third.stderr
    original = {p.relative_to(root): p.read_bytes() for p in root.rglob("*.jsonl")}
    copied = {p.relative_to(back): p.read_bytes() for p in back.rglob("*.jsonl")}
    assert copied == original and len(copied) == 3


def test_copy_refuses_an_unknown_store(tmp_path: Path) -> None:
    result = _cli(tmp_path, "--from", "ftp:x", "--to", f"sqlite:{tmp_path / 'x.db'}", process=True)
    assert result.returncode == 2 and "unknown scheme 'ftp'" in result.stderr
