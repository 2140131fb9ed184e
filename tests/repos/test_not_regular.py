"""Session paths and transcripts that are not regular files (issue 18, class 12): a FIFO's open
for reading waited for a writer for ever, ``/dev/zero`` was read until memory ran out. Each is
now refused before a byte is read, with ``SessionNotFoundError`` (reason: not a regular file).

Each call runs in a child process so that a call that blocks fails the test (the timeout is a
guard against a hang, nothing is measured), with real FIFOs, symlinks to devices and folders.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hooks import UserMessage
from repos import JsonlSessionRepo

CALLS = {
    "open_session": "from repos import open_session as f",
    "verify_file": "from repos._jsonl.verify import verify_file as f",
    "repair_file": "from repos._jsonl.verify import repair_file as f",
    "migrate_file": "from repos._jsonl.verify import migrate_file as f",
    "read_records": "from repos._importers.claude_code import read_records as f",
    "convert": "from repos._importers.claude_code import convert as f",
}


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,  # a guard against a hang, not a measurement
        check=False,
    )


def _make(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "x.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dev-null":
        path.symlink_to("/dev/null")
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo-behind-a-symlink":
        os.mkfifo(tmp_path / "real-fifo")
        path.symlink_to(tmp_path / "real-fifo")
    return path


KINDS = ["fifo", "dev-zero", "dev-null", "folder", "fifo-behind-a-symlink"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("call", list(CALLS))
def test_a_path_that_is_no_regular_file_is_refused_unread(
    tmp_path: Path, call: str, kind: str
) -> None:
    path = _make(tmp_path, kind)
    proc = _child(
        f"{CALLS[call]}\n"
        "from pathlib import Path\n"
        "from repos import SessionNotFoundError\n"
        "try:\n"
        f"    f(Path({str(path)!r}))\n"
        "except SessionNotFoundError as exc:\n"
        "    print('refused', exc.code)\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refused session_not_found"


@pytest.mark.parametrize("kind", KINDS)
def test_is_claude_code_says_no_without_reading(tmp_path: Path, kind: str) -> None:
    path = _make(tmp_path, kind)
    proc = _child(
        "from pathlib import Path\n"
        "from repos._importers.claude_code import is_claude_code\n"
        f"print(is_claude_code(Path({str(path)!r})))\n"
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "False"), proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_list_and_copy_skip_them_in_the_sessions_root(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "root"
    repo = JsonlSessionRepo(root)

    async def made() -> str:
        with await repo.create("/w") as session:
            session.append_message(UserMessage(content="hi"))
            return session.id

    real = asyncio.run(made())
    folder = next(root.glob("--*--"))
    _make(folder, kind).rename(folder / "2025-01-01T00-00-00-000Z_bogus.jsonl")
    proc = _child(
        "import asyncio\n"
        "from repos import JsonlSessionRepo, copy_sessions, open_line_store\n"
        f"repo = JsonlSessionRepo({str(root)!r}, list_cache=False)\n"
        "print(sorted(i.id for i in asyncio.run(repo.list())))\n"
        f"src, dst = open_line_store('jsonl:{root}'), open_line_store('sqlite:{tmp_path}/d.db')\n"
        "print(asyncio.run(copy_sessions(src, dst)).copied)\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == [f"['{real}']", f"['{real}']"]


def test_a_session_file_swapped_for_a_fifo_is_gone_not_waited_on(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")

    async def made() -> Path:
        with await repo.create("/w") as session:
            session.append_message(UserMessage(content="hi"))
            assert session.path is not None
            return session.path

    path = asyncio.run(made())
    proc = _child(
        "import os\n"
        "from repos import open_session, SessionGoneError\n"
        "from hooks import UserMessage\n"
        f"s = open_session({str(path)!r})\n"
        f"os.unlink({str(path)!r}); os.mkfifo({str(path)!r})\n"
        "try:\n"
        "    s.append_message(UserMessage(content='more'))\n"
        "except SessionGoneError as exc:\n"
        "    print('gone', exc.reason)\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in ("gone replaced", "gone deleted")
