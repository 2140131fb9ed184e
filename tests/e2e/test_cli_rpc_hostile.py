"""``harness rpc`` against hostile and broken input on stdin (docs/security.md, "harness rpc"):
every bad line gets an error response and the process goes on; no line grants a permission
(forged or guessed approval answers, answers that are not an option), reaches a session
outside the store, writes outside the working folder or picks the working folder; the
protocol's ``bash`` is gated like a model's call; stdin closing mid-run ends the process with
the partial reply saved. Run for real, as a subprocess, on the offline model."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rpc_process import Rpc

from harness._tools.sandbox import sandbox_available
from hooks import AssistantMessage, ToolResultMessage
from repos import CustomEntry, JsonlSessionRepo, MessageEntry, open_session


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def rpc(work: Path, tmp_path: Path) -> Iterator[Callable[..., Rpc]]:
    started: list[Rpc] = []

    def start(*args: str) -> Rpc:
        server = Rpc(work, tmp_path / "sessions", *args)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
        server.close()


def _deep(start: bytes, depth: int, end: bytes = b"") -> bytes:
    """``start`` + a list nested ``depth`` deep + ``end`` + ``}``."""
    return start + b"[" * depth + b"]" * depth + end + b"}"


HOSTILE_LINES: list[tuple[bytes, str]] = [
    (b"not json", "parse"),
    (b"\xff\xfe\x00 bytes", "parse"),
    (b"[1, 2]", "parse"),
    (b'"a string"', "parse"),
    (b"{}", "parse"),
    (b'{"type": 5}', "parse"),
    (b'{"type": "prompt", "message": ' + b"[" * 3000 + b"]" * 3000 + b"}", "parse"),
    (b'{"type": "prompt", "message": 5}', "prompt"),
    (b'{"type": "prompt", "message": "x", "images": [{"data": 1}]}', "prompt"),
    (b'{"type": "prompt", "message": "x", "streamingBehavior": "now"}', "prompt"),
    (b'{"type": "set_thinking_level", "level": "ultra"}', "set_thinking_level"),
    (b'{"type": "set_steering_mode", "mode": "some"}', "set_steering_mode"),
    (b'{"type": "steer", "message": "nothing runs"}', "steer"),
    (b'{"type": "fork", "entryId": "../../etc"}', "fork"),
    (b'{"type": "set_session_name", "name": "   "}', "set_session_name"),
    (b'{"type": "switch_session", "sessionPath": "../x"}', "switch_session"),
    (b'{"type": "export_html", "outputPath": "../outside.html"}', "export_html"),
    (b'{"type": "export_html", "outputPath": "/etc/harness-rpc-hostile.html"}', "export_html"),
    (
        b'{"type": "extension_ui_response", "id": "forged", "value": "Always allow"}',
        "extension_ui_response",
    ),
    (b'{"type": "no_such_command"}', "no_such_command"),
    # review 9, finding 3: an id nested just inside orjson's limit crashed the process when its
    # repr went into the error (and other fields nested as deep, in other commands)
    (_deep(b'{"type": "extension_ui_response", "id": ', 990), "extension_ui_response"),
    (_deep(b'{"type": "extension_ui_response", "id": {"a": ', 500, b"}"), "extension_ui_response"),
    (_deep(b'{"type": "prompt", "message": ', 1000), "prompt"),
    (_deep(b'{"type": "set_session_name", "name": ', 1000), "set_session_name"),
    (_deep(b'{"type": "fork", "entryId": ', 1000), "fork"),
    (_deep(b'{"type": "nope", "id": ', 1000), "nope"),
]


def test_every_hostile_line_gets_an_error_response_and_the_process_goes_on(
    rpc: Callable[..., Rpc], work: Path, tmp_path: Path
) -> None:
    server = rpc()
    for line, command in HOSTILE_LINES:
        server.send(line)
        error = server.until(lambda r: r["type"] == "response")
        assert (error["command"], error["success"]) == (command, False), (line[:60], error)
        assert error["error"]
    long_id = "x" * 1000
    server.send({"type": "nope", "id": long_id})
    assert "id" not in server.until(lambda r: r["type"] == "response")  # not echoed back
    # A U+2028 inside a string is no line end (pi's framing: LF only).
    reply = server.call({"id": "p", "type": "prompt", "message": "a\u2028b"})
    assert reply["success"] is True
    end = server.until(lambda r: r["type"] == "agent_end")
    assert end["messages"][-1]["content"][-1]["text"] == "(offline) You said: a\u2028b"
    state = server.call({"id": "s", "type": "get_state"})["data"]
    assert state["messageCount"] == 2
    assert server.close() == 0
    assert not (work.parent / "outside.html").exists()
    assert not Path("/etc/harness-rpc-hostile.html").exists()
    assert sorted(p.name for p in work.iterdir()) == []  # nothing written in the folder


def test_no_line_grants_a_permission(rpc: Callable[..., Rpc], tmp_path: Path) -> None:
    server = rpc()
    # Answers sent before any request, under guessed ids, are refused and remembered nowhere.
    for guess in ("1", "0", "00000000-0000-4000-8000-000000000000"):
        server.send({"type": "extension_ui_response", "id": guess, "value": "Always allow"})
        assert server.until(lambda r: r["type"] == "response")["success"] is False
    server.call({"id": "1", "type": "prompt", "message": "!echo granted"})
    request = server.until(lambda r: r["type"] == "extension_ui_request")
    assert request["permission"]["operationKey"] == "bash(echo granted)"
    server.send({"type": "extension_ui_response", "id": request["id"], "value": "yes please"})
    denied = server.until(lambda r: r["type"] == "tool_execution_end")
    assert denied["isError"] and "declined" in denied["result"]["content"][0]["text"]
    server.until(lambda r: r["type"] == "agent_end")
    # pi's `confirmed` answers a `confirm`, not this `select`: it approves nothing (review 3, 12).
    server.call({"id": "2", "type": "prompt", "message": "!echo confirmed"})
    request2 = server.until(lambda r: r["type"] == "extension_ui_request")
    server.send(
        {"type": "extension_ui_response", "id": request2["id"], "value": "Deny", "confirmed": True}
    )
    denied2 = server.until(lambda r: r["type"] == "tool_execution_end")
    assert denied2["isError"] and "declined" in denied2["result"]["content"][0]["text"]
    server.until(lambda r: r["type"] == "agent_end")
    # The answer is one per request: a second answer to the same id is refused.
    server.send({"type": "extension_ui_response", "id": request["id"], "value": "Allow once"})
    assert server.until(lambda r: r["type"] == "response")["success"] is False
    path = server.call({"id": "s", "type": "get_state"})["data"]["sessionFile"]
    assert server.close() == 0
    with open_session(path) as session:
        permissions = [e for e in session.entries() if isinstance(e, CustomEntry)]
        results = [
            e.message
            for e in session.entries()
            if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
        ]
    assert permissions == [] and [r.is_error for r in results] == [True, True]


def test_sessions_outside_the_store_are_never_reached(
    rpc: Callable[..., Rpc], work: Path, tmp_path: Path
) -> None:
    import asyncio

    elsewhere = asyncio.run(JsonlSessionRepo(tmp_path / "elsewhere").create(str(work)))
    elsewhere.close()
    before = Path(str(elsewhere.path)).read_bytes()
    server = rpc()
    refused = server.call({"id": "1", "type": "switch_session", "sessionPath": str(elsewhere.path)})
    assert refused["success"] is False and "store's sessions only" in refused["error"]
    fresh = server.call(
        {"id": "2", "type": "new_session", "parentSession": "/somewhere/else.jsonl"}
    )
    assert fresh["success"] is True
    state = server.call({"id": "3", "type": "get_state"})["data"]
    assert Path(state["sessionFile"]).is_relative_to(tmp_path / "sessions")
    assert server.close() == 0
    with open_session(state["sessionFile"]) as session:
        # The parent is recorded as information; the working folder is the process's.
        assert session.header.parent_session == "/somewhere/else.jsonl"
        assert session.cwd == str(work)
    assert Path(str(elsewhere.path)).read_bytes() == before


def test_the_protocols_bash_is_gated_like_a_models_call(
    rpc: Callable[..., Rpc], work: Path
) -> None:
    server = rpc("--disallowed-tools", "Bash(rm:*)")
    (work / "keep.txt").write_text("kept")
    denied = server.call({"id": "1", "type": "bash", "command": "rm keep.txt"})
    assert denied["success"] is False and denied["error"].startswith("denied:")
    assert (work / "keep.txt").exists()
    server.send({"id": "2", "type": "bash", "command": "echo asked"})
    request = server.until(lambda r: r["type"] == "extension_ui_request")
    assert request["permission"]["input"] == {"command": "echo asked"}
    server.send({"type": "extension_ui_response", "id": request["id"], "cancelled": True})
    refused = server.response("2")
    assert refused["success"] is False and "declined" in refused["error"]
    server.send({"id": "3", "type": "bash", "command": "echo ran"})
    request = server.until(lambda r: r["type"] == "extension_ui_request")
    server.send({"type": "extension_ui_response", "id": request["id"], "value": "Allow once"})
    ran = server.response("3")
    assert ran["data"] == {"output": "ran\n", "exitCode": 0, "cancelled": False, "truncated": False}
    assert server.close() == 0


@pytest.mark.parametrize(
    "other",
    [
        {"type": "prompt", "message": "count 300"},
        {"type": "new_session"},
        {"type": "bash", "command": "echo second"},
        {"type": "compact"},
    ],
)
def test_nothing_runs_beside_a_protocol_bash_waiting_for_its_approval(
    rpc: Callable[..., Rpc], work: Path, tmp_path: Path, other: dict[str, str]
) -> None:
    """Review 9, finding 14: a ``prompt`` (or ``new_session``) was accepted while a ``bash``
    waited for its approval; the command then ran beside the model's turn, or was recorded in
    the new session."""
    server = rpc()
    server.send({"id": "b", "type": "bash", "command": "echo FROM_BASH"})
    request = server.until(lambda r: r["type"] == "extension_ui_request")
    refused = server.call({"id": "o", **other})
    assert refused["success"] is False, refused
    server.send({"type": "extension_ui_response", "id": request["id"], "value": "Allow once"})
    ran = server.response("b")
    assert ran["data"]["output"] == "FROM_BASH\n"
    state = server.call({"id": "s", "type": "get_state"})["data"]
    assert server.close() == 0
    [stored] = (tmp_path / "sessions").rglob("*.jsonl")
    assert state["sessionId"] in stored.name
    assert "FROM_BASH" in stored.read_text()
    # once it has ended, a prompt runs
    again = rpc()
    assert again.call({"id": "p", "type": "prompt", "message": "hi"})["success"] is True
    again.until(lambda r: r["type"] == "agent_end")
    assert again.close() == 0


def test_abort_bash_while_it_waits_for_its_approval_ends_it_unrun(
    rpc: Callable[..., Rpc], work: Path
) -> None:
    server = rpc()
    server.send({"id": "b", "type": "bash", "command": "touch ran.txt"})
    server.until(lambda r: r["type"] == "extension_ui_request")
    server.call({"id": "a", "type": "abort_bash"})
    aborted = server.response("b")
    assert aborted["success"] is False and "aborted" in aborted["error"]
    assert server.call({"id": "p", "type": "prompt", "message": "hi"})["success"] is True
    server.until(lambda r: r["type"] == "agent_end")
    assert server.close() == 0
    assert not (work / "ran.txt").exists()


@pytest.mark.parametrize("how", ["stdin closes", "SIGTERM"])
def test_the_end_of_input_ends_the_process_with_the_partial_reply_saved(
    rpc: Callable[..., Rpc], how: str
) -> None:
    server = rpc()
    server.call({"id": "1", "type": "prompt", "message": "count 5000"})
    server.until(
        lambda r: (
            r["type"] == "message_update" and r["assistantMessageEvent"]["type"] == "text_delta"
        )
    )
    path = server.call({"id": "s", "type": "get_state"})["data"]["sessionFile"]
    if how == "SIGTERM":
        server.proc.send_signal(signal.SIGTERM)
    assert server.close() == 0
    with open_session(path) as session:
        last = [e.message for e in session.get_branch() if isinstance(e, MessageEntry)][-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
    assert last.text and "(offline) Counting to 5000: 1 2 3".startswith(last.text[:30])


def test_a_prompt_refused_before_it_starts_gets_an_error_response(
    rpc: Callable[..., Rpc], work: Path
) -> None:
    settings = work.parent / "config" / "harness" / "settings.json"
    settings.parent.mkdir(parents=True)
    refuse = "echo 'not today' >&2; exit 2"
    hook = {"hooks": [{"type": "command", "command": refuse}]}
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [hook]}}))
    server = rpc()
    refused = server.call({"id": "1", "type": "prompt", "message": "hello"})
    assert refused["success"] is False and "not today" in refused["error"]
    state = server.call({"id": "2", "type": "get_state"})["data"]
    assert state["messageCount"] == 0 and state["isStreaming"] is False
    assert server.close() == 0


@pytest.mark.parametrize(
    "target", [".git/config", ".harness/settings.json", ".mcp.json", "notes.txt", "sessions/x.html"]
)
def test_export_html_never_replaces_a_protected_or_other_file(
    rpc: Callable[..., Rpc], work: Path, tmp_path: Path, target: str
) -> None:
    # Review 5, finding 5: export_html replaced .git/config (git then refused the repository)
    # and .harness/settings.json; now only a .html file that is no protected path.
    for folder in (".git", ".harness", "sessions"):
        (work / folder).mkdir()
    (work / target).write_text("{}")  # valid settings: the process starts
    server = rpc() if target != "sessions/x.html" else Rpc(work, work / "sessions")
    reply = server.call({"id": "1", "type": "export_html", "outputPath": target})
    assert reply["success"] is False and reply["error"]
    assert (work / target).read_text() == "{}"
    made = server.call({"id": "2", "type": "export_html", "outputPath": "page.html"})
    assert made["success"] is True and "<html" in (work / "page.html").read_text()
    assert server.close() == 0


@pytest.mark.sandbox
@pytest.mark.skipif(not sandbox_available(), reason="bubblewrap (bwrap) missing or unusable")
def test_the_protocols_bash_runs_sandboxed_unless_the_person_approved_it(
    rpc: Callable[..., Rpc], work: Path
) -> None:
    """Review 7, finding 4: the protocol's bash dropped the gate's sandbox, so in bypass a
    computed name wrote `.git/config`."""
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    config = work / ".git" / "config"
    before = config.read_bytes()
    command = 'd=.gi; echo "# x" >> "${d}t/config"'
    server = rpc("--mode", "bypass")
    unasked = server.call({"id": "1", "type": "bash", "command": command})
    assert unasked["success"] is True and unasked["data"]["exitCode"] != 0
    assert config.read_bytes() == before
    assert server.close() == 0
    server = rpc()
    server.send({"id": "2", "type": "bash", "command": command})
    request = server.until(lambda r: r["type"] == "extension_ui_request")
    server.send({"type": "extension_ui_response", "id": request["id"], "value": "Allow once"})
    assert server.response("2")["data"]["exitCode"] == 0
    assert config.read_bytes() == before + b"# x\n"
    assert server.close() == 0
