"""``harness run -p TEXT``, run for real in a subprocess from a working folder under ``tmp_path``.

Offline runs use the scripted model (``--offline``: it echoes, and ``!COMMAND`` asks for a bash
call); the provider error goes through the real ``anthropic`` SDK to the local replay server.
Assertions are on exit codes, error codes, parsed JSON and the session files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_server import JsonReply, ReplayServer

from hooks import EVENT_CLASSES, AssistantMessage, ToolResultMessage
from repos import MessageEntry, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
CLAUDE_CODE = {"system", "assistant", "user", "result"}
"""The record types of Claude Code's stream-json (our events' types are others)."""

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def harness_run(tmp_path: Path, work: Path) -> Run:
    """Run ``harness ARGS...`` in ``work`` (or ``cwd=``), with extra environment ``env=``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base["HARNESS_SESSIONS_DIR"] = str(tmp_path / "default-root")
    base["PYTHONIOENCODING"] = "utf-8"
    base["PYTHONPATH"] = str(REPO_ROOT)

    def run(
        *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *map(str, args)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env={**base, **(env or {})},
            cwd=cwd or work,
            timeout=120,
            check=False,
        )

    return run


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\n{proc.stderr}"
    return proc


def session_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.jsonl")) if root.is_dir() else []


def messages(path: Path) -> list[Any]:
    with open_session(path) as session:
        return [e.message for e in session.get_branch() if isinstance(e, MessageEntry)]


def test_offline_text_prints_the_reply(harness_run: Run, root: Path, work: Path) -> None:
    proc = ok(harness_run("run", "-p", "hello there", "--offline", "--root", root))
    assert proc.stdout.strip() == "(offline) You said: hello there"
    (path,) = session_files(root)
    with open_session(path) as session:
        assert session.cwd == str(work)
    assert [m.role for m in messages(path)] == ["user", "assistant"]


def test_events_are_one_json_object_per_line(harness_run: Run, root: Path) -> None:
    proc = ok(harness_run("run", "-p", "ping", "--offline", "--output", "events", "--root", root))
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    # `events` is stream-json --verbose: Claude Code's records with our events between them.
    assert [r["type"] for r in records if r["type"] in CLAUDE_CODE] == [
        "system",
        "assistant",
        "result",
    ]
    events = [r for r in records if r["type"] not in CLAUDE_CODE]
    names = [e["type"] for e in events]
    assert set(names) <= set(EVENT_CLASSES) | {"thinking_level_changed", "compaction_start"}
    assert names[:3] == ["session_start", "user_prompt_submit", "before_agent_start"]
    assert names[-2:] == ["settled", "session_end"]  # the run ends, then the harness
    assert {"agent_start", "turn_start", "message_update", "turn_end", "agent_end"} <= set(names)
    ends = [e for e in events if e["type"] == "message_end"]
    assert [e["message"]["role"] for e in ends] == ["user", "assistant"]
    assert ends[0]["message"]["content"] == "ping"
    assert ends[1]["message"]["content"][-1] == {"type": "text", "text": "(offline) You said: ping"}
    (path,) = session_files(root)
    with open_session(path) as session:
        assert [e["entryId"] for e in ends] == [
            e.id for e in session.get_branch() if isinstance(e, MessageEntry)
        ]


def test_json_output_and_continue_picks_the_newest_session_of_the_folder(
    harness_run: Run, root: Path, work: Path, tmp_path: Path
) -> None:
    def run_json(*args: str | Path, cwd: Path | None = None) -> dict[str, Any]:
        proc = ok(
            harness_run("run", "--offline", "--output", "json", "--root", root, *args, cwd=cwd)
        )
        out: dict[str, Any] = json.loads(proc.stdout)
        return out

    first = run_json("-p", "one")
    second = run_json("-p", "two")
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = run_json("-p", "elsewhere", cwd=other)  # newest overall, but another folder
    assert len({first["session_id"], second["session_id"], elsewhere["session_id"]}) == 3
    assert second["result"] == "(offline) You said: two"

    again = run_json("-p", "three", "--continue")
    assert again["session_id"] == second["session_id"]
    texts = [m.text for m in messages(Path(again["path"]))]
    assert texts == ["two", "(offline) You said: two", "three", "(offline) You said: three"]

    by_id = run_json("-p", "four", "--session", first["session_id"])
    assert by_id["session_id"] == first["session_id"]
    assert len(messages(Path(first["path"]))) == 4


def test_continue_with_no_session_for_the_folder_fails(harness_run: Run, root: Path) -> None:
    proc = harness_run("run", "-p", "hi", "--offline", "--continue", "--root", root)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[session_not_found]:")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_session_and_continue_together_is_a_usage_error(harness_run: Run, root: Path) -> None:
    proc = harness_run("run", "-p", "hi", "--offline", "--continue", "--session", "x")
    assert proc.returncode == 2


def test_controlled_tool_calls_are_denied_unless_the_mode_allows(
    harness_run: Run, root: Path, work: Path
) -> None:
    proc = ok(harness_run("run", "-p", "!touch made.txt", "--offline", "--root", root))
    assert not (work / "made.txt").exists()
    assert proc.stdout.startswith("(offline) bash failed:")
    (path,) = session_files(root)
    result = messages(path)[2]
    assert isinstance(result, ToolResultMessage) and result.is_error

    events = ok(
        harness_run(
            "run",
            "-p",
            "!touch made.txt",
            "--offline",
            "--mode",
            "bypass",
            "--output",
            "events",
            "--root",
            root,
        )
    )
    assert (work / "made.txt").exists()
    decisions = [
        e for e in map(json.loads, events.stdout.splitlines()) if e["type"] == "permission_decision"
    ]
    assert [d["decision"] for d in decisions] == ["approve"]


def test_missing_api_key_is_one_line_and_writes_nothing(harness_run: Run, root: Path) -> None:
    proc = harness_run("run", "-p", "hi", "--root", root)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[missing_api_key]:")
    assert "ANTHROPIC_API_KEY" in proc.stderr
    assert session_files(root) == []


def test_a_provider_error_exits_1_after_persisting_the_reply(
    harness_run: Run, root: Path, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(JsonReply.error(401, "authentication_error", "invalid x-api-key"))
    env = {"ANTHROPIC_API_KEY": "sk-test-dummy", "ANTHROPIC_BASE_URL": replay_server.url}
    proc = harness_run("run", "-p", "hi", "--model", "claude-sonnet-4-5", "--root", root, env=env)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error[provider_error]:")
    assert "invalid x-api-key" in proc.stderr
    (path,) = session_files(root)
    reply = messages(path)[-1]
    assert isinstance(reply, AssistantMessage) and reply.stop_reason == "error"
    assert len(replay_server.requests) == 1
