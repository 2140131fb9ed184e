"""The chat commands and flags users bring from pi and Claude Code, run for real: ``/new``,
``/clear``, ``/resume`` (with its picker), ``/cost``, ``/status``, ``/permissions`` (and revoke),
a forced ``/compact``, pi's ``/fork ENTRY`` from a user message (``--at`` keeps the old
behaviour), ``-c``, and ``--resume`` without an id: a picker on a terminal (pexpect), an error
otherwise. Chats are piped (plain lines, answers included) on the scripted offline model."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from hooks import UserMessage
from repos import CompactionEntry, MessageEntry, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 90
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\r")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base.update(
        HARNESS_SESSIONS_DIR=str(tmp_path / "default-root"),
        HARNESS_CHAT_HISTORY=str(tmp_path / "state" / "history"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm-256color",
        PYTHONIOENCODING="utf-8",
        PYTHONPATH=str(REPO_ROOT),
    )
    return base


def chat(
    env: dict[str, str], work: Path, root: Path, lines: list[str], *args: str
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "chat", "--offline", "--root", str(root), *args],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=work,
        timeout=TIMEOUT_S * 2,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    return proc


def sessions(root: Path) -> dict[str, Path]:
    found = {}
    for path in root.glob("*/*.jsonl"):
        with open_session(path) as session:
            found[session.id] = path
    return found


def users(path: Path) -> list[str]:
    with open_session(path) as session:
        return [
            e.message.text
            for e in session.get_branch()
            if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
        ]


def test_cost_status_permissions_compact_new_clear_and_resume(
    env: dict[str, str], work: Path, root: Path
) -> None:
    proc = chat(
        env,
        work,
        root,
        [
            "hello",
            "!echo 41",
            "always",  # approve-always: remembered in the session
            "/permissions",
            "/permissions revoke bash(echo 41)",
            "!echo 41",
            "n",  # asked again after the revoke
            "/cost",
            "/status",
            "/compact keep the numbers",
            "/new",
            "in the new one",
            "/clear",
            "/resume",
            "2",  # the picker lists the other sessions, newest first
            "/exit",
        ],
    )
    out = proc.stdout
    assert "always bash(echo 41)  [this session; /permissions revoke bash(echo 41)]" in out
    assert "revoked bash(echo 41): it is asked again" in out
    assert out.count("allow bash(echo 41)? [y]es / [n]o / [a]lways:") == 2
    assert re.search(r"session \S+: 5 replies; tokens: \d+ input, \d+ output", out)
    assert "model: faux/offline; thinking: off" in out and "permission mode: default" in out
    assert re.search(r"compaction \S+: \d+ -> 2 messages in context", out)  # forced: short
    assert out.count("new session ") >= 2 and "(the last one," in out
    found = sessions(root)
    assert len(found) == 3  # the first, /new's and /clear's
    first = next(p for p in found.values() if users(p)[:1] == ["hello"])
    with open_session(first) as session:
        assert any(isinstance(e, CompactionEntry) for e in session.entries())
    resumed = re.search(r"resumed session (\S+)", out)
    assert resumed is not None and found[resumed.group(1)] == first


def test_fork_of_a_user_message_is_pis(env: dict[str, str], work: Path, root: Path) -> None:
    chat(env, work, root, ["one", "two", "/exit"])
    [path] = sessions(root).values()
    with open_session(path) as session:
        entries = [e for e in session.get_branch() if isinstance(e, MessageEntry)]
        second = next(e.id for e in entries if getattr(e.message, "text", "") == "two")
        sid = session.id
    out = chat(env, work, root, [f"/fork {second}", "two, edited", "/exit"], "--session", sid)
    # The fork ends before the message; its text is offered again at the prompt.
    assert f"forked {sid} before {second} into" in out.stdout
    assert "(to edit and resend: two)" in out.stdout
    forks = [p for p in sessions(root).values() if p != path]
    assert [users(p) for p in forks] == [["one", "two, edited"]]
    at = chat(env, work, root, [f"/fork {second} --at", "/exit"], "--session", sid)
    assert f"forked {sid} at {second} into" in at.stdout
    assert "to edit and resend" not in at.stdout
    newest = [p for p in sessions(root).values() if p != path and p not in forks]
    assert [users(p) for p in newest] == [["one", "two"]]
    assert users(path) == ["one", "two"]  # the source is never changed


def test_continue_goes_on_in_the_newest_session(
    env: dict[str, str], work: Path, root: Path
) -> None:
    chat(env, work, root, ["first", "/exit"])
    chat(env, work, root, ["more", "/exit"], "-c")
    [path] = sessions(root).values()
    assert users(path) == ["first", "more"]


def test_resume_without_an_id_picks_on_a_terminal(
    env: dict[str, str], work: Path, root: Path
) -> None:
    chat(env, work, root, ["older session", "/exit"])
    time.sleep(0.01)  # distinct modification times order the list
    chat(env, work, root, ["newer session", "/exit"])
    refused = subprocess.run(
        [sys.executable, "-m", "harness.cli", "chat", "--offline", "--root", str(root), "-r"],
        input="",
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert refused.returncode == 2 and "picks from a list on a terminal" in refused.stderr
    child = pexpect.spawn(
        sys.executable,
        ["-m", "harness.cli", "chat", "--offline", "--root", str(root), "-r"],
        env=env,
        cwd=str(work),
        dimensions=(40, 200),
        encoding="utf-8",
        timeout=TIMEOUT_S,
    )
    seen = io.StringIO()
    child.logfile_read = seen
    try:
        child.expect("resume which session")
        listing = _ESCAPES.sub("", str(child.before))
        assert re.search(r"1\. .*newer session", listing)
        assert re.search(r"2\. .*older session", listing)
        child.sendline("2")
        child.expect("Ctrl-D or /exit ends")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    older = next(p for p in sessions(root).values() if users(p)[0] == "older session")
    with open_session(older) as session:
        assert f"session {session.id} (" in _ESCAPES.sub("", seen.getvalue())
