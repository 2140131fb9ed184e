"""The session file a run continues by its path is the harness's own data (review finding
12): ``harness run --session ./s.jsonl`` inside the working folder, in ``acceptEdits`` or
``bypass``, no longer lets the model's ``write``, ``edit`` or ``bash rm`` replace or remove it
unasked (the run failed with ``SessionGoneError``, or went on with a replaced file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def harness(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.pop("HARNESS_SESSIONS_DIR", None)  # only --root names the store
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("mode", "call"),
    [
        ("acceptEdits", {"write": {"path": "s.jsonl", "content": "gone\n"}}),
        ("acceptEdits", {"write": {"path": "./sub/../s.jsonl.torn", "content": "x"}}),
        ("bypass", {"edit": {"path": "s.jsonl", "oldText": "precious", "newText": "swapped"}}),
        ("bypass", {"bash": {"command": "rm s.jsonl"}}),
        ("bypass", {"bash": {"command": "mv s.jsonl old.jsonl && echo '{}' > s.jsonl"}}),
    ],
)
def test_the_session_file_in_use_is_not_changed_unasked(
    tmp_path: Path, mode: str, call: dict[str, dict[str, str]]
) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    made = harness(work, "run", "--offline", "--root", "../store", "-p", "a precious session")
    assert made.returncode == 0, made.stderr
    [stored] = (tmp_path / "store").rglob("*.jsonl")
    shutil.copyfile(stored, work / "s.jsonl")
    before = (work / "s.jsonl").read_bytes()
    [(tool, args)] = call.items()
    ran = harness(
        work,
        "run",
        "--offline",
        "--root",
        "../store",
        "--session",
        "./s.jsonl",
        "--mode",
        mode,
        "-p",
        f"@{tool} {json.dumps(args)}",
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "protected path" in ran.stdout + ran.stderr
    assert "SessionGone" not in ran.stdout + ran.stderr
    after = (work / "s.jsonl").read_bytes()
    assert after.startswith(before)  # the run appended its turn; nothing else changed
    assert len(after) > len(before)
    assert not (work / "s.jsonl.torn").exists()
    assert not (work / "old.jsonl").exists()


def test_other_files_beside_the_session_file_keep_the_mode(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    made = harness(work, "run", "--offline", "--root", "../store", "-p", "a session")
    assert made.returncode == 0, made.stderr
    [stored] = (tmp_path / "store").rglob("*.jsonl")
    shutil.copyfile(stored, work / "s.jsonl")
    call = {"path": "notes.txt", "content": "fine"}
    ran = harness(
        work,
        "run",
        "--offline",
        "--root",
        "../store",
        "--session",
        "./s.jsonl",
        "--mode",
        "acceptEdits",
        "-p",
        f"@write {json.dumps(call)}",
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (work / "notes.txt").read_text() == "fine"
