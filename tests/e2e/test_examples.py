"""Every script in examples/ runs and does what its docstring says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path), "HARNESS_SESSIONS_DIR": str(tmp_path / "s")}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )


def test_log_events_prints_one_json_line_per_event_in_order(tmp_path: Path) -> None:
    out = run_example("log_events.py", tmp_path)
    records = [orjson.loads(line) for line in out.stdout.splitlines()]
    names = [r["event"] for r in records]
    assert names[0] == "before_agent_start" and names[-2:] == ["agent_end", "settled"]
    assert names.count("message_end") == 2
    ends = [r for r in records if r["event"] == "message_end"]
    assert ends[1]["message"]["content"][0]["text"] == "Hello from the faux model."
    assert ends[1]["entry_id"]
    session_file = Path(out.stderr.strip().removeprefix("session file: "))
    assert session_file.is_file() and session_file.is_relative_to(tmp_path)


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
