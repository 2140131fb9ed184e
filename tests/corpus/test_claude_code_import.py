"""The five real Claude Code transcripts of the corpus (``claude-code/`` in
``$HARNESS_TEST_CORPUS`` or ``../shared/fixtures``), read in place: all import, the sessions
verify clean, a second import adds nothing, and one context matches a hand-checked expectation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hooks import AssistantMessage, CompactionSummaryMessage, UserMessage
from repos import open_session
from repos._importers.claude_code import convert, is_claude_code

pytestmark = pytest.mark.corpus

REPO_ROOT = Path(__file__).resolve().parents[2]
NAMES = [
    "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "dag_compact_after_rewind.jsonl",
    "edge_cases.jsonl",
    "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
]


def harness(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )


def test_all_five_import_verify_and_import_once(fixtures_dir: Path, tmp_path: Path) -> None:
    folder = fixtures_dir / "claude-code"
    assert sorted(p.name for p in folder.glob("*.jsonl")) == NAMES
    assert all(is_claude_code(folder / n) for n in NAMES)
    root = tmp_path / "sessions"
    proc = harness("import", "claude-code", folder, "--root", root)
    assert proc.returncode == 0, proc.stderr
    assert "5 imported, 0 extended, 0 already imported" in proc.stdout
    files = sorted(root.glob("*/*.jsonl"))
    expected = sum(1 + len(convert(folder / n).sidechains) for n in NAMES)
    assert len(files) == expected == 12
    for path in files:
        verified = harness("sessions", "verify", path)
        assert verified.returncode == 0, verified.stdout
    before = {p: p.read_bytes() for p in files}
    again = harness("import", "claude-code", folder, "--root", root)
    assert "0 imported, 0 extended, 5 already imported" in again.stdout
    assert {p: p.read_bytes() for p in sorted(root.glob("*/*.jsonl"))} == before


def test_the_rewind_and_compaction_transcript_by_hand(fixtures_dir: Path, tmp_path: Path) -> None:
    """dag_compact_after_rewind.jsonl, read by hand: u1 Start -> a1 Ready, then two attempts
    from a1 (b1u/b1a abandoned; b2u/b2a, b2u2/b2a2 kept), a compact boundary whose logical
    parent is b2a2, its summary record, then p1u/p1a. The model sees the summary and the two
    records after it."""
    conversion = convert(fixtures_dir / "claude-code" / "dag_compact_after_rewind.jsonl")
    assert conversion.dropped == () and conversion.reattached == () and conversion.compactions == 1
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(conversion.main.lines))
    with open_session(path) as session:
        context = session.build_context().messages
        assert len(context) == 3
        summary, question, answer = context
        assert isinstance(summary, CompactionSummaryMessage)
        assert summary.tokens_before == 150000
        assert summary.summary.endswith("Summary: the user asked for a plan.")
        assert isinstance(question, UserMessage) and question.text == "After compaction"
        assert isinstance(answer, AssistantMessage) and answer.text == "Final answer"
        assert answer.model == "claude-sonnet-4-20250514"
        branch = [e.extra.get("claudeCodeUuid") for e in session.get_branch()]
        assert branch == ["u1", "a1", "b2u", "b2a", "b2u2", "b2a2", "cb", "p1u", "p1a"]
        a1 = session.get_branch()[1].id
        assert len(session.get_children(a1)) == 2  # the rewind
