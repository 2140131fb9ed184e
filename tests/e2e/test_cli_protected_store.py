"""The CLI protects the sessions store it was given (review 3, finding 04): with ``--root``
inside the working folder, ``accept_edits`` no longer approves the model's write over an
earlier session file, nor its checkpoint store, and a ``grep`` of the folder leaves them out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def harness(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.pop("HARNESS_SESSIONS_DIR", None)  # only --root names the store
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_the_root_store_inside_the_working_folder_is_not_written(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    harness(work, "run", "--offline", "--root", "store", "-p", "an earlier, precious session")
    [earlier] = (work / "store").rglob("*.jsonl")
    before = earlier.read_text()
    rel = str(earlier.relative_to(work))
    blob = "store/.checkpoints/objects/ab/cdef"
    for call in [
        f"@write {json.dumps({'path': rel, 'content': 'gone'})}",
        f"@write {json.dumps({'path': blob, 'content': 'planted'})}",
        f"@bash {json.dumps({'command': f'rm {rel}'})}",
    ]:
        ran = harness(work, "run", "--offline", "--root", "store", "--mode", "bypass", "-p", call)
        assert "protected path" in ran.stdout + ran.stderr
    assert earlier.read_text() == before
    assert not (work / blob).exists()
    found = harness(
        work,
        "run",
        "--offline",
        "--root",
        "store",
        "-p",
        f"@grep {json.dumps({'pattern': 'precious', 'path': '.'})}",
    )
    assert earlier.name not in found.stdout
