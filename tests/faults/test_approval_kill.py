"""Approvals that wait, with real processes killed at the worst moments: an approved call
runs at most once, whatever dies between the approval and the tool's end (issue 23). The
tool appends a line to a file, so a second run would show."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.faults

WORKER = Path(__file__).with_name("_approval_worker.py")


def worker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(WORKER),
            args[0],
            str(tmp_path / "sessions"),
            str(tmp_path),
            str(tmp_path / "log.txt"),
            *args[1:],
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def output(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


def test_a_kill_between_the_approval_and_the_tool_runs_it_once_later(tmp_path: Path) -> None:
    started = output(worker(tmp_path, "prompt"))
    assert started["stop_reason"] == "awaiting_approval"
    log = tmp_path / "log.txt"

    died = worker(tmp_path, "approve-and-die", started["path"], started["approval"])

    assert died.returncode == -signal.SIGKILL
    assert not log.exists()  # the answer is on disk; the tool never ran
    resumed = output(worker(tmp_path, "resume", started["path"]))
    assert resumed == {
        "stop_reason": "stop",
        "reply": "done: appended once",
        "results": ["appended once"],
    }
    assert log.read_text() == "once\n"
    # Once done, nothing is left to resume: the call never runs a second time.
    assert output(worker(tmp_path, "resume", started["path"])) == {"error": "nothing_to_resume"}
    assert log.read_text() == "once\n"


def test_a_kill_while_the_tool_runs_never_runs_it_again(tmp_path: Path) -> None:
    started = output(worker(tmp_path, "prompt"))
    log = tmp_path / "log.txt"
    marker = Path(f"{log}.started")
    args = [
        sys.executable,
        str(WORKER),
        "approve-and-resume",
        str(tmp_path / "sessions"),
        str(tmp_path),
        str(log),
        started["path"],
        started["approval"],
    ]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as running:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert running.poll() is None, running.stderr.read() if running.stderr else ""
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.02)
        running.send_signal(signal.SIGKILL)
        running.wait(timeout=30)
    assert log.read_text() == "once\n"

    resumed = output(worker(tmp_path, "resume", started["path"]))

    # Not run again: its result says it may have run, and the run goes on from there.
    assert log.read_text() == "once\n"
    assert resumed["stop_reason"] == "stop"
    (result,) = resumed["results"]
    assert result.startswith("Not run: this call was approved, then claimed")
    assert resumed["reply"] == f"done: {result}"
