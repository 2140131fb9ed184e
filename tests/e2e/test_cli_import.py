"""``harness import claude-code`` on small transcripts written here (``tests/fixtures/
claude_code_transcripts.py``), run in a subprocess; the five real ones are in tests/corpus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from claude_code_transcripts import SESSION, small_transcript, write
from cli_in_process import needs_process, run_cli

from hooks import (
    AssistantMessage,
    CompactionSummaryMessage,
    ImageContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from repos import MessageEntry, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]


def harness(*args: str | Path) -> subprocess.CompletedProcess[str]:
    if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
        return run_cli(args, env={**os.environ, "PYTHONIOENCODING": "utf-8"}, cwd=REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


def sessions(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.jsonl"))


def test_import_converts_the_tree_and_reports_what_it_dropped(tmp_path: Path) -> None:
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", small_transcript())
    root = tmp_path / "sessions"
    proc = harness("import", "claude-code", source, "--root", root)
    assert proc.returncode == 0, proc.stderr
    assert "dropped line 15: not a record" in proc.stdout
    assert "dropped line 16: no record type" in proc.stdout
    assert "dropped line 18: not JSON" in proc.stdout
    assert "re-attached line 14 (p1): parent ghost missing" in proc.stdout
    files = sessions(root)
    assert len(files) == 2  # the main thread and one sidechain
    opened = [open_session(f) for f in files]
    try:
        main = next(s for s in opened if s.header.parent_session is None)
        side = next(s for s in opened if s.header.parent_session is not None)
        assert side.header.parent_session == str(main.path)
        assert main.header.metadata is not None
        origin = main.header.metadata["importedFrom"]
        assert origin["format"] == "claude-code" and origin["sessionId"] == SESSION
        assert main.id != SESSION and main.name == "Small test transcript"
        assert main.diagnostics == ()

        context = main.build_context().messages
        assert isinstance(context[0], CompactionSummaryMessage)
        assert context[0].summary == "Summary: the user listed files."
        assert context[0].tokens_before == 1234
        assert [m.text for m in context[1:]] == ["After the compaction", "Final."]

        messages = [e.message for e in main.entries() if isinstance(e, MessageEntry)]
        first = messages[0]
        assert isinstance(first, UserMessage) and isinstance(first.content[1], ImageContent)
        reply = messages[1]  # three records of one response, merged
        assert isinstance(reply, AssistantMessage) and reply.stop_reason == "toolUse"
        kinds = [type(b) for b in reply.content]
        assert kinds == [ThinkingContent, type(reply.content[1]), ToolCall]
        assert reply.usage.cache_read == 100
        result = messages[2]
        assert isinstance(result, ToolResultMessage)
        assert (result.tool_name, result.tool_call_id, result.text) == (
            "Bash",
            "toolu_1",
            "a.txt\nb.txt",
        )
        # The rewind is a branch: the first user message has two children.
        assert len(main.get_children(main.entry_ids()[0])) == 2
        assert [m.text for m in side.build_context().messages] == [
            "sub-agent task",
            "sub-agent done",
        ]
    finally:
        for s in opened:
            s.close()


def test_importing_twice_adds_nothing(tmp_path: Path) -> None:
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", small_transcript())
    root = tmp_path / "sessions"
    assert harness("import", "claude-code", source.parent, "--root", root).returncode == 0
    before = {p: p.read_bytes() for p in sessions(root)}
    again = harness("import", "claude-code", source, "--root", root)
    assert again.returncode == 0, again.stderr
    assert "0 imported, 0 extended, 1 already imported" in again.stdout
    assert {p: p.read_bytes() for p in sessions(root)} == before


def test_a_grown_transcript_extends_its_session(tmp_path: Path) -> None:
    records = small_transcript()
    cut = records.index(next(r for r in records if isinstance(r, dict) and r.get("uuid") == "s1"))
    source = tmp_path / "cc" / f"{SESSION}.jsonl"
    write(source, records[:cut])  # up to the first answer: no sidechain, rewind or compaction
    root = tmp_path / "sessions"
    first = harness("import", "claude-code", source, "--root", root)
    assert first.returncode == 0, first.stderr
    (imported,) = sessions(root)
    with open_session(imported) as before:
        old_ids = before.entry_ids()
        session_id = before.id

    write(source, records)  # the transcript grew
    grown = harness("import", "claude-code", source, "--root", root)
    assert grown.returncode == 0, grown.stderr
    assert f"extended {imported} from {source}" in grown.stdout
    assert "0 imported, 1 extended, 0 already imported" in grown.stdout
    assert "changed" not in grown.stdout
    fresh_root = tmp_path / "fresh"
    assert harness("import", "claude-code", source, "--root", fresh_root).returncode == 0

    files = sessions(root)
    assert len(files) == 2 and imported in files  # the main session, and the new sidechain
    fresh_main = next(
        f for f in sessions(fresh_root) if b'"parentSession"' not in f.read_bytes()[:500]
    )
    with open_session(imported) as extended, open_session(fresh_main) as fresh:
        assert extended.id == session_id
        assert extended.entry_ids()[: len(old_ids)] == old_ids  # appended, nothing rewritten
        # The same entries as a fresh import of the whole transcript, with the same ids.
        assert set(extended.entry_ids()) == set(fresh.entry_ids())
        for entry_id in fresh.entry_ids():
            if fresh.entry_type(entry_id) == "session_info":
                continue  # the name hangs under the last entry of the first import
            assert extended.get_entry(entry_id) == fresh.get_entry(entry_id)
        assert extended.build_context().messages == fresh.build_context().messages
        assert extended.name == "Small test transcript"
        assert extended.diagnostics == ()

    before = {p: p.read_bytes() for p in sessions(root)}
    again = harness("import", "claude-code", source, "--root", root)
    assert "0 imported, 0 extended, 1 already imported" in again.stdout
    assert {p: p.read_bytes() for p in sessions(root)} == before


def test_sessions_show_names_the_format_instead_of_corrupt(tmp_path: Path) -> None:
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", small_transcript())
    before = source.read_bytes()
    proc = harness("sessions", "show", source)
    assert proc.returncode == 0, proc.stderr
    assert "Claude Code transcript" in proc.stderr and "corrupt" not in proc.stderr
    assert "After the compaction" in proc.stdout
    assert source.read_bytes() == before and sorted(source.parent.iterdir()) == [source]


def test_a_file_that_is_neither_format_is_still_corrupt(tmp_path: Path) -> None:
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": "world"}\n')
    proc = harness("sessions", "show", other)
    assert proc.returncode == 1 and proc.stderr.startswith("error[corrupt_session]")
