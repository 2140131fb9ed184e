"""Sub-agents from the command line: ``harness run`` offers the agents of the project's files
(the offline model's ``@task {...}`` calls one), and ``harness sessions tree`` shows the link
between the parent's tool call and the child session, both ways. ``run`` in a real process;
``sessions tree`` in-process through the CLI's entry point (``cli_in_process``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_in_process import needs_process, run_cli

from repos import open_session

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base["HARNESS_SESSIONS_DIR"] = str(tmp_path / "sessions")
    base["PYTHONIOENCODING"] = "utf-8"
    base["PYTHONPATH"] = str(REPO_ROOT)
    return base


def harness(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
        done = run_cli(args, env=env, cwd=cwd)
    else:
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
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_a_task_call_runs_a_file_agent_and_the_tree_shows_the_link(
    tmp_path: Path, env: dict[str, str]
) -> None:
    work = tmp_path / "work"
    (work / ".harness" / "agents").mkdir(parents=True)
    (work / ".harness" / "agents" / "helper.md").write_text(
        "---\ndescription: Helps with anything.\nmodel: opus\n---\nYou help.\n"
    )
    call = {"subagent_type": "helper", "description": "greet", "prompt": "hello child"}

    ran = harness(
        env, work, "run", "--offline", "--output", "json", "-p", f"@task {json.dumps(call)}"
    )

    out = json.loads(ran.stdout)
    # The untrusted project's model choice is ignored, and said so on stderr.
    assert "helper.md" in ran.stderr and "not trusted" in ran.stderr
    parent = open_session(Path(out["path"]))
    (result,) = [m for m in parent.build_context().messages if m.role == "toolResult"]
    # The child ran on the offline model (the parent's), which echoes its prompt.
    assert result.text == "(offline) You said: hello child" and not result.is_error
    child_id = result.details["sessionId"]  # type: ignore[index]
    child_path = Path(result.details["sessionPath"])  # type: ignore[index]
    parent.close()

    parent_tree = harness(env, work, "sessions", "tree", out["session_id"]).stdout
    child_tree = harness(env, work, "sessions", "tree", child_id).stdout

    assert f"[agent helper: session {child_id[:8]}]" in parent_tree
    first = child_tree.splitlines()[0]
    assert str(child_path) in first
    assert f"(sub-agent helper of {out['session_id'][:8]}, tool call offline_call_1)" in first


def test_a_hostile_link_reaches_the_terminal_escaped(tmp_path: Path, env: dict[str, str]) -> None:
    from harness import JsonlSessionRepo, ToolResultMessage

    repo = JsonlSessionRepo(tmp_path / "sessions")
    hostile = "\x1b]52;c;cHduZWQ=\x07\x1b[2J"
    # Outside an event loop, so that ``sessions tree`` below runs in-process.
    parent = asyncio.run(
        repo.create(str(tmp_path), metadata={"agent": hostile, "parentToolCallId": hostile})
    )
    parent.append_message(
        ToolResultMessage(
            tool_call_id="t1",
            tool_name="task",
            content="done",
            details={"agent": hostile, "sessionId": hostile},
        )
    )
    child = asyncio.run(
        repo.create(
            str(tmp_path),
            parent_session=str(parent.path),
            metadata={"agent": hostile, "parentToolCallId": hostile},
        )
    )
    parent.close()
    child.close()

    for session in (parent, child):
        shown = harness(env, tmp_path, "sessions", "tree", session.id).stdout
        assert "\x1b" not in shown and "\x07" not in shown
        assert "\\x1b]52" in shown
