"""pi's own ``RpcClient`` (npm ``@mariozechner/pi-coding-agent``, installed by the ``pi`` group)
drives ``harness rpc --offline`` unchanged: its ``cliPath`` is a two-line node shim that runs
our command. ``rpc_driver.mjs`` runs the scenario and prints what the client saw; here it is
checked field by field, and against the session files themselves."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pi_oracle import PiReader

from hooks import BashExecutionMessage
from repos import CompactionEntry, JsonlSessionRepo, build_context, encode_message, open_session

pytestmark = pytest.mark.pi

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "rpc_driver.mjs"

SHIM = Path(__file__).resolve().parent / "harness_rpc.cjs"
"""RpcClient's cliPath: two lines of node that run ``harness rpc`` with the client's arguments
(dropping the ``--mode rpc`` it passes) and hand it SIGTERM."""


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory, pi_install: PiReader | str) -> dict[str, Any]:
    """One scenario for the whole module: starting pi's client and our process is the cost."""
    if isinstance(pi_install, str):
        pytest.skip(pi_install)
    tmp = tmp_path_factory.mktemp("rpc")
    work = tmp / "work"
    work.mkdir()
    root = tmp / "sessions"
    outside = asyncio.run(JsonlSessionRepo(tmp / "elsewhere").create(str(work)))
    outside.close()
    env = {
        "OUTSIDE_SESSION": str(outside.path),
        **os.environ,
        "HARNESS_PY": sys.executable,
        "PYTHONPATH": str(REPO_ROOT),
        "HARNESS_SESSIONS_DIR": str(tmp / "default-root"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
    }
    done = subprocess.run(
        [
            pi_install.node,
            str(DRIVER),
            str(pi_install.package_dir),
            str(SHIM),
            str(work),
            json.dumps(["--offline", "--root", str(root)]),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    assert "error" not in out, f"{out['error']}\n{out.get('stderr', '')[-3000:]}"
    out["_root"], out["_work"], out["_outside"] = root, work, outside.path
    return out


def _context(path: str, *, before_compaction: bool = False) -> list[dict[str, Any]]:
    """The context the session file gives (``before_compaction``: as it was just before its
    first compaction entry was written)."""
    with open_session(path) as session:
        branch = session.get_branch()
        if before_compaction:
            cut = next(i for i, e in enumerate(branch) if isinstance(e, CompactionEntry))
            branch = branch[:cut]
        return [encode_message(m) for m in build_context(branch).messages]


def test_a_prompt_streams_pi_events(seen: dict[str, Any]) -> None:
    types = seen["prompt"]["types"]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert {"turn_start", "message_start", "message_update", "message_end", "turn_end"} <= set(
        types
    )
    deltas = seen["prompt"]["deltas"]
    assert {d["type"] for d in deltas} == {"thinking_delta", "text_delta"}
    text = "".join(d["delta"] for d in deltas if d["type"] == "text_delta")
    assert text == "(offline) You said: hello"
    assert all(
        isinstance(d["contentIndex"], int) and d["partial"]["role"] == "assistant" for d in deltas
    )
    user, reply = seen["prompt"]["ends"]
    assert user == {"role": "user", "content": "hello", "timestamp": user["timestamp"]}
    assert reply["stopReason"] == "stop" and reply["content"][-1]["text"] == text


def test_steer_and_follow_up_during_a_run_are_delivered_in_order(seen: dict[str, Any]) -> None:
    steer = seen["steer"]
    assert steer["users"] == ["count 60", "steered", "followed"]
    assert steer["turns"] == 3
    queued = [(q["steering"], q["followUp"]) for q in steer["queues"]]
    assert (["steered"], []) in queued and (["steered"], ["followed"]) in queued


def test_abort_mid_stream_keeps_the_partial_reply(seen: dict[str, Any]) -> None:
    reply = seen["abort"]["ends"][-1]
    assert reply["role"] == "assistant" and reply["stopReason"] == "aborted"
    text = reply["content"][-1]["text"]
    whole = f"(offline) Counting to 2000: {' '.join(map(str, range(1, 2001)))}."
    assert text and whole.startswith(text) and len(text) < len(whole)
    with open_session(seen["state"]["sessionFile"]) as session:
        stored = [e.message for e in session.entries() if getattr(e, "message", None)]
    assert any(getattr(m, "stop_reason", None) == "aborted" and m.text == text for m in stored)


def test_approvals_are_asked_through_the_protocol(seen: dict[str, Any]) -> None:
    approvals = seen["approvals"]
    assert [a["permission"]["input"] for a in approvals["asked"][:2]] == [
        {"command": "echo approved"},
        {"command": "echo no"},
    ]
    assert approvals["asked"][0]["options"] == ["Allow once", "Always allow", "Deny"]
    assert approvals["asked"][0]["title"] == "Allow bash(echo approved)?"
    assert [d["decision"] for d in approvals["decisions"]] == ["approve", "deny"]
    ran, refused = approvals["results"]
    assert not ran["isError"] and ran["result"]["content"][0]["text"].strip() == "approved"
    assert refused["isError"] and "declined" in refused["result"]["content"][0]["text"]


def test_state_and_messages_agree_with_the_session_file(seen: dict[str, Any]) -> None:
    state = seen["state"]
    path = state["sessionFile"]
    assert Path(path).parent.parent == seen["_root"]
    with open_session(path) as session:
        assert state["sessionId"] == session.id
    assert state["model"]["id"] == "offline" and state["isStreaming"] is False
    assert state["steeringMode"] == "one-at-a-time" and state["autoCompactionEnabled"] is True
    assert seen["messages"] == _context(path, before_compaction=True)
    assert state["messageCount"] == len(seen["messages"])
    assert (
        seen["lastText"]
        == "(offline) bash failed: " + seen["messages"][-2]["content"][0]["text"].splitlines()[0]
    )


def test_a_malformed_line_gets_an_error_response_and_the_process_goes_on(
    seen: dict[str, Any],
) -> None:
    parse, unknown = seen["malformed"]
    assert parse["command"] == "parse" and parse["success"] is False
    assert parse["error"].startswith("Failed to parse command")
    assert unknown == {
        "type": "response",
        "command": "no_such_command",
        "id": "x1",
        "success": False,
        "error": "Unknown command: no_such_command",
    }
    assert seen["stateAfterMalformed"]["sessionId"] == seen["state"]["sessionId"]


def test_compact_name_stats_and_export(seen: dict[str, Any]) -> None:
    compact = seen["compact"]
    path = seen["state"]["sessionFile"]
    with open_session(path) as session:
        entries = [e for e in session.entries() if isinstance(e, CompactionEntry)]
        assert session.name == "rpc session"
    assert len(entries) == 1
    assert compact["firstKeptEntryId"] == entries[0].first_kept_entry_id
    assert compact["summary"] == entries[0].summary and compact["tokensBefore"] > 0
    assert [e["type"] for e in seen["compactEvents"]] == ["compaction_start", "compaction_end"]
    assert seen["compactEvents"][1]["result"] == compact
    assert seen["named"]["sessionName"] == "rpc session"
    stats = seen["stats"]
    assert stats["sessionId"] == seen["state"]["sessionId"]
    assert stats["userMessages"] >= 6 and stats["toolCalls"] == 2 and stats["toolResults"] == 2
    assert stats["contextUsage"]["contextWindow"] == 200000
    exported = Path(seen["exported"]["path"])
    assert exported == seen["_work"] / "export.html"
    assert "rpc session" in exported.read_text()
    assert "inside the working folder" in seen["exportOutside"]
    assert not Path("/etc/harness-rpc-test.html").exists()


def test_fork_from_a_user_message_is_pis(seen: dict[str, Any]) -> None:
    forked_from = seen["forkMessages"][1]
    assert seen["fork"] == {"text": forked_from["text"], "cancelled": False}
    assert seen["forked"]["sessionFile"] != seen["state"]["sessionFile"]
    # The fork ends before that message: the first exchange only.
    assert [m["role"] for m in seen["forkedMessages"]] == ["user", "assistant"]
    assert seen["forkedMessages"][0]["content"] == "hello"


def test_new_session_and_switch_back(seen: dict[str, Any]) -> None:
    assert seen["newSession"] == {"cancelled": False}
    assert seen["fresh"]["messageCount"] == 0
    assert seen["fresh"]["sessionFile"] not in (
        seen["state"]["sessionFile"],
        seen["forked"]["sessionFile"],
    )
    assert seen["switched"] == {"cancelled": False}
    assert seen["back"]["sessionFile"] == seen["state"]["sessionFile"]
    assert "switch_session reaches the store's sessions only" in seen["switchOutside"]
    with open_session(seen["_outside"]) as outside:
        assert len(outside) == 0  # nothing was written to it


def test_the_protocols_bash_is_gated_run_and_recorded(seen: dict[str, Any]) -> None:
    assert seen["bash"] == {
        "output": "from-rpc\n",
        "exitCode": 0,
        "cancelled": False,
        "truncated": False,
    }
    last = seen["afterBash"][-1]
    assert last["role"] == "bashExecution" and last["command"] == "echo from-rpc"
    path = seen["back"]["sessionFile"]
    assert seen["afterBash"] == _context(path)
    with open_session(path) as session:
        message = session.get_branch()[-1].message  # type: ignore[attr-defined]
    assert isinstance(message, BashExecutionMessage) and message.exit_code == 0
