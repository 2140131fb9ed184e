"""``harness hooks list``, and command hooks in ``harness run`` and ``harness chat``, run for real
in subprocesses: trust, the warning for an untrusted project's hooks, settings errors before
anything is written, a refused prompt, the chat's idle notification and session end."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import needs_process, run_cli

REPO_ROOT = Path(__file__).resolve().parents[2]

Harness = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base["HARNESS_SESSIONS_DIR"] = str(tmp_path / "sessions")
    base["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # the user's settings live here
    base["PYTHONIOENCODING"] = "utf-8"
    base["PYTHONPATH"] = str(REPO_ROOT)
    return base


@pytest.fixture
def harness(work: Path, env: dict[str, str]) -> Harness:
    def run(
        *args: str | Path, stdin: str | None = None, process: bool = False
    ) -> subprocess.CompletedProcess[str]:
        # The same entry point, in-process (``cli_in_process``), unless ``process``.
        if not process and not needs_process(args):
            return run_cli(args, env=env, cwd=work, input=stdin)
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *map(str, args)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            cwd=work,
            input=stdin,
            timeout=120,
            check=False,
        )

    return run


def settings(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def hook(event: str, command: str, matcher: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
    if matcher:
        group["matcher"] = matcher
    return {event: [group]}


def user_settings(tmp_path: Path, hooks: dict[str, Any]) -> Path:
    return settings(tmp_path / "config" / "harness" / "settings.json", {"hooks": hooks})


def project_settings(work: Path, hooks: dict[str, Any]) -> Path:
    return settings(work / ".harness" / "settings.json", {"hooks": hooks})


def test_hooks_list_shows_every_hook_its_source_and_the_projects_trust(
    harness: Harness, tmp_path: Path, work: Path
) -> None:
    user = user_settings(tmp_path, hook("Stop", "notify-send done"))
    project = project_settings(work, hook("PreToolUse", "./guard.sh \x1b]52;c;x\x07", "Bash"))

    untrusted = harness("hooks", "list")
    assert untrusted.returncode == 0, untrusted.stderr
    lines = untrusted.stdout.splitlines()
    assert "not trusted" in lines[0]
    assert lines[1] == "Stop (stop): notify-send done"
    assert f"user: {user} hooks.Stop[0].hooks[0]" in lines[2]
    assert lines[3].startswith("ignored, the project is not trusted")
    assert lines[4] == "  PreToolUse (tool_call) [Bash]: ./guard.sh \\x1b]52;c;x\\x07"
    assert "\x1b" not in untrusted.stdout  # a project's text reaches the terminal escaped

    # ``hooks list`` keeps one real-process run.
    trusted = json.loads(harness("hooks", "list", "--trust-project", "--json", process=True).stdout)
    assert trusted["project_trusted"] is True and trusted["ignored"] == []
    assert [(h["event"], h["source"], h["path"]) for h in trusted["hooks"]] == [
        ("Stop", "user", str(user)),
        ("PreToolUse", "project", str(project)),
    ]


def test_run_ignores_an_untrusted_projects_hooks_and_says_so(
    harness: Harness, tmp_path: Path, work: Path
) -> None:
    marker = tmp_path / "ran"
    project_settings(work, hook("PreToolUse", f"touch {shlex.quote(str(marker))}"))

    untrusted = harness("run", "--offline", "--mode", "bypassPermissions", "-p", "!echo hi")
    assert untrusted.returncode == 0, untrusted.stderr
    warnings = [line for line in untrusted.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "1 hook that will not run" in warnings[0]
    assert not marker.exists()

    trusted = harness(
        "run", "--offline", "--mode", "bypassPermissions", "--trust-project", "-p", "!echo hi"
    )
    assert trusted.returncode == 0, trusted.stderr
    assert "warning:" not in trusted.stderr
    assert marker.exists()


def test_broken_hook_settings_fail_before_a_session_is_written(
    harness: Harness, tmp_path: Path
) -> None:
    user = user_settings(tmp_path, {"PreToolUse": [{"hooks": [{"type": "agent"}]}]})
    for command in (["run", "--offline", "-p", "hi"], ["chat", "--offline"]):
        done = harness(*command, stdin="hi\n")
        assert done.returncode == 1
        assert done.stderr.startswith("error[hook_settings_invalid]: ")
        assert str(user) in done.stderr and "hooks.PreToolUse[0].hooks[0].type" in done.stderr
    assert not list((tmp_path / "sessions").glob("*/*.jsonl"))


def test_run_exits_1_when_a_hook_refuses_the_prompt(harness: Harness, tmp_path: Path) -> None:
    user_settings(tmp_path, hook("UserPromptSubmit", "echo 'no prompts on Fridays' >&2; exit 2"))
    done = harness("run", "--offline", "-p", "deploy")
    assert done.returncode == 1
    assert done.stderr.strip().endswith("no prompts on Fridays")
    assert "error[prompt_blocked]" in done.stderr
    [session] = (tmp_path / "sessions").glob("*/*.jsonl")
    assert len(session.read_text().splitlines()) == 1  # the header: the prompt was never written


def test_run_shows_what_hooks_tell_the_user(harness: Harness, tmp_path: Path) -> None:
    said = json.dumps({"systemMessage": "formatted 1 file", "continue": False,
                       "stopReason": "one command is enough"})  # fmt: skip
    user_settings(tmp_path, hook("PostToolUse", f"echo {shlex.quote(said)}"))
    done = harness("run", "--offline", "--mode", "bypass", "-p", "!echo hi")
    assert done.returncode == 0, done.stderr
    assert "hook: formatted 1 file" in done.stderr
    assert "the run ended early: one command is enough" in done.stderr


def test_chat_sends_idle_notifications_and_ends_the_session_for_hooks(
    tmp_path: Path, work: Path, env: dict[str, str]
) -> None:
    log = tmp_path / "hooks.log"
    record = f"cat >> {shlex.quote(str(log))}"
    user_settings(tmp_path, {**hook("Notification", record), **hook("SessionEnd", record)})
    chat = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "chat", "--offline"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "HARNESS_CHAT_IDLE_S": "0.1"},
        cwd=work,
    )
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and "idle_prompt" in log.read_text()):
            assert time.monotonic() < deadline, "no idle notification"
            assert chat.poll() is None, chat.stderr.read() if chat.stderr else ""
            time.sleep(0.05)
        _, err = chat.communicate("hello\n/exit\n", timeout=60)
    finally:
        chat.kill()
        chat.wait()
    assert chat.returncode == 0, err
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert events[0]["hook_event_name"] == "Notification"
    assert events[0]["notification_type"] == "idle_prompt"
    assert (events[-1]["hook_event_name"], events[-1]["reason"]) == (
        "SessionEnd",
        "prompt_input_exit",
    )
