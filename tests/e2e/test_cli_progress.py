"""Progress for long work (import, export, verify/repair of a large file, compaction): drawn on
stdout only when it is a terminal. Each command runs twice for real: under a pseudo-terminal
(``pty.openpty``, 120 columns), where the bar or spinner appears, and with pipes, where nothing
of it does.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from claude_code_transcripts import small_transcript, write

from hooks import AssistantMessage, TextContent, UserMessage
from repos import JsonlSessionRepo


def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HARNESS_SESSIONS_DIR": str(tmp_path / "default-root"),
        "TERM": "xterm-256color",
        "COLUMNS": "120",
    }


def in_terminal(tmp_path: Path, *args: str | Path) -> str:
    """Run ``harness ARGS`` with stdin, stdout and stderr on a new pseudo-terminal; return
    everything it wrote there (exit code 0 checked)."""
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env(tmp_path),
        cwd=tmp_path,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    screen = b"".join(chunks).decode(errors="replace")
    assert proc.wait(timeout=120) == 0, screen
    return screen


def piped(tmp_path: Path, *args: str | Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env(tmp_path),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


def big_session(root: Path, megabytes: float = 1.5) -> str:
    """A session file over 1 MiB (the size from which verify and repair draw a bar)."""

    async def build() -> str:
        with await JsonlSessionRepo(root).create("/work/progress") as s:
            text = "x" * 50_000
            for n in range(int(megabytes * 1_000_000 / 100_000) + 1):
                s.append_message(UserMessage(content=f"{n} {text}"))
                s.append_message(AssistantMessage(content=[TextContent(text=f"{n} {text}")]))
            return s.id

    return asyncio.run(build())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def test_import_shows_a_bar_counting_transcripts(tmp_path: Path, root: Path) -> None:
    folder = tmp_path / "cc"
    write(folder / "one.jsonl", small_transcript())
    write(folder / "two.jsonl", small_transcript())
    screen = in_terminal(tmp_path, "import", "claude-code", folder, "--root", root / "a")
    assert "importing transcripts" in screen
    assert "/2" in screen  # the count: done/total
    quiet = piped(tmp_path, "import", "claude-code", folder, "--root", root / "b")
    assert "importing transcripts" not in quiet
    assert "1 imported, 0 extended, 1 already imported" in quiet  # one session id in both


def test_export_shows_a_bar_counting_entries(tmp_path: Path, root: Path) -> None:
    session_id = big_session(root, megabytes=0.3)
    screen = in_terminal(tmp_path, "export", "--root", root, session_id, "-o", tmp_path / "a.html")
    assert "exporting html" in screen and "/8" in screen
    quiet = piped(tmp_path, "export", "--root", root, session_id, "-o", tmp_path / "b.html")
    assert "exporting" not in quiet
    assert (tmp_path / "a.html").stat().st_size == (tmp_path / "b.html").stat().st_size


def test_verify_and_repair_of_a_large_file_show_a_bar(tmp_path: Path, root: Path) -> None:
    session_id = big_session(root)
    (path,) = root.glob(f"*/*_{session_id}.jsonl")
    assert path.stat().st_size > 1 << 20
    screen = in_terminal(tmp_path, "sessions", "verify", "--root", root, session_id)
    assert f"verifying {path.name}" in screen and "ok: " in screen
    assert "verifying" not in piped(tmp_path, "sessions", "verify", "--root", root, session_id)
    screen = in_terminal(tmp_path, "sessions", "repair", "--root", root, session_id, "--dry-run")
    assert f"repairing {path.name}" in screen
    quiet = piped(tmp_path, "sessions", "repair", "--root", root, session_id, "--dry-run")
    assert "repairing" not in quiet


def test_compaction_shows_a_spinner_with_counts(tmp_path: Path, root: Path) -> None:
    shown, quiet_one = big_session(root, megabytes=0.3), big_session(root, megabytes=0.3)
    args = ("sessions", "compact", "--root", root, "--offline", "--keep-recent-tokens", "100")
    screen = in_terminal(tmp_path, *args, shown)
    assert "summarising 8 messages" in screen and "compaction " in screen
    quiet = piped(tmp_path, *args, quiet_one)
    assert "summarising" not in quiet and quiet.startswith("compaction ")
