"""Approvals that wait, across processes: ``harness run --defer-approvals`` stops a run
``awaiting_approval``; ``harness approvals list`` shows the call; ``harness approve`` (or
``deny``), in another process, answers it and the run completes there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_in_process import run_cli

from repos import open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMAND = "echo hi >> out.txt"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base["HARNESS_SESSIONS_DIR"] = str(tmp_path / "sessions")
    base["PYTHONIOENCODING"] = "utf-8"
    base["PYTHONPATH"] = str(REPO_ROOT)
    return base


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def harness(
    env: dict[str, str], cwd: Path, *args: str, code: int = 0
) -> subprocess.CompletedProcess[str]:
    if args[0] in ("approvals", "export"):  # they only print and write files: in-process
        done = run_cli(args, env=env, cwd=cwd)  # (``cli_in_process``)
    else:  # ``run`` and ``approve``, which goes on with the run: each a process of its own
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
    assert done.returncode == code, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def deferred_run(env: dict[str, str], work: Path) -> tuple[dict[str, object], str]:
    """``run --defer-approvals`` of a bash call: its JSON output and the approval's id."""
    ran = harness(
        env, work, "run", "--offline", "--defer-approvals", "--output", "json", "-p", f"!{COMMAND}"
    )
    out = json.loads(ran.stdout)
    assert out["stop_reason"] == "awaiting_approval"
    (approval,) = out["approvals"]
    assert f"awaiting approval {approval}" in ran.stderr
    assert not (work / "out.txt").exists()
    return out, approval


def test_a_run_waits_and_harness_approve_completes_it_in_another_process(
    env: dict[str, str], work: Path
) -> None:
    out, approval = deferred_run(env, work)

    listed = json.loads(harness(env, work, "approvals", "list", "--json").stdout)
    assert [(a["id"], a["status"], a["tool_name"], a["input"], a["signed"]) for a in listed] == [
        (approval, "waiting", "bash", {"command": COMMAND}, True)
    ]

    approved = harness(env, work, "approve", approval, "--offline", "--output", "json")

    # What runs is shown first, then it runs once, and the run completes here.
    assert f"approving {approval}  waiting" in approved.stderr and COMMAND in approved.stderr
    done = json.loads(approved.stdout)
    assert done["stop_reason"] == "stop" and done["session_id"] == out["session_id"]
    assert done["reply"].startswith("(offline) bash returned")
    assert (work / "out.txt").read_text() == "hi\n"
    assert harness(env, work, "approvals", "list").stdout.strip() == "no approvals are waiting"
    # Approving again finds nothing: the call ran once.
    again = harness(env, work, "approve", approval, "--offline", code=1)
    assert "approval_not_found" in again.stderr
    assert (work / "out.txt").read_text() == "hi\n"
    with open_session(Path(str(out["path"]))) as session:
        roles = [m.role for m in session.build_context().messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"]


def test_harness_deny_gives_the_reason_and_the_run_goes_on(env: dict[str, str], work: Path) -> None:
    _, approval = deferred_run(env, work)

    denied = harness(
        env, work, "deny", approval, "--reason", "not today", "--offline", "--output", "json"
    )

    done = json.loads(denied.stdout)
    assert done["stop_reason"] == "stop"
    assert done["reply"] == "(offline) bash failed: denied by the user: not today"
    assert not (work / "out.txt").exists()


def test_an_approval_written_into_a_session_file_by_hand_is_refused(
    env: dict[str, str], work: Path
) -> None:
    out, approval = deferred_run(env, work)
    path = Path(str(out["path"]))
    # An attacker swaps the command in the file: the signature no longer checks.
    path.write_text(path.read_text().replace(COMMAND, "touch pwned"))

    listed = harness(env, work, "approvals", "list").stdout
    assert "UNSIGNED" in listed and "touch pwned" in listed
    refused = harness(env, work, "approve", approval, "--offline", code=1)

    assert "approval_refused" in refused.stderr
    assert not (work / "pwned").exists() and not (work / "out.txt").exists()


def test_what_a_waiting_call_holds_reaches_the_terminal_escaped(
    env: dict[str, str], work: Path
) -> None:
    ran = harness(
        env, work, "run", "--offline", "--defer-approvals", "-p", "!echo \x1b]52;c;cHduZWQ=\x07"
    )
    assert "\x1b" not in ran.stderr and "\x1b" not in ran.stdout

    listed = harness(env, work, "approvals", "list")

    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "\\x1b]52" in listed.stdout  # shown, as an escape


def test_a_long_waiting_call_is_shown_whole_before_it_is_approved(
    env: dict[str, str], work: Path
) -> None:
    # Review 3, finding 14: an input cut at 100 characters hid what `approve` then ran.
    hidden = "touch SHOWN_AT_LAST"
    command = f"echo {'a' * 150}; {hidden}"
    ran = harness(
        env, work, "run", "--offline", "--defer-approvals", "--output", "json", "-p", f"!{command}"
    )
    (approval,) = json.loads(ran.stdout)["approvals"]
    listed = harness(env, work, "approvals", "list").stdout
    assert hidden in listed and "..." not in listed
    approved = harness(env, work, "approve", approval, "--offline")
    assert hidden in approved.stderr.split("\n", 1)[0]  # shown before it runs
    assert (work / "SHOWN_AT_LAST").exists()


def test_approvals_list_shows_the_whole_command_of_a_waiting_call(
    env: dict[str, str], work: Path
) -> None:
    command = "echo " + "a" * 120 + "; echo hidden-payload"
    harness(env, work, "run", "--offline", "--defer-approvals", "-p", f"!{command}")
    listed = harness(env, work, "approvals", "list").stdout
    assert f"│ {command}" in listed.splitlines()  # the one-line summary cuts it at 60 and 100


def test_an_export_of_a_waiting_call_carries_no_signature_and_cannot_be_answered_again(
    env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """Review 9, finding 12: the JSONL export left the signatures of waiting approvals (and
    their decisions) in; the export sent back as a session file had the call answered and
    run a second time."""
    out, approval = deferred_run(env, work)
    exported = tmp_path / "exp.jsonl"
    harness(env, work, "export", str(out["path"]), "--format", "jsonl", "-o", str(exported))
    harness(env, work, "approve", approval, "--offline")
    assert (work / "out.txt").read_text() == "hi\n"
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    kinds = {line.get("customType") for line in lines}
    assert "harness.approvals.pending" in kinds
    assert not any("signature" in (line.get("data") or {}) for line in lines)
    replayed = work / "replayed.jsonl"
    replayed.write_bytes(exported.read_bytes())
    again = harness(env, work, "approve", approval, "--offline", "--session", str(replayed), code=1)
    assert "approval_refused" in again.stderr or "approval_not_found" in again.stderr
    assert (work / "out.txt").read_text() == "hi\n"  # ran once
