"""`harness sessions compact | checkout | label` and a snapshot of `tree`, run in-process through
the CLI's entry point (``cli_in_process``; they only read and write files), but for one real
process each of ``checkout`` and ``label``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
from cli_in_process import run_cli
from pi_sessions import PiSession

from harness import (
    CompactionEntry,
    CompactionSummaryMessage,
    LeafEntry,
    open_session,
    to_llm_messages,
)
from harness._validate import request_problems

REPO_ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def harness_cli(
    tmp_path: Path, *args: str | Path, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``harness ARGS...`` in-process, or with ``process`` in a real process (``checkout`` and
    ``label`` keep one real-process run here)."""
    env = {**os.environ, "HARNESS_SESSIONS_DIR": str(tmp_path / "default-root")}
    if process:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", *map(str, args)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            timeout=120,
            check=False,
        )
    else:
        proc = run_cli(args, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_compact_offline_on_a_large_v1_session(
    pi_file: Callable[..., PiSession], tmp_path: Path
) -> None:
    record = pi_file("large-session")
    copy = record.path
    assert copy is not None
    with open_session(copy) as before:
        messages_before = before.build_context().messages
        entries_before = len(before)

    proc = harness_cli(tmp_path, "sessions", "compact", copy, "--offline")
    assert proc.stdout.startswith("compaction ")
    assert "(migrated)" in proc.stderr  # the v1 file was rewritten as v3: the user is told

    with open_session(copy) as after:
        entries = list(after.entries())
        assert len(entries) == entries_before + 1
        assert isinstance(entries[-1], CompactionEntry)
        context = after.build_context().messages
    assert isinstance(context[0], CompactionSummaryMessage)
    assert len(context) < len(messages_before)
    assert request_problems(to_llm_messages(context)) == []
    assert copy.with_name(copy.name + ".v1.bak").read_bytes() == record.data

    shown = orjson.loads(harness_cli(tmp_path, "sessions", "show", copy, "--json").stdout)
    assert shown[0]["role"] == "compactionSummary"


def test_checkout_and_label_persist(pi_file: Callable[..., PiSession], tmp_path: Path) -> None:
    record = pi_file("before-compaction")
    copy = record.path
    assert copy is not None
    with open_session(copy) as session:
        user_ids = [
            e.id
            for e in session.entries()
            if getattr(getattr(e, "message", None), "role", "") == "user"
        ]
        target = user_ids[3]
        parent = session.get_entry(target).parent_id
    out = harness_cli(tmp_path, "sessions", "checkout", copy, target, process=True).stdout
    assert "message to edit and resend:" in out
    harness_cli(tmp_path, "sessions", "label", copy, target, "retry here", process=True)
    with open_session(copy) as session:
        assert session.leaf_id == parent
        assert session.get_label(target) == "retry here"
        assert isinstance(list(session.entries())[-1], LeafEntry)
    tree = harness_cli(tmp_path, "sessions", "tree", copy).stdout
    assert f"{target} " in tree and "[label: retry here]" in tree
    assert f"* {parent} " in tree


def test_tree_rendering_matches_the_snapshot(tmp_path: Path) -> None:
    """A hand-written session with a branch, a compaction, a branch summary, a label and a moved
    leaf; the expected rendering was written by hand in snapshots/tree.txt. The label entry
    (here the active leaf) and the leaf move are not drawn: the label shows on its target and
    the compaction before it is marked as the leaf."""
    session_file = SNAPSHOTS / "tree-session.jsonl"
    out = harness_cli(tmp_path, "sessions", "tree", session_file).stdout
    assert out == (SNAPSHOTS / "tree.txt").read_text().replace("{path}", str(session_file))


def test_show_and_tree_never_send_terminal_control_codes(tmp_path: Path) -> None:
    path = tmp_path / "esc.jsonl"
    hostile = "\x1b]0;pwned\x07\x1b[2Jtext"
    path.write_text(
        '{"type":"session","version":3,"id":"esc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        + orjson.dumps(
            {
                "type": "message",
                "id": "e0000001",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": hostile, "timestamp": 1},
            }
        ).decode()
        + "\n"
    )
    for command in ("show", "tree"):
        out = harness_cli(tmp_path, "sessions", command, path).stdout
        assert "\x1b" not in out and "\x07" not in out
        assert "\\x1b]0;pwned\\x07" in out
