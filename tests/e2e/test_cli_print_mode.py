"""Claude Code's print mode, run for real: ``harness -p``, prompts from arguments and stdin,
``--output-format json|stream-json`` with Claude Code's records checked field by field (names
and types as its headless docs and Agent SDK give them), ``--input-format stream-json``,
``--max-turns``, ``--system-prompt``, the tool flags and ``--no-session``.

Every run is a subprocess on the scripted offline model; stdin is ``/dev/null`` unless a test
gives it (a pipe otherwise would be waited for)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from repos import CustomEntry, MessageEntry, ThinkingLevelChangeEntry, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def harness(
    *args: str | Path,
    cwd: Path,
    input: str | None = None,
    env: dict[str, str] | None = None,
    stdin: Any = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base.update(
        PYTHONPATH=str(REPO_ROOT),
        PYTHONIOENCODING="utf-8",
        HARNESS_SESSIONS_DIR=str(cwd.parent / "default-root"),
        XDG_CONFIG_HOME=str(cwd.parent / "config"),
    )
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        input=input,
        stdin=None if input is not None else stdin,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=120,
        check=False,
    )


def records(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _types(record: dict[str, Any], **expected: type | tuple[type, ...]) -> None:
    for key, kind in expected.items():
        assert isinstance(record[key], kind), (key, record[key])


def test_stream_json_records_are_claude_codes(root: Path, work: Path) -> None:
    proc = harness(
        "-p", "!echo hi", "--offline", "--root", root, "--output-format", "stream-json",
        "--mode", "bypassPermissions", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    init, assistant, user, final, result = records(proc)
    assert (init["type"], init["subtype"]) == ("system", "init")
    _types(init, session_id=str, cwd=str, model=str, tools=list, mcp_servers=list, uuid=str)
    _types(init, permissionMode=str, slash_commands=list, apiKeySource=str)
    assert init["cwd"] == str(work) and init["permissionMode"] == "bypassPermissions"
    assert init["tools"] == ["read", "write", "edit", "bash", "ls", "grep", "find"]
    assert init["model"] == "faux/offline"

    assert assistant["type"] == "assistant" and assistant["parent_tool_use_id"] is None
    message = assistant["message"]
    assert (message["type"], message["role"], message["model"]) == (
        "message",
        "assistant",
        "offline",
    )
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]
    tool_use = message["content"][2]
    assert tool_use == {
        "type": "tool_use",
        "id": tool_use["id"],
        "name": "bash",
        "input": {"command": "echo hi"},
    }
    assert message["stop_reason"] == "tool_use" and message["stop_sequence"] is None
    _types(message["usage"], input_tokens=int, output_tokens=int)
    _types(message["usage"], cache_creation_input_tokens=int, cache_read_input_tokens=int)

    assert user["type"] == "user" and user["message"]["role"] == "user"
    [block] = user["message"]["content"]
    assert block["type"] == "tool_result" and block["tool_use_id"] == tool_use["id"]
    assert block["is_error"] is False and block["content"][0]["text"] == "hi\n"

    assert final["message"]["stop_reason"] == "end_turn"
    assert final["message"]["content"][-1]["text"] == "(offline) bash returned: hi"

    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "success", False)
    assert result["result"] == "(offline) bash returned: hi"
    assert result["num_turns"] == 2 and result["session_id"] == init["session_id"]
    _types(result, duration_ms=int, duration_api_ms=int, total_cost_usd=(int, float), usage=dict)
    assert result["duration_ms"] >= result["duration_api_ms"] >= 0
    assert result["usage"]["output_tokens"] == sum(
        m["message"]["usage"]["output_tokens"] for m in (assistant, final)
    )
    assert {r["session_id"] for r in (assistant, user, final, result)} == {init["session_id"]}
    with open_session(next(root.glob("*/*.jsonl"))) as session:
        assert session.id == init["session_id"]
        ids = [e.id for e in session.entries() if isinstance(e, MessageEntry)]
    assert [assistant["uuid"], user["uuid"], final["uuid"]] == ids[1:]


def test_max_turns_ends_the_run_with_error_max_turns(root: Path, work: Path) -> None:
    proc = harness(
        "run", "!echo once", "--offline", "--root", root, "--output-format", "stream-json",
        "--mode", "bypass", "--max-turns", "1", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 1
    result = records(proc)[-1]
    assert (result["subtype"], result["is_error"], result["num_turns"]) == (
        "error_max_turns",
        True,
        1,
    )
    assert "reached --max-turns 1" in proc.stderr
    with open_session(next(root.glob("*/*.jsonl"))) as session:
        roles = [e.message.role for e in session.entries() if isinstance(e, MessageEntry)]
    assert roles == ["user", "assistant", "toolResult"]  # the turn finished; no second request


def test_max_turns_is_the_json_outputs_stop_reason_and_the_sessions_last_entry(
    root: Path, work: Path
) -> None:
    proc = harness(
        "run", "!echo once", "--offline", "--root", root, "--output", "json",
        "--mode", "bypass", "--max-turns", "1", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["stop_reason"] == "max_turns"
    with open_session(next(root.glob("*/*.jsonl"))) as session:
        last = list(session.entries())[-1]
    assert isinstance(last, CustomEntry) and last.custom_type == "harness.run.stop"
    assert last.data["stopReason"] == "max_turns"


def test_json_prints_the_result_record(root: Path, work: Path) -> None:
    proc = harness("-p", "hello", "--offline", "--root", root, "--output", "json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["type"], result["subtype"]) == ("result", "success")
    assert result["result"] == "(offline) You said: hello" and result["num_turns"] == 1
    assert Path(result["path"]).parent.parent == root


def test_input_format_stream_json_runs_each_user_message(root: Path, work: Path) -> None:
    lines = [
        {"type": "user", "message": {"role": "user", "content": "first"}},
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": "second"}]},
        },
    ]
    proc = harness(
        "run", "--offline", "--root", root, "--input-format", "stream-json",
        "--output-format", "stream-json", cwd=work,
        input="".join(json.dumps(line) + "\n" for line in lines),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = records(proc)
    assert [r["type"] for r in out] == ["system", "assistant", "result", "assistant", "result"]
    assert [r["result"] for r in out if r["type"] == "result"] == [
        "(offline) You said: first",
        "(offline) You said: second",
    ]
    with open_session(next(root.glob("*/*.jsonl"))) as session:
        users = [
            e.message.text
            for e in session.entries()
            if isinstance(e, MessageEntry) and e.message.role == "user"
        ]  # type: ignore[union-attr]
    assert users == ["first", "second"]
    bad = harness(
        "run", "--offline", "--root", root, "--input-format", "stream-json",
        "--output-format", "stream-json", cwd=work, input='{"type": "user"}\n',
    )  # fmt: skip
    assert (
        bad.returncode == 1
        and "error[invalid_input]: stdin line 1 is no user message" in bad.stderr
    )


def test_prompts_from_stdin_and_arguments(root: Path, work: Path) -> None:
    piped = harness("run", "--offline", "--root", root, cwd=work, input="from stdin\n")
    assert piped.returncode == 0 and piped.stdout == "(offline) You said: from stdin\n"
    joined = harness("-p", "summarize", "--offline", "--root", root, cwd=work, input="the text\n")
    assert joined.stdout == "(offline) You said: summarize\n\nthe text\n"
    words = harness("run", "two", "words", "--offline", "--root", root, cwd=work)
    assert words.stdout == "(offline) You said: two words\n"
    nothing = harness("run", "--offline", "--root", root, cwd=work)
    assert nothing.returncode == 2 and "no prompt" in nothing.stderr


def test_a_silent_pipe_on_stdin_is_not_waited_for(root: Path, work: Path) -> None:
    read, write = os.pipe()
    try:
        started = time.monotonic()
        proc = harness(
            "-p", "hello", "--offline", "--root", root, cwd=work, stdin=read,
            env={"HARNESS_STDIN_WAIT_S": "0.2"},
        )  # fmt: skip
        assert time.monotonic() - started < 60  # a bound, not a timing claim: it did not hang
    finally:
        os.close(read)
        os.close(write)
    assert proc.returncode == 0 and proc.stdout == "(offline) You said: hello\n"
    assert "stdin sent nothing in 0.2 s" in proc.stderr


def test_verbose_adds_our_events_and_system_prompt_flags(root: Path, work: Path) -> None:
    proc = harness(
        "-p", "hi", "--offline", "--root", root, "--output-format", "stream-json", "--verbose",
        "--system-prompt", "You are terse.", "--append-system-prompt", "Answer in French.",
        cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = records(proc)
    start = next(r for r in out if r["type"] == "before_agent_start")
    assert start["systemPrompt"].startswith("You are terse.\n\nAnswer in French.")
    kinds = {r["type"] for r in out}
    assert {"system", "assistant", "result", "agent_start", "message_update", "agent_end"} <= kinds
    assert harness("-p", "hi", "--offline", "--verbose", cwd=work).returncode == 2


def test_tool_flags(root: Path, work: Path) -> None:
    def init(*flags: str) -> dict[str, Any]:
        proc = harness(
            "-p", "hi", "--offline", "--root", root, "--output-format", "stream-json", *flags,
            cwd=work,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return records(proc)[0]

    assert init("--tools", "Read,bash,Glob")["tools"] == ["read", "bash", "find"]
    assert init("--no-tools")["tools"] == []
    bad = harness("-p", "hi", "--offline", "--tools", "nope", cwd=work)
    assert bad.returncode == 2 and "unknown tool 'nope'" in bad.stderr

    allowed = harness(
        "-p", "!echo ok", "--offline", "--root", root, "--allowed-tools", "Bash(echo:*) Read",
        cwd=work,
    )  # fmt: skip
    assert allowed.stdout == "(offline) bash returned: ok\n"
    denied = harness(
        "-p", "!echo ok", "--offline", "--root", root, "--mode", "bypass",
        "--disallowedTools", "Bash(echo:*)", "--output-format", "json", cwd=work,
    )  # fmt: skip
    result = json.loads(denied.stdout)
    assert result["result"].startswith("(offline) bash failed:")
    assert result["permission_denials"] == [
        {"tool_name": "bash", "tool_use_id": result["permission_denials"][0]["tool_use_id"],
         "tool_input": {"command": "echo ok"}}
    ]  # fmt: skip


def test_no_session_writes_nothing(tmp_path: Path, work: Path) -> None:
    proc = harness("-p", "hi", "--offline", "--no-session", "--output-format", "json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["session_id"] and result["path"] is None
    assert not (tmp_path / "default-root").exists()
    both = harness("-p", "hi", "--offline", "--no-session", "-c", cwd=work)
    assert both.returncode == 2 and "at most one of --continue, --no-session" in both.stderr


def test_thinking_on_run_is_recorded(root: Path, work: Path) -> None:
    proc = harness("-p", "hi", "--offline", "--root", root, "--thinking", "high", cwd=work)
    assert proc.returncode == 0, proc.stderr
    with open_session(next(root.glob("*/*.jsonl"))) as session:
        levels = [
            e.thinking_level for e in session.entries() if isinstance(e, ThinkingLevelChangeEntry)
        ]
    assert levels == ["high"]


def test_harness_alone_starts_a_chat_and_help_stays_on_help(work: Path, tmp_path: Path) -> None:
    chat = harness("--offline", "--root", tmp_path / "s", cwd=work, input="hello\n/exit\n")
    assert chat.returncode == 0, chat.stderr
    assert "(offline) You said: hello" in chat.stdout and "new session" in chat.stdout
    # Alone, it is a chat on the default model: without a key it says so before anything.
    alone = harness(cwd=work, input="/exit\n", env={"HARNESS_SESSIONS_DIR": str(tmp_path / "t")})
    assert alone.returncode == 1 and "ANTHROPIC_API_KEY" in alone.stderr
    assert "Usage" not in alone.stdout + alone.stderr and not (tmp_path / "t").exists()
    assert "Usage: harness" in harness("--help", cwd=work).stdout
