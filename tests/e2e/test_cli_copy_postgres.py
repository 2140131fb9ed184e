"""``harness sessions copy`` to a real PostgreSQL server and back, in-process through the CLI's
entry point (``cli_in_process``): the JSONL files come back byte-identical (a damaged line
included), and a second copy adds nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from cli_in_process import run_cli

from hooks import UserMessage
from repos import JsonlSessionRepo

pytestmark = pytest.mark.postgres

REPO_ROOT = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_SESSIONS_DIR": str(tmp_path / "default-root")}
    return run_cli(["sessions", "copy", *args], env=env, cwd=REPO_ROOT)


def test_jsonl_to_postgres_and_back_is_byte_identical(tmp_path: Path, postgres_url: str) -> None:
    root = tmp_path / "jsonl"
    repo = JsonlSessionRepo(root)
    for n in range(3):  # outside an event loop, so that the copies run in-process
        s = asyncio.run(repo.create(f"/proj/{n}", session_id=f"s{n}"))
        for i in range(n * 5):
            s.append_message(UserMessage(content=f"{n}/{i} \u00e9\u0000"))
        s.set_name(f"name {n}")
        path = s.path
        s.close()
    assert path is not None
    with path.open("ab") as f:
        f.write(b'{"type":"message","id":"damaged\n')  # kept verbatim, never decoded
    first = _cli(tmp_path, "--from", f"jsonl:{root}", "--to", postgres_url)
    assert first.returncode == 0, first.stderr
    assert "3 copied, 0 resumed, 0 unchanged, 0 conflicts" in first.stdout
    second = _cli(tmp_path, "--from", f"jsonl:{root}", "--to", postgres_url)
    assert second.returncode == 0 and "0 copied, 0 resumed, 3 unchanged" in second.stdout
    back = tmp_path / "back"
    third = _cli(tmp_path, "--from", postgres_url, "--to", f"jsonl:{back}")
    assert third.returncode == 0, third.stderr
    original = {p.relative_to(root): p.read_bytes() for p in root.rglob("*.jsonl")}
    copied = {p.relative_to(back): p.read_bytes() for p in back.rglob("*.jsonl")}
    assert copied == original and len(copied) == 3
