"""``harness rpc``'s setting commands on their success path, as pi's RpcClient sends them:
``set_model``, ``set_thinking_level``, ``set_steering_mode``, ``set_follow_up_mode``,
``set_auto_compaction`` and ``abort_bash`` change what ``get_state`` reports and what the
session file records, and change what the next run does. Run for real, as a subprocess."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rpc_process import WAIT_S, Rpc

from hooks import UserMessage
from repos import MessageEntry, ModelChangeEntry, ThinkingLevelChangeEntry, open_session


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def rpc(work: Path, tmp_path: Path) -> Iterator[Callable[..., Rpc]]:
    started: list[Rpc] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Rpc:
        server = Rpc(work, tmp_path / "sessions", *args, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
        server.close()


def _ok(server: Rpc, command: dict[str, Any]) -> Any:
    reply = server.call(command)
    assert reply["success"] is True, reply
    return reply.get("data")


def test_set_model_switches_the_model_and_records_the_change(rpc: Callable[..., Rpc]) -> None:
    # No request is made: the key is never used, the port refuses anything sent to it.
    server = rpc(
        "--model",
        "anthropic/claude-sonnet-4-5",
        env={"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    before = _ok(server, {"id": "0", "type": "get_state"})
    assert (before["model"]["provider"], before["model"]["id"]) == (
        "anthropic",
        "claude-sonnet-4-5",
    )
    model = _ok(
        server,
        {"id": "1", "type": "set_model", "provider": "anthropic", "modelId": "claude-haiku-4-5"},
    )
    assert (model["provider"], model["id"], model["name"]) == (
        "anthropic",
        "claude-haiku-4-5",
        "Claude Haiku 4.5",
    )
    state = _ok(server, {"id": "2", "type": "get_state"})
    assert state["model"]["id"] == "claude-haiku-4-5"
    unknown = server.call(
        {"id": "3", "type": "set_model", "provider": "anthropic", "modelId": "no-such-model"}
    )
    assert unknown["success"] is False and "no-such-model" in unknown["error"]
    assert _ok(server, {"id": "4", "type": "get_state"})["model"]["id"] == "claude-haiku-4-5"
    assert server.close() == 0
    with open_session(state["sessionFile"]) as session:
        changes = [
            (e.provider, e.model_id) for e in session.entries() if isinstance(e, ModelChangeEntry)
        ]
    assert changes[-1] == ("anthropic", "claude-haiku-4-5")
    assert ("anthropic", "no-such-model") not in changes


def test_thinking_level_steering_mode_and_auto_compaction_are_reported_and_recorded(
    rpc: Callable[..., Rpc],
) -> None:
    server = rpc()
    state = _ok(server, {"id": "0", "type": "get_state"})
    assert (state["steeringMode"], state["autoCompactionEnabled"]) == ("one-at-a-time", True)
    assert _ok(server, {"id": "1", "type": "set_thinking_level", "level": "high"}) is None
    assert _ok(server, {"id": "2", "type": "get_state"})["thinkingLevel"] == "high"
    _ok(server, {"id": "3", "type": "set_thinking_level", "level": "off"})
    _ok(server, {"id": "4", "type": "set_steering_mode", "mode": "all"})
    bad = server.call({"id": "5", "type": "set_steering_mode", "mode": "some"})
    assert bad["success"] is False  # and the last good mode stays
    _ok(server, {"id": "6", "type": "set_auto_compaction", "enabled": False})
    state = _ok(server, {"id": "7", "type": "get_state"})
    assert (state["thinkingLevel"], state["steeringMode"], state["autoCompactionEnabled"]) == (
        "off",
        "all",
        False,
    )
    _ok(server, {"id": "8", "type": "set_auto_compaction", "enabled": True})
    assert _ok(server, {"id": "9", "type": "get_state"})["autoCompactionEnabled"] is True
    assert server.close() == 0
    with open_session(state["sessionFile"]) as session:
        levels = [
            e.thinking_level for e in session.entries() if isinstance(e, ThinkingLevelChangeEntry)
        ]
    assert levels[-2:] == ["high", "off"]


def _user_turns(path: str) -> list[str]:
    """The session's messages as 'u:TEXT' and 'a' in order, on the active branch."""
    with open_session(path) as session:
        out = []
        for entry in session.get_branch():
            if isinstance(entry, MessageEntry):
                message = entry.message
                out.append(f"u:{message.text}" if isinstance(message, UserMessage) else "a")
        return out


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # pi's queue modes: "all" delivers every queued follow-up in the next turn,
        # "one-at-a-time" one per turn.
        ("all", ["u:count 150", "a", "u:first", "u:second", "a"]),
        ("one-at-a-time", ["u:count 150", "a", "u:first", "a", "u:second", "a"]),
    ],
)
def test_set_follow_up_mode_decides_how_queued_messages_are_delivered(
    rpc: Callable[..., Rpc], mode: str, expected: list[str]
) -> None:
    server = rpc()
    _ok(server, {"id": "m", "type": "set_follow_up_mode", "mode": mode})
    state = _ok(server, {"id": "s", "type": "get_state"})
    assert state["followUpMode"] == mode
    _ok(server, {"id": "1", "type": "prompt", "message": "count 150"})
    server.until(
        lambda r: (
            r["type"] == "message_update" and r["assistantMessageEvent"]["type"] == "text_delta"
        )
    )
    _ok(server, {"id": "2", "type": "follow_up", "message": "first"})
    _ok(server, {"id": "3", "type": "follow_up", "message": "second"})
    server.until(lambda r: r["type"] == "agent_end")
    assert server.close() == 0
    assert _user_turns(state["sessionFile"]) == expected


def test_abort_bash_kills_the_running_command(
    rpc: Callable[..., Rpc], work: Path, tmp_path: Path
) -> None:
    server = rpc("--allowed-tools", "Bash(touch started && sleep 30)")
    started = time.monotonic()
    server.send({"id": "1", "type": "bash", "command": "touch started && sleep 30"})
    deadline = time.monotonic() + WAIT_S
    while not (work / "started").exists():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    assert _ok(server, {"id": "2", "type": "abort_bash"}) is None
    reply = server.response("1")
    assert reply["success"] is True
    assert reply["data"]["cancelled"] is True
    assert time.monotonic() - started < 20  # killed, not waited for
    # Nothing runs now: a second abort is a no-op, not an error.
    assert _ok(server, {"id": "3", "type": "abort_bash"}) is None
    assert server.close() == 0
