"""How the command line names a session (``harness/cli/_common.py: resolve_ref``): a path, a whole
id, or the 8-character prefix ``list`` and ``tree`` print, in every command that takes one; an
ambiguous prefix lists its candidates; a bare name that exists in the current folder is a path.

Run in-process through the CLI's entry point (``run`` in a real subprocess), on sessions
written with the library under ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_in_process import run_cli

from hooks import AssistantMessage, TextContent, UserMessage
from repos import CompactionEntry, JsonlSessionRepo, LabelEntry, LeafEntry, open_session

# Commands that read stdin as a process does (``run``, ``chat``, ``rpc``) start a real one; the
# others, which only print and write files, run in-process (``cli_in_process``), the same entry
# point without an interpreter's start for each.
_PROCESS = frozenset({"run", "chat", "rpc", "serve"})


def run(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HARNESS_SESSIONS_DIR": str(cwd / "default-root"),
        "PYTHONIOENCODING": "utf-8",
    }
    if str(args[0]) not in _PROCESS:
        return run_cli(args, env=env, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def make_session(root: Path, session_id: str | None = None, exchanges: int = 3) -> str:
    """A linear session of ``exchanges`` user/assistant pairs; returns its id."""

    async def build() -> str:
        with await JsonlSessionRepo(root).create("/work/ids", session_id=session_id) as s:
            for n in range(exchanges):
                s.append_message(UserMessage(content=f"question {n} " + "words " * 50))
                s.append_message(AssistantMessage(content=[TextContent(text=f"answer {n}")]))
            return s.id

    return asyncio.run(build())


def entry_ids(path: Path) -> list[str]:
    with open_session(path) as session:
        return session.entry_ids()


def test_every_command_accepts_the_8_character_prefix(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session_id = make_session(root)
    make_session(root)  # another session, so that the prefix has to tell them apart
    prefix = session_id[:8]
    (path,) = root.glob(f"*/*_{session_id}.jsonl")
    ids = entry_ids(path)

    shown = ok(run(tmp_path, "sessions", "show", "--root", root, prefix))
    assert f"session: {session_id}" in shown.stdout
    tree = ok(run(tmp_path, "sessions", "tree", "--root", root, prefix))
    assert all(i in tree.stdout for i in ids)
    listed = ok(run(tmp_path, "sessions", "list", "--root", root)).stdout
    assert any(line.startswith(f"{prefix} ") for line in listed.splitlines())
    assert tree.stdout.startswith(f"session {prefix} ")

    out = tmp_path / "export.md"
    ok(run(tmp_path, "export", "--root", root, prefix, "--format", "md", "-o", out))
    assert "question 2" in out.read_text()
    ok(run(tmp_path, "sessions", "verify", "--root", root, prefix))
    ok(run(tmp_path, "sessions", "repair", "--root", root, prefix, "--dry-run"))
    ok(run(tmp_path, "sessions", "migrate", "--root", root, prefix))

    forked = json.loads(
        ok(run(tmp_path, "sessions", "fork", "--root", root, prefix, "--json")).stdout
    )
    assert forked["parent_session"] == str(path.resolve())

    ok(run(tmp_path, "sessions", "label", "--root", root, prefix, ids[0], "start"))
    ok(run(tmp_path, "sessions", "checkout", "--root", root, prefix, ids[1]))
    ok(run(tmp_path, "sessions", "checkout", "--root", root, prefix, ids[-1]))
    compacted = ok(
        run(
            tmp_path,
            *("sessions", "compact", "--root", root, prefix),
            *("--offline", "--keep-recent-tokens", "0"),
        )
    )
    assert compacted.stdout.startswith("compaction ")
    reply = ok(run(tmp_path, "run", "--root", root, "--session", prefix, "--offline", "-p", "hi"))
    assert "hi" in reply.stdout
    with open_session(path) as session:
        entries = list(session.entries())
        assert session.get_label(ids[0]) == "start"
        assert sum(isinstance(e, LeafEntry) for e in entries) >= 2
        assert sum(isinstance(e, LabelEntry) for e in entries) == 1
        assert any(isinstance(e, CompactionEntry) for e in entries)
        assert session.build_context().messages[-2].text == "hi"

    ok(run(tmp_path, "sessions", "delete", "--root", root, prefix))
    assert not path.exists()


def test_an_ambiguous_prefix_lists_every_candidate(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    first = make_session(root, "abcd1234-aaaa", exchanges=1)
    second = make_session(root, "abcd1234-bbbb", exchanges=1)
    proc = run(tmp_path, "sessions", "show", "--root", root, "abcd1234")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error[ambiguous_session]")
    assert len(proc.stderr.splitlines()) == 1
    assert first in proc.stderr and second in proc.stderr
    # One more character settles it; a whole id is never ambiguous.
    assert (
        f"session: {second}"
        in ok(run(tmp_path, "sessions", "show", "--root", root, "abcd1234-b")).stdout
    )
    assert (
        f"session: {first}" in ok(run(tmp_path, "sessions", "show", "--root", root, first)).stdout
    )
    # A prefix of nothing is not found; too short a prefix is never looked up.
    for ref in ("abcd9", "abc"):
        missing = run(tmp_path, "sessions", "tree", "--root", root, ref)
        assert missing.returncode == 1 and missing.stderr.startswith("error[session_not_found]")


@pytest.mark.parametrize(
    ("name", "code"), [("notes.txt", "corrupt_session"), ("adir", "session_not_found")]
)
def test_a_bare_name_in_the_current_folder_is_a_path_not_an_id(
    tmp_path: Path, name: str, code: str
) -> None:
    root = tmp_path / "sessions"
    make_session(root, name, exchanges=1)  # a session whose id is the same name
    here = tmp_path / "here"
    here.mkdir()
    (here / "notes.txt").write_text("my notes, not a session\n")
    (here / "adir").mkdir()

    taken_as_path = run(here, "sessions", "show", "--root", root, name)
    assert taken_as_path.returncode == 1
    assert taken_as_path.stderr.startswith(f"error[{code}]")
    assert name in taken_as_path.stderr
    assert (here / "notes.txt").read_text() == "my notes, not a session\n"
    # Elsewhere, where no such file exists, the same word is the session id.
    elsewhere = ok(run(tmp_path, "sessions", "show", "--root", root, name))
    assert f"session: {name}" in elsewhere.stdout


def test_a_missing_root_is_said_to_be_missing(tmp_path: Path) -> None:
    root = tmp_path / "no-such-root"
    listed = run(tmp_path, "sessions", "list", "--root", root)
    assert listed.returncode == 1 and listed.stdout == ""
    assert listed.stderr.startswith(
        f"error[root_not_found]: the sessions root {root} does not exist ("
    )
    assert len(listed.stderr.splitlines()) == 1
    shown = run(tmp_path, "sessions", "show", "--root", root, "abcdef12")
    assert shown.returncode == 1
    assert shown.stderr.startswith("error[session_not_found]")
    assert f"the sessions root {root} does not exist" in shown.stderr
    assert not root.exists()
    # An existing, empty root is just empty.
    root.mkdir()
    empty = ok(run(tmp_path, "sessions", "list", "--root", root))
    assert empty.stdout == ""
