"""``harness run``, ``chat`` and ``rpc`` ended by a signal (a closed terminal, ``timeout``, a
CI limit) end cleanly: SIGTERM and SIGHUP abort what runs, so a sandboxed command is killed
and the session keeps the aborted call (review 9, finding 7: a command planting
``~/.config/git/config`` was left running, and its plant stayed; since review 11, finding 10,
the sandbox itself stops a command within 20 ms of a plant and sets it aside:
``harness/test_sandbox.py::test_a_command_that_makes_a_protected_name_is_stopped_at_once``,
and an aborted command's plants are set aside too:
``::test_an_aborted_command_has_its_protected_names_set_aside``); ``harness rpc``
ended by SIGTERM while it waits for a line exits 0, not with an abort at interpreter shutdown
(finding 8). Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness._tools.sandbox import sandbox_available

REPO_ROOT = Path(__file__).resolve().parents[2]

COMMAND = "touch STARTED; sleep 60"


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.pop("HARNESS_SESSIONS_DIR", None)
    env |= {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONIOENCODING": "utf-8",
    }
    return env


def wait_for(path: Path, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.1)


@pytest.mark.sandbox
@pytest.mark.skipif(not sandbox_available(), reason="bubblewrap missing or unable to sandbox")
@pytest.mark.parametrize(
    ("command", "signum"),
    [
        (["run"], signal.SIGTERM),
        (["run"], signal.SIGHUP),
        (["chat"], signal.SIGHUP),
        (["chat"], signal.SIGTERM),
    ],
)
def test_a_signal_mid_command_kills_it_and_keeps_the_aborted_call(
    tmp_path: Path, command: list[str], signum: int
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    args = [sys.executable, "-m", "harness.cli", *command, "--offline", "--mode", "bypass"]
    if command == ["run"]:
        args.append(f"!{COMMAND}")
    proc = subprocess.Popen(
        args,
        cwd=work,
        env=environment(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdin is not None
    if command == ["chat"]:
        proc.stdin.write(f"!{COMMAND}\n".encode())
        proc.stdin.flush()
    wait_for(work / "STARTED")
    started = time.monotonic()
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, out.decode(errors="replace")
    assert time.monotonic() - started < 50  # the 60 s command was killed, not waited for
    # the session was saved with the aborted call in it
    [stored] = (home / ".local/share/harness/sessions").rglob("*.jsonl")
    assert "sleep 60" in stored.read_text()


def test_rpc_ended_by_sigterm_while_it_waits_for_a_line_exits_0(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "rpc", "--offline"],
        cwd=work,
        env=environment(home),
        stdin=subprocess.PIPE,  # kept open: the reader thread waits in a read
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"type": "get_state", "id": "ready"}\n')
    proc.stdin.flush()
    assert b'"id":"ready"' in proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)  # stdin still open: communicate() would close it first
    assert proc.stderr is not None
    err = proc.stderr.read()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    assert proc.returncode == 0, err.decode(errors="replace")
    assert b"Fatal Python error" not in err
