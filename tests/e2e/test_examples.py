"""Every script in examples/ runs and does what its docstring says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run one example with its own temporary folder, and check it cleaned up after itself."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "HARNESS_SESSIONS_DIR": str(tmp_path / "s")}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    # the user's bash-output folder stays (shared by every harness process, hidden whole
    # from sandboxed commands: docs/security.md), but empty
    left = [
        p for p in temp.iterdir() if not (p.name.startswith("harness-bash-logs-") and p.is_dir())
    ]
    assert left == [], f"{name} left files in the temporary folder"
    for logs in temp.glob("harness-bash-logs-*"):
        assert list(logs.iterdir()) == [], f"{name} left its bash output behind"
    assert not (tmp_path / "s").exists()
    return proc


def test_log_events_prints_one_json_line_per_event_in_order(tmp_path: Path) -> None:
    out = run_example("log_events.py", tmp_path)
    records = [orjson.loads(line) for line in out.stdout.splitlines()]
    names = [r["type"] for r in records]  # the EventEncoder shape: pi's RPC events
    assert names[:3] == ["session_start", "user_prompt_submit", "before_agent_start"]
    assert names[-3:] == ["stop", "agent_end", "settled"]
    assert names.count("message_end") == 2
    ends = [r for r in records if r["type"] == "message_end"]
    assert ends[1]["message"]["content"][0]["text"] == "Hello from the faux model."
    assert ends[1]["entryId"]
    deltas = [r["assistantMessageEvent"] for r in records if r["type"] == "message_update"]
    assert "".join(d["delta"] for d in deltas) == "Hello from the faux model."
    session_file = Path(out.stderr.strip().removeprefix("session file: "))
    # Written in the temporary folder, removed with it at the end.
    assert session_file.is_relative_to(tmp_path / "tmp") and not session_file.exists()


def test_guard_tools_blocks_rm_rf_and_moves_the_write(tmp_path: Path) -> None:
    out = run_example("guard_tools.py", tmp_path)
    assert out.stdout.splitlines() == [
        "bash: is_error=True rm -rf is not allowed here",
        "write: is_error=False Created drafts/report.md (4 bytes)",
        "files: ['drafts/report.md']",
    ]


def test_redact_secrets_keeps_the_key_out_of_the_model_and_the_file(tmp_path: Path) -> None:
    out = run_example("redact_secrets.py", tmp_path)
    assert out.stdout.splitlines() == [
        "The file says: 'OPENAI_KEY=[REDACTED]\\nDEBUG=1'",
        "secret in session file: False",
    ]


def test_fork_session_keeps_the_first_exchange_and_continues(tmp_path: Path) -> None:
    out = run_example("fork_session.py", tmp_path)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("fork ") and " has 2 entries; parent: " in lines[0]
    assert lines[1:] == [
        "  user: What is the capital of France?",
        "  assistant: Paris.",
        "  user: And of Germany?",
        "  assistant: Berlin.",
    ]


def test_skills_offers_a_catalog_the_model_loads_one_and_runs_another(tmp_path: Path) -> None:
    out = run_example("skills.py", tmp_path)
    lines = out.stdout.splitlines()
    assert lines[0] == "catalog:"
    assert lines[1].startswith("  - release-notes [project]: Write release notes")
    assert lines[2].startswith("  - triage [project]: Label and prioritise")
    assert "'name': 'release-notes'" in lines[3] and "'journaled': False" in lines[3]
    assert lines[4:6] == ["reply: Added: a skills catalog. Fixed: nothing yet.", "journaled: True"]
    assert lines[6].startswith("run_skill triage: Reproduction first, please. (child session ")


def test_permissions_allows_git_status_and_denies_every_other_bash_command(
    tmp_path: Path,
) -> None:
    out = run_example("permissions.py", tmp_path)
    assert out.stdout.splitlines() == [
        "approve: bash(git status:*)",
        "deny: bash(git push --force)",
        "deny: bash(git status; rm -rf .)",
        "  is_error=False",
        "  is_error=True",
        "  is_error=True",
    ]


def test_the_permissions_doc_shows_the_tested_example() -> None:
    doc = (EXAMPLES.parent / "docs" / "permissions.md").read_text()
    assert (EXAMPLES / "permissions.py").read_text().strip() in doc


def test_mcp_in_process_calls_the_servers_tool(tmp_path: Path) -> None:
    out = run_example("mcp_in_process.py", tmp_path)
    assert out.stdout.splitlines() == [
        "mcp__weather__forecast: Sunny in Oslo, 21 °C.",
        "Pack sunglasses.",
    ]


def test_the_mcp_doc_shows_the_tested_example() -> None:
    doc = (EXAMPLES.parent / "docs" / "mcp.md").read_text()
    assert (EXAMPLES / "mcp_in_process.py").read_text().strip() in doc
